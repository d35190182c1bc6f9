package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"

	"github.com/pinstore/pinstore/idcodec"
	"github.com/pinstore/pinstore/model"
	"github.com/pinstore/pinstore/store/ownercache"
)

// baseline runs the same logical operations straight against MySQL (and
// the Redis owner cache) with the driver pinstore uses, configured the
// same way (interpolateParams, parseTime, UTC, same pool size): no HTTP,
// no JSON encoding or decoding, no routing, only the statements a
// minimal correct implementation needs.
type baseline struct {
	db          *sql.DB
	prefix      string
	rc          *redis.Client
	cache       *ownercache.Cache
	cachePrefix string // the object cache's keys (the Redis limit)
}

type keyPos struct {
	seq int64
	to  uint64
}

func openBaseline(ctx context.Context, c config, st *State) (*baseline, error) {
	mc, err := mysql.ParseDSN(c.dsn)
	if err != nil {
		return nil, fmt.Errorf("-dsn: %w", err)
	}
	mc.InterpolateParams = true
	mc.ParseTime = true
	mc.Loc = time.UTC
	if mc.Params == nil {
		mc.Params = map[string]string{}
	}
	mc.Params["time_zone"] = "'+00:00'"
	conn, err := mysql.NewConnector(mc)
	if err != nil {
		return nil, err
	}
	db := sql.OpenDB(conn)
	db.SetMaxOpenConns(c.pool)
	db.SetMaxIdleConns(c.pool)
	rc := redis.NewClient(&redis.Options{Addr: c.redisAddr, PoolSize: c.pool, ContextTimeoutEnabled: true})
	b := &baseline{db: db, prefix: c.prefix, rc: rc, cachePrefix: c.cachePrefix, cache: ownercache.New(rc, ownercache.Options{Prefix: c.redisPrefix, Timeout: 2 * time.Second})}
	if st.Cursor10k != "" && st.Depth10kTo == 0 {
		// The entry at position 10,000 of the big board, newest first: the
		// baseline's keyset starts after it, as the API's cursor does.
		q := "SELECT sequence, to_id FROM " + b.dbOf(st.BigBoard) + ".board_pins WHERE from_id = ? ORDER BY sequence DESC, to_id DESC LIMIT 1 OFFSET 9999"
		if err := db.QueryRowContext(ctx, q, st.BigBoard).Scan(&st.Depth10kSeq, &st.Depth10kTo); err != nil {
			return nil, fmt.Errorf("baseline: depth 10,000 entry: %w", err)
		}
	}
	return b, nil
}

func (b *baseline) close() { b.db.Close(); b.rc.Close() }

func (b *baseline) dbOf(id uint64) string {
	return fmt.Sprintf("%s%05d", b.prefix, idcodec.ShardOf(id))
}

var objTable = map[idcodec.Type]string{idcodec.TypePin: "pins", idcodec.TypeBoard: "boards", idcodec.TypeUser: "users"}

// getPin: one primary-key read.
func (b *baseline) getPin(ctx context.Context, id uint64) error {
	var doc []byte
	var ver int64
	var c, u time.Time
	db := b.dbOf(id)
	q := "SELECT doc, version, created_at, updated_at" + countColumns(db, idcodec.TypePin, idcodec.ShardOf(id), "local_id") + " FROM " + db + ".pins WHERE local_id = ?"
	return b.db.QueryRowContext(ctx, q, idcodec.LocalOf(id)).Scan(append([]any{&doc, &ver, &c, &u}, countDest(idcodec.TypePin)...)...)
}

// getPinBare is the primary-key select of a pin's row alone, without the
// counts an API pin carries.
func (b *baseline) getPinBare(ctx context.Context, id uint64) error {
	var doc []byte
	var ver int64
	var c, u time.Time
	return b.db.QueryRowContext(ctx, "SELECT doc, version, created_at, updated_at FROM "+b.dbOf(id)+".pins WHERE local_id = ?", idcodec.LocalOf(id)).Scan(&doc, &ver, &c, &u)
}

