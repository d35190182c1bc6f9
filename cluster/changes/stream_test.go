package changes_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/pinstore/pinstore/cluster/changes"
	"github.com/pinstore/pinstore/idcodec"
	"github.com/pinstore/pinstore/internal/testenv"
	"github.com/pinstore/pinstore/migrations"
	"github.com/pinstore/pinstore/model"
	"github.com/pinstore/pinstore/store/shardmap"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testenv.Cleanup()
	os.Exit(code)
}

// fleet is one MariaDB host with row binlogs and two migrated shards.
type fleet struct {
	host *testenv.Host
	db   *sqlx.DB
	m    *shardmap.Map
}

func newFleet(t *testing.T) *fleet { return newFleetTB(t) }

func newFleetTB(t testing.TB) *fleet {
	t.Helper()
	return newFleetOn(t, "changes", 1, testenv.UniquePrefix(t, "chg"))
}

// newFleetOn is newFleet on a host of its own name and server id, with
// the shard databases named by prefix.
func newFleetOn(t testing.TB, name string, id int, prefix string) *fleet {
	t.Helper()
	h := testenv.ReplicationHost(t, name, id)
	m, err := shardmap.SingleHost(h.DSN(), 2, prefix)
	if err != nil {
		t.Fatal(err)
	}
	db, err := sqlx.Open("mysql", h.DSN()+"?parseTime=true")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	ms, err := migrations.All()
	if err != nil {
		t.Fatal(err)
	}
	for s := 0; s < m.Shards; s++ {
		if err := migrations.Apply(context.Background(), db, m.DBName(s), ms); err != nil {
			t.Fatal(err)
		}
	}
	return &fleet{host: h, db: db, m: m}
}

// tx runs statements in one transaction; {0} and {1} name the shards'
// databases.
func (f *fleet) tx(t *testing.T, stmts ...string) { f.txTB(t, stmts...) }

