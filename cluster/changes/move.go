package changes

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/go-mysql-org/go-mysql/replication"

	"github.com/pinstore/pinstore/model"
)

// Following a move. A move (package reshard) copies a shard range to
// another host while clients write the source, applies their changes to
// the copy, holds writes, switches the map to the target, and may keep
// applying the target's changes to the old copies (or move the range
// back). The stream tells each client change once, where the client made
// it, in order per shard:
//
//   - Every write of the move itself is flagged in the binary log
//     (skip_replication on the move's connections): those transactions
//     tell nothing, so the copy and its catch-up produce no events, on
//     either side. Any other change to a shard database is a client's,
//     whichever host logged it: the stream tells it.
//   - Before the switch, writes held, the move writes on the host taking
//     the range an arrival mark naming each host the range leaves and
//     that host's gtid_binlog_pos then, which covers the range's last
//     write there. The reader of the taking host, on reading the mark,
//     waits until the leaving host's reader has handed on every
//     transaction up to that position before it hands on anything the
//     taking host logged later. Per shard, the source's events so come
//     before the target's, for a stream that runs through the move as for
//     one that resumes from a token taken before it.
//
// A mark is a row of the move's change log (reshard_log: seq, tbl, d,
// k1, k2, …), inserted with tbl = ArrivalMark, k1 the leaving host's name
// in the map and k2 its position, and deleted in the same transaction.

// ArrivalMark is the tbl value of a move's arrival mark in its change log.
const ArrivalMark = "pinstore.arrive"

// markTable is the table of the move's change log, in each shard
// database of a moving range.
const markTable = "reshard_log"

// skipReplicationFlag is LOG_EVENT_SKIP_REPLICATION_F, the event header
// flag of every event of a transaction made with skip_replication set.
const skipReplicationFlag = 0x8000

// arrival is an arrival mark: the range now arriving left host from
// once that host's binlog reached at.
type arrival struct {
	from string
	at   pos
}

// arrivals reads the arrival marks of a flagged rows event: inserts into
// a shard database's change log with tbl ArrivalMark, one row per host
// the range leaves.
func (h *hostReader) arrivals(e *replication.RowsEvent) []arrival {
	var out []arrival
	if e.Table == nil || string(e.Table.Table) != markTable || e.Type() != replication.EnumRowsEventTypeInsert {
		return nil
	}
	if _, ok := shardOf(string(e.Table.Schema), h.prefix, h.shards); !ok {
		return nil
	}
	for _, row := range e.Rows {
		tbl, ok1 := text(at(row, 1))
		from, ok2 := text(at(row, 3))
		p, ok3 := text(at(row, 4))
		if !ok1 || !ok2 || !ok3 || string(tbl) != ArrivalMark {
			continue
		}
		at, err := parsePos(string(p))
		if err != nil {
			h.logger.Warn("change stream: an arrival mark with a bad position", "host", h.name, "pos", string(p))
			continue
		}
		out = append(out, arrival{from: string(from), at: at})
	}
	return out
}

// errUnread is the error of an arrival from a host the stream does not
// read: what that host logged before the move cannot be told first, so
// the stream stops rather than tell the rest out of order.
var errUnread = errors.New("the stream does not read the host a range left")

// progress is how far each host's reader has handed transactions on to
// the stream, for the arrival marks to wait on.
type progress struct {
	mu   sync.Mutex
	at   map[string]pos
	wake chan struct{} // closed at each change
}

func newProgress() *progress { return &progress{at: map[string]pos{}, wake: make(chan struct{})} }

// set records that host's reader has handed on everything up to p.
func (r *progress) set(host string, p pos) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.at[host] = p
	close(r.wake)
	r.wake = make(chan struct{})
}

// wait returns once host a.from's reader has handed on every transaction
// up to a.at; waiter is the host whose reader waits.
func (r *progress) wait(ctx context.Context, waiter string, a arrival) error {
	for {
		r.mu.Lock()
		p, ok := r.at[a.from]
		wake := r.wake
		r.mu.Unlock()
		if !ok {
			return model.Wrap("changes.Follow", model.EConflict, fmt.Sprintf("host %s took shards from host %s after %s, and this stream does not read %s (it is not in the map): what %s logged before the move cannot be told first; start a new stream without a token", waiter, a.from, a.at, a.from, a.from), errUnread)
		}
		if p.covers(a.at) {
			return nil
		}
		select {
		case <-wake:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// covers says whether p is at or past q in every domain of q.
func (p pos) covers(q pos) bool {
	for d, g := range q {
		have, ok := p[d]
		if !ok || have.SequenceNumber < g.SequenceNumber {
			return false
		}
	}
	return true
}
