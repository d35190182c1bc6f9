package reshard

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/pinstore/pinstore/migrations"
	"github.com/pinstore/pinstore/store/shardmap"
)

// shardWork is one shard's databases on both sides, and the tally of
// the rows its work writes.
type shardWork struct {
	n        int
	name     string
	src, dst *sqlx.DB
	tally    *tally
	// wait is called before each chunk or batch: the throttle, or nil
	// (while writes are held).
	wait func(context.Context) error
}

// pause waits for w's throttle, if any.
func (w shardWork) pause(ctx context.Context) error {
	if w.wait == nil {
		return nil
	}
	return w.wait(ctx)
}

// eachShard runs fn on every shard of the move, par at a time, printing
// progress every second (Options.every in tests): shards done, rows so
// far (counted as each chunk is written, not only when a shard ends),
// the rate and the time left. Forward, each shard's work reads its source
// host and writes the target; back (a revert, or keeping the old copies
// up to date), the reverse. It returns the rows fn reported.
func (mv *mover) eachShard(ctx context.Context, m *shardmap.Map, what string, back bool, par int, fn func(context.Context, shardWork) (int64, error)) (int64, error) {
	st := mv.lock.state
	target, err := mv.hosts.db(m, st.To)
	if err != nil {
		return 0, err
	}
	mt := &meter{what: what, shards: st.last - st.first + 1, start: time.Now()}
	if what == "copy" && !back {
		ectx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		go mv.estimate(ectx, m, mt)
	}
	finished := make(chan error, 1)
	go func() {
		finished <- mv.parallel(ctx, st.first, st.last, par, func(ctx context.Context, sh int) error {
			source, err := mv.hosts.db(m, st.source(sh))
			if err != nil {
				return err
			}
			w := shardWork{n: sh, name: m.DBName(sh), src: source, dst: target, tally: &tally{m: mt}}
			if what != "final pass" {
				th, t := mv.throttleHosts(m, st.source(sh), st.To), mv.throttleFor(what)
				w.wait = func(ctx context.Context) error { return t.Wait(ctx, th) }
				if err := w.pause(ctx); err != nil {
					return err
				}
			}
			if back {
				w.src, w.dst = w.dst, w.src
			}
			n, err := fn(ctx, w)
			mt.rows.Add(n - w.tally.rows) // what fn did not count as it went
			if err != nil {
				var mm *mismatch
				if errors.As(err, &mm) {
					return err
				}
				return fmt.Errorf("%s shard %d: %w", what, sh, err)
			}
			mt.done.Add(1)
			return nil
		})
	}()
	every := mv.opt.every
	if every <= 0 {
		every = time.Second
	}
	progress := time.NewTicker(every)
	defer progress.Stop()
	var saved time.Time
	for {
		select {
		case err := <-finished:
			// The pass's last progress stays recorded until the next
			// pass replaces it: what the last pass did, for the servers.
			mv.saveProgress(ctx, mt.record())
			return mt.rows.Load(), err
		case <-progress.C:
			mv.logf("%s", mt.line())
			if time.Since(saved) >= progressSaveEvery {
				saved = time.Now()
				mv.saveProgress(ctx, mt.record())
			}
		}
	}
}

// progressSaveEvery is how often a pass records its progress in the
// move's state, for servers to show (the fleet page).
const progressSaveEvery = time.Second

// saveProgress records p in the move's state. A
// failure to save is printed and otherwise ignored: the progress is for
// display, and the steps that matter save the state themselves.
func (mv *mover) saveProgress(ctx context.Context, p *moveProgress) {
	mv.lock.state.Progress = p
	if err := mv.lock.save(ctx); err != nil && ctx.Err() == nil {
		mv.logf("recording the move's progress in %s: %v", mv.lock.where(), err)
	}
}