// cacheGet is the Redis limit of a read by id: one GET of the object's
// cache entry. An entry that expired (the API side fills it again on its
// next read) is a GET all the same; anything else that is not an object is
// an error.
func (b *baseline) cacheGet(ctx context.Context, id uint64) error {
	v, err := b.rc.Get(ctx, b.cachePrefix+strconv.FormatUint(id, 10)).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("redis limit: GET of %d: %w", id, err)
	}
	if !isEntry(v) {
		return fmt.Errorf("redis limit: the entry of %d is not an object (a lease?)", id)
	}
	return nil
}

// cacheMGet is the Redis limit of a page's objects: one MGET of their
// cache entries, as the server reads them (expired entries count, as in
// cacheGet).
func (b *baseline) cacheMGet(ctx context.Context, keys []string) error {
	vals, err := b.rc.MGet(ctx, keys...).Result()
	if err != nil {
		return fmt.Errorf("redis limit: MGET: %w", err)
	}
	for i, v := range vals {
		if s, ok := v.(string); ok && !isEntry([]byte(s)) {
			return fmt.Errorf("redis limit: %s is not an object (a lease?)", keys[i])
		}
	}
	return nil
}

// isEntry reports whether a cache value is an object's entry ('F', or 'V'
// of the layout before flags), not a lease.
func isEntry(v []byte) bool { return len(v) > 0 && (v[0] == 'F' || v[0] == 'V') }

// cacheKeys are the object cache's keys of ids.
func (b *baseline) cacheKeys(ids []uint64) []string {
	keys := make([]string, len(ids))
	for i, id := range ids {
		keys[i] = b.cachePrefix + strconv.FormatUint(id, 10)
	}
	return keys
}

// countDest is where the count columns of an object of typ scan to.
func countDest(typ idcodec.Type) []any {
	counts := make([]int64, len(model.CountKeys(typ)))
	dest := make([]any, len(counts))
	for i := range counts {
		dest[i] = &counts[i]
	}
	return dest
}

// countColumns is ", <count>, …": the length of each list an object of
// typ carries as its counts (a pin's likes and comments, a user's
// followers, …), each a sub-select of mapping_counts as pinstore reads
// them, so that a baseline read returns what an API read returns. local is
// the column holding the object's local id in shard's database db.
func countColumns(db string, typ idcodec.Type, shard uint32, local string) string {
	var b strings.Builder
	base := idcodec.MustEncode(shard, typ, 0)
	for _, key := range model.CountKeys(typ) { // with a user's secret boards and pins, which others' counts leave out
		fmt.Fprintf(&b, ", COALESCE((SELECT c.n FROM %s.mapping_counts c WHERE c.from_id = %s + %d AND c.mapping = %d), 0)", db, local, base, int(key))
	}
	return b.String()
}

type execer interface {
	ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error)
}

func addEdge(ctx context.Context, x execer, db, table string, m model.Mapping, from, to uint64, seq int64) error {
	res, err := x.ExecContext(ctx, "INSERT IGNORE INTO "+db+"."+table+" (from_id, to_id, sequence) VALUES (?, ?, ?)", from, to, seq)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return nil
	}
	_, err = x.ExecContext(ctx, "INSERT INTO "+db+".mapping_counts (from_id, mapping, n) VALUES (?, ?, 1) ON DUPLICATE KEY UPDATE n = n + 1", from, uint8(m))
	return err
}

func removeEdge(ctx context.Context, x execer, db, table string, m model.Mapping, from, to uint64) error {
	res, err := x.ExecContext(ctx, "DELETE FROM "+db+"."+table+" WHERE from_id = ? AND to_id = ?", from, to)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return nil
	}
	_, err = x.ExecContext(ctx, "UPDATE "+db+".mapping_counts SET n = n - 1 WHERE from_id = ? AND mapping = ?", from, uint8(m))
	return err
}

