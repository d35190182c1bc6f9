package shardsql

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"slices"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/pinstore/pinstore/model"
)

// FeedChunk bounds the rows one feed statement writes or names.
const FeedChunk = 500

// FeedRow is one row of user_feed: a pin of author in follower's feed.
type FeedRow struct {
	Follower, Pin, Author uint64
	Seq                   int64
}

// The statements of user_feed and feed_outbox.
var (
	insertFeedRows   = declare("INSERT IGNORE INTO {db}.user_feed (from_id, to_id, sequence, author_id) SELECT from_id, ?, ?, to_id FROM {db}." + model.UserFollowing.Table() + " WHERE from_id IN (")
	lookUpFollows    = declare("SELECT from_id FROM {db}." + model.UserFollowing.Table() + " WHERE from_id IN (")
	insertFeedValues = declare("INSERT IGNORE INTO {db}.user_feed (from_id, to_id, sequence, author_id) VALUES ")
	deletePinInFeeds = declare("DELETE FROM {db}.user_feed WHERE to_id = ? AND from_id IN (")
	deleteFeedPins   = declare("DELETE FROM {db}.user_feed WHERE from_id = ? AND to_id IN (")
	follows          = perLock("SELECT 1 FROM {db}." + model.UserFollowing.Table() + " WHERE from_id = ? AND to_id = ?")
	deleteFeedAuthor = declare("DELETE FROM {db}.user_feed WHERE from_id = ? AND author_id = ?")
	countFeedAuthor  = declare("SELECT COUNT(*) FROM {db}.user_feed WHERE from_id = ? AND author_id = ?")
	feedOfAuthor     = declare("SELECT to_id, sequence FROM {db}.user_feed WHERE from_id = ? AND author_id = ?")
	unfollowedFeed   = declare("SELECT DISTINCT f.from_id, f.author_id FROM {db}.user_feed f LEFT JOIN {db}." + model.UserFollowing.Table() +
		" g ON g.from_id = f.from_id AND g.to_id = f.author_id WHERE g.from_id IS NULL")
	pinsSince = declare("(SELECT to_id, sequence FROM {db}." + model.UserPins.Table() + " WHERE from_id = ? ORDER BY sequence DESC, to_id DESC LIMIT ?)" +
		" UNION (SELECT to_id, sequence FROM {db}." + model.UserPins.Table() + " WHERE from_id = ? AND sequence >= ?)")
	listedAmong      = perMapping("SELECT to_id FROM {db}.{table} WHERE from_id = ? AND to_id IN (")
	insertOutbox     = declare("INSERT INTO {db}.feed_outbox (pin_id, author_id, sequence, created_at) VALUES (" + newIDVar + ", ?, ?, ?)")
	markOutboxRemove = declare("INSERT INTO {db}.feed_outbox (pin_id, author_id, sequence, created_at, remove) VALUES (?, ?, 0, UTC_TIMESTAMP(6), 1)" +
		" ON DUPLICATE KEY UPDATE remove = 1, created_at = VALUES(created_at)")
	deleteOutbox = declare("DELETE FROM {db}.feed_outbox WHERE remove = ? AND pin_id IN (")
	readOutbox   = declare("SELECT pin_id, author_id, sequence, remove FROM {db}.feed_outbox WHERE created_at <= ? LIMIT ?")
)

