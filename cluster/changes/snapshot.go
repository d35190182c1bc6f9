package changes

import (
	"context"
	"database/sql"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// Snapshot tells emit what exists now, for a consumer that starts without
// a token (its first sync): every visible object, as a Created event, and
// every list entry, as an Added event, each with Snapshot set and no
// GTID, shard by shard in shard order. Each host is read in one
// transaction WITH CONSISTENT SNAPSHOT, whose binlog position MariaDB
// names with it (Binlog_snapshot_file and _position, as mariadb-dump
// --single-transaction --gtid uses them). Last it tells a Progress event
// whose token resumes the stream at exactly those positions: Follow from
// it tells every change the snapshot did not see, and none that it did.
//
// The snapshot's events carry no token (nothing resumes in the middle of
// a snapshot): a consumer stopped during one starts it again. c's Types
// and Lists filter it as they filter Follow. The errors are Follow's at
// its start.
func Snapshot(ctx context.Context, c Config, emit func(Event) error) error {
	const op = "changes.Snapshot"
	if c.Map == nil {
		return fmt.Errorf("%s: no map", op)
	}
	m := c.Map()
	f := newFilter(c)
	tbls := tables()
	names := slices.Sorted(maps.Keys(tbls))
	state := map[string]HostPos{}
	// Hosts that hold no shards (a move's target) resume from where they
	// are before any snapshot is taken: whatever they log later is told.
	for _, host := range slices.Sorted(maps.Keys(m.Hosts)) {
		if _, holds := firstShard(m, host); holds || m.Hosts[host].Master == "" {
			continue
		}
		r := &hostReader{name: host, tables: tbls}
		st, err := r.inspect(ctx, m.Hosts[host].Master, "")
		if err != nil {
			return fmt.Errorf("%s: %w", op, err)
		}
		state[host] = HostPos{Pos: st.current.String()}
	}
	for _, host := range hostsOf(m) {
		r := &hostReader{name: host, tables: tbls}
		dsn := m.Hosts[host].Master
		first, _ := firstShard(m, host)
		if _, err := r.inspect(ctx, dsn, m.DBName(first)); err != nil {
			return fmt.Errorf("%s: %w", op, err)
		}
		var shards []int
		for _, rg := range m.Ranges {
			if rg.Host == host {
				for s := rg.First; s <= rg.Last; s++ {
					shards = append(shards, s)
				}
			}
		}
		slices.Sort(shards)
		p, err := snapshotHost(ctx, r, host, dsn, func(s int) string { return m.DBName(s) }, shards, names, f, emit)
		if err != nil {
			return fmt.Errorf("%s: host %s: %w", op, host, err)
		}
		state[host] = HostPos{Pos: p.String()}
	}
	return emit(Event{Kind: Progress, Token: Token{Hosts: state}.Encode()})
}

// snapshotHost reads shards of one host in one consistent snapshot and
// returns the GTID position it is consistent with.
func snapshotHost(ctx context.Context, r *hostReader, host, dsn string, dbName func(int) string, shards []int, names []string, f filter, emit func(Event) error) (pos, error) {
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	conn, err := db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ"); err != nil {
		return nil, err
	}
	if _, err := conn.ExecContext(ctx, "START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY"); err != nil {
		return nil, err
	}
	defer conn.ExecContext(context.WithoutCancel(ctx), "ROLLBACK") //nolint:errcheck // read only: nothing to keep
	var file string
	var offset int64
	for name, dst := range map[string]any{"binlog_snapshot_file": &file, "binlog_snapshot_position": &offset} {
		var n string
		if err := conn.QueryRowContext(ctx, "SHOW STATUS LIKE '"+name+"'").Scan(&n, dst); err != nil {
			return nil, fmt.Errorf("the snapshot's binlog position (%s): %w", name, err)
		}
	}
	var gtids sql.NullString
	if err := conn.QueryRowContext(ctx, "SELECT BINLOG_GTID_POS(?, ?)", file, offset).Scan(&gtids); err != nil || !gtids.Valid {
		return nil, fmt.Errorf("the GTID position of %s:%d: %v", file, offset, err)
	}
	p, err := parsePos(gtids.String)
	if err != nil {
		return nil, fmt.Errorf("the GTID position of %s:%d: %w", file, offset, err)
	}
	for _, s := range shards {
		for _, name := range names {
			t := r.tables[name]
			if t.list != 0 && !f.all && !f.lists[t.list.String()] {
				continue
			}
			if t.typ != 0 && !f.all && !f.types[t.typ.String()] {
				continue
			}
			if err := snapshotTable(ctx, conn, "snapshot/"+host+"/"+p.String(), dbName(s), s, name, t, emit); err != nil {
				return nil, err
			}
		}
	}
	return p, nil
}

// snapshotTable tells what one table of one shard holds, in key order.
func snapshotTable(ctx context.Context, conn *sql.Conn, key, db string, shard int, name string, t table, emit func(Event) error) error {
	cols, q := objectColumns, "SELECT local_id, doc, version FROM `%s`.`%s` ORDER BY local_id"
	if t.list != 0 {
		cols, q = listColumns, "SELECT from_id, to_id, sequence FROM `%s`.`%s` ORDER BY from_id, to_id"
	}
	rows, err := conn.QueryContext(ctx, fmt.Sprintf(q, db, name))
	if err != nil {
		return fmt.Errorf("read %s.%s: %w", db, name, err)
	}
	defer rows.Close()
	layout := columns{}
	for i, c := range cols {
		layout[c] = i
	}
	for rows.Next() {
		var a, b, c any
		if err := rows.Scan(&a, &b, &c); err != nil {
			return fmt.Errorf("read %s.%s: %w", db, name, err)
		}
		row := []any{numeric(a), b, numeric(c)}
		if t.list != 0 {
			row = []any{numeric(a), numeric(b), numeric(c)}
		}
		var e Event
		var ok bool
		if t.list != 0 {
			e, ok, err = entryEvent(shard, t.list, layout, nil, row)
		} else {
			e, ok, err = objectEvent(shard, t.typ, layout, nil, row)
		}
		if err != nil {
			return fmt.Errorf("%s.%s: %w", db, name, err)
		}
		if !ok {
			continue // an object that is not visible
		}
		e.Snapshot = true
		e.Key = snapshotKey(key, e)
		if err := emit(e); err != nil {
			return err
		}
	}
	return rows.Err()
}

// numeric reads an integer column as database/sql scans it into an any
// (the text protocol's digits) into what the binlog decoder
// gives, so that the row goes through the same decoding.
func numeric(v any) any {
	b, ok := v.([]byte)
	if !ok {
		return v
	}
	if n, err := strconv.ParseInt(string(b), 10, 64); err == nil {
		return n
	}
	if n, err := strconv.ParseUint(string(b), 10, 64); err == nil {
		return n
	}
	return v
}

// snapshotKey is a snapshot event's Key: the snapshot (its host and
// position) and what it tells of, since a snapshot has no GTID
// ("snapshot/h0/0-1-57/pin/211174952009765",
// "snapshot/h0/0-1-57/board_pins/211243671486469/211174952009765"). A
// snapshot taken again at another position tells new keys.
func snapshotKey(snapshot string, e Event) string {
	if e.IsObject() {
		return snapshot + "/" + e.Type + "/" + strconv.FormatUint(uint64(e.ID), 10)
	}
	return strings.Join([]string{snapshot, e.List, strconv.FormatUint(uint64(e.From), 10), strconv.FormatUint(uint64(e.To), 10)}, "/")
}
