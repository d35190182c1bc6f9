package reshard

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"database/sql/driver"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"
)

// The change log. While a move is in progress, every shard database on
// the side that takes writes records the primary key of each row that
// changes, in the table logTable, written by triggers on every other table
// in the same transaction as the change: a change and its log row commit
// or roll back together. Each entry also records what the change did to
// its table's row count (d: +1 an insert, -1 a delete, 0 an update; an
// update of the key is both), so that the counts read once before the hold
// can be carried forward (rowCounts) instead of read again while held. Applying the log copies exactly the logged keys
// from that side to the other (the source row, or its absence, replaces
// the target's) and then deletes the log rows it applied, by their
// sequence numbers: a row committed meanwhile, even with a lower sequence
// number, stays for the next batch.
//
// Writes made by the move itself (its copies on either side) set the
// session variable applyVar, which the triggers check, so they are never
// logged: the log holds what clients changed and nothing else.
const (
	logTable = "reshard_log"
	applyVar = "@pinstore_reshard_apply"
	// logKeys is how many primary-key columns the log can hold.
	logKeys = 4
)

// triggerName is the name of the trigger of tb for event ("i", "u", "d"):
// at most 64 characters, unique per table and event.
func triggerName(table, event string) string {
	n := "reshard_" + event + "_" + table
	if len(n) > 64 {
		sum := sha256.Sum256([]byte(table))
		n = n[:47] + "_" + hex.EncodeToString(sum[:8])
	}
	return n
}

// logInsert is the statement a trigger runs to log row (NEW or OLD) of tb,
// whose change added d rows to the table.
func (tb tableInfo) logInsert(db, row string, d int) string {
	cols := make([]string, len(tb.pk))
	vals := make([]string, len(tb.pk))
	for i, c := range tb.pk {
		cols[i] = "k" + strconv.Itoa(i+1)
		vals[i] = row + ".`" + tb.cols[c] + "`"
	}
	return "INSERT INTO " + db + "." + logTable + " (tbl, d, " + strings.Join(cols, ", ") + ") VALUES ('" + tb.name + "', " + strconv.Itoa(d) + ", " + strings.Join(vals, ", ") + ")"
}

// ensureLog creates, in database name on db, the change log table and the
// triggers that fill it for every table of tables. Every step is IF NOT
// EXISTS, so it can run again. Once it returns, every later client write
// to these tables is logged, and every earlier one has committed or rolled
// back (CREATE TRIGGER waits for the transactions that use the table).
// Each trigger statement runs holding ddl (see hosts.ddlLock).
func ensureLog(ctx context.Context, db *sqlx.DB, ddl *sync.Mutex, name string, tables []tableInfo) error {
	_, err := db.ExecContext(ctx, "CREATE TABLE IF NOT EXISTS "+name+"."+logTable+` (
  seq BIGINT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY,
  tbl VARCHAR(64) CHARACTER SET ascii NOT NULL,
  d TINYINT NOT NULL,
  k1 VARBINARY(255), k2 VARBINARY(255), k3 VARBINARY(255), k4 VARBINARY(255)
) ENGINE=InnoDB`)
	if err != nil {
		return fmt.Errorf("create the change log: %w", err)
	}
	for _, tb := range tables {
		if len(tb.pk) > logKeys {
			return fmt.Errorf("table %s has a primary key of %d columns; the change log holds at most %d", tb.name, len(tb.pk), logKeys)
		}
		var same []string
		for _, c := range tb.pk {
			same = append(same, "OLD.`"+tb.cols[c]+"` <=> NEW.`"+tb.cols[c]+"`")
		}
		on := " ON " + name + ".`" + tb.name + "` FOR EACH ROW IF " + applyVar + " IS NULL THEN "
		for _, q := range []string{
			"CREATE TRIGGER IF NOT EXISTS " + name + "." + triggerName(tb.name, "i") + " AFTER INSERT" + on + tb.logInsert(name, "NEW", 1) + "; END IF",
			// An update that changes the key logs both keys: the new one
			// inserted, the old one deleted.
			"CREATE TRIGGER IF NOT EXISTS " + name + "." + triggerName(tb.name, "u") + " AFTER UPDATE" + on + "IF " + strings.Join(same, " AND ") + " THEN " + tb.logInsert(name, "NEW", 0) + "; ELSE " + tb.logInsert(name, "NEW", 1) + "; " + tb.logInsert(name, "OLD", -1) + "; END IF; END IF",
			"CREATE TRIGGER IF NOT EXISTS " + name + "." + triggerName(tb.name, "d") + " AFTER DELETE" + on + tb.logInsert(name, "OLD", -1) + "; END IF",
		} {
			if err := execLocked(ctx, db, ddl, q); err != nil {
				return fmt.Errorf("table %s: create trigger: %w", tb.name, err)
			}
		}
	}
	return nil
}