// InsertFeedRows inserts rows (at most FeedChunk, all on db) whose
// (follower, author) pair is still a follow, locking those follow rows in
// share mode so an unfollow waits for this transaction and then removes
// what it wrote (stillFollowing). Rows already there are left alone.
//
// An author's rows for few pins (a fan-out: one pin, many followers) go
// as one INSERT … SELECT per pin, which reads the follows and writes the
// rows; on a *Tx it is queued to go with the transaction's next
// statement, so it costs no round trip of its own. An author's rows for
// many pins (a follow's backfill: many pins, one follower) read the
// follows first, then insert the rows in one statement (queued).
func InsertFeedRows(ctx context.Context, tx Ext, db DB, rows []FeedRow) error {
	type pin struct {
		pin, author uint64
		seq         int64
	}
	byAuthor := map[uint64][]pin{}
	var authors []uint64
	followers := map[pin][]uint64{}
	for _, r := range rows {
		p := pin{r.Pin, r.Author, r.Seq}
		if _, ok := followers[p]; !ok {
			if len(byAuthor[r.Author]) == 0 {
				authors = append(authors, r.Author)
			}
			byAuthor[r.Author] = append(byAuthor[r.Author], p)
		}
		followers[p] = append(followers[p], r.Follower)
	}
	// In one order (author, pin, follower), so two transactions writing
	// the same rows (a fan-out and a sweep redoing it) queue instead of
	// deadlocking.
	slices.Sort(authors)
	for _, a := range authors {
		slices.SortFunc(byAuthor[a], func(x, y pin) int { return cmp.Compare(x.pin, y.pin) })
		for _, p := range byAuthor[a] {
			slices.Sort(followers[p])
		}
	}
	for _, a := range authors {
		pins := byAuthor[a]
		if len(pins) > feedSelectPins {
			continue
		}
		for _, p := range pins {
			fs := followers[p]
			if err := later(ctx, tx, stillFollowing(db, insertFeedRows, len(fs)), followingArgs([]any{p.pin, p.seq}, fs, p.author)...); err != nil {
				return err
			}
		}
	}
	var values []any
	for _, a := range authors {
		pins := byAuthor[a]
		if len(pins) <= feedSelectPins {
			continue
		}
		var all []uint64
		seen := map[uint64]bool{}
		for _, p := range pins {
			for _, f := range followers[p] {
				if !seen[f] {
					seen[f] = true
					all = append(all, f)
				}
			}
		}
		var following []uint64
		if err := sqlx.SelectContext(ctx, tx, &following, stillFollowing(db, lookUpFollows, len(all)), followingArgs(nil, all, a)...); err != nil {
			return err
		}
		still := map[uint64]bool{}
		for _, f := range following {
			still[f] = true
		}
		for _, p := range pins {
			for _, f := range followers[p] {
				if still[f] {
					values = append(values, f, p.pin, p.seq, p.author)
				}
			}
		}
	}
	if len(values) == 0 {
		return nil
	}
	return later(ctx, tx, placeholders(db.sql(insertFeedValues), len(values)/4, "(?, ?, ?, ?)", ""), values...)
}

// feedSelectPins is the most pins of one author InsertFeedRows writes
// with an INSERT … SELECT each.
const feedSelectPins = 4

// idArgs appends ids to args.
func idArgs(args []any, ids []uint64) []any {
	for _, id := range ids {
		args = append(args, id)
	}
	return args
}

// DeletePinFromFeeds deletes pin from the feeds of followers (at most
// FeedChunk): point deletes on the primary key (from_id, to_id).
func DeletePinFromFeeds(ctx context.Context, x sqlx.ExecerContext, db DB, pin uint64, followers []uint64) error {
	_, err := x.ExecContext(ctx, placeholders(db.sql(deletePinInFeeds), len(followers), "?", ")"), idArgs([]any{pin}, followers)...)
	return err
}

// DeleteFeedPins deletes pins (at most FeedChunk) from follower's feed.
func DeleteFeedPins(ctx context.Context, x sqlx.ExecerContext, db DB, follower uint64, pins []uint64) error {
	_, err := x.ExecContext(ctx, placeholders(db.sql(deleteFeedPins), len(pins), "?", ")"), idArgs([]any{follower}, pins)...)
	return err
}

// Follows reports whether follower follows followee, reading the follow
// row with the lock given.
func Follows(ctx context.Context, q sqlx.QueryerContext, db DB, follower, followee uint64, lock Lock) (bool, error) {
	var one int
	err := q.QueryRowxContext(ctx, db.sql(follows[lock]), follower, followee).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	return err == nil, err
}

