package store

import (
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/pinstore/pinstore/idcodec"
	"github.com/pinstore/pinstore/model"
	"github.com/pinstore/pinstore/store/shardsql"
)

// waitFeed waits until every queued fan-out is written.
func waitFeed(t *testing.T, s *Store) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for s.FeedBacklog() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("feed fan-out still has %d pins queued after 20s", s.FeedBacklog())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// feedAll pages through a user's feed by cursor.
func feedAll(t *testing.T, s *Store, user uint64, limit int) []uint64 {
	t.Helper()
	return pageAll(t, model.Page{Limit: limit}, func(p model.Page) (model.List, error) { return s.Feed(ctx, user, p) })
}

// wantFeed is what a feed must hold: the newest n pins of each followee
// (all when n is 0), merged newest first by (sequence, id) as the store
// orders them.
func wantFeed(t *testing.T, s *Store, n int, followees ...uint64) []uint64 {
	t.Helper()
	var all []model.Entry
	for _, u := range followees {
		l, err := s.List(ctx, model.UserPins, u, model.Page{Limit: model.MaxLimit, Desc: true})
		if err != nil {
			t.Fatal(err)
		}
		if l.NextCursor != "" {
			t.Fatal("wantFeed reads one page of user_pins")
		}
		e := l.Entries
		if n > 0 && len(e) > n {
			e = e[:n]
		}
		all = append(all, e...)
	}
	sort.Slice(all, func(i, j int) bool {
		if all[i].Sequence != all[j].Sequence {
			return all[i].Sequence > all[j].Sequence
		}
		return all[i].To > all[j].To
	})
	out := []uint64{}
	for _, e := range all {
		out = append(out, e.To)
	}
	return out
}

func feedRows(t *testing.T, s *Store, user uint64) int {
	t.Helper()
	sh, _, err := s.route("test", user, idcodec.TypeUser)
	if err != nil {
		t.Fatal(err)
	}
	var n int
	if err := sh.Host.DB.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+sh.Name+".user_feed WHERE from_id = ?", user).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func equalFeed(t *testing.T, what string, got, want []uint64) {
	t.Helper()
	if got == nil {
		got = []uint64{}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("%s: got %d pins %v, want %d %v", what, len(got), got, len(want), want)
	}
}