// dropLog removes the triggers of tables and the change log table from
// database name on db, each trigger statement holding ddl. Every step is
// IF EXISTS, so it can run again.
func dropLog(ctx context.Context, db *sqlx.DB, ddl *sync.Mutex, name string, tables []tableInfo) error {
	for _, tb := range tables {
		for _, ev := range []string{"i", "u", "d"} {
			if err := execLocked(ctx, db, ddl, "DROP TRIGGER IF EXISTS "+name+"."+triggerName(tb.name, ev)); err != nil {
				return fmt.Errorf("table %s: drop trigger: %w", tb.name, err)
			}
		}
	}
	if _, err := db.ExecContext(ctx, "DROP TABLE IF EXISTS "+name+"."+logTable); err != nil {
		return fmt.Errorf("drop the change log: %w", err)
	}
	return nil
}

// execLocked runs the DDL statement q on db holding l. It never waits for
// the metadata locks of its tables (lock_wait_timeout 0): a DDL statement
// waiting in the queue would hold up every client statement behind it,
// and a client transaction waiting there on a row lock held by another
// that waits for the DDL would stall both. When the tables are in use it
// tries again after a short pause, for up to ddlRetryFor.
func execLocked(ctx context.Context, db *sqlx.DB, l *sync.Mutex, q string) error {
	until := time.Now().Add(ddlRetryFor)
	for {
		l.Lock()
		err := execHostLocked(ctx, db, "SET STATEMENT lock_wait_timeout = 0 FOR "+q)
		l.Unlock()
		var me *mysql.MySQLError
		if !errors.As(err, &me) || me.Number != errLockWaitTimeout || time.Now().After(until) {
			return err
		}
		if err := sleep(ctx, time.Duration(5+rand.IntN(20))*time.Millisecond); err != nil {
			return err
		}
	}
}

// execHostLocked runs q on one connection of db holding the server's user
// lock hostDDLLock, so that moves in other processes (another move-shards
// finishing, a second tool on the same host) never send trigger statements
// to that server at the same time either. The lock is the connection's: it
// goes with the connection if the release fails.
func execHostLocked(ctx context.Context, db *sqlx.DB, q string) error {
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	var granted sql.NullInt64
	if err := conn.QueryRowContext(ctx, "SELECT GET_LOCK(?, ?)", hostDDLLock, int(ddlRetryFor/time.Second)).Scan(&granted); err != nil {
		return fmt.Errorf("take the host's DDL lock: %w", err)
	}
	if granted.Int64 != 1 {
		return fmt.Errorf("the host's DDL lock %q was not granted within %s", hostDDLLock, ddlRetryFor)
	}
	_, err = conn.ExecContext(ctx, q)
	if _, rerr := conn.ExecContext(context.WithoutCancel(ctx), "DO RELEASE_LOCK(?)", hostDDLLock); rerr != nil {
		// Never hand a connection holding the lock back to the pool.
		_ = conn.Raw(func(any) error { return driver.ErrBadConn })
	}
	return err
}

// hostDDLLock is the name of the MariaDB user lock (GET_LOCK) a move's
// trigger statements and database drops hold on their server.
const hostDDLLock = "pinstore.reshard.ddl"

// ddlRetryFor is how long a move's DDL statement keeps trying to find its
// tables free; errLockWaitTimeout is MySQL's error number when they are not
// (ER_LOCK_WAIT_TIMEOUT).
const (
	ddlRetryFor        = 2 * time.Minute
	errLockWaitTimeout = 1205
)

// applyTx begins a transaction on db whose writes the triggers do not log.
func applyTx(ctx context.Context, db *sqlx.DB) (*sqlx.Tx, error) {
	tx, err := db.BeginTxx(ctx, nil)
	if err != nil {
		return nil, err
	}
	if _, err := tx.ExecContext(ctx, "SET "+applyVar+" = 1"); err != nil {
		tx.Rollback()
		return nil, err
	}
	return tx, nil
}

// keySet is the distinct primary keys of each table that a pass applied.
type keySet map[string]map[string][]any

func (k keySet) add(table string, key []any) {
	m := k[table]
	if m == nil {
		m = map[string][]any{}
		k[table] = m
	}
	m[fmt.Sprintf("%#v", key)] = key
}