// createPin: one shard transaction (share-lock the board, insert the pin,
// board_pins + user_pins with their counts), then the owner into Redis.
func (b *baseline) createPin(ctx context.Context, board, owner uint64) (uint64, error) {
	doc, _ := json.Marshal(&model.PinDoc{BoardID: model.ID(board), OwnerID: model.ID(owner), Link: "https://example.com/new/1",
		Description: "Pin created under load by the harness, with a realistic description", ImageURL: "https://img.example.com/new/1.jpg", Active: true})
	db := b.dbOf(board)
	tx, err := b.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback()
	var bdoc []byte
	if err := tx.QueryRowContext(ctx, "SELECT doc FROM "+db+".boards WHERE local_id = ? LOCK IN SHARE MODE", idcodec.LocalOf(board)).Scan(&bdoc); err != nil {
		return 0, err
	}
	at := time.Now().UTC().Truncate(time.Microsecond)
	res, err := tx.ExecContext(ctx, "INSERT INTO "+db+".pins (doc, version, created_at, updated_at) VALUES (?, 1, ?, ?)", doc, at, at)
	if err != nil {
		return 0, err
	}
	local, _ := res.LastInsertId()
	id := idcodec.MustEncode(idcodec.ShardOf(board), idcodec.TypePin, uint64(local))
	seq := at.UnixMilli()
	if err := addEdge(ctx, tx, db, "board_pins", model.BoardPins, board, id, seq); err != nil {
		return 0, err
	}
	if err := addEdge(ctx, tx, db, "user_pins", model.UserPins, owner, id, seq); err != nil {
		return 0, err
	}
	if err := tx.Commit(); err != nil {
		return 0, err
	}
	_ = b.cache.Set(ctx, map[uint64]uint64{id: owner})
	return id, nil
}

// page: the keyset (or offset) range scan of limit+1 entries, newest first.
func (b *baseline) page(ctx context.Context, db, table string, from uint64, pos *keyPos, offset, limit int) ([]uint64, []int64, error) {
	q := "SELECT to_id, sequence FROM " + db + "." + table + " WHERE from_id = ?"
	args := []any{from}
	if pos != nil {
		q += " AND sequence <= ? AND (sequence < ? OR to_id < ?)"
		args = append(args, pos.seq, pos.seq, pos.to)
	}
	q += " ORDER BY sequence DESC, to_id DESC LIMIT ?"
	args = append(args, limit+1)
	if offset > 0 {
		q += " OFFSET ?"
		args = append(args, offset)
	}
	rows, err := b.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, nil, err
	}
	defer rows.Close()
	var ids []uint64
	var seqs []int64
	for rows.Next() {
		var id uint64
		var s int64
		if err := rows.Scan(&id, &s); err != nil {
			return nil, nil, err
		}
		ids, seqs = append(ids, id), append(seqs, s)
	}
	return ids, seqs, rows.Err()
}

// getMany: the objects of ids, one statement (UNION ALL of one
// primary-key IN (…) per shard database; one host here).
func (b *baseline) getMany(ctx context.Context, ids []uint64, typ idcodec.Type) (int, error) {
	if len(ids) == 0 {
		return 0, nil
	}
	byShard := map[uint32][]uint64{}
	var order []uint32
	for _, id := range ids {
		s := idcodec.ShardOf(id)
		if _, ok := byShard[s]; !ok {
			order = append(order, s)
		}
		byShard[s] = append(byShard[s], idcodec.LocalOf(id))
	}
	var q strings.Builder
	args := make([]any, 0, len(ids))
	for i, s := range order {
		if i > 0 {
			q.WriteString(" UNION ALL ")
		}
		db := fmt.Sprintf("%s%05d", b.prefix, s)
		fmt.Fprintf(&q, "SELECT %d, local_id, doc, version, created_at, updated_at%s FROM %s.%s WHERE local_id IN (", s, countColumns(db, typ, s, "local_id"), db, objTable[typ])
		for j, l := range byShard[s] {
			if j > 0 {
				q.WriteByte(',')
			}
			q.WriteByte('?')
			args = append(args, l)
		}
		q.WriteByte(')')
	}
	rows, err := b.db.QueryContext(ctx, q.String(), args...)
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var s int
		var local uint64
		var doc []byte
		var ver int64
		var c, u time.Time
		if err := rows.Scan(append([]any{&s, &local, &doc, &ver, &c, &u}, countDest(typ)...)...); err != nil {
			return n, err
		}
		n++
	}
	return n, rows.Err()
}

