// Package shardsql is the SQL of one shard database: every table name and
// every statement pinstore sends to a shard, built in one place.
//
// A shard database (dbNNNNN) holds the same tables as every other one
// (package migrations creates them):
//
//   - object tables users, boards, pins, comments, sections: local_id (the 36-bit
//     local part of an ID, AUTO_INCREMENT), the JSON document, a version
//     for optimistic concurrency, created and updated times, and flags
//     (model.Flags), which the database derives from the document;
//   - one table per mapping (model.Mapping.Table): from_id, to_id,
//     sequence, primary key (from_id, to_id) so an add is idempotent, and
//     an index (from_id, sequence, to_id) so an ordered page is a range
//     scan; a row lives on the shard of its from_id;
//   - mapping_counts: the length of each list, changed in the same
//     transaction as the rows, and, under model.SecretKey, how many of a
//     user's boards and pins are secret;
//   - idempotency_claims (a key's claim, on the shard its hash picks) and
//     idempotency_outcomes (a claim's outcome and response, on the shard
//     its create writes to);
//   - user_feed (the materialised home feed) and feed_outbox (fan-out not
//     yet known to be written); feed_pull_authors (authors whose pins are
//     merged at read time, on their shard) and feed_pulled (the pulled
//     authors a user follows, on the user's shard).
//
// Helpers take the smallest sqlx interface they use (sqlx.ExecerContext,
// sqlx.QueryerContext) and the DB to address, so one helper runs on a
// host's pool or inside a transaction, and none knows which host that is.
// Database and table names come only from a DB the shard map built and
// fixed table names; values always travel as placeholders. Errors are the
// driver's, unclassified: Classify turns them into model errors.
package shardsql

import (
	"strconv"
	"time"

	"github.com/pinstore/pinstore/idcodec"
	"github.com/pinstore/pinstore/model"
)

// DB is one shard database: its shard number and its name (prefix +
// %05d), as the shard map built them.
type DB struct {
	N    int
	Name string
}

// ID composes the ID of an object of type typ on this shard.
func (db DB) ID(typ idcodec.Type, local uint64) uint64 {
	return idcodec.MustEncode(uint32(db.N), typ, local)
}

// objectTables are the object tables by type, from the types' declarations
// (model.ObjectType.Table).
var objectTables = func() (t [model.TypeSlots]string) {
	for _, typ := range model.ObjectTypes() {
		t[typ] = model.Table(typ)
	}
	return t
}()

// ObjectTable is the table holding objects of typ.
func ObjectTable(typ idcodec.Type) string { return objectTables[typ] }

// FeedTable is the table of the materialised home feeds, a list table
// like a mapping's.
const FeedTable = "user_feed"

// Lock is the locking clause of a read inside a transaction.
type Lock uint8

const (
	NoLock Lock = iota
	ShareLock
	ForUpdate
	// ShareNoWait fails at once (MySQL error 1205, see LockBusy) instead
	// of waiting for a transaction that is changing the row.
	ShareNoWait
	numLocks
)

// lockClauses are the clauses of the locks, by Lock.
var lockClauses = [numLocks]string{NoLock: "", ShareLock: " LOCK IN SHARE MODE", ForUpdate: " FOR UPDATE", ShareNoWait: " LOCK IN SHARE MODE NOWAIT"}

// Now is the time pinstore stores: UTC, to the microsecond DATETIME(6)
// keeps.
func Now() time.Time { return time.Now().UTC().Truncate(time.Microsecond) }

// Sequence is the default sequence of a list entry made at t: its time in
// milliseconds (ties break on to_id).
func Sequence(t time.Time) int64 { return t.UnixMilli() }

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// Entry is one row of a list: the object listed and its sequence.
type Entry = model.Entry
