package changes

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"
	mysqldriver "github.com/go-sql-driver/mysql"

	"github.com/pinstore/pinstore/model"
)

// ErrNotRow is the error of a host whose binlog the stream cannot read:
// no binary log, or not in full row format.
var ErrNotRow = errors.New("the host writes no full row binlog")

// ErrExpired is the error of a token whose position a host's binlogs no
// longer hold: the changes between it and the oldest binlog are lost to
// it.
var ErrExpired = errors.New("the token is older than the binlogs")

// erMasterFatalReadingBinlog is MariaDB's error when a binlog dump cannot
// start or go on (the position asked for was purged or is unknown).
const erMasterFatalReadingBinlog = 1236

// txn is one committed transaction of a host, as the stream tells it.
type txn struct {
	host   string
	gtid   mysql.MariadbGTID
	after  pos // the host's position once it is told
	time   time.Time
	events []Event
	// moved: a move's own transaction (flagged skip_replication), which
	// tells nothing; arrivals are the arrival marks it carries.
	moved    bool
	arrivals []arrival
}

// hostReader follows one host's binlog.
type hostReader struct {
	name    string
	dsn     func() (string, error) // the host's master now
	prefix  string
	shards  int
	read    *progress // how far every host's reader of the stream has handed transactions on
	tables  map[string]table
	cols    map[string]columns
	logger  *slog.Logger
	retry   time.Duration
	started func() // called once the first dump has started (tests)
}

// hostState is what a host says of its binlog at the start.
type hostState struct {
	current    pos // @@gtid_binlog_pos
	oldest     pos // the Gtid_list of its oldest binlog: what was before it
	oldestFile string
}

// inspect checks that the host at dsn writes a full row binlog and reads
// its positions and the column layout of its shard database probe (none
// when probe is "").
func (h *hostReader) inspect(ctx context.Context, dsn, probe string) (hostState, error) {
	var st hostState
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		return st, fmt.Errorf("host %s: %w", h.name, err)
	}
	defer db.Close()
	var logBin int
	var format, image, current string
	err = db.QueryRowContext(ctx, "SELECT @@log_bin, @@binlog_format, @@binlog_row_image, @@gtid_binlog_pos").Scan(&logBin, &format, &image, &current)
	if err != nil {
		return st, model.Wrap("changes.inspect", model.EUnavailable, fmt.Sprintf("host %s does not answer", h.name), err)
	}
	if logBin != 1 || !strings.EqualFold(format, "ROW") || !strings.EqualFold(image, "FULL") {
		return st, model.Wrap("changes.inspect", model.EUnavailable, fmt.Sprintf("host %s cannot feed the change stream: it has log_bin=%d binlog_format=%s binlog_row_image=%s; the stream needs log_bin=ON, binlog_format=ROW, binlog_row_image=FULL", h.name, logBin, format, image), ErrNotRow)
	}
	if st.current, err = parsePos(current); err != nil {
		return st, fmt.Errorf("host %s: @@gtid_binlog_pos: %w", h.name, err)
	}
	rows, err := db.QueryContext(ctx, "SHOW BINARY LOGS")
	if err != nil {
		return st, fmt.Errorf("host %s: SHOW BINARY LOGS: %w", h.name, err)
	}
	cols, _ := rows.Columns()
	for rows.Next() && st.oldestFile == "" {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			rows.Close()
			return st, fmt.Errorf("host %s: SHOW BINARY LOGS: %w", h.name, err)
		}
		if b, ok := vals[0].([]byte); ok {
			st.oldestFile = string(b)
		}
	}
	rows.Close()
	var oldest sql.NullString
	if err := db.QueryRowContext(ctx, "SELECT BINLOG_GTID_POS(?, 4)", st.oldestFile).Scan(&oldest); err != nil {
		return st, fmt.Errorf("host %s: the GTIDs before %s: %w", h.name, st.oldestFile, err)
	}
	if st.oldest, err = parsePos(oldest.String); err != nil {
		return st, fmt.Errorf("host %s: the GTIDs before %s: %w", h.name, st.oldestFile, err)
	}
	if probe == "" {
		return st, nil // a host with no shards: the layout is another's
	}
	if h.cols, err = layouts(ctx, db, probe, h.tables); err != nil {
		return st, fmt.Errorf("host %s: %w", h.name, err)
	}
	return st, nil
}

