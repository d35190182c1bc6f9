package shardsql

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/pinstore/pinstore/idcodec"
)

const (
	usernamesTable  = "usernames"
	userClaimsTable = "user_claims"
)

// ClaimUsername inserts the row of name key for user, failing with MySQL
// error 1062 when the name has a row already.
func ClaimUsername(ctx context.Context, x sqlx.ExecerContext, db DB, key string, user uint64, at time.Time) error {
	_, err := x.ExecContext(ctx, "INSERT INTO "+db.table(usernamesTable)+" (name_key, user_id, claimed_at) VALUES (?, ?, ?)", key, user, at)
	return err
}

// UsernameHolder reads the user the row of name key names (0 when there is
// no row), with the lock given.
func UsernameHolder(ctx context.Context, q sqlx.QueryerContext, db DB, key string, lock Lock) (uint64, error) {
	var user uint64
	err := q.QueryRowxContext(ctx, "SELECT user_id FROM "+db.table(usernamesTable)+" WHERE name_key = ?"+string(lock), key).Scan(&user)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	return user, err
}

// TakeUsername gives the row of name key to user (a takeover of a row that
// no longer counts).
func TakeUsername(ctx context.Context, x sqlx.ExecerContext, db DB, key string, user uint64, at time.Time) error {
	_, err := x.ExecContext(ctx, "UPDATE "+db.table(usernamesTable)+" SET user_id = ?, claimed_at = ? WHERE name_key = ?", user, at, key)
	return err
}

// ReleaseUsername deletes the row of name key if it still names user.
func ReleaseUsername(ctx context.Context, x sqlx.ExecerContext, db DB, key string, user uint64) error {
	_, err := x.ExecContext(ctx, "DELETE FROM "+db.table(usernamesTable)+" WHERE name_key = ? AND user_id = ?", key, user)
	return err
}

// UsernameRow is one row of the usernames index.
type UsernameRow struct {
	Key  string
	User uint64
}

// ScanUsernames reads up to n rows of the index after key, in key order.
func ScanUsernames(ctx context.Context, q sqlx.QueryerContext, db DB, after string, n int) ([]UsernameRow, error) {
	rows, err := q.QueryContext(ctx, "SELECT name_key, user_id FROM "+db.table(usernamesTable)+" WHERE name_key > ? ORDER BY name_key LIMIT ?", after, n)
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
	_, err := x.ExecContext(ctx, "INSERT INTO "+db.table(userClaimsTable)+" (user_id, name_key, created_at) VALUES (?, ?, ?)", user, key, at)
	return err
}

// DeleteUserClaim deletes a user's pending-claim row and reports whether
// there was one.
func DeleteUserClaim(ctx context.Context, x sqlx.ExecerContext, db DB, user uint64) (bool, error) {
	res, err := x.ExecContext(ctx, "DELETE FROM "+db.table(userClaimsTable)+" WHERE user_id = ?", user)
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
	query, args := unionPerDB(dbs, "SELECT user_id, name_key FROM %s WHERE created_at <= ? LIMIT ?", userClaimsTable, cutoff, n)
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
	err = q.QueryRowxContext(ctx, "SELECT u.doc, c.name_key FROM "+db.table(objectTables[idcodec.TypeUser])+" u LEFT JOIN "+db.table(userClaimsTable)+
		" c ON c.user_id = ? WHERE u.local_id = ?"+string(lock), db.ID(idcodec.TypeUser, local), local).Scan(&doc, &key)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, "", nil
	}
	return doc, key.String, err
}

// SetDoc replaces an object's document without a new version: a user
// made visible once its name is claimed is still at its first version.
func SetDoc(ctx context.Context, t *Tx, db DB, typ idcodec.Type, local uint64, doc []byte) error {
	_, err := t.change(ctx, []uint64{db.ID(typ, local)}, "UPDATE "+db.table(objectTables[typ])+" SET doc = ? WHERE local_id = ?", doc, local)
	return err
}

// DeleteObjectRow deletes an object's row outright: a user that lost the
// race for its name was never visible to anyone.
func DeleteObjectRow(ctx context.Context, t *Tx, db DB, typ idcodec.Type, local uint64) error {
	_, err := t.change(ctx, []uint64{db.ID(typ, local)}, "DELETE FROM "+db.table(objectTables[typ])+" WHERE local_id = ?", local)
	return err
}

// ScanUsers reads up to n user rows after local, in local-id order.
func ScanUsers(ctx context.Context, q sqlx.QueryerContext, db DB, after uint64, n int) ([]Row, error) {
	rows, err := q.QueryContext(ctx, "SELECT local_id, doc, flags, version, created_at, updated_at FROM "+db.table(objectTables[idcodec.TypeUser])+
		" WHERE local_id > ? ORDER BY local_id LIMIT ?", after, n)
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
