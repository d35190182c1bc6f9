package reshard

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/pinstore/pinstore/migrations"
	"github.com/pinstore/pinstore/store/shardmap"
)

// shardWork is one shard's databases on both sides.
type shardWork struct {
	n        int
	name     string
	src, dst *sqlx.DB
}

// eachShard runs fn on every shard of the move, opt.Parallel at a time,
// printing progress every second. It returns the rows fn reported and the
// digests fn returned, by shard.
func (mv *mover) eachShard(ctx context.Context, m *shardmap.Map, what string, fn func(context.Context, shardWork) (int64, string, error)) (int64, map[int]string, error) {
	st := mv.lock.state
	dst, err := mv.hosts.db(m, st.To)
	if err != nil {
		return 0, nil, err
	}
	var rows, done atomic.Int64
	digests := map[int]string{}
	var mu sync.Mutex
	finished := make(chan error, 1)
	go func() {
		finished <- mv.parallel(ctx, st.first, st.last, func(ctx context.Context, sh int) error {
			src, err := mv.hosts.db(m, st.source(sh))
			if err != nil {
				return err
			}
			n, d, err := fn(ctx, shardWork{n: sh, name: m.DBName(sh), src: src, dst: dst})
			rows.Add(n)
			if err != nil {
				var mm *mismatch
				if errors.As(err, &mm) {
					return err
				}
				return fmt.Errorf("%s shard %d: %w", what, sh, err)
			}
			mu.Lock()
			digests[sh] = d
			mu.Unlock()
			done.Add(1)
			return nil
		})
	}()
	progress := time.NewTicker(time.Second)
	defer progress.Stop()
	for {
		select {
		case err := <-finished:
			return rows.Load(), digests, err
		case <-progress.C:
			mv.logf("%s: %d/%d shards, %d rows", what, done.Load(), st.last-st.first+1, rows.Load())
		}
	}
}

// parallel runs fn for shards first … last, opt.Parallel at once, and
// stops at the first error (a mismatch is preferred over other errors).
func (mv *mover) parallel(ctx context.Context, first, last int, fn func(context.Context, int) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	work := make(chan int)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	for range min(mv.opt.Parallel, last-first+1) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for sh := range work {
				if err := fn(ctx, sh); err != nil {
					mu.Lock()
					var mm *mismatch
					if firstErr == nil || errors.As(err, &mm) && !errors.As(firstErr, &mm) {
						firstErr = err
					}
					mu.Unlock()
					cancel()
				}
			}
		}()
	}
	for sh := first; sh <= last; sh++ {
		select {
		case work <- sh:
			continue
		case <-ctx.Done():
		}
		break
	}
	close(work)
	wg.Wait()
	if firstErr == nil {
		firstErr = ctx.Err()
	}
	return firstErr
}

// mismatch is a verification failure: a table differs between the hosts.
type mismatch struct {
	shard    int
	table    string
	src, dst tableSum
}

func (e *mismatch) Error() string {
	return fmt.Sprintf("shard %d table %s differs: %d rows (hash %016x) on the source, %d rows (hash %016x) on the target",
		e.shard, e.table, e.src.rows, e.src.hash, e.dst.rows, e.dst.hash)
}

// copyShard creates the shard on the target (the embedded migrations, the
// same as pinstore migrate) and makes every table a copy of the source's,
// chunk by chunk, while the source takes writes. It returns the rows
// written.
func (mv *mover) copyShard(ctx context.Context, w shardWork) (int64, string, error) {
	if err := migrations.Apply(ctx, w.dst, w.name, mv.ms); err != nil {
		return 0, "", fmt.Errorf("create on target: %w", err)
	}
	tables, err := sameTables(ctx, w)
	if err != nil {
		return 0, "", err
	}
	var rows int64
	for _, tb := range tables {
		n, _, err := syncTable(ctx, w, tb, mv.opt.Batch, nil)
		rows += n
		if err != nil {
			return rows, "", fmt.Errorf("table %s: %w", tb.name, err)
		}
	}
	return rows, "", nil
}

