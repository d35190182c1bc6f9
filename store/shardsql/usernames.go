package shardsql

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/pinstore/pinstore/idcodec"
)

// The statements of usernames and user_claims, and of the user rows a
// user's create and its sweep read and change.
var (
	claimUsername   = declare("INSERT INTO {db}.usernames (name_key, user_id, claimed_at) VALUES (?, ?, ?)")
	usernameHolder  = perLock("SELECT user_id FROM {db}.usernames WHERE name_key = ?")
	takeUsername    = declare("UPDATE {db}.usernames SET user_id = ?, claimed_at = ? WHERE name_key = ?")
	releaseUsername = declare("DELETE FROM {db}.usernames WHERE name_key = ? AND user_id = ?")
	scanUsernames   = declare("SELECT name_key, user_id FROM {db}.usernames WHERE name_key > ? ORDER BY name_key LIMIT ?")
	insertUserClaim = declare("INSERT INTO {db}.user_claims (user_id, name_key, created_at) VALUES (?, ?, ?)")
	deleteUserClaim = declare("DELETE FROM {db}.user_claims WHERE user_id = ?")
	dueUserClaims   = declare("SELECT user_id, name_key FROM {db}.user_claims WHERE created_at <= ? LIMIT ?")
	userState       = perLock("SELECT u.doc, c.name_key FROM {db}.users u LEFT JOIN {db}.user_claims c ON c.user_id = ? WHERE u.local_id = ?")
	setDoc          = perType("UPDATE {db}.{table} SET doc = ? WHERE local_id = ?")
	deleteObjectRow = perType("DELETE FROM {db}.{table} WHERE local_id = ?")
	scanUsers       = declare("SELECT local_id, doc, flags, version, created_at, updated_at FROM {db}.users WHERE local_id > ? ORDER BY local_id LIMIT ?")
)

// ClaimUsername inserts the row of name key for user, failing with MySQL
// error 1062 when the name has a row already.
func ClaimUsername(ctx context.Context, x sqlx.ExecerContext, db DB, key string, user uint64, at time.Time) error {
	_, err := x.ExecContext(ctx, db.sql(claimUsername), key, user, at)
	return err
}

// UsernameHolder reads the user the row of name key names (0 when there is
// no row), with the lock given.
func UsernameHolder(ctx context.Context, q sqlx.QueryerContext, db DB, key string, lock Lock) (uint64, error) {
	var user uint64
	err := q.QueryRowxContext(ctx, db.sql(usernameHolder[lock]), key).Scan(&user)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	return user, err
}

// TakeUsername gives the row of name key to user (a takeover of a row that
// no longer counts).
func TakeUsername(ctx context.Context, x sqlx.ExecerContext, db DB, key string, user uint64, at time.Time) error {
	_, err := x.ExecContext(ctx, db.sql(takeUsername), user, at, key)
	return err
}

// ReleaseUsername deletes the row of name key if it still names user.
func ReleaseUsername(ctx context.Context, x sqlx.ExecerContext, db DB, key string, user uint64) error {
	_, err := x.ExecContext(ctx, db.sql(releaseUsername), key, user)
	return err
}

// UsernameRow is one row of the usernames index.
type UsernameRow struct {
	Key  string
	User uint64
}

// ScanUsernames reads up to n rows of the index after key, in key order.
func ScanUsernames(ctx context.Context, q sqlx.QueryerContext, db DB, after string, n int) ([]UsernameRow, error) {
	rows, err := q.QueryContext(ctx, db.sql(scanUsernames), after, n)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []UsernameRow
	for rows.Next() {
		var r UsernameRow
		if err := rows.Scan(&r.Key, &r.User); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// InsertUserClaim records, in a new user's create transaction, that the
// user is not visible until its name is claimed.
func InsertUserClaim(ctx context.Context, x sqlx.ExecerContext, db DB, user uint64, key string, at time.Time) error {
	_, err := x.ExecContext(ctx, db.sql(insertUserClaim), user, key, at)
	return err
}

// DeleteUserClaim deletes a user's pending-claim row and reports whether
// there was one.
func DeleteUserClaim(ctx context.Context, x sqlx.ExecerContext, db DB, user uint64) (bool, error) {
	res, err := x.ExecContext(ctx, db.sql(deleteUserClaim), user)
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n > 0, err
}

// UserClaim is a user still being created, and the name it claims.
type UserClaim struct {
	User uint64
	Key  string
}

// DueUserClaims reads, with one statement, up to n pending users per
// database of dbs (all on one host) created at or before cutoff.
func DueUserClaims(ctx context.Context, q sqlx.QueryerContext, dbs []DB, cutoff time.Time, n int) ([]UserClaim, error) {
	query, args := unionPerDB(dbs, dueUserClaims, cutoff, n)
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []UserClaim
	for rows.Next() {
		var c UserClaim
		if err := rows.Scan(&c.User, &c.Key); err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

// UserState reads a user's row, with the lock given, and pending claim with
// one statement: the document (nil when there is no such row) and the name
// it is still claiming ("" when it is not being created).
func UserState(ctx context.Context, q sqlx.QueryerContext, db DB, local uint64, lock Lock) (doc []byte, pending string, err error) {
	var key sql.NullString
	err = q.QueryRowxContext(ctx, db.sql(userState[lock]), db.ID(idcodec.TypeUser, local), local).Scan(&doc, &key)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, "", nil
	}
	return doc, key.String, err
}

// SetDoc replaces an object's document without a new version: a user
// made visible once its name is claimed is still at its first version.
func SetDoc(ctx context.Context, t *Tx, db DB, typ idcodec.Type, local uint64, doc []byte) error {
	_, err := t.change(ctx, []uint64{db.ID(typ, local)}, db.sql(setDoc.of(typ)), doc, local)
	return err
}

// DeleteObjectRow deletes an object's row outright: a user that lost the
// race for its name was never visible to anyone.
func DeleteObjectRow(ctx context.Context, t *Tx, db DB, typ idcodec.Type, local uint64) error {
	_, err := t.change(ctx, []uint64{db.ID(typ, local)}, db.sql(deleteObjectRow.of(typ)), local)
	return err
}

// ScanUsers reads up to n user rows after local, in local-id order.
func ScanUsers(ctx context.Context, q sqlx.QueryerContext, db DB, after uint64, n int) ([]Row, error) {
	rows, err := q.QueryContext(ctx, db.sql(scanUsers), after, n)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Row
	for rows.Next() {
		var r Row
		if err := rows.Scan(&r.Local, &r.Doc, &r.Flags, &r.Version, &r.Created, &r.Updated); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}
