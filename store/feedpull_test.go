package store

import (
	"testing"

	"github.com/pinstore/pinstore/idcodec"
	"github.com/pinstore/pinstore/model"
)

// pulledRow reports whether follower's feed merges author's pins.
func pulledRow(t *testing.T, s *Store, follower, author uint64) bool {
	t.Helper()
	sh, _, _ := s.route("test", follower, idcodec.TypeUser)
	var n int
	if err := sh.Host.DB.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+sh.Name+".feed_pulled WHERE from_id = ? AND author_id = ?", follower, author).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n == 1
}

func follow(t *testing.T, s *Store, follower, followee uint64, on bool) {
	t.Helper()
	var err error
	if on {
		err = s.AddMapping(ctx, model.UserFollowing, follower, followee)
	} else {
		err = s.RemoveMapping(ctx, model.UserFollowing, follower, followee)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// checkFeeds asserts each reader's feed, paged at several sizes, is
// exactly the pins of the followees given (no pin twice, none missing).
func checkFeeds(t *testing.T, s *Store, what string, feeds map[uint64][]uint64) {
	t.Helper()
	for reader, followees := range feeds {
		want := wantFeed(t, s, 0, followees...)
		for _, limit := range []int{1, 3, 100} {
			equalFeed(t, what, feedAll(t, s, reader, limit), want)
		}
	}
}

// TestFeedPullTransitions: with a threshold of 3 followers, an author
// crosses it upwards (their new pins write no feed rows and are merged at
// read time, the rows of their earlier pins stay and appear once) and
// back down (new pins are pushed again, and the pins made while pulled
// still appear); every feed stays exact throughout, and repair finds
// nothing to fix.
func TestFeedPullTransitions(t *testing.T) {
	s, _ := openTestWith(t, func(c *Config) { c.FeedPullThreshold = 3 })
	celeb, plain := mustUser(t, s, "celeb"), mustUser(t, s, "plain")
	cb, pb := mustBoard(t, s, celeb), mustBoard(t, s, plain)
	r1, r2, r3, r4 := mustUser(t, s, "r1"), mustUser(t, s, "r2"), mustUser(t, s, "r3"), mustUser(t, s, "r4")
	for _, r := range []uint64{r1, r2} {
		follow(t, s, r, celeb, true)
		follow(t, s, r, plain, true)
	}
	// Two followers: pushed.
	for range 3 {
		mustPin(t, s, cb)
		mustPin(t, s, pb)
	}
	waitFeed(t, s)
	if n := feedRows(t, s, r1); n != 6 {
		t.Fatalf("below the threshold r1 has %d feed rows, want 6", n)
	}
	checkFeeds(t, s, "pushed", map[uint64][]uint64{r1: {celeb, plain}, r2: {celeb, plain}})

	// Up: a third follower; the next pins are pulled.
	follow(t, s, r3, celeb, true)
	gap := []uint64{mustPin(t, s, cb), mustPin(t, s, cb)}
	mustPin(t, s, pb)
	waitFeed(t, s)
	if n := feedRows(t, s, r1); n != 7 {
		t.Fatalf("a pulled author's pins wrote feed rows: r1 has %d, want 7 (6 + plain's new pin)", n)
	}
	for _, pin := range gap {
		if outboxRows(t, s, pin) != 0 {
			t.Fatalf("pulled pin %d has a feed_outbox row", pin)
		}
	}
	for _, r := range []uint64{r1, r2, r3} {
		if !pulledRow(t, s, r, celeb) {
			t.Fatalf("follower %d was not told that celeb is pulled", r)
		}
	}
	if pulledRow(t, s, r1, plain) {
		t.Fatal("plain is pulled with 2 followers")
	}
	// A follow of a pulled author copies nothing and still sees every pin.
	follow(t, s, r4, celeb, true)
	if n := feedRows(t, s, r4); n != 0 || !pulledRow(t, s, r4, celeb) {
		t.Fatalf("following a pulled author: %d rows copied, pulled row %v", n, pulledRow(t, s, r4, celeb))
	}
	all := map[uint64][]uint64{r1: {celeb, plain}, r2: {celeb, plain}, r3: {celeb}, r4: {celeb}}
	checkFeeds(t, s, "pulled", all)

	// A deleted pulled pin leaves every feed.
	if err := s.Delete(ctx, gap[1], idcodec.TypePin, 0); err != nil {
		t.Fatal(err)
	}
	waitFeed(t, s)
	checkFeeds(t, s, "after deleting a pulled pin", all)

	// Down: two unfollows leave 2 followers; new pins are pushed again and
	// the pin made while pulled stays in the feeds, once.
	follow(t, s, r3, celeb, false)
	follow(t, s, r4, celeb, false)
	if pulledRow(t, s, r3, celeb) || feedRows(t, s, r3) != 0 {
		t.Fatal("an unfollow left the pulled author in r3's feed")
	}
	before := feedRows(t, s, r1)
	mustPin(t, s, cb)
	waitFeed(t, s)
	if n := feedRows(t, s, r1); n != before+1 {
		t.Fatalf("below the threshold again, a pin wrote %d rows to r1's feed, want 1", n-before)
	}
	all = map[uint64][]uint64{r1: {celeb, plain}, r2: {celeb, plain}, r3: {}, r4: {}}
	checkFeeds(t, s, "back below the threshold", all)
	if rep, err := s.RepairFeeds(ctx, true, nil); err != nil || rep.Missing != 0 || rep.Stale != 0 {
		t.Fatalf("repair found %+v, %v", rep, err)
	}
	// And up again: nothing twice.
	follow(t, s, r3, celeb, true)
	mustPin(t, s, cb)
	waitFeed(t, s)
	all[r3] = []uint64{celeb}
	checkFeeds(t, s, "above the threshold again", all)
	if rep, err := s.RepairFeeds(ctx, true, nil); err != nil || rep.Missing != 0 || rep.Stale != 0 {
		t.Fatalf("repair found %+v, %v", rep, err)
	}
}

// TestFeedPullRecovers: a Pull job lost with its process is redone by the
// sweep; a missing feed_pulled row is found by repair, which adds no feed
// rows for a pulled author's pins; a stale one is removed.
func TestFeedPullRecovers(t *testing.T) {
	s, _ := openTestWith(t, func(c *Config) { c.FeedPullThreshold = 2 })
	celeb := mustUser(t, s, "celeb")
	cb := mustBoard(t, s, celeb)
	r1, r2, r3 := mustUser(t, s, "r1"), mustUser(t, s, "r2"), mustUser(t, s, "r3")
	follow(t, s, r1, celeb, true)
	follow(t, s, r2, celeb, true)
	for range 3 {
		mustPin(t, s, cb)
	}
	waitFeed(t, s)
	ash, _, _ := s.route("test", celeb, idcodec.TypeUser)
	sh2, _, _ := s.route("test", r2, idcodec.TypeUser)
	// The job's work lost: told back to 0, r2's row gone.
	if _, err := ash.Host.DB.ExecContext(ctx, "UPDATE "+ash.Name+".feed_pull_authors SET told = 0 WHERE author_id = ?", celeb); err != nil {
		t.Fatal(err)
	}
	if _, err := sh2.Host.DB.ExecContext(ctx, "DELETE FROM "+sh2.Name+".feed_pulled WHERE from_id = ?", r2); err != nil {
		t.Fatal(err)
	}
	if rep, err := s.RepairFeeds(ctx, true, nil); err != nil || rep.Missing != 1 || rep.Stale != 0 {
		t.Fatalf("dry-run repair: %+v, %v; want 1 missing (the feed_pulled row), no feed rows", rep, err)
	}
	if n, err := s.SweepFeedOutbox(ctx, 0); err != nil || n != 1 {
		t.Fatalf("sweep queued %d jobs (%v), want the one Pull job", n, err)
	}
	waitFeed(t, s)
	if !pulledRow(t, s, r2, celeb) {
		t.Fatal("the sweep did not tell r2")
	}
	checkFeeds(t, s, "after the sweep", map[uint64][]uint64{r1: {celeb}, r2: {celeb}})

	// Repair: a missing row is added, a row without its follow removed.
	sh3, _, _ := s.route("test", r3, idcodec.TypeUser)
	if _, err := sh2.Host.DB.ExecContext(ctx, "DELETE FROM "+sh2.Name+".feed_pulled WHERE from_id = ?", r2); err != nil {
		t.Fatal(err)
	}
	if _, err := sh3.Host.DB.ExecContext(ctx, "INSERT INTO "+sh3.Name+".feed_pulled (from_id, author_id) VALUES (?, ?)", r3, celeb); err != nil {
		t.Fatal(err)
	}
	rows := feedRows(t, s, r2)
	rep, err := s.RepairFeeds(ctx, false, nil)
	if err != nil || rep.Missing != 1 || rep.Stale != 1 {
		t.Fatalf("repair: %+v, %v; want 1 missing, 1 stale", rep, err)
	}
	if n := feedRows(t, s, r2); n != rows {
		t.Fatalf("repair added %d feed rows for a pulled author's pins", n-rows)
	}
	checkFeeds(t, s, "after repair", map[uint64][]uint64{r1: {celeb}, r2: {celeb}, r3: {}})
	if rep, err := s.RepairFeeds(ctx, true, nil); err != nil || rep.Missing != 0 || rep.Stale != 0 {
		t.Fatalf("second repair found %+v, %v", rep, err)
	}
}