// TestFeedFanOut: pins made after a follow reach the follower's feed;
// a follow copies the followee's earlier pins; unfollow, pin deletes and
// user deletes take rows out.
func TestFeedFanOut(t *testing.T) {
	s, _ := openTest(t)
	reader, other := mustUser(t, s, "reader"), mustUser(t, s, "other")
	var authors, boards []uint64
	for range 3 {
		a := mustUser(t, s, "author")
		authors = append(authors, a)
		boards = append(boards, mustBoard(t, s, a))
	}
	stranger := mustBoard(t, s, mustUser(t, s, "stranger"))
	// Pins before the follow: copied by the follow.
	for i := range 6 {
		mustPin(t, s, boards[i%3])
	}
	for _, a := range authors {
		if err := s.AddMapping(ctx, model.UserFollowing, reader, a); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.AddMapping(ctx, model.UserFollowing, other, authors[0]); err != nil {
		t.Fatal(err)
	}
	equalFeed(t, "feed right after following", feedAll(t, s, reader, 4), wantFeed(t, s, 0, authors...))
	// Pins after the follow: fanned out.
	for i := range 30 {
		mustPin(t, s, boards[i%3])
		if i%4 == 0 {
			mustPin(t, s, stranger)
		}
	}
	waitFeed(t, s)
	want := wantFeed(t, s, 0, authors...)
	if len(want) != 36 {
		t.Fatalf("the authors have %d pins, want 36", len(want))
	}
	for _, limit := range []int{1, 7, 36, 100} {
		equalFeed(t, "feed after fan-out", feedAll(t, s, reader, limit), want)
	}
	equalFeed(t, "other's feed", feedAll(t, s, other, 10), wantFeed(t, s, 0, authors[0]))
	if n := feedRows(t, s, mustUser(t, s, "nobody")); n != 0 {
		t.Fatalf("a user following nobody has %d feed rows", n)
	}

	// A deleted pin leaves every follower's feed.
	victim := want[0]
	if err := s.Delete(ctx, victim, idcodec.TypePin, 0); err != nil {
		t.Fatal(err)
	}
	waitFeed(t, s)
	equalFeed(t, "feed after a pin delete", feedAll(t, s, reader, 10), wantFeed(t, s, 0, authors...))
	if n := feedRows(t, s, reader); n != 35 {
		t.Fatalf("%d feed rows after deleting one of 36 pins", n)
	}

	// Unfollow: the followee's rows go at once; following again brings them back.
	if err := s.RemoveMapping(ctx, model.UserFollowing, reader, authors[1]); err != nil {
		t.Fatal(err)
	}
	equalFeed(t, "feed after an unfollow", feedAll(t, s, reader, 10), wantFeed(t, s, 0, authors[0], authors[2]))
	mustPin(t, s, boards[1]) // not fanned out to reader any more
	waitFeed(t, s)
	equalFeed(t, "feed after the unfollowed author pins", feedAll(t, s, reader, 10), wantFeed(t, s, 0, authors[0], authors[2]))
	if err := s.AddMapping(ctx, model.UserFollowing, reader, authors[1]); err != nil {
		t.Fatal(err)
	}
	equalFeed(t, "feed after following again", feedAll(t, s, reader, 10), wantFeed(t, s, 0, authors...))

	// Deleting a board deletes its pins: they leave the feed.
	if err := s.Delete(ctx, boards[2], idcodec.TypeBoard, 0); err != nil {
		t.Fatal(err)
	}
	waitFeed(t, s)
	equalFeed(t, "feed after a board delete", feedAll(t, s, reader, 10), wantFeed(t, s, 0, authors[0], authors[1]))

	// Deleting a followee empties their part; deleting the reader empties
	// theirs, and the feed is then not found.
	if err := s.Delete(ctx, authors[0], idcodec.TypeUser, 0); err != nil {
		t.Fatal(err)
	}
	waitFeed(t, s)
	equalFeed(t, "feed after deleting a followee", feedAll(t, s, reader, 10), wantFeed(t, s, 0, authors[1]))
	if n := feedRows(t, s, other); n != 0 {
		t.Fatalf("other followed only the deleted author, yet has %d feed rows", n)
	}
	if err := s.Delete(ctx, reader, idcodec.TypeUser, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Feed(ctx, reader, model.Page{Limit: 10}); !model.IsCode(err, model.ENotFound) {
		t.Fatalf("feed of a deleted user: %v", err)
	}
	if n := feedRows(t, s, reader); n != 0 {
		t.Fatalf("a deleted user keeps %d feed rows", n)
	}
	if rep, err := s.RepairFeeds(ctx, true, nil); err != nil || rep.Missing != 0 || rep.Stale != 0 {
		t.Fatalf("repair after the fan-out test found %+v, %v", rep, err)
	}
}

// TestFeedBackfillIsBounded: a follow copies only the followee's newest
// FeedBackfill pins; later pins all arrive.
func TestFeedBackfillIsBounded(t *testing.T) {
	s, _ := openTest(t)
	s.cfg.FeedBackfill = 5
	reader, author := mustUser(t, s, "reader"), mustUser(t, s, "author")
	board := mustBoard(t, s, author)
	for range 12 {
		mustPin(t, s, board)
	}
	// Fan-out still queued when the follow lands would (rightly) add those
	// older pins as well: let it finish first.
	waitFeed(t, s)
	if err := s.AddMapping(ctx, model.UserFollowing, reader, author); err != nil {
		t.Fatal(err)
	}
	equalFeed(t, "feed after following a user with 12 pins", feedAll(t, s, reader, 3), wantFeed(t, s, 5, author))
	for range 4 {
		mustPin(t, s, board)
	}
	waitFeed(t, s)
	equalFeed(t, "feed after 4 more pins", feedAll(t, s, reader, 3), wantFeed(t, s, 9, author))
	if rep, err := s.RepairFeeds(ctx, true, nil); err != nil || rep.Missing != 0 || rep.Stale != 0 {
		t.Fatalf("repair found %+v, %v", rep, err)
	}
}

// TestFeedFanOutRacesFollows: authors pin while readers follow and
// unfollow them over and over; afterwards every feed holds exactly what
// its final follows say, and repair finds nothing to fix.
func TestFeedFanOutRacesFollows(t *testing.T) {
	s, _ := openTest(t)
	var authors, boards, readers []uint64
	for range 3 {
		a := mustUser(t, s, "author")
		authors = append(authors, a)
		boards = append(boards, mustBoard(t, s, a))
	}
	for range 6 {
		readers = append(readers, mustUser(t, s, "reader"))
	}
	var wg sync.WaitGroup
	errs := make(chan error, 100)
	stop := make(chan struct{})
	for _, b := range boards {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Until the follows end, or one page of the author's pins
			// (wantFeed) is full.
			for range model.MaxLimit {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := s.CreatePin(ctx, model.PinDoc{BoardID: model.ID(b)}, 0); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	final := make([][]bool, len(readers)) // final[r][a]: reader r follows author a at the end
	var fw sync.WaitGroup
	for r, reader := range readers {
		final[r] = make([]bool, len(authors))
		fw.Add(1)
		go func() {
			defer fw.Done()
			for i := 0; i < 40; i++ {
				a := i % len(authors)
				var err error
				if (i/len(authors)+r)%2 == 0 {
					err = s.AddMapping(ctx, model.UserFollowing, reader, authors[a])
					final[r][a] = true
				} else {
					err = s.RemoveMapping(ctx, model.UserFollowing, reader, authors[a])
					final[r][a] = false
				}
				if err != nil && !model.IsCode(err, model.EUnavailable) { // a deadlock is a retryable 503
					errs <- err
					return
				}
				if err != nil {
					i-- // retry the same step
				}
			}
		}()
	}
	fw.Wait()
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	waitFeed(t, s)
	for r, reader := range readers {
		var followed []uint64
		for a, on := range final[r] {
			if on {
				followed = append(followed, authors[a])
			}
		}
		equalFeed(t, "a reader's feed after racing follows", feedAll(t, s, reader, 100), wantFeed(t, s, 0, followed...))
	}
	if rep, err := s.RepairFeeds(ctx, true, nil); err != nil || rep.Missing != 0 || rep.Stale != 0 {
		t.Fatalf("repair after the race found %+v, %v", rep, err)
	}
}

// TestRepairFeeds: feeds that lost rows (a crash during fan-out), kept
// rows of a deleted pin or of an unfollowed author are put right; a dry run
// only counts.
func TestRepairFeeds(t *testing.T) {
	s, _ := openTest(t)
	reader, a, b := mustUser(t, s, "reader"), mustUser(t, s, "a"), mustUser(t, s, "b")
	ba, bb := mustBoard(t, s, a), mustBoard(t, s, b)
	for range 5 {
		mustPin(t, s, ba)
		mustPin(t, s, bb)
	}
	for _, u := range []uint64{a, b} {
		if err := s.AddMapping(ctx, model.UserFollowing, reader, u); err != nil {
			t.Fatal(err)
		}
	}
	waitFeed(t, s) // the pins' own fan-out may run after the follows
	want := wantFeed(t, s, 0, a)
	sh, _, _ := s.route("test", reader, idcodec.TypeUser)
	db := sh.Host.DB
	// Lose three of a's rows; keep b's rows after an unfollow whose feed
	// clean-up never ran; keep the row of a pin whose delete fan-out never
	// ran.
	if _, err := db.ExecContext(ctx, "DELETE FROM "+sh.Name+".user_feed WHERE from_id = ? AND to_id IN (?, ?, ?)", reader, want[0], want[2], want[4]); err != nil {
		t.Fatal(err)
	}
	bsh, _, _ := s.route("test", b, idcodec.TypeUser)
	if err := s.inTx(ctx, "test", sh, func(tx *shardsql.Tx) error {
		_, err := shardsql.RemoveEdge(ctx, tx, sh.DB, model.UserFollowing, reader, b)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if err := s.inTx(ctx, "test", bsh, func(tx *shardsql.Tx) error {
		_, err := shardsql.RemoveEdge(ctx, tx, bsh.DB, model.UserFollowers, b, reader)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	doomed := want[1]
	ash, _, _ := s.route("test", a, idcodec.TypeUser)
	if err := s.inTx(ctx, "test", ash, func(tx *shardsql.Tx) error { // the pin's own delete, without the queue
		d, err := markDeleted(ctx, tx, "test", ash, idcodec.TypePin, idcodec.LocalOf(doomed), 0)
		if err != nil {
			return err
		}
		return unlink(ctx, tx, "test", ash, idcodec.TypePin, doomed, d, new(deleted))
	}); err != nil {
		t.Fatal(err)
	}
	dry, err := s.RepairFeeds(ctx, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	if dry.Missing != 3 || dry.Stale != 6 { // 5 of b's rows + the deleted pin
		t.Fatalf("dry run: %+v, want 3 missing, 6 stale", dry)
	}
	if n := feedRows(t, s, reader); n != 2+5 {
		t.Fatalf("a dry run changed the feed: %d rows", n)
	}
	rep, err := s.RepairFeeds(ctx, false, nil)
	if err != nil || rep.Missing != 3 || rep.Stale != 6 {
		t.Fatalf("repair: %+v, %v", rep, err)
	}
	equalFeed(t, "feed after repair", feedAll(t, s, reader, 2), wantFeed(t, s, 0, a))
	if again, err := s.RepairFeeds(ctx, true, nil); err != nil || again.Missing != 0 || again.Stale != 0 {
		t.Fatalf("second repair found %+v, %v", again, err)
	}
}

func outboxRows(t *testing.T, s *Store, pin uint64) int {
	t.Helper()
	sh, _, err := s.route("test", pin, idcodec.TypePin)
	if err != nil {
		t.Fatal(err)
	}
	var n int
	if err := sh.Host.DB.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+sh.Name+".feed_outbox WHERE pin_id = ?", pin).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestFeedOutboxRecoversLostFanOut: a pin's feed_outbox row is written
// with the pin and goes once its fan-out is written; a server that died
// with the fan-out queued leaves the row, and a sweep writes the feeds;
// a deleted pin's row goes with it, so no sweep brings it back.
func TestFeedOutboxRecoversLostFanOut(t *testing.T) {
	s, _ := openTest(t)
	author := mustUser(t, s, "author")
	board := mustBoard(t, s, author)
	var readers []uint64
	for range 5 {
		r := mustUser(t, s, "reader")
		readers = append(readers, r)
		if err := s.AddMapping(ctx, model.UserFollowing, r, author); err != nil {
			t.Fatal(err)
		}
	}
	var pins []uint64
	for range 4 {
		pins = append(pins, mustPin(t, s, board))
	}
	waitFeed(t, s)
	for _, p := range pins {
		if n := outboxRows(t, s, p); n != 0 {
			t.Fatalf("pin %d keeps %d outbox rows after its fan-out", p, n)
		}
	}
	// The crash: the pins' feed rows were never written, their outbox
	// rows remain (as the create transaction left them).
	ash, _, _ := s.route("test", author, idcodec.TypeUser)
	for _, r := range readers {
		sh, _, _ := s.route("test", r, idcodec.TypeUser)
		if _, err := sh.Host.DB.ExecContext(ctx, "DELETE FROM "+sh.Name+".user_feed WHERE from_id = ?", r); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range pins {
		if _, err := ash.Host.DB.ExecContext(ctx, "INSERT INTO "+ash.Name+".feed_outbox (pin_id, author_id, sequence, created_at, remove) SELECT to_id, from_id, sequence, UTC_TIMESTAMP(6) - INTERVAL 1 HOUR, 0 FROM "+ash.Name+".user_pins WHERE from_id = ? AND to_id = ?", author, p); err != nil {
			t.Fatal(err)
		}
	}
	// Deleting a pin turns its outbox row into a removal, done and cleared
	// in the background: no sweep fans it out again.
	if err := s.Delete(ctx, pins[0], idcodec.TypePin, 0); err != nil {
		t.Fatal(err)
	}
	waitFeed(t, s)
	if n := outboxRows(t, s, pins[0]); n != 0 {
		t.Fatalf("a deleted pin keeps %d outbox rows after its removal ran", n)
	}
	// Rows younger than the cutoff are left alone (a live server is on them).
	if n, err := s.SweepFeedOutbox(ctx, 2*time.Hour); err != nil || n != 0 {
		t.Fatalf("sweep of rows older than 2h queued %d, %v", n, err)
	}
	n, err := s.SweepFeedOutbox(ctx, time.Minute)
	if err != nil || n != 3 {
		t.Fatalf("sweep queued %d, %v; want the 3 live pins", n, err)
	}
	waitFeed(t, s)
	want := wantFeed(t, s, 0, author)
	if len(want) != 3 {
		t.Fatalf("author has %d pins", len(want))
	}
	for _, r := range readers {
		equalFeed(t, "feed after the sweep", feedAll(t, s, r, 2), want)
	}
	for _, p := range pins {
		if n := outboxRows(t, s, p); n != 0 {
			t.Fatalf("pin %d keeps %d outbox rows after the sweep", p, n)
		}
	}
}

// TestFeedOutboxRecoversLostRemoval: a pin deleted by a server that died
// before removing its feed rows: the sweep removes them.
func TestFeedOutboxRecoversLostRemoval(t *testing.T) {
	s, _ := openTest(t)
	author, reader := mustUser(t, s, "author"), mustUser(t, s, "reader")
	if err := s.AddMapping(ctx, model.UserFollowing, reader, author); err != nil {
		t.Fatal(err)
	}
	board := mustBoard(t, s, author)
	keep, gone := mustPin(t, s, board), mustPin(t, s, board)
	waitFeed(t, s)
	rsh, _, _ := s.route("test", reader, idcodec.TypeUser)
	var seq int64
	if err := rsh.Host.DB.QueryRowContext(ctx, "SELECT sequence FROM "+rsh.Name+".user_feed WHERE from_id = ? AND to_id = ?", reader, gone).Scan(&seq); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, gone, idcodec.TypePin, 0); err != nil {
		t.Fatal(err)
	}
	waitFeed(t, s)
	// The crash: the removal never ran; the delete transaction's outbox
	// row remains.
	if _, err := rsh.Host.DB.ExecContext(ctx, "INSERT INTO "+rsh.Name+".user_feed (from_id, to_id, sequence, author_id) VALUES (?, ?, ?, ?)", reader, gone, seq, author); err != nil {
		t.Fatal(err)
	}
	ash, _, _ := s.route("test", author, idcodec.TypeUser)
	if _, err := ash.Host.DB.ExecContext(ctx, "INSERT INTO "+ash.Name+".feed_outbox (pin_id, author_id, sequence, created_at, remove) VALUES (?, ?, 0, UTC_TIMESTAMP(6) - INTERVAL 1 HOUR, 1)", gone, author); err != nil {
		t.Fatal(err)
	}
	if n, err := s.SweepFeedOutbox(ctx, time.Minute); err != nil || n != 1 {
		t.Fatalf("sweep queued %d, %v", n, err)
	}
	waitFeed(t, s)
	if n := feedRows(t, s, reader); n != 1 {
		t.Fatalf("%d feed rows after the sweep, want 1 (%d)", n, keep)
	}
	if n := outboxRows(t, s, gone); n != 0 {
		t.Fatalf("the deleted pin keeps %d outbox rows", n)
	}
}
