package store

import (
	"context"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/pinstore/pinstore/idcodec"
	"github.com/pinstore/pinstore/internal/testenv"
	"github.com/pinstore/pinstore/model"
)

// Create makes every type with a parent as its declaration says: the
// parent read live, what it adopts from it, its Live refs checked; a pin
// and a user go through their own creates (the owner cache, the name); a
// document of another type than named is refused.
func TestCreateUnderParents(t *testing.T) {
	s, _ := openTest(t)
	ann, bob := mustUser(t, s, "ann"), mustUser(t, s, "bob")
	board, err := s.Create(ctx, idcodec.TypeBoard, &model.BoardDoc{OwnerID: model.ID(ann), Name: "b", Secret: true}, 0)
	if err != nil {
		t.Fatal(err)
	}
	pin, err := s.Create(ctx, idcodec.TypePin, &model.PinDoc{BoardID: model.ID(board.ID)}, ann)
	if err != nil {
		t.Fatal(err)
	}
	d, err := model.DecodeDoc(idcodec.TypePin, pin.Doc)
	if err != nil {
		t.Fatal(err)
	}
	if p := d.(*model.PinDoc); uint64(p.OwnerID) != ann || !p.Secret {
		t.Errorf("pin owner %d, secret %v; want ann's (%d), secret as its board", p.OwnerID, p.Secret, ann)
	}
	if owners, err := s.ownerCache.Get(ctx, []uint64{pin.ID}); err != nil || len(owners) != 1 || owners[0] != ann {
		t.Errorf("the owner cache holds %v, %v for the pin; want ann (%d): a pin's own create caches its owner", owners, err, ann)
	}
	if _, err := s.Create(ctx, idcodec.TypeSection, &model.SectionDoc{BoardID: model.ID(board.ID), Name: "s"}, bob); !model.IsCode(err, model.ENotFound) {
		t.Errorf("bob's section on ann's secret board: %v, want not found", err)
	}
	gone := idcodec.MustEncode(idcodec.ShardOf(bob), idcodec.TypeUser, idcodec.LocalOf(bob)+1000)
	if _, err := s.Create(ctx, idcodec.TypeComment, &model.CommentDoc{PinID: model.ID(pin.ID), AuthorID: model.ID(gone), Text: "hi"}, 0); !model.IsCode(err, model.ENotFound) {
		t.Errorf("a comment by a user who does not exist: %v, want not found", err)
	}
	if _, err := s.Create(ctx, idcodec.TypeComment, &model.CommentDoc{PinID: model.ID(pin.ID), AuthorID: model.ID(ann), Text: "hi"}, 0); err != nil {
		t.Errorf("ann's comment on her own secret pin: %v", err)
	}
	cat, err := s.Create(ctx, idcodec.TypeUser, &model.UserDoc{Username: "cat"}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if named, err := s.GetUserByUsername(ctx, "CAT"); err != nil || named.ID != cat.ID {
		t.Errorf("the user named cat: %v, %v; want %d: a user's own create claims its name", named.ID, err, cat.ID)
	}
	if _, err := s.Create(ctx, idcodec.TypeComment, &model.BoardDoc{OwnerID: model.ID(ann), Name: "x"}, 0); !model.IsCode(err, model.EInternal) {
		t.Errorf("a board's document as a comment: %v, want refused", err)
	}
}

// A create waits for its board's row no longer than the query timeout,
// although its statements carry the caller's context, which has no
// deadline: the transaction's deadline holds them all. It then fails as
// unavailable, changes nothing, and goes through once the row is free.
func TestCreateWaitsNoLongerThanTheQueryTimeout(t *testing.T) {
	const qt = 500 * time.Millisecond
	s, _ := openTestWith(t, func(c *Config) { c.QueryTimeout = qt })
	board := mustBoard(t, s, mustUser(t, s, "ann"))
	sh, local, err := s.route("test", board, idcodec.TypeBoard)
	if err != nil {
		t.Fatal(err)
	}
	hold, err := sh.Host.DB.BeginTxx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer hold.Rollback()
	if _, err := hold.ExecContext(ctx, "SELECT local_id FROM "+sh.Name+".boards WHERE local_id = ? FOR UPDATE", local); err != nil {
		t.Fatal(err)
	}

	start := time.Now()
	_, err = s.CreatePin(context.Background(), model.PinDoc{BoardID: model.ID(board), Link: "https://example.com/a"}, 0)
	took := time.Since(start)
	if !model.IsCode(err, model.EUnavailable) {
		t.Fatalf("a create on a board held by another transaction: %v, want unavailable", err)
	}
	if took > 5*time.Second {
		t.Fatalf("the create gave up after %v, with a query timeout of %v", took.Round(time.Millisecond), qt)
	}
	if err := hold.Rollback(); err != nil {
		t.Fatal(err)
	}
	if n := count(t, s, model.BoardPins, board); n != 0 {
		t.Fatalf("the board counts %d pins after the failed create, want 0", n)
	}
	pin, err := s.CreatePin(context.Background(), model.PinDoc{BoardID: model.ID(board), Link: "https://example.com/a"}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := all(t, s, model.BoardPins, board, 10, true); !slices.Equal(got, []uint64{pin.ID}) {
		t.Fatalf("the board's pins %v, want the one created after the hold", got)
	}
}

// texts records the statement texts pinstore's pools send on connections
// dialled through the "recorded" network, one entry a round trip, with the
// connection that sent it.
var texts struct {
	sync.Mutex
	sent []sentText
}

type sentText struct {
	conn net.Conn
	text string
}

func init() {
	mysql.RegisterDialContext("recorded", func(ctx context.Context, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
		return recordedConn{c}, err
	})
}

type recordedConn struct{ net.Conn }

func (c recordedConn) Write(b []byte) (int, error) {
	texts.Lock()
	texts.sent = append(texts.sent, sentText{c.Conn, string(b)})
	texts.Unlock()
	return c.Conn.Write(b)
}

// A pin's create is two round trips to its shard: the board's read, which
// opens the transaction and brings the author's follower count, then the
// insert with everything that names the new pin and the COMMIT, which
// reads the pin's id back. The pin it answers with is the one stored, on
// its lists and in the owner cache.
func TestCreatePinIsTwoRoundTrips(t *testing.T) {
	cfg, err := mysql.ParseDSN(testenv.MySQLDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	s, _ := openTest(t, "root@recorded("+cfg.Addr+")/")
	ann := mustUser(t, s, "ann")
	board := mustBoard(t, s, ann)
	sh, _, _ := s.route("", board, idcodec.TypeBoard)
	texts.Lock()
	texts.sent = nil
	texts.Unlock()
	pin, err := s.CreatePin(ctx, model.PinDoc{BoardID: model.ID(board), Link: "https://example.com/p"}, ann)
	if err != nil {
		t.Fatal(err)
	}
	texts.Lock()
	sent := slices.Clone(texts.sent)
	texts.Unlock()
	insert := "INSERT INTO " + sh.Name + ".pins "
	var opened, inserted []string
	var open, ins int // where in sent
	for i, q := range sent {
		if strings.Contains(q.text, "START TRANSACTION") && strings.Contains(q.text, sh.Name+".boards") {
			opened, open = append(opened, q.text), i
		}
		if strings.Contains(q.text, insert) {
			inserted, ins = append(inserted, q.text), i
		}
	}
	if len(opened) != 1 || !strings.Contains(opened[0], "LOCK IN SHARE MODE") || !strings.Contains(opened[0], "mapping_counts") {
		t.Fatalf("texts opening the create's transaction with the board's read: %q", opened)
	}
	if len(inserted) != 1 {
		t.Fatalf("%d texts insert the pin, want 1: %q", len(inserted), inserted)
	}
	q := inserted[0]
	for _, part := range []string{sh.Name + ".board_pins", sh.Name + ".user_pins", sh.Name + ".feed_outbox", "COMMIT", "SELECT @new_id"} {
		if !strings.Contains(q, part) {
			t.Errorf("the text with the pin's insert lacks %q: %s", part, q)
		}
	}
	if ins < open {
		t.Fatalf("the pin's insert was sent before the board's read")
	}
	if sent[open].conn != sent[ins].conn {
		t.Errorf("the board's read and the insert went on different connections")
	}
	// The store's background loops may use other connections meanwhile; the
	// transaction's own connection sends nothing between its two texts.
	var between []string
	for _, q := range sent[open+1 : ins] {
		if q.conn == sent[open].conn {
			between = append(between, q.text)
		}
	}
	if len(between) != 0 {
		t.Errorf("%d texts on the transaction's connection between the board's read and the insert: %q", len(between), between)
	}

	got, err := s.Get(ctx, pin.ID, idcodec.TypePin)
	if err != nil || string(got.Doc) != string(pin.Doc) || got.Version != 1 {
		t.Fatalf("the pin answered %d %s; stored %+v, %v", pin.ID, pin.Doc, got, err)
	}
	if n := count(t, s, model.BoardPins, board); n != 1 {
		t.Errorf("the board counts %d pins, want 1", n)
	}
	if owners, err := s.ownerCache.Get(ctx, []uint64{pin.ID}); err != nil || len(owners) != 1 || owners[0] != ann {
		t.Errorf("the owner cache holds %v, %v for the pin; want ann (%d)", owners, err, ann)
	}
}
