package shardsql

import (
	"context"
	"strings"

	"github.com/jmoiron/sqlx"

	"github.com/pinstore/pinstore/model"
)

// The pulled side of the hybrid feed: feed_pull_authors on an author's
// shard says their pins are merged at read time; feed_pulled on a
// follower's shard lists the pulled authors they follow.
var (
	markPulled     = declare("INSERT IGNORE INTO {db}.feed_pull_authors (author_id, since) VALUES (?, ?)")
	isPulled       = perLock("SELECT COUNT(*) FROM {db}.feed_pull_authors WHERE author_id = ?")
	untoldPulled   = declare("SELECT author_id FROM {db}.feed_pull_authors WHERE told = 0 LIMIT ?")
	markTold       = declare("UPDATE {db}.feed_pull_authors SET told = 1 WHERE author_id IN (")
	insertPulled   = declare("INSERT IGNORE INTO {db}.feed_pulled (from_id, author_id) VALUES (?, ?)")
	deletePulled   = declare("DELETE FROM {db}.feed_pulled WHERE from_id = ? AND author_id = ?")
	hasPulled      = declare("SELECT COUNT(*) FROM {db}.feed_pulled WHERE from_id = ? AND author_id = ?")
	pulledAuthors  = declare("SELECT author_id FROM {db}.feed_pulled WHERE from_id = ?")
	pulledFollowed = declare("INSERT IGNORE INTO {db}.feed_pulled (from_id, author_id) SELECT from_id, to_id FROM {db}." + model.UserFollowing.Table() + " WHERE from_id IN (")
	unfollowed     = declare("SELECT p.from_id, p.author_id FROM {db}.feed_pulled p LEFT JOIN {db}." + model.UserFollowing.Table() +
		" g ON g.from_id = p.from_id AND g.to_id = p.author_id WHERE g.from_id IS NULL")
	pulledPins = declare("(SELECT e.to_id, e.sequence FROM {db}." + model.UserPins.Table() + " e WHERE e.from_id = ?")
)