// DeleteFeedAuthor deletes every pin of author from follower's feed and
// returns how many rows went.
func DeleteFeedAuthor(ctx context.Context, x sqlx.ExecerContext, db DB, follower, author uint64) (int64, error) {
	res, err := x.ExecContext(ctx, db.sql(deleteFeedAuthor), follower, author)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// CountFeedAuthor counts author's pins in follower's feed.
func CountFeedAuthor(ctx context.Context, q sqlx.QueryerContext, db DB, follower, author uint64) (int, error) {
	var n int
	err := q.QueryRowxContext(ctx, db.sql(countFeedAuthor), follower, author).Scan(&n)
	return n, err
}

// FeedOfAuthor reads every pin of author in follower's feed.
func FeedOfAuthor(ctx context.Context, q sqlx.QueryerContext, db DB, follower, author uint64) ([]Entry, error) {
	return scanEntries(ctx, q, db.sql(feedOfAuthor), follower, author)
}

// UnfollowedFeedAuthors lists the (follower, author) pairs of the shard's
// feed rows whose follower no longer follows the author.
func UnfollowedFeedAuthors(ctx context.Context, q sqlx.QueryerContext, db DB) ([][2]uint64, error) {
	return queryPairs(ctx, q, db.sql(unfollowedFeed))
}

// queryPairs reads the two id columns of every row query returns.
func queryPairs(ctx context.Context, q sqlx.QueryerContext, query string) ([][2]uint64, error) {
	rows, err := q.QueryContext(ctx, query)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out [][2]uint64
	for rows.Next() {
		var p [2]uint64
		if err := rows.Scan(&p[0], &p[1]); err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, rows.Err()
}

// PinsSince reads author's newest n pins and every pin of theirs at or
// after sequence since: what a follow made at since should have put in
// the follower's feed.
func PinsSince(ctx context.Context, q sqlx.QueryerContext, db DB, author uint64, n int, since int64) ([]Entry, error) {
	return scanEntries(ctx, q, db.sql(pinsSince), author, n, author, since)
}

// ListedAmong returns which of ids (at most FeedChunk) are in from's list m.
func ListedAmong(ctx context.Context, q sqlx.QueryerContext, db DB, m model.Mapping, from uint64, ids []uint64) (map[uint64]bool, error) {
	var found []uint64
	if err := sqlx.SelectContext(ctx, q, &found, placeholders(db.sql(listedAmong.of(m)), len(ids), "?", ")"), idArgs([]any{from}, ids)...); err != nil {
		return nil, err
	}
	out := make(map[uint64]bool, len(found))
	for _, id := range found {
		out[id] = true
	}
	return out, nil
}

// OutboxRow is a pin whose feed fan-out (or, with Remove, whose removal)
// is not known to be written.
type OutboxRow struct {
	Pin, Author uint64
	Seq         int64
	Remove      bool
}

// InsertOutbox records the fan-out of the pin t inserted (InsertNew) as
// due, in its create transaction t.
func InsertOutbox(ctx context.Context, t *Tx, db DB, author uint64, seq int64, at time.Time) error {
	if err := t.insertedNamed(); err != nil {
		return err
	}
	return later(ctx, t, db.sql(insertOutbox), author, seq, at)
}

// MarkOutboxRemove records a deleted pin's removal from feeds as due, in
// its delete transaction, replacing a fan-out still due: a sweep must not
// fan the pin out again.
func MarkOutboxRemove(ctx context.Context, x sqlx.ExecerContext, db DB, pin, author uint64) error {
	_, err := x.ExecContext(ctx, db.sql(markOutboxRemove), pin, author)
	return err
}

// DeleteOutbox deletes the outbox rows of pins that are of the given kind
// (a row that became a removal meanwhile stays for its own job); queued
// on a *Tx (later.go).
func DeleteOutbox(ctx context.Context, x sqlx.ExecerContext, db DB, pins []uint64, remove bool) error {
	return later(ctx, x, placeholders(db.sql(deleteOutbox), len(pins), "?", ")"), idArgs([]any{remove}, pins)...)
}

// ReadOutbox reads up to n outbox rows recorded at or before cutoff.
func ReadOutbox(ctx context.Context, q sqlx.QueryerContext, db DB, cutoff time.Time, n int) ([]OutboxRow, error) {
	rows, err := q.QueryContext(ctx, db.sql(readOutbox), cutoff, n)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []OutboxRow
	for rows.Next() {
		var r OutboxRow
		if err := rows.Scan(&r.Pin, &r.Author, &r.Seq, &r.Remove); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}
