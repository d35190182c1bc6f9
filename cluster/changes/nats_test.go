package changes_test

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/pinstore/pinstore/cluster/changes"
	"github.com/pinstore/pinstore/store/shardmap"
)

// natsURL is the NATS server with JetStream the tests publish to: it
// must answer in CI; elsewhere the test is skipped without it.
func natsURL(t *testing.T) string {
	t.Helper()
	url := os.Getenv("PINSTORE_TEST_NATS_URL")
	if url == "" {
		url = "nats://127.0.0.1:4222"
	}
	nc, err := nats.Connect(url, nats.Timeout(3*time.Second))
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("NATS at %s: %v (start it: start-stop-daemon --start --oknodo --background --exec /usr/sbin/nats-server -- -a 127.0.0.1 -p 4222 -js -sd /var/lib/nats-server -l /var/log/nats-server.log)", url, err)
		}
		t.Skipf("NATS at %s: %v", url, err)
	}
	nc.Close()
	return url
}

// TestNATSSink publishes the stream into JetStream, one subject per type
// and list, and publishes part of it again from an older token, as a
// sink restarted after a crash would: JetStream keeps each event once, and
// the sink's saved token resumes after the last one.
func TestNATSSink(t *testing.T) {
	url := natsURL(t)
	f := newFleet(t)
	name := strings.ToUpper(strings.TrimSuffix(f.m.DBPrefix, "_"))
	cfg := changes.NATSConfig{URL: url, Stream: name, Subjects: strings.ToLower(name) + ".changes", SaveEvery: time.Millisecond}
	ctx := context.Background()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		js.DeleteStream(ctx, name)
		js.DeleteKeyValue(ctx, name)
	})

	// publish follows from token into a new sink until n events went out,
	// and returns the tokens of all it told.
	publish := func(token string, n int) []changes.Event {
		t.Helper()
		sink, err := changes.OpenNATS(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		fctx, cancel := context.WithCancel(ctx)
		var told []changes.Event
		err = changes.Follow(fctx, changes.Config{Map: func() *shardmap.Map { return f.m }}, mustParse(t, token), func(e changes.Event) error {
			if err := sink.Publish(fctx, e); err != nil {
				return err
			}
			if e.Kind != changes.Progress {
				told = append(told, e)
				if len(told) == n {
					cancel()
				}
			}
			return nil
		})
		if err != context.Canceled {
			t.Fatalf("Follow: %v", err)
		}
		if err := sink.Close(ctx); err != nil {
			t.Fatal(err)
		}
		return told
	}

	sink, err := changes.OpenNATS(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	start := make(chan string, 1)
	go func() {
		changes.Follow(ctx, changes.Config{Map: func() *shardmap.Map { return f.m }}, changes.Token{}, func(e changes.Event) error {
			start <- e.Token
			return context.Canceled
		})
	}()
	first := <-start
	sink.Close(ctx)

	f.tx(t, `INSERT INTO {0}.users (local_id, doc, version, created_at, updated_at) VALUES (1, '{"username":"ann","active":true}', 1, NOW(6), NOW(6))`)
	f.tx(t, `INSERT INTO {0}.boards (local_id, doc, version, created_at, updated_at) VALUES (1, '{"owner_id":"1","name":"b","active":true}', 1, NOW(6), NOW(6))`,
		`INSERT INTO {0}.user_boards VALUES (1, 2, 100)`)
	f.tx(t, `INSERT INTO {0}.pins (local_id, doc, version, created_at, updated_at) VALUES (1, '{"board_id":"2","owner_id":"1","active":true}', 1, NOW(6), NOW(6))`,
		`INSERT INTO {0}.board_pins VALUES (2, 3, 200)`)
	f.tx(t, `UPDATE {0}.pins SET doc = '{"board_id":"2","owner_id":"1","active":true,"link":"x"}', version = 2`)

	all := publish(first, 6)
	// A sink that crashed with only the first event's token saved starts
	// again from it: five events are published a second time.
	again := publish(all[0].Token, 5)
	if again[0].Key != all[1].Key || again[4].Key != all[5].Key {
		t.Fatalf("published again from the first token: %s … %s, want %s … %s", again[0].Key, again[4].Key, all[1].Key, all[5].Key)
	}

	st, err := js.Stream(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx, jetstream.WithSubjectFilter(cfg.Subjects+".>"))
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 6 {
		t.Errorf("the stream holds %d messages, want the 6 events once each", info.State.Msgs)
	}
	want := map[string]uint64{cfg.Subjects + ".user": 1, cfg.Subjects + ".board": 1, cfg.Subjects + ".pin": 2, cfg.Subjects + ".user_boards": 1, cfg.Subjects + ".board_pins": 1}
	for subj, n := range want {
		if got := info.State.Subjects[subj]; got != n {
			t.Errorf("subject %s: %d messages, want %d (all: %v)", subj, got, n, info.State.Subjects)
		}
	}
	// The messages are the events, with their keys as message ids.
	msg, err := st.GetLastMsgForSubject(ctx, cfg.Subjects+".pin")
	if err != nil {
		t.Fatal(err)
	}
	var e changes.Event
	if err := json.Unmarshal(msg.Data, &e); err != nil {
		t.Fatal(err)
	}
	if e.Kind != changes.Updated || e.Version != 2 || e.Key != all[5].Key || msg.Header.Get("Nats-Msg-Id") != e.Key {
		t.Errorf("the last pin message: %+v, id %q", e, msg.Header.Get("Nats-Msg-Id"))
	}
	// The token saved last resumes after the last event published.
	sink, err = changes.OpenNATS(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	saved, err := sink.Token(ctx)
	sink.Close(ctx)
	if err != nil || saved != all[5].Token {
		t.Errorf("saved token %q (%v), want the last event's", saved, err)
	}
}