// boardPage: one page of 50 of a board's pins, then the 50 pins.
func (b *baseline) boardPage(ctx context.Context, board uint64, pos *keyPos, offset int) error {
	ids, _, err := b.page(ctx, b.dbOf(board), "board_pins", board, pos, offset, 50)
	if err != nil {
		return err
	}
	if len(ids) > 50 {
		ids = ids[:50]
	}
	n, err := b.getMany(ctx, ids, idcodec.TypePin)
	if err == nil && n != len(ids) {
		err = fmt.Errorf("board page: %d of %d pins", n, len(ids))
	}
	return err
}

// feed: one page of the user's materialised feed (user_feed, written on
// pin creation), then the 50 pins: the statements a minimal fan-out-on-write
// store runs, as pinstore does.
func (b *baseline) feed(ctx context.Context, user uint64) error {
	ids, _, err := b.page(ctx, b.dbOf(user), "user_feed", user, nil, 0, 50)
	if err != nil {
		return err
	}
	if len(ids) > 50 {
		ids = ids[:50]
	}
	n, err := b.getMany(ctx, ids, idcodec.TypePin)
	if err == nil && n != 50 {
		err = fmt.Errorf("feed page: %d of 50 pins", n)
	}
	return err
}

// viewerPage: one page of a list of pins (table: board_pins or user_feed)
// and its 50 pins, then which of them the viewer likes, with one
// statement on the viewer's shard.
func (b *baseline) viewerPage(ctx context.Context, table string, from, viewer uint64) error {
	ids, _, err := b.page(ctx, b.dbOf(from), table, from, nil, 0, 50)
	if err != nil {
		return err
	}
	if len(ids) > 50 {
		ids = ids[:50]
	}
	if _, err := b.getMany(ctx, ids, idcodec.TypePin); err != nil {
		return err
	}
	return b.edge(ctx, edgeCheck{table: "user_likes", from: viewer, tos: ids})
}

// owners: one Redis pipeline of HMGETs (ownercache's bucketed hashes).
func (b *baseline) owners(ctx context.Context, pins []uint64) error {
	got, err := b.cache.Get(ctx, pins)
	if err != nil {
		return err
	}
	for _, o := range got {
		if o == 0 {
			return errors.New("owner cache miss (cache not warm?)")
		}
	}
	return nil
}

func (b *baseline) inTx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	tx, err := b.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if err := fn(tx); err != nil {
		return err
	}
	return tx.Commit()
}

func (b *baseline) checkLive(ctx context.Context, q interface {
	QueryRowContext(context.Context, string, ...any) *sql.Row
}, id uint64, typ idcodec.Type, lock string) error {
	var doc []byte
	return q.QueryRowContext(ctx, "SELECT doc FROM "+b.dbOf(id)+"."+objTable[typ]+" WHERE local_id = ?"+lock, idcodec.LocalOf(id)).Scan(&doc)
}