func (k keySet) len() int {
	n := 0
	for _, m := range k {
		n += len(m)
	}
	return n
}

// applyLog applies one batch of at most batch entries of w.src's change
// log (those numbered upto at most, when upto is not 0) to w.dst and
// deletes them from the log. It returns how many log entries it applied,
// adds the keys to seen (when not nil) and carries counts forward (when
// not nil) by the entries' changes on the source and its own on the
// target.
func applyLog(ctx context.Context, w shardWork, tables map[string]tableInfo, batch int, upto uint64, seen keySet, counts *rowCounts) (int, error) {
	q := "SELECT seq, tbl, d, k1, k2, k3, k4 FROM " + w.name + "." + logTable
	if upto > 0 {
		q += " WHERE seq <= " + strconv.FormatUint(upto, 10)
	}
	rs, err := w.src.QueryContext(ctx, q+" ORDER BY seq LIMIT "+strconv.Itoa(batch))
	if err != nil {
		return 0, fmt.Errorf("read the change log: %w", err)
	}
	var seqs []any
	keys := keySet{}
	logged := map[string]int64{} // by table: the rows the entries added on the source
	for rs.Next() {
		var seq uint64
		var table string
		var d int64
		var k [logKeys][]byte
		if err := rs.Scan(&seq, &table, &d, &k[0], &k[1], &k[2], &k[3]); err != nil {
			rs.Close()
			return 0, err
		}
		seqs = append(seqs, seq)
		logged[table] += d
		tb, ok := tables[table]
		if !ok {
			rs.Close()
			return 0, fmt.Errorf("the change log names table %q, which the move does not know: did a migration run during the move?", table)
		}
		key := make([]any, len(tb.pk))
		for i, c := range tb.pk {
			if key[i], err = tb.ints[c].decode(k[i]); err != nil {
				rs.Close()
				return 0, fmt.Errorf("change log key of %s: %w", table, err)
			}
		}
		keys.add(table, key)
	}
	rs.Close()
	if err := rs.Err(); err != nil {
		return 0, err
	}
	if len(seqs) == 0 {
		return 0, nil
	}
	// Read every logged row as the source has it now, then replace the
	// target's rows of those keys in one transaction.
	type rowsOf struct {
		tb   tableInfo
		keys [][]any
		rows [][]any
	}
	var work []rowsOf
	for table, m := range keys {
		r := rowsOf{tb: tables[table]}
		for _, k := range m {
			r.keys = append(r.keys, k)
		}
		for part := range chunks(r.keys, keysPerStatement) {
			where, args := r.tb.keyIn(part)
			rows, _, err := fetchRows(ctx, w.src, "SELECT "+r.tb.colList()+" FROM "+w.name+".`"+table+"`"+where, r.tb, args)
			if err != nil {
				return 0, fmt.Errorf("table %s: %w", table, err)
			}
			r.rows = append(r.rows, rows...)
		}
		work = append(work, r)
	}
	tx, err := applyTx(ctx, w.dst)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback()
	written := map[string]int64{} // by table: the rows this apply added on the target
	for _, r := range work {
		for part := range chunks(r.keys, keysPerStatement) {
			where, args := r.tb.keyIn(part)
			res, err := tx.ExecContext(ctx, "DELETE FROM "+w.name+".`"+r.tb.name+"`"+where, args...)
			if err != nil {
				return 0, fmt.Errorf("table %s: %w", r.tb.name, err)
			}
			gone, err := res.RowsAffected()
			if err != nil {
				return 0, fmt.Errorf("table %s: %w", r.tb.name, err)
			}
			written[r.tb.name] -= gone
		}
		if err := insertRows(ctx, tx, w.name, r.tb, r.rows); err != nil {
			return 0, fmt.Errorf("table %s: %w", r.tb.name, err)
		}
		written[r.tb.name] += int64(len(r.rows))
	}
	if err := tx.Commit(); err != nil {
		return 0, err
	}
	for part := range chunks(seqs, keysPerStatement) {
		if _, err := w.src.ExecContext(ctx, "DELETE FROM "+w.name+"."+logTable+" WHERE seq IN (?"+strings.Repeat(",?", len(part)-1)+")", part...); err != nil {
			return 0, fmt.Errorf("delete applied change log entries: %w", err)
		}
	}
	if seen != nil {
		for table, m := range keys {
			for _, k := range m {
				seen.add(table, k)
			}
		}
	}
	if counts != nil {
		for table := range keys {
			counts.add(table, logged[table], written[table])
		}
	}
	return len(seqs), nil
}

