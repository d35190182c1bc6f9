package shardsql

import (
	"context"
	"database/sql"
	"time"

	"github.com/jmoiron/sqlx"
)

const idemTable = "idempotency_keys"

// Key states of idempotency_keys.state.
const (
	KeyPending = 0 // claimed; its create has not committed
	KeyDone    = 1 // its create committed; response holds the answer
)

// KeyRow is one row of idempotency_keys.
type KeyRow struct {
	Fingerprint []byte
	State       int
	Claim       uint64
	ClaimedAt   time.Time
	ObjectID    uint64
	Response    []byte
	ExpiresAt   time.Time
}

// InsertKey claims key as pending with claim, failing with MySQL error
// 1062 when the key has a row already.
func InsertKey(ctx context.Context, x sqlx.ExecerContext, db DB, key, fingerprint []byte, claim uint64, at, expires time.Time) error {
	_, err := x.ExecContext(ctx, "INSERT INTO "+db.table(idemTable)+" (key_hash, fingerprint, state, claim, claimed_at, expires_at) VALUES (?, ?, ?, ?, ?, ?)",
		key, fingerprint, KeyPending, claim, at, expires)
	return err
}

// ReadKey reads the row of key with lock; sql.ErrNoRows when there is none.
func ReadKey(ctx context.Context, q sqlx.QueryerContext, db DB, key []byte, lock Lock) (KeyRow, error) {
	var r KeyRow
	err := q.QueryRowxContext(ctx, "SELECT fingerprint, state, claim, claimed_at, object_id, response, expires_at FROM "+db.table(idemTable)+" WHERE key_hash = ?"+string(lock), key).
		Scan(&r.Fingerprint, &r.State, &r.Claim, &r.ClaimedAt, &r.ObjectID, &r.Response, &r.ExpiresAt)
	return r, err
}

// TakeKey gives the row of key to a new claim, as pending with
// fingerprint, if it is still as the taker read it: claim old in state
// (a pending claim past its lease, or an expired row). A claimant that
// completed the row meanwhile keeps it. It reports whether it took it;
// keepObject false also forgets the object a user create noted.
func TakeKey(ctx context.Context, x sqlx.ExecerContext, db DB, key, fingerprint []byte, old uint64, state int, claim uint64, at, expires time.Time, keepObject bool) (bool, error) {
	obj := "0"
	if keepObject {
		obj = "object_id"
	}
	res, err := x.ExecContext(ctx, "UPDATE "+db.table(idemTable)+" SET fingerprint = ?, state = ?, claim = ?, claimed_at = ?, expires_at = ?, response = NULL, object_id = "+obj+" WHERE key_hash = ? AND claim = ? AND state = ?",
		fingerprint, KeyPending, claim, at, expires, key, old, state)
	return affected(res, err)
}

// NoteKeyObject records, while claim holds key, the object its request
// has made so far (a user not yet visible). It reports whether claim
// still held the key.
func NoteKeyObject(ctx context.Context, x sqlx.ExecerContext, db DB, key []byte, claim, object uint64) (bool, error) {
	res, err := x.ExecContext(ctx, "UPDATE "+db.table(idemTable)+" SET object_id = ? WHERE key_hash = ? AND claim = ? AND state = ?", object, key, claim, KeyPending)
	return affected(res, err)
}

// CompleteKey marks key done with its response and object, if claim still
// holds it pending; it reports whether it did. Run in the create's
// transaction, it commits with the create.
func CompleteKey(ctx context.Context, x sqlx.ExecerContext, db DB, key []byte, claim, object uint64, response []byte) (bool, error) {
	res, err := x.ExecContext(ctx, "UPDATE "+db.table(idemTable)+" SET state = ?, object_id = ?, response = ? WHERE key_hash = ? AND claim = ? AND state = ?",
		KeyDone, object, response, key, claim, KeyPending)
	return affected(res, err)
}

// ReleaseKey deletes key's row if claim holds it pending (its create
// failed and made nothing, so a retry may run again at once).
func ReleaseKey(ctx context.Context, x sqlx.ExecerContext, db DB, key []byte, claim uint64) error {
	_, err := x.ExecContext(ctx, "DELETE FROM "+db.table(idemTable)+" WHERE key_hash = ? AND claim = ? AND state = ?", key, claim, KeyPending)
	return err
}

// DeleteExpiredKeys deletes up to n rows that expired before cutoff and
// returns how many it deleted.
func DeleteExpiredKeys(ctx context.Context, x sqlx.ExecerContext, db DB, cutoff time.Time, n int) (int, error) {
	res, err := x.ExecContext(ctx, "DELETE FROM "+db.table(idemTable)+" WHERE expires_at < ? LIMIT ?", cutoff, n)
	if err != nil {
		return 0, err
	}
	k, err := res.RowsAffected()
	return int(k), err
}

// affected reports whether an update changed a row.
func affected(res sql.Result, err error) (bool, error) {
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n > 0, err
}