// expired is the error of starting from p on a host whose oldest binlog
// begins after oldest; nil when nothing between was purged.
func (h *hostReader) expired(p pos, st hostState) error {
	lost := p.lost(st.oldest)
	if len(lost) == 0 {
		return nil
	}
	msg := fmt.Sprintf("the token is older than host %s's binlogs (the oldest, %s, begins after %s): the transactions of %s were purged and are lost to this token; start a new stream without a token",
		h.name, st.oldestFile, st.oldest, strings.Join(lost, "; "))
	return model.Wrap("changes.Follow", model.EConflict, msg, ErrExpired)
}

// run follows the host's binlog from p, sending every committed
// transaction to out, until ctx ends or an error that a new connection
// would meet again (a position the host no longer holds). A lost
// connection is made again from the last transaction sent, from the
// host's master in the map then (a failover's promoted replica carries
// the same GTIDs).
func (h *hostReader) run(ctx context.Context, p pos, out chan<- txn) error {
	for {
		next, err := h.follow(ctx, p, out)
		p = next
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if errors.Is(err, errUnread) {
			return err
		}
		var me *mysql.MyError
		if errors.As(err, &me) && me.Code == erMasterFatalReadingBinlog {
			return model.Wrap("changes.Follow", model.EConflict, fmt.Sprintf("host %s cannot resume the stream after %s: %s", h.name, p, me.Message), ErrExpired)
		}
		h.logger.Warn("change stream: reading a host's binlog failed; reconnecting", "host", h.name, "after", p.String(), "error", err.Error())
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(h.retry):
		}
	}
}

// follow is one binlog connection: it returns the position after the last
// transaction it sent, and why it stopped.
func (h *hostReader) follow(ctx context.Context, p pos, out chan<- txn) (pos, error) {
	dsn, err := h.dsn()
	if err != nil {
		return p, err
	}
	cfg, err := mysqldriver.ParseDSN(dsn)
	if err != nil {
		return p, fmt.Errorf("host %s: %w", h.name, err)
	}
	host, port, err := net.SplitHostPort(cfg.Addr)
	if err != nil {
		return p, fmt.Errorf("host %s: address %q: %w", h.name, cfg.Addr, err)
	}
	pn, _ := strconv.Atoi(port)
	items := make(chan item, 256)
	// The handler waits on this connection's context, which ends before
	// the syncer is closed (Close waits for the handler).
	cctx, ccancel := context.WithCancel(ctx)
	syncer := replication.NewBinlogSyncer(replication.BinlogSyncerConfig{
		// A replica's id of its own, unlike any server's of the fleet:
		// the master drops an older connection with the same id.
		ServerID:         1<<31 + rand.Uint32N(1<<30),
		Flavor:           mysql.MariaDBFlavor,
		Host:             host,
		Port:             uint16(pn),
		User:             cfg.User,
		Password:         cfg.Passwd,
		HeartbeatPeriod:  time.Second,
		ReadTimeout:      10 * time.Second,
		DisableRetrySync: true,
		Logger:           slog.New(slog.DiscardHandler),
		// Events are taken as the syncer parses them, not from its
		// channel: it keeps the GTID event of each new (domain, server)
		// pair by pointer in its own GTID set and moves that one forward
		// with every later GTID of the pair, so a GTID event read from the
		// channel after later ones were parsed (the first one of a
		// failover's new master) tells a later sequence number. The
		// handler copies the GTID while it is still the event's own.
		SynchronousEventHandler: handler{ctx: cctx, out: items},
	})
	defer syncer.Close()
	defer ccancel()
	streamer, err := syncer.StartSyncGTID(p.set())
	if err != nil {
		return p, fmt.Errorf("host %s: start reading the binlog after %s: %w", h.name, p, err)
	}
	if h.started != nil {
		h.started()
	}
	errc := make(chan error, 1)
	go func() {
		_, err := streamer.GetEvent(ctx) // with a handler, only the stream's end comes here
		errc <- err
	}()
	var cur *txn
	standalone := false
	checked := time.Now()
	for {
		var it item
		select {
		case it = <-items:
		case err := <-errc:
			return p, err
		case <-ctx.Done():
			return p, ctx.Err()
		}
		ev := it.ev
		// A failover names another master in the map while the old one,
		// fenced, still answers: between transactions, once a second (the
		// master's heartbeats wake an idle stream), look.
		if cur == nil && time.Since(checked) >= time.Second {
			checked = time.Now()
			if now, err := h.dsn(); err == nil && now != dsn {
				return p, fmt.Errorf("host %s: the map names another master", h.name)
			}
		}
		switch e := ev.Event.(type) {
		case *replication.MariadbGTIDEvent:
			cur = &txn{host: h.name, gtid: it.gtid, moved: ev.Header.Flags&skipReplicationFlag != 0}
			standalone = e.IsStandalone()
		case *replication.RowsEvent:
			if cur == nil {
				continue
			}
			if ev.Header.Flags&skipReplicationFlag != 0 {
				cur.moved = true
				cur.arrivals = append(cur.arrivals, h.arrivals(e)...)
				continue
			}
			evs, err := h.rows(e)
			if err != nil {
				return p, fmt.Errorf("host %s: transaction %s: %w", h.name, cur.gtid.String(), err)
			}
			cur.events = append(cur.events, evs...)
		case *replication.XIDEvent:
			if cur != nil {
				if err := h.commit(ctx, &p, cur, ev.Header.Timestamp, out); err != nil {
					return p, err
				}
				cur = nil
			}
		case *replication.QueryEvent:
			if cur != nil && (standalone || string(e.Query) == "COMMIT") {
				if err := h.commit(ctx, &p, cur, ev.Header.Timestamp, out); err != nil {
					return p, err
				}
				cur = nil
			}
		}
	}
}

