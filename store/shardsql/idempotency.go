package shardsql

import (
	"context"
	"database/sql"
	"time"

	"github.com/jmoiron/sqlx"
)

// The tables of idempotency keys: idempotency_claims holds a key's claim
// on its home shard, idempotency_outcomes the outcome of one claim on the
// shard its create writes to (migration 0011).
var (
	insertKey         = declare("INSERT INTO {db}.idempotency_claims (key_hash, fingerprint, state, claim, claimed_at, target, expires_at) VALUES (?, ?, ?, ?, ?, ?, ?)")
	readKey           = declare("SELECT fingerprint, state, claim, claimed_at, target, expires_at FROM {db}.idempotency_claims WHERE key_hash = ?")
	takeKey           = declare("UPDATE {db}.idempotency_claims SET fingerprint = ?, state = ?, claim = ?, claimed_at = ?, target = ?, expires_at = ? WHERE key_hash = ? AND claim = ? AND state = ?")
	releaseKey        = declare("DELETE FROM {db}.idempotency_claims WHERE key_hash = ? AND claim = ? AND state = ?")
	insertOutcome     = declare("INSERT INTO {db}.idempotency_outcomes (key_hash, claim, state, object_id, response, expires_at) VALUES (?, ?, ?, ?, ?, ?)")
	completeNoted     = declare("UPDATE {db}.idempotency_outcomes SET state = ?, response = ? WHERE key_hash = ? AND claim = ? AND state = ?")
	readOutcome       = declare("SELECT state, object_id, response FROM {db}.idempotency_outcomes WHERE key_hash = ? AND claim = ?")
	fenceOutcome      = declare("INSERT IGNORE INTO {db}.idempotency_outcomes (key_hash, claim, state, expires_at) VALUES (?, ?, ?, ?)")
	fenceNoted        = declare("UPDATE {db}.idempotency_outcomes SET state = ? WHERE key_hash = ? AND claim = ? AND state = ?")
	deleteExpiredKeys = [...]stmt{
		declare("DELETE FROM {db}.idempotency_claims WHERE expires_at < ? LIMIT ?"),
		declare("DELETE FROM {db}.idempotency_outcomes WHERE expires_at < ? LIMIT ?"),
		// idempotency_keys kept keys on their create's shard (migration
		// 0010); it is only swept now, until a later migration drops it.
		declare("DELETE FROM {db}.idempotency_keys WHERE expires_at < ? LIMIT ?"),
	}
)

// Claim states of idempotency_claims.state.
const (
	KeyPending = 0 // claimed by a create; its outcome is on the target shard, if any
	KeyRead    = 2 // used by a request that creates nothing (target -1)
)

// Outcome states of idempotency_outcomes.state.
const (
	OutcomeDone   = 1 // the claim's create committed; response holds its outcome (store/outcome.go)
	OutcomeFenced = 2 // the claim can no longer commit here (a retry took it over, or it failed)
	OutcomeNoted  = 3 // a user create made object_id, not yet visible
)

// NoTarget is the target of a claim whose request creates nothing.
const NoTarget = -1

// KeyRow is one row of idempotency_claims.
type KeyRow struct {
	Fingerprint []byte
	State       int
	Claim       uint64
	ClaimedAt   time.Time
	Target      int // the shard the create writes to; NoTarget
	ExpiresAt   time.Time
}

// Outcome is one row of idempotency_outcomes.
type Outcome struct {
	State    int
	ObjectID uint64
	Response []byte
}

// InsertKey claims key on its home shard with claim, in state, for a
// create writing to shard target, failing with MySQL error 1062 when the
// key has a row already.
func InsertKey(ctx context.Context, x sqlx.ExecerContext, db DB, key, fingerprint []byte, state int, claim uint64, target int, at, expires time.Time) error {
	_, err := x.ExecContext(ctx, db.sql(insertKey), key, fingerprint, state, claim, at, target, expires)
	return err
}

// ReadKey reads the claim of key; sql.ErrNoRows when there is none.
func ReadKey(ctx context.Context, q sqlx.QueryerContext, db DB, key []byte) (KeyRow, error) {
	var r KeyRow
	err := q.QueryRowxContext(ctx, db.sql(readKey), key).
		Scan(&r.Fingerprint, &r.State, &r.Claim, &r.ClaimedAt, &r.Target, &r.ExpiresAt)
	return r, err
}