// MarkPulled records author as pulled from the pin at since, and reports
// whether this call made the record (an author already pulled keeps the
// first since). A new record is not told yet (PullAuthor.Told).
func MarkPulled(ctx context.Context, x sqlx.ExecerContext, db DB, author uint64, since int64) (bool, error) {
	res, err := x.ExecContext(ctx, db.sql(markPulled), author, since)
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

// IsPulled reports whether author's pins are merged at read time, reading
// their record with the lock given (ShareLock inside a follow's
// transaction: a record being made meanwhile is waited for).
func IsPulled(ctx context.Context, q sqlx.QueryerContext, db DB, author uint64, lock Lock) (bool, error) {
	var n int
	err := sqlx.GetContext(ctx, q, &n, db.sql(isPulled[lock]), author)
	return n > 0, err
}

// UntoldPulled reads up to n pulled authors of db whose followers have not
// all been told yet.
func UntoldPulled(ctx context.Context, q sqlx.QueryerContext, db DB, n int) ([]uint64, error) {
	var ids []uint64
	err := sqlx.SelectContext(ctx, q, &ids, db.sql(untoldPulled), n)
	return ids, err
}

// MarkTold records that every follower of authors (at most FeedChunk) has
// been told that they are pulled.
func MarkTold(ctx context.Context, x sqlx.ExecerContext, db DB, authors []uint64) error {
	args := make([]any, len(authors))
	for i, a := range authors {
		args[i] = a
	}
	_, err := x.ExecContext(ctx, placeholders(db.sql(markTold), len(authors), "?", ")"), args...)
	return err
}

// InsertPulled records that follower follows the pulled author. The
// caller holds the follow's own locks (a settle).
func InsertPulled(ctx context.Context, x sqlx.ExecerContext, db DB, follower, author uint64) error {
	_, err := x.ExecContext(ctx, db.sql(insertPulled), follower, author)
	return err
}

// InsertPulledFollowers records that followers (at most FeedChunk, all on
// db) follow the pulled author, for those whose follow row still exists,
// read under a shared lock like InsertFeedRows: one INSERT … SELECT,
// queued on a *Tx to go with its next statement.
func InsertPulledFollowers(ctx context.Context, x sqlx.ExecerContext, db DB, author uint64, followers []uint64) error {
	return later(ctx, x, stillFollowing(db, pulledFollowed, len(followers)), followingArgs(nil, followers, author)...)
}

// stillFollowing is the text of insert s (an INSERT … SELECT … FROM
// user_following WHERE from_id IN (, declared) for n followers of one
// author: the point look-ups on the primary key (from_id, to_id) lock
// the follow rows they find in share mode, so an unfollow waits for the
// caller's transaction and then removes what it wrote, and an unfollowed
// follower gets no row.
func stillFollowing(db DB, s stmt, n int) string {
	return placeholders(db.sql(s), n, "?", ") AND to_id = ? LOCK IN SHARE MODE")
}

// followingArgs appends to args the arguments of stillFollowing's text.
func followingArgs(args []any, followers []uint64, author uint64) []any {
	for _, f := range followers {
		args = append(args, f)
	}
	return append(args, author)
}

// DeletePulled forgets that follower follows the pulled author (an
// unfollow) and returns how many rows went.
func DeletePulled(ctx context.Context, x sqlx.ExecerContext, db DB, follower, author uint64) (int64, error) {
	res, err := x.ExecContext(ctx, db.sql(deletePulled), follower, author)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// HasPulled reports whether follower's feed merges author's pins.
func HasPulled(ctx context.Context, q sqlx.QueryerContext, db DB, follower, author uint64) (bool, error) {
	var n int
	err := sqlx.GetContext(ctx, q, &n, db.sql(hasPulled), follower, author)
	return n > 0, err
}

// PulledAuthors reads the pulled authors follower follows (one range scan
// of the primary key).
func PulledAuthors(ctx context.Context, q sqlx.QueryerContext, db DB, follower uint64) ([]uint64, error) {
	var ids []uint64
	err := sqlx.SelectContext(ctx, q, &ids, db.sql(pulledAuthors), follower)
	return ids, err
}

// UnfollowedPulled lists the (follower, author) rows of db's feed_pulled
// whose follower no longer follows the author.
func UnfollowedPulled(ctx context.Context, q sqlx.QueryerContext, db DB) ([][2]uint64, error) {
	return queryPairs(ctx, q, db.sql(unfollowed))
}

// AuthorAt is an author and the shard database holding their pins.
type AuthorAt struct {
	DB     DB
	Author uint64
}

// ReadPulledPins reads, in one statement for any number of authors whose
// databases share one host, the first p.Limit of their pins (user_pins)
// in p's order after p.After: per author a keyset range scan of at most
// p.Limit rows, merged by the server. p.Offset is ignored.
func ReadPulledPins(ctx context.Context, q sqlx.QueryerContext, authors []AuthorAt, p Page) ([]Entry, error) {
	var b strings.Builder
	var args []any
	b.WriteString("SELECT to_id, sequence FROM (")
	for i, a := range authors {
		if i > 0 {
			b.WriteString(" UNION ALL ")
		}
		b.WriteString(a.DB.sql(pulledPins))
		args = p.bounds(&b, append(args, a.Author), "e.")
		if p.After != nil {
			b.WriteString(keyset("e.", p.Desc))
			args = append(args, p.After.Seq, p.After.Seq, p.After.To)
		}
		b.WriteString(order("e.", p.Desc) + " LIMIT ?)")
		args = append(args, p.Limit)
	}
	b.WriteString(") t" + order("", p.Desc) + " LIMIT ?")
	args = append(args, p.Limit)
	return scanEntries(ctx, q, b.String(), args...)
}