// item is one binlog event as the syncer parsed it, and for a GTID event
// its GTID at that moment.
type item struct {
	ev   *replication.BinlogEvent
	gtid mysql.MariadbGTID
}

// handler hands the syncer's events to follow, one at a time: a slow
// stream holds the syncer, and so the binlog connection, back.
type handler struct {
	ctx context.Context
	out chan<- item
}

func (h handler) HandleEvent(e *replication.BinlogEvent) error {
	it := item{ev: e}
	if g, ok := e.Event.(*replication.MariadbGTIDEvent); ok {
		it.gtid = g.GTID
	}
	select {
	case h.out <- it:
		return nil
	case <-h.ctx.Done():
		return h.ctx.Err()
	}
}

// commit sends the transaction t, committed at ts, and moves p past it.
// A move's transaction tells nothing (its events are dropped, its
// position still moves p); when it carries arrival marks, commit returns
// only once the reader of each host the range left has handed on every
// transaction up to the mark's position there, so that nothing this host
// logs later is told before what the other host logged first.
func (h *hostReader) commit(ctx context.Context, p *pos, t *txn, ts uint32, out chan<- txn) error {
	t.after = p.with(t.gtid)
	t.time = time.Unix(int64(ts), 0).UTC()
	if t.moved {
		t.events = nil
	}
	select {
	case out <- *t:
		*p = t.after
	case <-ctx.Done():
		return ctx.Err()
	}
	if h.read == nil {
		return nil
	}
	h.read.set(h.name, *p)
	for _, a := range t.arrivals {
		if err := h.read.wait(ctx, h.name, a); err != nil {
			return err
		}
	}
	return nil
}

// rows decodes a rows event: events for a shard of this host's and a
// table that is an object type's or a list's, none for anything else.
func (h *hostReader) rows(e *replication.RowsEvent) ([]Event, error) {
	if e.Table == nil {
		return nil, nil
	}
	shard, ok := shardOf(string(e.Table.Schema), h.prefix, h.shards)
	if !ok {
		return nil, nil
	}
	name := string(e.Table.Table)
	t, ok := h.tables[name]
	if !ok {
		return nil, nil
	}
	cols := h.cols[name]
	if names := e.Table.ColumnNameString(); len(names) > 0 { // binlog_row_metadata=FULL names them
		cols = columns{}
		for i, n := range names {
			cols[n] = i
		}
	}
	return decodeRows(shard, t, cols, e.Type(), e.Rows)
}