func (f *fleet) txTB(t testing.TB, stmts ...string) {
	t.Helper()
	tx, err := f.db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range stmts {
		s = strings.NewReplacer("{0}", f.m.DBName(0), "{1}", f.m.DBName(1)).Replace(s)
		if _, err := tx.Exec(s); err != nil {
			tx.Rollback()
			t.Fatalf("%s: %v", s, err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
}

// follow runs changes.Follow from token in the background and returns the
// channel of what it tells and a stop that returns Follow's error.
func (f *fleet) follow(t *testing.T, token string, c changes.Config) (<-chan changes.Event, func() error) {
	t.Helper()
	tok, err := changes.ParseToken(token)
	if err != nil {
		t.Fatal(err)
	}
	c.Map = func() *shardmap.Map { return f.m }
	ctx, cancel := context.WithCancel(context.Background())
	out := make(chan changes.Event, 1000)
	done := make(chan error, 1)
	go func() {
		done <- changes.Follow(ctx, c, tok, func(e changes.Event) error {
			select {
			case out <- e:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		})
	}()
	t.Cleanup(cancel)
	return out, func() error { cancel(); return <-done }
}

// next returns the next event that is not progress, failing after 10s.
func next(t *testing.T, ch <-chan changes.Event) changes.Event {
	t.Helper()
	for {
		select {
		case e := <-ch:
			if e.Kind != changes.Progress {
				return e
			}
		case <-time.After(10 * time.Second):
			t.Fatal("no event within 10s")
		}
	}
}

// firstToken waits for the Progress event every stream starts with.
func firstToken(t *testing.T, ch <-chan changes.Event) string {
	t.Helper()
	select {
	case e := <-ch:
		if e.Kind != changes.Progress || e.Token == "" {
			t.Fatalf("the stream began with %+v, not its token", e)
		}
		return e.Token
	case <-time.After(20 * time.Second):
		t.Fatal("the stream told no token within 20s")
	}
	return ""
}

func id(shard int, typ idcodec.Type, local uint64) model.ID {
	return model.ID(idcodec.MustEncode(uint32(shard), typ, local))
}

// summary is what the tests compare of an event.
func summary(e changes.Event) string {
	if e.IsObject() {
		var doc bytes.Buffer
		if err := json.Compact(&doc, e.Doc); err != nil {
			return "bad doc: " + err.Error()
		}
		return fmt.Sprintf("%s %s %d v%d %s", e.Kind, e.Type, uint64(e.ID), e.Version, doc.Bytes())
	}
	return fmt.Sprintf("%s %s %d->%d @%d", e.Kind, e.List, uint64(e.From), uint64(e.To), *e.Sequence)
}

// TestFollow writes rows as the store does and checks what the stream
// tells of them, then resumes it from tokens, filters it, and refuses a
// host without row binlogs and a token whose binlogs were purged.
func TestFollow(t *testing.T) {
	f := newFleet(t)
	ch, stop := f.follow(t, "", changes.Config{Progress: 50 * time.Millisecond})
	start := firstToken(t, ch)

	user, board, pin := id(1, idcodec.TypeUser, 1), id(1, idcodec.TypeBoard, 1), id(1, idcodec.TypePin, 1)
	// A user is inserted inactive and made visible once its name is
	// claimed; another lost its name and was deleted outright: no events.
	f.tx(t, `INSERT INTO {1}.users (local_id, doc, version, created_at, updated_at) VALUES (1, '{"username":"ann","active":false}', 1, NOW(6), NOW(6)), (2, '{"username":"bob","active":false}', 1, NOW(6), NOW(6))`,
		`INSERT INTO {1}.usernames (name_key, user_id, claimed_at) VALUES ('ann', 1, NOW(6))`)
	f.tx(t, `UPDATE {1}.users SET doc = '{"username":"ann","active":true}' WHERE local_id = 1`, `DELETE FROM {1}.users WHERE local_id = 2`)
	// A board and a pin with their lists and counts, one transaction each.
	f.tx(t, fmt.Sprintf(`INSERT INTO {1}.boards (local_id, doc, version, created_at, updated_at) VALUES (1, '{"owner_id":"%d","name":"b","active":true}', 1, NOW(6), NOW(6))`, user),
		fmt.Sprintf(`INSERT INTO {1}.user_boards VALUES (%d, %d, 100)`, user, board),
		fmt.Sprintf(`INSERT INTO {1}.mapping_counts VALUES (%d, 1, 1)`, user))
	f.tx(t, fmt.Sprintf(`INSERT INTO {1}.pins (local_id, doc, version, created_at, updated_at) VALUES (1, '{"board_id":"%d","owner_id":"%d","active":true}', 1, NOW(6), NOW(6))`, board, user),
		fmt.Sprintf(`INSERT INTO {1}.board_pins VALUES (%d, %d, 200)`, board, pin),
		fmt.Sprintf(`INSERT INTO {1}.user_pins VALUES (%d, %d, 200)`, user, pin),
		fmt.Sprintf(`INSERT INTO {1}.feed_outbox VALUES (%d, %d, 200, NOW(6), 0)`, pin, user))
	f.tx(t, `UPDATE {1}.pins SET doc = JSON_SET(doc, '$.description', 'x'), version = version + 1 WHERE local_id = 1`)
	f.tx(t, fmt.Sprintf(`UPDATE {1}.board_pins SET sequence = 50 WHERE to_id = %d`, pin))
	f.tx(t, `UPDATE {1}.pins SET doc = JSON_SET(doc, '$.active', false), version = version + 1 WHERE local_id = 1`,
		fmt.Sprintf(`DELETE FROM {1}.board_pins WHERE to_id = %d`, pin), fmt.Sprintf(`DELETE FROM {1}.user_pins WHERE to_id = %d`, pin))
	// Tables outside the shards: nothing.
	f.host.Exec(t, "CREATE DATABASE IF NOT EXISTS "+f.m.DBPrefix+"other", "CREATE TABLE IF NOT EXISTS "+f.m.DBPrefix+"other.pins (local_id INT PRIMARY KEY)", "INSERT INTO "+f.m.DBPrefix+"other.pins VALUES (1)")
	f.tx(t, `INSERT INTO {0}.comments (local_id, doc, version, created_at, updated_at) VALUES (1, '{"pin_id":"1","author_id":"1","text":"end","active":true}', 1, NOW(6), NOW(6))`)

	want := []string{
		fmt.Sprintf(`created user %d v1 {"username":"ann","active":true}`, user),
		fmt.Sprintf(`created board %d v1 {"owner_id":"%d","name":"b","active":true}`, board, user),
		fmt.Sprintf("added user_boards %d->%d @100", user, board),
		fmt.Sprintf(`created pin %d v1 {"board_id":"%d","owner_id":"%d","active":true}`, pin, board, user),
		fmt.Sprintf("added board_pins %d->%d @200", board, pin),
		fmt.Sprintf("added user_pins %d->%d @200", user, pin),
		fmt.Sprintf(`updated pin %d v2 {"board_id":"%d","owner_id":"%d","active":true,"description":"x"}`, pin, board, user),
		fmt.Sprintf("moved board_pins %d->%d @50", board, pin),
		fmt.Sprintf(`deleted pin %d v3 {"board_id":"%d","owner_id":"%d","active":false,"description":"x"}`, pin, board, user),
		fmt.Sprintf("removed board_pins %d->%d @50", board, pin),
		fmt.Sprintf("removed user_pins %d->%d @200", user, pin),
		fmt.Sprintf(`created comment %d v1 {"pin_id":"1","author_id":"1","text":"end","active":true}`, id(0, idcodec.TypeComment, 1)),
	}
	var got []changes.Event
	for range want {
		got = append(got, next(t, ch))
	}
	if err := stop(); !errors.Is(err, context.Canceled) {
		t.Fatalf("Follow returned %v after its context ended", err)
	}
	var lastSeq uint64
	for i, e := range got {
		if s := summary(e); s != want[i] {
			t.Errorf("event %d: %s\n               want %s", i, s, want[i])
		}
		if wantShard := min(1, len(got)-1-i); e.Shard != wantShard {
			t.Errorf("event %d on shard %d, want %d", i, e.Shard, wantShard)
		}
		seq, _ := seqOf(e.GTID)
		if seq < lastSeq {
			t.Errorf("event %d: GTID %s after sequence %d", i, e.GTID, lastSeq)
		}
		lastSeq = seq
		if e.Key != fmt.Sprintf("%s/%s/%d", e.Host, e.GTID, e.Index) || e.Host != "default" || e.Time.IsZero() || time.Since(e.Time) > time.Minute {
			t.Errorf("event %d: key %q host %q time %v", i, e.Key, e.Host, e.Time)
		}
	}
	// The pin's create is one transaction of three events, in row order.
	if got[3].GTID != got[5].GTID || got[3].Index != 0 || got[5].Index != 2 || got[2].GTID == got[3].GTID {
		t.Errorf("the pin's create: GTIDs %s %s %s, indexes %d…%d", got[2].GTID, got[3].GTID, got[5].GTID, got[3].Index, got[5].Index)
	}

	t.Run("resume", func(t *testing.T) {
		// From each event's token, the stream goes on with the next one:
		// inside a transaction (after the board_pins entry of the pin's
		// create) and between them.
		for _, k := range []int{0, 4, 5, 9} {
			ch, stop := f.follow(t, got[k].Token, changes.Config{})
			firstToken(t, ch)
			for j := k + 1; j < len(got); j++ {
				if e := next(t, ch); e.Key != got[j].Key || summary(e) != summary(got[j]) {
					t.Fatalf("from the token of event %d: %s (%s), want %s (%s)", k, summary(e), e.Key, summary(got[j]), got[j].Key)
				}
			}
			stop()
		}
		// From the start's token: all of it again, the same keys.
		ch, stop := f.follow(t, start, changes.Config{})
		firstToken(t, ch)
		for j := range got {
			if e := next(t, ch); e.Key != got[j].Key {
				t.Fatalf("from the start: event %d is %s, want %s", j, e.Key, got[j].Key)
			}
		}
		stop()
	})

	t.Run("filter", func(t *testing.T) {
		ch, stop := f.follow(t, start, changes.Config{Types: []idcodec.Type{idcodec.TypePin}, Lists: []model.Mapping{model.UserPins}})
		firstToken(t, ch)
		var kept []string
		for _, e := range got {
			if e.Type == "pin" || e.List == "user_pins" {
				kept = append(kept, e.Key)
			}
		}
		for _, k := range kept {
			if e := next(t, ch); e.Key != k {
				t.Fatalf("filtered: %s (%s), want %s", e.Key, summary(e), k)
			}
		}
		// Past the last one it tells progress, whose token resumes after the comment.
		var prog changes.Event
		for prog.Token == "" {
			select {
			case e := <-ch:
				if e.Kind != changes.Progress {
					t.Fatalf("filtered: an event past the last kept: %s", summary(e))
				}
				prog = e
			case <-time.After(5 * time.Second):
				t.Fatal("no progress after the filtered events")
			}
		}
		stop()
		f.tx(t, `UPDATE {0}.comments SET doc = JSON_SET(doc, '$.text', 'again'), version = 2`)
		ch, stop = f.follow(t, prog.Token, changes.Config{})
		firstToken(t, ch)
		if e := next(t, ch); e.Kind != changes.Updated || e.Type != "comment" || e.Version != 2 {
			t.Fatalf("after the progress token: %s, want the comment's update", summary(e))
		}
		stop()
	})

	t.Run("bad tokens", func(t *testing.T) {
		for _, tok := range []string{"x", "eyJ2IjoxfQ", changes.Token{Hosts: map[string]changes.HostPos{"default": {Pos: "0-1"}}}.Encode()} {
			if _, err := changes.ParseToken(tok); model.ErrorCode(err) != model.EInvalid {
				t.Errorf("ParseToken(%q): %v, want invalid_argument", tok, err)
			}
		}
		tok := changes.Token{Hosts: map[string]changes.HostPos{"elsewhere": {Pos: "0-1-1"}}}
		err := changes.Follow(context.Background(), changes.Config{Map: func() *shardmap.Map { return f.m }}, tok, func(changes.Event) error { return nil })
		if model.ErrorCode(err) != model.EInvalid || !strings.Contains(err.Error(), "elsewhere") {
			t.Errorf("a token of another host: %v", err)
		}
	})

	t.Run("not row", func(t *testing.T) {
		f.host.Exec(t, "SET GLOBAL binlog_format = 'MIXED'")
		defer f.host.Exec(t, "SET GLOBAL binlog_format = 'ROW'")
		err := changes.Follow(context.Background(), changes.Config{Map: func() *shardmap.Map { return f.m }}, changes.Token{}, func(changes.Event) error { return nil })
		if !errors.Is(err, changes.ErrNotRow) || !strings.Contains(err.Error(), "binlog_format=MIXED") {
			t.Fatalf("a host in MIXED format: %v", err)
		}
	})

	t.Run("expired", func(t *testing.T) {
		// The binlogs that held the changes after start are purged.
		f.host.Exec(t, "FLUSH BINARY LOGS")
		f.tx(t, `UPDATE {0}.comments SET doc = JSON_SET(doc, '$.text', 'last'), version = 3`)
		newest := f.host.Query(t, "SELECT @@gtid_binlog_pos")
		file := lastBinlog(t, f)
		// A purge leaves a file a binlog reader still has open: the
		// streams stopped above may take a moment to leave.
		for deadline := time.Now().Add(20 * time.Second); firstBinlog(t, f) != file; time.Sleep(200 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("the binlogs before %s are still there", file)
			}
			f.host.Exec(t, "PURGE BINARY LOGS TO '"+file+"'")
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		err := changes.Follow(ctx, changes.Config{Map: func() *shardmap.Map { return f.m }}, mustParse(t, start), func(changes.Event) error { return nil })
		if !errors.Is(err, changes.ErrExpired) || model.ErrorCode(err) != model.EConflict || !strings.Contains(err.Error(), "purged") {
			t.Fatalf("a purged token: %v", err)
		}
		t.Logf("%v (now at %s)", err, newest)
		// A token from after the purge still resumes.
		ch, stop := f.follow(t, "", changes.Config{})
		firstToken(t, ch)
		stop()
	})
}

func mustParse(t *testing.T, s string) changes.Token {
	t.Helper()
	tok, err := changes.ParseToken(s)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// lastBinlog is the newest binlog file of the fleet's host.
func lastBinlog(t *testing.T, f *fleet) string {
	t.Helper()
	files := binlogs(t, f)
	return files[len(files)-1]
}

// firstBinlog is the oldest binlog file of the fleet's host.
func firstBinlog(t *testing.T, f *fleet) string {
	t.Helper()
	return binlogs(t, f)[0]
}

func binlogs(t *testing.T, f *fleet) []string {
	t.Helper()
	rows, err := f.db.Query("SHOW BINARY LOGS")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	var files []string
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		files = append(files, string(vals[0].([]byte)))
	}
	return files
}

func seqOf(gtid string) (uint64, error) {
	parts := strings.Split(gtid, "-")
	var n uint64
	_, err := fmt.Sscan(parts[len(parts)-1], &n)
	return n, err
}
