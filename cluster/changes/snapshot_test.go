package changes_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pinstore/pinstore/cluster/changes"
	"github.com/pinstore/pinstore/idcodec"
	"github.com/pinstore/pinstore/model"
	"github.com/pinstore/pinstore/store/shardmap"
)

// state is what a consumer builds from the stream: visible objects and
// list entries.
type state struct {
	objects map[model.ID]object
	entries map[string]int64 // "list from to" → sequence
}

type object struct {
	version int64
	doc     string
}

func entryKey(list string, from, to model.ID) string { return fmt.Sprintf("%s %d %d", list, from, to) }

func compact(t *testing.T, doc []byte) string {
	t.Helper()
	var b bytes.Buffer
	if err := json.Compact(&b, doc); err != nil {
		t.Fatalf("a document that is not JSON: %s", doc)
	}
	return b.String()
}

// apply applies e as a consumer would, failing on an event that does not
// follow from what came before: a create of what exists, an update of
// what does not, a version that does not grow.
func (s *state) apply(t *testing.T, e changes.Event) {
	t.Helper()
	switch e.Kind {
	case changes.Created:
		if _, ok := s.objects[e.ID]; ok {
			t.Fatalf("%s: created, but it exists already (snapshot %v)", e.Key, e.Snapshot)
		}
		s.objects[e.ID] = object{e.Version, compact(t, e.Doc)}
	case changes.Updated:
		old, ok := s.objects[e.ID]
		if !ok || old.version >= e.Version {
			t.Fatalf("%s: updated to v%d, but it is %v", e.Key, e.Version, old)
		}
		s.objects[e.ID] = object{e.Version, compact(t, e.Doc)}
	case changes.Deleted:
		if _, ok := s.objects[e.ID]; !ok {
			t.Fatalf("%s: deleted, but it does not exist", e.Key)
		}
		delete(s.objects, e.ID)
	case changes.Added:
		k := entryKey(e.List, e.From, e.To)
		if _, ok := s.entries[k]; ok {
			t.Fatalf("%s: added %s, but it is there (snapshot %v)", e.Key, k, e.Snapshot)
		}
		s.entries[k] = *e.Sequence
	case changes.Moved:
		k := entryKey(e.List, e.From, e.To)
		if _, ok := s.entries[k]; !ok {
			t.Fatalf("%s: moved %s, but it is not there", e.Key, k)
		}
		s.entries[k] = *e.Sequence
	case changes.Removed:
		k := entryKey(e.List, e.From, e.To)
		if _, ok := s.entries[k]; !ok {
			t.Fatalf("%s: removed %s, but it is not there", e.Key, k)
		}
		delete(s.entries, k)
	}
}