func (b *baseline) like(ctx context.Context, u, pin uint64) error {
	if err := b.checkLive(ctx, b.db, pin, idcodec.TypePin, ""); err != nil {
		return err
	}
	seq := time.Now().UnixMilli()
	if err := b.inTx(ctx, func(tx *sql.Tx) error {
		if err := b.checkLive(ctx, tx, u, idcodec.TypeUser, " LOCK IN SHARE MODE"); err != nil {
			return err
		}
		return addEdge(ctx, tx, b.dbOf(u), "user_likes", model.UserLikes, u, pin, seq)
	}); err != nil {
		return err
	}
	return b.inTx(ctx, func(tx *sql.Tx) error {
		return addEdge(ctx, tx, b.dbOf(pin), "pin_likers", model.PinLikers, pin, u, seq)
	})
}

func (b *baseline) unlike(ctx context.Context, u, pin uint64) error {
	if err := b.inTx(ctx, func(tx *sql.Tx) error {
		return removeEdge(ctx, tx, b.dbOf(u), "user_likes", model.UserLikes, u, pin)
	}); err != nil {
		return err
	}
	return b.inTx(ctx, func(tx *sql.Tx) error {
		return removeEdge(ctx, tx, b.dbOf(pin), "pin_likers", model.PinLikers, pin, u)
	})
}

// move: item just after anchor (display order newest first), the same
// statements as store.Move's "after" branch.
func (b *baseline) move(ctx context.Context, board, item, anchor uint64) error {
	tbl := b.dbOf(board) + ".board_pins"
	return b.inTx(ctx, func(tx *sql.Tx) error {
		var itemSeq, aSeq int64
		if err := tx.QueryRowContext(ctx, "SELECT sequence FROM "+tbl+" WHERE from_id = ? AND to_id = ? FOR UPDATE", board, item).Scan(&itemSeq); err != nil {
			return err
		}
		if err := tx.QueryRowContext(ctx, "SELECT sequence FROM "+tbl+" WHERE from_id = ? AND to_id = ? FOR UPDATE", board, anchor).Scan(&aSeq); err != nil {
			return err
		}
		var loTo uint64
		var loSeq int64
		err := tx.QueryRowContext(ctx, "SELECT to_id, sequence FROM "+tbl+" WHERE from_id = ? AND to_id <> ? AND sequence <= ? AND (sequence < ? OR to_id < ?) ORDER BY sequence DESC, to_id DESC LIMIT 1 FOR UPDATE",
			board, item, aSeq, aSeq, anchor).Scan(&loTo, &loSeq)
		var seq int64
		switch {
		case errors.Is(err, sql.ErrNoRows):
			seq = aSeq - 1
		case err != nil:
			return err
		case aSeq-loSeq >= 2:
			seq = loSeq + (aSeq-loSeq)/2
		default:
			if _, err := tx.ExecContext(ctx, "UPDATE "+tbl+" SET sequence = sequence - 2 WHERE from_id = ? AND to_id <> ? AND (sequence < ? OR (sequence = ? AND to_id <= ?))",
				board, item, loSeq, loSeq, loTo); err != nil {
				return err
			}
			seq = loSeq - 1
		}
		_, err = tx.ExecContext(ctx, "UPDATE "+tbl+" SET sequence = ? WHERE from_id = ? AND to_id = ?", seq, board, item)
		return err
	})
}

// updatePin: read-for-update, write the document back with version+1 (the
// baseline does no JSON merge: it writes the bytes it read).
func (b *baseline) updatePin(ctx context.Context, id uint64) error {
	db := b.dbOf(id) + ".pins"
	return b.inTx(ctx, func(tx *sql.Tx) error {
		var doc []byte
		var ver int64
		if err := tx.QueryRowContext(ctx, "SELECT doc, version FROM "+db+" WHERE local_id = ? FOR UPDATE", idcodec.LocalOf(id)).Scan(&doc, &ver); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, "UPDATE "+db+" SET doc = ?, version = version + 1, updated_at = ? WHERE local_id = ?", doc, time.Now().UTC(), idcodec.LocalOf(id))
		return err
	})
}