// finalShard is the pass while writes are held: every table made equal to
// the source's and verified, chunk by chunk (row count and hash equal on
// both hosts; a chunk copied is summed again on both sides), AUTO_INCREMENT
// counters raised to the source's. It returns the rows written and the
// source's digest, which the check before the drop compares against.
func (mv *mover) finalShard(ctx context.Context, w shardWork) (int64, string, error) {
	tables, err := sameTables(ctx, w)
	if err != nil {
		return 0, "", err
	}
	verify := func(table string) error { return mv.hook("chunk copied: " + table) }
	h := sha256.New()
	var rows int64
	for _, tb := range tables {
		n, sum, err := syncTable(ctx, w, tb, mv.opt.Batch, verify)
		rows += n
		if err != nil {
			var mm *mismatch
			if errors.As(err, &mm) {
				return rows, "", err
			}
			return rows, "", fmt.Errorf("table %s: %w", tb.name, err)
		}
		if tb.autoInc {
			if err := raiseAutoInc(ctx, w, tb.name); err != nil {
				return rows, "", fmt.Errorf("table %s: %w", tb.name, err)
			}
		}
		fmt.Fprintf(h, "%s:%d:%016x;", tb.name, sum.rows, sum.hash)
	}
	return rows, hex.EncodeToString(h.Sum(nil)[:8]), nil
}

// shardDigest is finalShard's digest computed on one side alone.
func shardDigest(ctx context.Context, db *sqlx.DB, name string, batch int) (string, error) {
	tables, err := listTables(ctx, db, name)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	for _, tb := range tables {
		var sum tableSum
		var lo []any
		for {
			hi, err := chunkEnd(ctx, db, name, tb, lo, batch)
			if err != nil {
				return "", err
			}
			s, err := tableChecksum(ctx, db, name, tb, lo, hi)
			if err != nil {
				return "", err
			}
			sum.rows, sum.hash = sum.rows+s.rows, sum.hash^s.hash
			if hi == nil {
				break
			}
			lo = hi
		}
		fmt.Fprintf(h, "%s:%d:%016x;", tb.name, sum.rows, sum.hash)
	}
	return hex.EncodeToString(h.Sum(nil)[:8]), nil
}

// syncTable makes the target's table equal to the source's. An empty
// target gets a straight copy (the first pass); otherwise each chunk whose
// sums differ is replaced (delete the chunk's key range on the target,
// insert the source's rows) in one target transaction.
//
// With verify (the final pass, source frozen) every chunk is compared:
// equal sums verify it, and a replaced chunk is summed again on both hosts
// and must then be equal, or the result is a *mismatch; verify is called
// after each copy (a test hook). It returns the rows written and, with
// verify, the source's whole-table sum.
func syncTable(ctx context.Context, w shardWork, tb tableInfo, batch int, verify func(table string) error) (int64, tableSum, error) {
	var written int64
	var total tableSum
	if verify == nil {
		var empty int
		err := w.dst.QueryRowContext(ctx, "SELECT COUNT(*) FROM (SELECT 1 FROM "+w.name+".`"+tb.name+"` LIMIT 1) x").Scan(&empty)
		if err != nil {
			return 0, total, err
		}
		if empty == 0 {
			n, err := copyAll(ctx, w, tb, batch)
			return n, total, err
		}
	}
	var lo []any
	for {
		hi, err := chunkEnd(ctx, w.src, w.name, tb, lo, batch)
		if err != nil {
			return written, total, err
		}
		s, err := tableChecksum(ctx, w.src, w.name, tb, lo, hi)
		if err != nil {
			return written, total, err
		}
		d, err := tableChecksum(ctx, w.dst, w.name, tb, lo, hi)
		if err != nil {
			return written, total, err
		}
		if s != d {
			n, err := copyChunk(ctx, w, tb, lo, hi)
			written += n
			if err != nil {
				return written, total, err
			}
			if verify != nil {
				if err := verify(tb.name); err != nil {
					return written, total, err
				}
				if s, err = tableChecksum(ctx, w.src, w.name, tb, lo, hi); err != nil {
					return written, total, err
				}
				if d, err = tableChecksum(ctx, w.dst, w.name, tb, lo, hi); err != nil {
					return written, total, err
				}
				if s != d {
					return written, total, &mismatch{shard: w.n, table: tb.name, src: s, dst: d}
				}
			}
		}
		total.rows, total.hash = total.rows+s.rows, total.hash^s.hash
		if hi == nil {
			return written, total, nil
		}
		lo = hi
	}
}

