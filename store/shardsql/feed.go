package shardsql

import (
	"context"
	"database/sql"
	"errors"
	"strings"
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

// InsertFeedRows inserts rows (at most FeedChunk, all on db) whose
// (follower, author) pair is still a follow, locking those follow rows in
// share mode so an unfollow waits for this transaction and then removes
// what it wrote. Rows already there are left alone.
func InsertFeedRows(ctx context.Context, tx sqlx.ExtContext, db DB, rows []FeedRow) error {
	type pair struct{ follower, author uint64 }
	byAuthor := map[uint64][]uint64{}
	seen := map[pair]bool{}
	for _, r := range rows {
		p := pair{r.Follower, r.Author}
		if _, ok := seen[p]; !ok {
			seen[p] = false
			byAuthor[r.Author] = append(byAuthor[r.Author], r.Follower)
		}
	}
	for author, followers := range byAuthor {
		following, err := stillFollowing(ctx, tx, db, author, followers)
		if err != nil {
			return err
		}
		for _, f := range following {
			seen[pair{f, author}] = true
		}
	}
	var q strings.Builder
	var args []any
	for _, r := range rows {
		if !seen[pair{r.Follower, r.Author}] {
			continue
		}
		if len(args) == 0 {
			q.WriteString("INSERT IGNORE INTO " + db.table(FeedTable) + " (from_id, to_id, sequence, author_id) VALUES ")
		} else {
			q.WriteString(", ")
		}
		q.WriteString("(?, ?, ?, ?)")
		args = append(args, r.Follower, r.Pin, r.Seq, r.Author)
	}
	if len(args) == 0 {
		return nil
	}
	return later(ctx, tx, q.String(), args...) // on a *Tx, with the next shard's look-up
}

// DeletePinFromFeeds deletes pin from the feeds of followers (at most
// FeedChunk): point deletes on the primary key (from_id, to_id).
func DeletePinFromFeeds(ctx context.Context, x sqlx.ExecerContext, db DB, pin uint64, followers []uint64) error {
	q, args, err := sqlx.In("DELETE FROM "+db.table(FeedTable)+" WHERE from_id IN (?) AND to_id = ?", followers, pin)
	if err != nil {
		return err
	}
	_, err = x.ExecContext(ctx, q, args...)
	return err
}

// DeleteFeedPins deletes pins (at most FeedChunk) from follower's feed.
func DeleteFeedPins(ctx context.Context, x sqlx.ExecerContext, db DB, follower uint64, pins []uint64) error {
	q, args, err := sqlx.In("DELETE FROM "+db.table(FeedTable)+" WHERE from_id = ? AND to_id IN (?)", follower, pins)
	if err != nil {
		return err
	}
	_, err = x.ExecContext(ctx, q, args...)
	return err
}

// Follows reports whether follower follows followee, reading the follow
// row with the lock given.
func Follows(ctx context.Context, q sqlx.QueryerContext, db DB, follower, followee uint64, lock Lock) (bool, error) {
	var one int
	err := q.QueryRowxContext(ctx, "SELECT 1 FROM "+db.table(model.UserFollowing.Table())+" WHERE from_id = ? AND to_id = ?"+string(lock), follower, followee).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	return err == nil, err
}

// DeleteFeedAuthor deletes every pin of author from follower's feed and
// returns how many rows went.
func DeleteFeedAuthor(ctx context.Context, x sqlx.ExecerContext, db DB, follower, author uint64) (int64, error) {
	res, err := x.ExecContext(ctx, "DELETE FROM "+db.table(FeedTable)+" WHERE from_id = ? AND author_id = ?", follower, author)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// CountFeedAuthor counts author's pins in follower's feed.
func CountFeedAuthor(ctx context.Context, q sqlx.QueryerContext, db DB, follower, author uint64) (int, error) {
	var n int
	err := q.QueryRowxContext(ctx, "SELECT COUNT(*) FROM "+db.table(FeedTable)+" WHERE from_id = ? AND author_id = ?", follower, author).Scan(&n)
	return n, err
}

// FeedOfAuthor reads every pin of author in follower's feed.
func FeedOfAuthor(ctx context.Context, q sqlx.QueryerContext, db DB, follower, author uint64) ([]Entry, error) {
	return scanEntries(ctx, q, "SELECT to_id, sequence FROM "+db.table(FeedTable)+" WHERE from_id = ? AND author_id = ?", follower, author)
}

// UnfollowedFeedAuthors lists the (follower, author) pairs of the shard's
// feed rows whose follower no longer follows the author.
func UnfollowedFeedAuthors(ctx context.Context, q sqlx.QueryerContext, db DB) ([][2]uint64, error) {
	return queryPairs(ctx, q, "SELECT DISTINCT f.from_id, f.author_id FROM "+db.table(FeedTable)+" f LEFT JOIN "+db.table(model.UserFollowing.Table())+
		" g ON g.from_id = f.from_id AND g.to_id = f.author_id WHERE g.from_id IS NULL")
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
	t := db.table(model.UserPins.Table())
	return scanEntries(ctx, q, "(SELECT to_id, sequence FROM "+t+" WHERE from_id = ? ORDER BY sequence DESC, to_id DESC LIMIT ?)"+
		" UNION (SELECT to_id, sequence FROM "+t+" WHERE from_id = ? AND sequence >= ?)", author, n, author, since)
}

// ListedAmong returns which of ids (at most FeedChunk) are in from's list m.
func ListedAmong(ctx context.Context, q sqlx.QueryerContext, db DB, m model.Mapping, from uint64, ids []uint64) (map[uint64]bool, error) {
	query, args, err := sqlx.In("SELECT to_id FROM "+db.table(m.Table())+" WHERE from_id = ? AND to_id IN (?)", from, ids)
	if err != nil {
		return nil, err
	}
	var found []uint64
	if err := sqlx.SelectContext(ctx, q, &found, query, args...); err != nil {
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

// InsertOutbox records a new pin's fan-out as due, in the pin's create
// transaction.
func InsertOutbox(ctx context.Context, x sqlx.ExecerContext, db DB, pin, author uint64, seq int64, at time.Time) error {
	return later(ctx, x, "INSERT INTO "+db.table(outboxTable)+" (pin_id, author_id, sequence, created_at) VALUES (?, ?, ?, ?)", pin, author, seq, at)
}

// MarkOutboxRemove records a deleted pin's removal from feeds as due, in
// its delete transaction, replacing a fan-out still due: a sweep must not
// fan the pin out again.
func MarkOutboxRemove(ctx context.Context, x sqlx.ExecerContext, db DB, pin, author uint64) error {
	_, err := x.ExecContext(ctx, "INSERT INTO "+db.table(outboxTable)+" (pin_id, author_id, sequence, created_at, remove) VALUES (?, ?, 0, UTC_TIMESTAMP(6), 1)"+
		" ON DUPLICATE KEY UPDATE remove = 1, created_at = VALUES(created_at)", pin, author)
	return err
}

// DeleteOutbox deletes the outbox rows of pins that are of the given kind
// (a row that became a removal meanwhile stays for its own job); queued
// on a *Tx (later.go).
func DeleteOutbox(ctx context.Context, x sqlx.ExecerContext, db DB, pins []uint64, remove bool) error {
	q, args, err := sqlx.In("DELETE FROM "+db.table(outboxTable)+" WHERE pin_id IN (?) AND remove = ?", pins, remove)
	if err != nil {
		return err
	}
	return later(ctx, x, q, args...)
}

// ReadOutbox reads up to n outbox rows recorded at or before cutoff.
func ReadOutbox(ctx context.Context, q sqlx.QueryerContext, db DB, cutoff time.Time, n int) ([]OutboxRow, error) {
	rows, err := q.QueryContext(ctx, "SELECT pin_id, author_id, sequence, remove FROM "+db.table(outboxTable)+" WHERE created_at <= ? LIMIT ?", cutoff, n)
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