// TakeKey gives the claim of key to a new claim in state, with
// fingerprint and target, if it is still as the taker read it (claim old
// in state old). It reports whether it took it.
func TakeKey(ctx context.Context, x sqlx.ExecerContext, db DB, key, fingerprint []byte, old uint64, oldState, state int, claim uint64, target int, at, expires time.Time) (bool, error) {
	res, err := x.ExecContext(ctx, db.sql(takeKey), fingerprint, state, claim, at, target, expires, key, old, oldState)
	return affected(res, err)
}

// ReleaseKey deletes key's claim if claim still holds it pending (its
// create failed and its outcome is fenced, so a retry may run at once).
func ReleaseKey(ctx context.Context, x sqlx.ExecerContext, db DB, key []byte, claim uint64) error {
	_, err := x.ExecContext(ctx, db.sql(releaseKey), key, claim, KeyPending)
	return err
}

// InsertOutcome records the outcome of key's claim in state, in the
// create's transaction on its target shard. MySQL error 1062 means the
// claim has an outcome already: fenced, so the create must roll back.
func InsertOutcome(ctx context.Context, x sqlx.ExecerContext, db DB, key []byte, claim uint64, state int, object uint64, response []byte, expires time.Time) error {
	_, err := x.ExecContext(ctx, db.sql(insertOutcome), key, claim, state, object, response, expires)
	return err
}

// CompleteNoted turns the noted outcome of key's claim done with its
// response, in the create's transaction; it reports whether the claim was
// still noted (not fenced).
func CompleteNoted(ctx context.Context, x sqlx.ExecerContext, db DB, key []byte, claim uint64, response []byte) (bool, error) {
	res, err := x.ExecContext(ctx, db.sql(completeNoted), OutcomeDone, response, key, claim, OutcomeNoted)
	return affected(res, err)
}

// ReadOutcome reads the outcome of key's claim; sql.ErrNoRows when it has
// none (its create has not committed, or never will).
func ReadOutcome(ctx context.Context, q sqlx.QueryerContext, db DB, key []byte, claim uint64) (Outcome, error) {
	var o Outcome
	err := q.QueryRowxContext(ctx, db.sql(readOutcome), key, claim).
		Scan(&o.State, &o.ObjectID, &o.Response)
	return o, err
}

// FenceOutcome makes sure key's claim can no longer commit a create on
// this shard, and returns its outcome as it then stands: a claim with no
// outcome gets a fenced one (the claimant's own insert will collide with
// it, or it has rolled back), a noted one (a user not yet visible) is
// fenced keeping its object, a done one stays done (it committed: its
// response is to be replayed). Each statement is alone: the insert waits
// for a create still inserting the same row to commit or roll back.
func FenceOutcome(ctx context.Context, x Ext, db DB, key []byte, claim uint64, expires time.Time) (Outcome, error) {
	res, err := x.ExecContext(ctx, db.sql(fenceOutcome), key, claim, OutcomeFenced, expires)
	if fresh, err := affected(res, err); err != nil || fresh {
		return Outcome{State: OutcomeFenced}, err
	}
	if _, err := x.ExecContext(ctx, db.sql(fenceNoted), OutcomeFenced, key, claim, OutcomeNoted); err != nil {
		return Outcome{}, err
	}
	return ReadOutcome(ctx, x, db, key, claim)
}

// DeleteExpiredKeys deletes up to n claims, n outcomes and n legacy rows
// that expired before cutoff; it returns how many it deleted, and more
// when a table may hold others.
func DeleteExpiredKeys(ctx context.Context, x sqlx.ExecerContext, db DB, cutoff time.Time, n int) (deleted int, more bool, err error) {
	for _, s := range deleteExpiredKeys {
		res, err := x.ExecContext(ctx, db.sql(s), cutoff, n)
		if err != nil {
			return deleted, more, err
		}
		k, err := res.RowsAffected()
		if err != nil {
			return deleted, more, err
		}
		deleted += int(k)
		more = more || int(k) == n
	}
	return deleted, more, nil
}

// affected reports whether an update changed a row.
func affected(res sql.Result, err error) (bool, error) {
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n > 0, err
}