// parallel runs fn for shards first … last, par at once, and stops at
// the first error (a mismatch is preferred over other errors).
func (mv *mover) parallel(ctx context.Context, first, last, par int, fn func(context.Context, int) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	work := make(chan int)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	for range min(par, last-first+1) {
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
	what     string // which rows: "the 12 rows changed last", "all rows"
	src, dst tableSum
}

func (e *mismatch) Error() string {
	return fmt.Sprintf("shard %d table %s differs (%s): %d rows (hash %016x) on the source, %d rows (hash %016x) on the target",
		e.shard, e.table, e.what, e.src.rows, e.src.hash, e.dst.rows, e.dst.hash)
}

// tablesOf is the tables of shard w.n, the same on both sides (sameTables),
// listed once per move and kept.
func (mv *mover) tablesOf(ctx context.Context, w shardWork) ([]tableInfo, map[string]tableInfo, error) {
	mv.mu.Lock()
	tables, ok := mv.tables[w.n]
	mv.mu.Unlock()
	if !ok {
		var err error
		if tables, err = sameTables(ctx, w); err != nil {
			return nil, nil, err
		}
		mv.mu.Lock()
		mv.tables[w.n] = tables
		mv.mu.Unlock()
	}
	byName := make(map[string]tableInfo, len(tables))
	for _, tb := range tables {
		byName[tb.name] = tb
	}
	return tables, byName, nil
}

// copyShard is the first pass of a shard: the change log and its triggers
// on the source (before anything is read, so every change from then on is
// logged), the shard created on the target (the embedded migrations, the
// same as pinstore migrate), every table copied chunk by chunk while the
// source takes writes (an empty table straight, a table copied before
// chunk by chunk where the sums differ), and then the change log on the
// target, which records the target's changes from the switch on, for the
// way back. It returns the rows written.
func (mv *mover) copyShard(ctx context.Context, w shardWork) (int64, error) {
	tables, err := listTables(ctx, w.src, w.name)
	if err != nil {
		return 0, fmt.Errorf("source: %w", err)
	}
	if len(tables) == 0 {
		return 0, fmt.Errorf("source database %s has no tables (is it provisioned?)", w.name)
	}
	if err := ensureLog(ctx, w.src, mv.hosts.ddlLock(w.src), w.name, tables); err != nil {
		return 0, fmt.Errorf("source: %w", err)
	}
	if err := mv.hook("logging"); err != nil {
		return 0, err
	}
	if err := migrations.Apply(ctx, w.dst, w.name, mv.ms); err != nil {
		return 0, fmt.Errorf("create on target: %w", err)
	}
	// The target now holds this deployment's shards: record it, as
	// migrate does, so that servers know them for this deployment's.
	if err := migrations.RecordDeployment(ctx, w.dst, mv.cur.DBPrefix, mv.cur.Shards); err != nil {
		return 0, fmt.Errorf("record the deployment on target: %w", err)
	}
	if tables, err = sameTables(ctx, w); err != nil {
		return 0, err
	}
	var rows int64
	for _, tb := range tables {
		n, err := syncTable(ctx, w, tb, mv.opt.Batch)
		rows += n
		if err != nil {
			return rows, fmt.Errorf("table %s: %w", tb.name, err)
		}
	}
	if err := ensureLog(ctx, w.dst, mv.hosts.ddlLock(w.dst), w.name, tables); err != nil {
		return rows, fmt.Errorf("target: %w", err)
	}
	mv.mu.Lock()
	mv.tables[w.n] = tables
	mv.mu.Unlock()
	return rows, nil
}

// catchUpShard applies the shard's change log from w.src to w.dst while
// clients still write w.src (see drainLog), carrying forward the counts of
// the check before the hold (when it ran). It returns the log entries
// applied.
func (mv *mover) catchUpShard(ctx context.Context, w shardWork) (int64, error) {
	_, byName, err := mv.tablesOf(ctx, w)
	if err != nil {
		return 0, err
	}
	return drainLog(ctx, w, byName, mv.opt.Batch, false, nil, mv.countsOf(w.n))
}

// finalShard is the pass while writes are held: the change log applied
// until it is empty, then verified: the rows of every key applied in this
// pass are the same on both sides (count and hash); every table has as
// many rows on both sides, by the counts of the check before the hold
// carried forward (rowCounts; without a check in this run, by counting
// every table on both sides); the source has no table the move does not
// know; and the source's log is still empty (nothing arrived meanwhile; if
// something did, it is applied and checked again). The AUTO_INCREMENT
// counters of the tables that changed (all, without a check) are raised to
// the source's. It returns the log entries applied; a difference is a
// *mismatch. With a check, nothing it reads grows with the shard's size.
func (mv *mover) finalShard(ctx context.Context, w shardWork) (int64, error) {
	tables, byName, err := mv.tablesOf(ctx, w)
	if err != nil {
		return 0, err
	}
	counts := mv.countsOf(w.n)
	var counted []tableInfo // without carried counts, every table is counted
	if counts == nil {
		counted = tables
	}
	seen := keySet{}
	var applied int64
	for round := 0; ; round++ {
		n, err := drainLog(ctx, w, byName, mv.opt.Batch, true, seen, counts)
		applied += n
		if err != nil {
			return applied, err
		}
		if err := mv.hook(fmt.Sprintf("final applied %d", w.n)); err != nil {
			return applied, err
		}
		src, err := countRows(ctx, w.src, w.name, counted, true)
		if err != nil {
			return applied, fmt.Errorf("count: %w", err)
		}
		if src[0] > 0 { // writes arrive while held: a server routes by an old map
			if round < 3 {
				continue
			}
			return applied, fmt.Errorf("writes keep reaching the source while writes are held (%d changes logged): a server still routes by an old map", src[0])
		}
		if src[1] != int64(len(tables)+1) { // a migration ran during the move
			return applied, &mismatch{shard: w.n, table: "(every table)", what: "tables in the database", src: tableSum{rows: src[1] - 1}, dst: tableSum{rows: int64(len(tables))}}
		}
		if counts != nil {
			if err := counts.verify(w.n, tables); err != nil {
				return applied, err
			}
			break
		}
		dst, err := countRows(ctx, w.dst, w.name, counted, false)
		if err != nil {
			return applied, fmt.Errorf("count on the target: %w", err)
		}
		for i, tb := range counted {
			if src[i+2] != dst[i] {
				return applied, &mismatch{shard: w.n, table: tb.name, what: "row count", src: tableSum{rows: src[i+2]}, dst: tableSum{rows: dst[i]}}
			}
		}
		break
	}
	if err := verifyKeys(ctx, w, byName, seen); err != nil {
		return applied, err
	}
	mv.verified.Add(int64(seen.len()))
	raise := tables
	if counts != nil {
		raise = raise[:0:0]
		for _, tb := range tables {
			if seen[tb.name] != nil {
				raise = append(raise, tb)
			}
		}
	}
	if err := raiseAutoInc(ctx, w, mv.hosts.ddlLock(w.dst), raise, 0); err != nil {
		return applied, err
	}
	return applied, nil
}

// syncTable makes the target's table equal to the source's. An empty
// target gets a straight copy (the first pass); otherwise each chunk whose
// sums differ is replaced (delete the chunk's key range on the target,
// insert the source's rows) in one target transaction. It returns the
// rows written.
func syncTable(ctx context.Context, w shardWork, tb tableInfo, batch int) (int64, error) {
	var empty int
	err := w.dst.QueryRowContext(ctx, "SELECT COUNT(*) FROM (SELECT 1 FROM "+w.name+".`"+tb.name+"` LIMIT 1) x").Scan(&empty)
	if err != nil {
		return 0, err
	}
	if empty == 0 {
		return copyAll(ctx, w, tb, batch)
	}
	var written int64
	var lo []any
	for {
		if err := w.pause(ctx); err != nil {
			return written, err
		}
		hi, err := chunkEnd(ctx, w.src, w.name, tb, lo, batch)
		if err != nil {
			return written, err
		}
		s, err := tableChecksum(ctx, w.src, w.name, tb, lo, hi)
		if err != nil {
			return written, err
		}
		d, err := tableChecksum(ctx, w.dst, w.name, tb, lo, hi)
		if err != nil {
			return written, err
		}
		if s != d {
			n, err := copyChunk(ctx, w, tb, lo, hi)
			written += n
			if err != nil {
				return written, err
			}
		}
		if hi == nil {
			return written, nil
		}
		lo = hi
	}
}

// copyAll copies the whole table into an empty target table in batches.
func copyAll(ctx context.Context, w shardWork, tb tableInfo, batch int) (int64, error) {
	var written int64
	var lo []any
	for {
		if err := w.pause(ctx); err != nil {
			return written, err
		}
		where, args := tb.keyCond(lo, nil)
		rows, last, err := fetchRows(ctx, w.src, "SELECT "+tb.colList()+" FROM "+w.name+".`"+tb.name+"`"+where+" ORDER BY "+tb.pkList()+" LIMIT "+strconv.Itoa(batch), tb, args)
		if err != nil || len(rows) == 0 {
			return written, err
		}
		tx, err := applyTx(ctx, w.dst)
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
		w.tally.add(int64(len(rows)), rowBytes(rows))
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
	tx, err := applyTx(ctx, w.dst)
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
	if err := tx.Commit(); err != nil {
		return 0, err
	}
	w.tally.add(int64(len(rows)), rowBytes(rows))
	return int64(len(rows)), nil
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

// raiseAutoInc sets the AUTO_INCREMENT of every such table of tables on
// the target to at least the source's plus margin, so an id handed out
// (even by a rolled-back insert) on the source is never handed out again on
// the target. The ALTER is DDL: it runs holding ddl (hosts.ddlLock).
func raiseAutoInc(ctx context.Context, w shardWork, ddl *sync.Mutex, tables []tableInfo, margin uint64) error {
	var names []any
	for _, tb := range tables {
		if tb.autoInc {
			names = append(names, tb.name)
		}
	}
	if len(names) == 0 {
		return nil
	}
	read := func(db *sqlx.DB) (map[string]uint64, error) {
		var rows []struct {
			Table string `db:"TABLE_NAME"`
			Next  uint64 `db:"AI"`
		}
		q := "SELECT TABLE_NAME, COALESCE(AUTO_INCREMENT, 0) AS AI FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME IN (?" + strings.Repeat(",?", len(names)-1) + ")"
		if err := sqlx.SelectContext(ctx, db, &rows, q, append([]any{w.name}, names...)...); err != nil {
			return nil, err
		}
		out := map[string]uint64{}
		for _, r := range rows {
			out[r.Table] = r.Next
		}
		return out, nil
	}
	src, err := read(w.src)
	if err != nil {
		return fmt.Errorf("AUTO_INCREMENT on the source: %w", err)
	}
	dst, err := read(w.dst)
	if err != nil {
		return fmt.Errorf("AUTO_INCREMENT on the target: %w", err)
	}
	for _, n := range names {
		table := n.(string)
		if src[table]+margin <= dst[table] {
			continue
		}
		if err := execLocked(ctx, w.dst, ddl, "ALTER TABLE "+w.name+".`"+table+"` AUTO_INCREMENT = "+strconv.FormatUint(src[table]+margin, 10)); err != nil {
			return fmt.Errorf("table %s: %w", table, err)
		}
	}
	return nil
}