// copyAll copies the whole table into an empty target table in batches.
func copyAll(ctx context.Context, w shardWork, tb tableInfo, batch int) (int64, error) {
	var written int64
	var lo []any
	for {
		where, args := tb.keyCond(lo, nil)
		rows, last, err := fetchRows(ctx, w.src, "SELECT "+tb.colList()+" FROM "+w.name+".`"+tb.name+"`"+where+" ORDER BY "+tb.pkList()+" LIMIT "+strconv.Itoa(batch), tb, args)
		if err != nil || len(rows) == 0 {
			return written, err
		}
		tx, err := w.dst.BeginTxx(ctx, nil)
		if err != nil {
			return written, err
		}
		if err := insertRows(ctx, tx, w.name, tb, rows); err != nil {
			tx.Rollback()
			return written, err
		}
		if err := tx.Commit(); err != nil {
			return written, err
		}
		written += int64(len(rows))
		lo = last
	}
}

// copyChunk replaces the target's rows with keys in (lo, hi] by the
// source's, in one target transaction.
func copyChunk(ctx context.Context, w shardWork, tb tableInfo, lo, hi []any) (int64, error) {
	where, args := tb.keyCond(lo, hi)
	rows, _, err := fetchRows(ctx, w.src, "SELECT "+tb.colList()+" FROM "+w.name+".`"+tb.name+"`"+where+" ORDER BY "+tb.pkList(), tb, args)
	if err != nil {
		return 0, err
	}
	tx, err := w.dst.BeginTxx(ctx, nil)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, "DELETE FROM "+w.name+".`"+tb.name+"`"+where, args...); err != nil {
		return 0, err
	}
	if err := insertRows(ctx, tx, w.name, tb, rows); err != nil {
		return 0, err
	}
	return int64(len(rows)), tx.Commit()
}

// fetchRows reads rows (integers decoded so keys compare as numbers, not
// strings) and returns them with the last row's primary key.
func fetchRows(ctx context.Context, db *sqlx.DB, q string, tb tableInfo, args []any) ([][]any, []any, error) {
	rs, err := db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, nil, err
	}
	defer rs.Close()
	var out [][]any
	for rs.Next() {
		vals := make([]any, len(tb.cols))
		ptrs := make([]any, len(vals))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rs.Scan(ptrs...); err != nil {
			return nil, nil, err
		}
		for i, k := range tb.ints {
			if vals[i], err = k.decode(vals[i]); err != nil {
				return nil, nil, err
			}
		}
		out = append(out, vals)
	}
	if err := rs.Err(); err != nil {
		return nil, nil, err
	}
	if len(out) == 0 {
		return nil, nil, nil
	}
	lastRow := out[len(out)-1]
	key := make([]any, len(tb.pk))
	for i, c := range tb.pk {
		key[i] = lastRow[c]
	}
	return out, key, nil
}

// maxInsertBytes bounds one multi-row INSERT well under max_allowed_packet.
const maxInsertBytes = 2 << 20

// insertRows inserts rows with their explicit keys (local_id included), in
// statements of at most maxInsertBytes.
func insertRows(ctx context.Context, tx *sqlx.Tx, name string, tb tableInfo, rows [][]any) error {
	head := "INSERT INTO " + name + ".`" + tb.name + "` (" + tb.colList() + ") VALUES "
	tuple := "(?" + strings.Repeat(",?", len(tb.cols)-1) + ")"
	var q strings.Builder
	var args []any
	size := 0
	flush := func() error {
		if len(args) == 0 {
			return nil
		}
		_, err := tx.ExecContext(ctx, q.String(), args...)
		q.Reset()
		args, size = args[:0], 0
		return err
	}
	for _, r := range rows {
		if len(args) == 0 {
			q.WriteString(head)
		} else {
			q.WriteByte(',')
		}
		q.WriteString(tuple)
		args = append(args, r...)
		for _, v := range r {
			size += 24
			if b, ok := v.([]byte); ok {
				size += 2 * len(b)
			}
		}
		if size >= maxInsertBytes {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	return flush()
}

// raiseAutoInc sets the target table's AUTO_INCREMENT to at least the
// source's, so an id handed out (even by a rolled-back insert) on the
// source is never handed out again on the target.
func raiseAutoInc(ctx context.Context, w shardWork, table string) error {
	const q = "SELECT COALESCE(AUTO_INCREMENT, 0) FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?"
	var src, dst uint64
	if err := w.src.QueryRowContext(ctx, q, w.name, table).Scan(&src); err != nil {
		return err
	}
	if err := w.dst.QueryRowContext(ctx, q, w.name, table).Scan(&dst); err != nil {
		return err
	}
	if src <= dst {
		return nil
	}
	_, err := w.dst.ExecContext(ctx, "ALTER TABLE "+w.name+".`"+table+"` AUTO_INCREMENT = "+strconv.FormatUint(src, 10))
	return err
}