// TestSnapshotThenFollow is a first sync under writes: the snapshot is
// taken while a writer creates, edits, moves and deletes pins, and is held
// open (a slow consumer) until a hundred more transactions have committed;
// the stream from the snapshot's token then tells exactly what the
// snapshot did not see. Snapshot plus stream equal the database at the
// end, and no event repeats or contradicts the snapshot.
func TestSnapshotThenFollow(t *testing.T) {
	f := newFleet(t)
	board := id(1, idcodec.TypeBoard, 1)
	user := id(0, idcodec.TypeUser, 1)
	f.tx(t, `INSERT INTO {0}.users (local_id, doc, version, created_at, updated_at) VALUES (1, '{"username":"ann","active":true}', 1, NOW(6), NOW(6)), (2, '{"username":"gone","active":false}', 1, NOW(6), NOW(6))`)
	f.tx(t, fmt.Sprintf(`INSERT INTO {1}.boards (local_id, doc, version, created_at, updated_at) VALUES (1, '{"owner_id":"%d","name":"b","active":true}', 1, NOW(6), NOW(6))`, user))

	// The writer: pin n on shard n%2, made with its board_pins entry, then
	// edited, moved in its list, and every fifth one deleted.
	pin := func(n int) (model.ID, string) {
		return id(n%2, idcodec.TypePin, uint64(n)), fmt.Sprintf("{%d}", n%2)
	}
	step := func(n int) []string {
		local := n/4 + 1
		p, db := pin(local)
		switch n % 4 {
		case 0:
			return []string{
				fmt.Sprintf(`INSERT INTO %s.pins (local_id, doc, version, created_at, updated_at) VALUES (%d, '{"board_id":"%d","description":"pin %d","active":true}', 1, NOW(6), NOW(6))`, db, local, board, local),
				fmt.Sprintf(`INSERT INTO %s.board_pins VALUES (%d, %d, %d)`, db, board, p, 1000+local),
			}
		case 1:
			return []string{fmt.Sprintf(`UPDATE %s.pins SET doc = JSON_SET(doc, '$.description', 'edited %d'), version = version + 1 WHERE local_id = %d`, db, local, local)}
		case 2:
			return []string{fmt.Sprintf(`UPDATE %s.board_pins SET sequence = %d WHERE from_id = %d AND to_id = %d`, db, 5000+local, board, p)}
		default:
			if local%5 != 0 {
				return []string{fmt.Sprintf(`UPDATE %s.pins SET doc = JSON_SET(doc, '$.description', 'again'), version = version + 1 WHERE local_id = %d`, db, local)}
			}
			return []string{
				fmt.Sprintf(`UPDATE %s.pins SET doc = JSON_SET(doc, '$.active', false), version = version + 1 WHERE local_id = %d`, db, local),
				fmt.Sprintf(`DELETE FROM %s.board_pins WHERE from_id = %d AND to_id = %d`, db, board, p),
			}
		}
	}
	const before, total = 2000, 3200
	for n := 0; n < before; n++ {
		f.tx(t, step(n)...)
	}
	var done atomic.Int64
	done.Store(before)
	werr := make(chan error, 1)
	go func() {
		for n := before; n < total; n++ {
			tx, err := f.db.Begin()
			if err != nil {
				werr <- err
				return
			}
			for _, s := range step(n) {
				s = strings.NewReplacer("{0}", f.m.DBName(0), "{1}", f.m.DBName(1)).Replace(s)
				if _, err := tx.Exec(s); err != nil {
					tx.Rollback()
					werr <- fmt.Errorf("%s: %w", s, err)
					return
				}
			}
			if err := tx.Commit(); err != nil {
				werr <- err
				return
			}
			done.Add(1)
		}
		werr <- nil
	}()

	s := &state{objects: map[model.ID]object{}, entries: map[string]int64{}}
	var token string
	var told, heldAt int64
	cfg := changes.Config{Map: func() *shardmap.Map { return f.m }, Progress: 50 * time.Millisecond}
	err := changes.Snapshot(context.Background(), cfg, func(e changes.Event) error {
		if e.Kind == changes.Progress {
			token = e.Token
			return nil
		}
		if told == 0 { // hold the snapshot open while the writer goes on
			heldAt = done.Load()
			for deadline := time.Now().Add(30 * time.Second); done.Load() < min(heldAt+100, total) && time.Now().Before(deadline); {
				time.Sleep(5 * time.Millisecond)
			}
		}
		told++
		if !e.Snapshot || e.GTID != "" || e.Token != "" || !strings.HasPrefix(e.Key, "snapshot/default/") {
			t.Fatalf("a snapshot event: %+v", e)
		}
		s.apply(t, e)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if token == "" || told == 0 {
		t.Fatalf("the snapshot told %d events and token %q", told, token)
	}
	if err := <-werr; err != nil {
		t.Fatal(err)
	}
	target := f.host.Query(t, "SELECT @@gtid_binlog_pos")

	ch, stop := f.follow(t, token, cfg)
	firstToken(t, ch)
	var streamed int
	for caughtUp := false; !caughtUp; {
		select {
		case e := <-ch:
			if e.Kind != changes.Progress {
				streamed++
				s.apply(t, e)
			}
			tok, err := changes.ParseToken(e.Token)
			if err != nil {
				t.Fatal(err)
			}
			hp := tok.Hosts["default"]
			caughtUp = hp.Pos == target && hp.GTID == ""
		case <-time.After(20 * time.Second):
			t.Fatalf("the stream did not reach %s within 20s (%d events)", target, streamed)
		}
	}
	stop()
	// The writer went on for at least a hundred transactions while the
	// snapshot was open: the stream had them to tell.
	if streamed < 100 {
		t.Fatalf("only %d events after the snapshot (held at transaction %d)", streamed, heldAt)
	}

	// The database now.
	want := &state{objects: map[model.ID]object{}, entries: map[string]int64{}}
	for shard := range 2 {
		db := f.m.DBName(shard)
		for _, tbl := range []struct {
			name string
			typ  idcodec.Type
		}{{"users", idcodec.TypeUser}, {"boards", idcodec.TypeBoard}, {"pins", idcodec.TypePin}} {
			rows, err := f.db.Query(fmt.Sprintf("SELECT local_id, version, doc FROM %s.%s", db, tbl.name))
			if err != nil {
				t.Fatal(err)
			}
			for rows.Next() {
				var local uint64
				var o object
				var doc []byte
				if err := rows.Scan(&local, &o.version, &doc); err != nil {
					t.Fatal(err)
				}
				var flags struct{ Active bool }
				if json.Unmarshal(doc, &flags); !flags.Active {
					continue
				}
				o.doc = compact(t, doc)
				want.objects[id(shard, tbl.typ, local)] = o
			}
			rows.Close()
		}
		rows, err := f.db.Query(fmt.Sprintf("SELECT from_id, to_id, sequence FROM %s.board_pins", db))
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var from, to uint64
			var seq int64
			if err := rows.Scan(&from, &to, &seq); err != nil {
				t.Fatal(err)
			}
			want.entries[entryKey("board_pins", model.ID(from), model.ID(to))] = seq
		}
		rows.Close()
	}
	if len(want.objects) < 3 || len(want.entries) == 0 {
		t.Fatalf("the database holds %d objects and %d entries", len(want.objects), len(want.entries))
	}
	for k, w := range want.objects {
		if g, ok := s.objects[k]; !ok || g != w {
			t.Errorf("object %d: snapshot and stream give %+v (%v), the database %+v", k, g, ok, w)
		}
	}
	for k, g := range s.objects {
		if _, ok := want.objects[k]; !ok {
			t.Errorf("object %d: snapshot and stream give %+v, the database has none", k, g)
		}
	}
	for k, w := range want.entries {
		if g, ok := s.entries[k]; !ok || g != w {
			t.Errorf("entry %s: snapshot and stream give %d (%v), the database %d", k, g, ok, w)
		}
	}
	if len(s.entries) != len(want.entries) {
		t.Errorf("snapshot and stream give %d entries, the database %d", len(s.entries), len(want.entries))
	}
	t.Logf("snapshot: %d events, held open from transaction %d; then %d events from its token; %d objects and %d entries at the end", told, heldAt, streamed, len(want.objects), len(want.entries))
}