// keysPerStatement bounds the keys one IN list names.
const keysPerStatement = 500

// chunks yields s in consecutive pieces of at most n.
func chunks[T any](s []T, n int) func(func([]T) bool) {
	return func(yield func([]T) bool) {
		for len(s) > 0 {
			k := min(n, len(s))
			if !yield(s[:k]) {
				return
			}
			s = s[k:]
		}
	}
}

// drainLog applies w.src's change log to w.dst batch after batch. Live
// (frozen false), it applies the entries the log holds when it starts
// (those numbered up to the highest then), so that it never chases writers;
// entries that commit later, even with lower numbers, stay for the next
// pass. Frozen (writes held), it stops when the log is empty. It returns
// the log entries applied; seen and counts are applyLog's.
func drainLog(ctx context.Context, w shardWork, tables map[string]tableInfo, batch int, frozen bool, seen keySet, counts *rowCounts) (int64, error) {
	var upto uint64
	if !frozen {
		var top sql.NullInt64
		if err := w.src.QueryRowContext(ctx, "SELECT MAX(seq) FROM "+w.name+"."+logTable).Scan(&top); err != nil || !top.Valid {
			return 0, err
		}
		upto = uint64(top.Int64)
	}
	var total int64
	for {
		if err := w.pause(ctx); err != nil {
			return total, err
		}
		n, err := applyLog(ctx, w, tables, batch, upto, seen, counts)
		total += int64(n)
		if err != nil || n < batch {
			return total, err
		}
	}
}

// keyIn is the condition "primary key IN (keys)".
func (tb tableInfo) keyIn(keys [][]any) (string, []any) {
	tuple := "?"
	if len(tb.pk) > 1 {
		tuple = "(?" + strings.Repeat(",?", len(tb.pk)-1) + ")"
	}
	args := make([]any, 0, len(keys)*len(tb.pk))
	for _, k := range keys {
		args = append(args, k...)
	}
	return " WHERE (" + tb.pkList() + ") IN (" + tuple + strings.Repeat(","+tuple, len(keys)-1) + ")", args
}

// verifyKeys checks that the rows of the given keys are the same on both
// sides (count and hash of the rows found); a difference is a *mismatch.
func verifyKeys(ctx context.Context, w shardWork, tables map[string]tableInfo, keys keySet) error {
	for table, m := range keys {
		tb := tables[table]
		all := make([][]any, 0, len(m))
		for _, k := range m {
			all = append(all, k)
		}
		for part := range chunks(all, keysPerStatement) {
			where, args := tb.keyIn(part)
			q := "SELECT COUNT(*), COALESCE(BIT_XOR(" + tb.rowHash() + "), 0) FROM " + w.name + ".`" + table + "`" + where
			var s, d tableSum
			if err := w.src.QueryRowContext(ctx, q, args...).Scan(&s.rows, &s.hash); err != nil {
				return fmt.Errorf("table %s: %w", table, err)
			}
			if err := w.dst.QueryRowContext(ctx, q, args...).Scan(&d.rows, &d.hash); err != nil {
				return fmt.Errorf("table %s: %w", table, err)
			}
			if s != d {
				return &mismatch{shard: w.n, table: table, what: fmt.Sprintf("the %d rows changed last", len(part)), src: s, dst: d}
			}
		}
	}
	return nil
}

// countRows counts the rows of every table of tables in database name on
// db, in one statement. With withLog, two counts come first: the change
// log's entries, and the database's base tables (the log included).
func countRows(ctx context.Context, db sqlx.QueryerContext, name string, tables []tableInfo, withLog bool) ([]int64, error) {
	var parts []string
	if withLog {
		parts = append(parts, "(SELECT COUNT(*) FROM "+name+"."+logTable+")",
			"(SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = '"+name+"' AND TABLE_TYPE = 'BASE TABLE')")
	}
	for _, tb := range tables {
		parts = append(parts, "(SELECT COUNT(*) FROM "+name+".`"+tb.name+"`)")
	}
	out := make([]int64, len(parts))
	if len(parts) == 0 {
		return out, nil
	}
	ptrs := make([]any, len(out))
	for i := range out {
		ptrs[i] = &out[i]
	}
	err := db.QueryRowxContext(ctx, "SELECT "+strings.Join(parts, ", ")).Scan(ptrs...)
	return out, err
}

// logLen is how many entries the change log of database name holds.
func logLen(ctx context.Context, db *sqlx.DB, name string) (int64, error) {
	var n int64
	err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+name+"."+logTable).Scan(&n)
	return n, err
}
