package shardsql

import (
	"context"
	"database/sql"
	"errors"

	"github.com/jmoiron/sqlx"
)

const boardSavesTable = "board_saves"

// BoardSave reads the pin that saved source to board, with lock; 0 when
// the board holds no save of it.
func BoardSave(ctx context.Context, q sqlx.QueryerContext, db DB, board, source uint64, lock Lock) (uint64, error) {
	var saved uint64
	err := q.QueryRowxContext(ctx, "SELECT saved_pin_id FROM "+db.table(boardSavesTable)+" WHERE board_id = ? AND source_pin_id = ?"+string(lock), board, source).Scan(&saved)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	return saved, err
}

// InsertBoardSave records that saved is board's save of source. A board
// that already holds a save of source is a duplicate key (IsDuplicate):
// of two racing saves exactly one inserts.
func InsertBoardSave(ctx context.Context, x sqlx.ExecerContext, db DB, board, source, saved uint64) error {
	_, err := x.ExecContext(ctx, "INSERT INTO "+db.table(boardSavesTable)+" (board_id, source_pin_id, saved_pin_id) VALUES (?, ?, ?)", board, source, saved)
	return err
}

// DeleteBoardSave forgets saved as a save on board (its pin is deleted).
func DeleteBoardSave(ctx context.Context, x sqlx.ExecerContext, db DB, board, saved uint64) error {
	_, err := x.ExecContext(ctx, "DELETE FROM "+db.table(boardSavesTable)+" WHERE board_id = ? AND saved_pin_id = ?", board, saved)
	return err
}
