package shardsql

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/pinstore/pinstore/idcodec"
)

// The statements of board_saves, and of the documents a save's batch
// locks and changes (by local id, an IN list).
var (
	boardSave       = perLock("SELECT saved_pin_id FROM {db}.board_saves WHERE board_id = ? AND source_pin_id = ?")
	insertBoardSave = declare("INSERT INTO {db}.board_saves (board_id, source_pin_id, saved_pin_id) VALUES (?, ?, ?)")
	deleteBoardSave = declare("DELETE FROM {db}.board_saves WHERE board_id = ? AND saved_pin_id = ?")
	lockDocs        = perType("SELECT local_id, doc FROM {db}.{table} WHERE local_id IN (")
	updateDocs      = perType("UPDATE {db}.{table} SET doc = CASE local_id")
)

// BoardSave reads the pin that saved source to board, with lock; 0 when
// the board holds no save of it.
func BoardSave(ctx context.Context, q sqlx.QueryerContext, db DB, board, source uint64, lock Lock) (uint64, error) {
	var saved uint64
	err := q.QueryRowxContext(ctx, db.sql(boardSave[lock]), board, source).Scan(&saved)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	return saved, err
}

// InsertBoardSave records that saved is board's save of source. A board
// that already holds a save of source is a duplicate key (IsDuplicate):
// of two racing saves exactly one inserts.
func InsertBoardSave(ctx context.Context, x sqlx.ExecerContext, db DB, board, source, saved uint64) error {
	_, err := x.ExecContext(ctx, db.sql(insertBoardSave), board, source, saved)
	return err
}

// DeleteBoardSave forgets saved as a save on board (its pin is deleted).
func DeleteBoardSave(ctx context.Context, x sqlx.ExecerContext, db DB, board, saved uint64) error {
	_, err := x.ExecContext(ctx, db.sql(deleteBoardSave), board, saved)
	return err
}

// LockDocs reads the documents of the objects locals of type typ with
// one statement per 500, locking their rows (FOR UPDATE), by local id;
// a missing row is left out.
func LockDocs(ctx context.Context, q sqlx.QueryerContext, db DB, typ idcodec.Type, locals []uint64) (map[uint64][]byte, error) {
	out := make(map[uint64][]byte, len(locals))
	for start := 0; start < len(locals); start += docBatch {
		part := locals[start:min(start+docBatch, len(locals))]
		args := make([]any, len(part))
		for i, l := range part {
			args[i] = l
		}
		rows, err := q.QueryxContext(ctx, placeholders(db.sql(lockDocs.of(typ)), len(part), "?", ") FOR UPDATE"), args...)
		if err != nil {
			return nil, err
		}
		for rows.Next() {
			var l uint64
			var doc []byte
			if err := rows.Scan(&l, &doc); err != nil {
				rows.Close()
				return nil, err
			}
			out[l] = doc
		}
		if err := rows.Close(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// UpdateDocs replaces the documents of objects of type typ (by local id)
// and raises each one's version, with one statement per 500: UpdateObject
// for many.
func UpdateDocs(ctx context.Context, t *Tx, db DB, typ idcodec.Type, docs map[uint64][]byte, at time.Time) error {
	locals := make([]uint64, 0, len(docs))
	for l := range docs {
		locals = append(locals, l)
	}
	for start := 0; start < len(locals); start += docBatch {
		part := locals[start:min(start+docBatch, len(locals))]
		var b strings.Builder
		args := make([]any, 0, 3*len(part)+1)
		ids := make([]uint64, len(part))
		for i, l := range part {
			b.WriteString(" WHEN ? THEN ?")
			args = append(args, l, docs[l])
			ids[i] = db.ID(typ, l)
		}
		b.WriteString(placeholders(" END, version = version + 1, updated_at = ? WHERE local_id IN (", len(part), "?", ")"))
		args = append(args, at)
		for _, l := range part {
			args = append(args, l)
		}
		if _, err := t.change(ctx, ids, db.sql(updateDocs.of(typ))+b.String(), args...); err != nil {
			return err
		}
	}
	return nil
}

// docBatch bounds the objects one statement of LockDocs or UpdateDocs names.
const docBatch = 500
