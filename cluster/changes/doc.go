// Package changes is the change stream: every committed change to
// pinstore's objects and lists, read from the hosts' binary logs and
// told in product terms (an object created, updated or deleted; an entry
// added to, moved in or removed from a list), in order per shard, and
// resumable from an opaque token.
//
// Where it comes from: each host of the shard map writes a binary log in
// row format (log_bin, binlog_format=ROW, binlog_row_image=FULL) with
// MariaDB GTIDs; a reader per host follows the log as a replica would
// (go-mysql's replication package) from a GTID position, and turns the
// row images of the shard databases' object and list tables into Events.
// Internal tables (outboxes, counts, claims, caches, idempotency keys,
// feeds, a move's change log) are never events. Nothing is added to the
// write path: the binlog is what the server writes anyway.
//
// Invariants:
//   - Events of one host leave in the order of its binlog, which is commit
//     order; a shard lives on one host at a time, so events of one shard
//     are in commit order. Hosts are read side by side, with no order
//     between them, except across a move: the taking host's reader waits
//     at the move's arrival mark until the leaving host's reader has
//     passed the range's last write there (move.go).
//   - A move's own writes (flagged skip_replication) are never events;
//     every other change to a shard database is, on whichever host of
//     the map logged it. Every host of the map is read, those without
//     shards too.
//   - An event is only told once its transaction's commit has been read;
//     all the events of a transaction leave together, numbered from 0
//     (Event.Index) in the order of its row changes.
//   - Every event carries the Token that resumes after it. Following from
//     a token gives every event after it at least once (after a crash of
//     the consumer, the events after its last saved token come again);
//     Event.Key (host, GTID, index) recognises repeats.
//   - A token whose position the host's binlogs no longer hold is refused
//     with ErrExpired, naming what was lost; it is never resumed with a
//     gap. A host without row binlogs is refused with ErrNotRow.
//   - A position is kept per host of the map and per GTID domain, one GTID
//     each (MariaDB's own replica position), so the promoted replica of a
//     failover, which carries the master's GTIDs, continues a token.
//
// Where things are: event.go the Event and its kinds; tables.go which
// tables are objects and lists and where their columns are; token.go the
// token; host.go one host's reader; stream.go following every host of a
// map, with the filter and the token; move.go following a range across a
// move; nats.go the JetStream sink.
package changes