// deletePin: soft delete + unlist in one shard transaction, the likers
// check, the cache entry dropped.
func (b *baseline) deletePin(ctx context.Context, id, board, owner uint64) error {
	db := b.dbOf(id)
	err := b.inTx(ctx, func(tx *sql.Tx) error {
		var doc []byte
		if err := tx.QueryRowContext(ctx, "SELECT doc FROM "+db+".pins WHERE local_id = ? FOR UPDATE", idcodec.LocalOf(id)).Scan(&doc); err != nil {
			return err
		}
		doc = bytes.Replace(doc, []byte(`"active":true`), []byte(`"active":false`), 1)
		if _, err := tx.ExecContext(ctx, "UPDATE "+db+".pins SET doc = ?, version = version + 1, updated_at = ? WHERE local_id = ?", doc, time.Now().UTC(), idcodec.LocalOf(id)); err != nil {
			return err
		}
		if err := removeEdge(ctx, tx, db, "board_pins", model.BoardPins, board, id); err != nil {
			return err
		}
		return removeEdge(ctx, tx, db, "user_pins", model.UserPins, owner, id)
	})
	if err != nil {
		return err
	}
	_ = b.cache.Delete(ctx, id)
	var n int
	return b.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM (SELECT to_id FROM "+db+".pin_likers WHERE from_id = ? LIMIT 250) x", id).Scan(&n)
}

func (b *baseline) linkbench(ctx context.Context, p picks, w *worker, op string) error {
	switch op {
	case "getlinklist":
		u := p.listUser(w)
		ids, _, err := b.page(ctx, b.dbOf(u), "user_followers", u, nil, 0, 50)
		if err != nil {
			return err
		}
		if len(ids) > 50 {
			ids = ids[:50]
		}
		_, err = b.getMany(ctx, ids, idcodec.TypeUser)
		return err
	case "getnode":
		return b.getPin(ctx, p.pin(w))
	case "addlink":
		u, pin := p.user(w), p.pin(w)
		if err := b.like(ctx, u, pin); err != nil {
			return err
		}
		w.liked = append(w.liked, [2]uint64{u, pin})
		return nil
	case "updatelink":
		bd, item, anchor := p.move(w)
		return b.move(ctx, bd, item, anchor)
	case "updatenode":
		return b.updatePin(ctx, p.pin(w))
	case "countlink":
		u := p.listUser(w)
		var n int64
		err := b.db.QueryRowContext(ctx, "SELECT n FROM "+b.dbOf(u)+".mapping_counts WHERE from_id = ? AND mapping = ?", u, uint8(model.UserFollowers)).Scan(&n)
		if errors.Is(err, sql.ErrNoRows) {
			err = nil
		}
		return err
	case "deletelink":
		u, pin := p.user(w), p.pin(w)
		if n := len(w.liked); n > 0 {
			u, pin = w.liked[n-1][0], w.liked[n-1][1]
			w.liked = w.liked[:n-1]
		}
		return b.unlike(ctx, u, pin)
	case "addnode":
		bd, o := p.sink(w)
		id, err := b.createPin(ctx, bd, o)
		if err != nil {
			return err
		}
		w.created = append(w.created, id, bd, o)
		return nil
	case "deletenode":
		if len(w.created) == 0 {
			if err := b.linkbench(ctx, p, w, "addnode"); err != nil {
				return err
			}
		}
		n := len(w.created)
		id, bd, o := w.created[n-3], w.created[n-2], w.created[n-1]
		w.created = w.created[:n-3]
		return b.deletePin(ctx, id, bd, o)
	case "getlink": // does this user like this pin: one primary-key look-up on the user's shard
		u := p.user(w)
		var one int
		err := b.db.QueryRowContext(ctx, "SELECT 1 FROM "+b.dbOf(u)+".user_likes WHERE from_id = ? AND to_id = ?", u, p.pin(w)).Scan(&one)
		if errors.Is(err, sql.ErrNoRows) {
			err = nil
		}
		return err
	}
	return fmt.Errorf("unknown op %s", op)
}
