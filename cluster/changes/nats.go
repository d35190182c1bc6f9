package changes

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// NATSConfig names where a Sink publishes.
type NATSConfig struct {
	URL string // the NATS server ("nats://127.0.0.1:4222")
	// Stream is the JetStream stream the events go to, created or updated
	// to hold Subjects.>; its key-value bucket of the same name keeps the
	// sink's token. Default: PINSTORE_CHANGES.
	Stream string
	// Subjects is the subjects' prefix: an object's event goes to
	// Subjects.TYPE ("pinstore.changes.pin"), a list entry's to
	// Subjects.LIST ("pinstore.changes.board_pins"). Default:
	// pinstore.changes.
	Subjects string
	// SaveEvery is how often the token is saved in the bucket while events
	// flow. Default: one second.
	SaveEvery time.Duration
}

// Sink publishes the stream into NATS JetStream: one subject per object
// type and list, each event with its Key as the message id, so that the
// events a restart tells again (those after the last saved token) are
// dropped by JetStream's duplicate window rather than stored twice.
// Publishing waits for the server's acknowledgement: a slow JetStream
// slows this stream, and only it.
type Sink struct {
	nc        *nats.Conn
	js        jetstream.JetStream
	kv        jetstream.KeyValue
	subjects  string
	saveEvery time.Duration
	saved     time.Time
	pending   string // a token not saved yet
}

// tokenKey is the key of the sink's token in its bucket.
const tokenKey = "token"

// OpenNATS connects to c.URL and makes the stream and the bucket.
func OpenNATS(ctx context.Context, c NATSConfig) (*Sink, error) {
	const op = "changes.OpenNATS"
	if c.Stream == "" {
		c.Stream = "PINSTORE_CHANGES"
	}
	if c.Subjects == "" {
		c.Subjects = "pinstore.changes"
	}
	if c.SaveEvery <= 0 {
		c.SaveEvery = time.Second
	}
	nc, err := nats.Connect(c.URL, nats.Name("pinstore changes"))
	if err != nil {
		return nil, fmt.Errorf("%s: connect to %s: %w", op, c.URL, err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	if _, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name:       c.Stream,
		Subjects:   []string{c.Subjects + ".>"},
		Duplicates: 10 * time.Minute,
	}); err != nil {
		nc.Close()
		return nil, fmt.Errorf("%s: stream %s: %w", op, c.Stream, err)
	}
	kv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: c.Stream})
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("%s: bucket %s: %w", op, c.Stream, err)
	}
	return &Sink{nc: nc, js: js, kv: kv, subjects: c.Subjects, saveEvery: c.SaveEvery}, nil
}

// Close saves the last token and closes the connection.
func (s *Sink) Close(ctx context.Context) error {
	err := s.save(ctx)
	s.nc.Close()
	return err
}

// Token is the token saved last: the stream resumes after it ("" when the
// sink never saved one).
func (s *Sink) Token(ctx context.Context) (string, error) {
	e, err := s.kv.Get(ctx, tokenKey)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("changes.Sink.Token: %w", err)
	}
	return string(e.Value()), nil
}

// Subject is where e is published.
func (s *Sink) Subject(e Event) string {
	if e.IsObject() {
		return s.subjects + "." + e.Type
	}
	return s.subjects + "." + e.List
}

// Publish publishes e (a Progress event only moves the token) and saves
// the token when the last save is SaveEvery old.
func (s *Sink) Publish(ctx context.Context, e Event) error {
	if e.Kind != Progress {
		b, err := json.Marshal(e)
		if err != nil {
			return fmt.Errorf("changes.Sink.Publish: %w", err)
		}
		if _, err := s.js.Publish(ctx, s.Subject(e), b, jetstream.WithMsgID(e.Key)); err != nil {
			return fmt.Errorf("changes.Sink.Publish %s: %w", e.Key, err)
		}
	}
	s.pending = e.Token
	if time.Since(s.saved) >= s.saveEvery {
		return s.save(ctx)
	}
	return nil
}

func (s *Sink) save(ctx context.Context) error {
	if s.pending == "" {
		return nil
	}
	if _, err := s.kv.PutString(ctx, tokenKey, s.pending); err != nil {
		return fmt.Errorf("changes.Sink: save the token: %w", err)
	}
	s.pending, s.saved = "", time.Now()
	return nil
}
