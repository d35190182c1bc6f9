// Package failover operates MariaDB replication for the shard map: it
// sets a replica up from a host's master (AddReplica, `pinstore replica
// add`), promotes a replica when a master dies or is retired (Failover,
// `pinstore failover`), and, opt-in, has one server of a fleet do that by
// itself when a majority of the servers see a master down (Auto).
//
// It works on the map where the servers follow it (the map file or etcd,
// through Home, every change a compare-and-swap) and on its own
// connections to the servers, as an administrator (Access); like package
// reshard it never imports package store.
//
// The promises:
//   - A replica is promoted only when it can be without losing what
//     another server has: its SQL thread has applied everything it
//     received, it holds no transaction its master does not (errant
//     transactions), and no other replica received more; with the master
//     still answering, only once it has applied the master's last
//     transaction, with the master fenced. Otherwise Failover refuses and
//     says why. With semi-synchronous replication every acknowledged
//     commit was received by a replica, so the most advanced replica has
//     them all: none is lost.
//   - Semi-synchronous replication never falls back to asynchronous: a
//     master waits for a replica's acknowledgement for a year
//     (SemiSyncTimeout), so a master cut off from its replicas commits
//     nothing a failover could lose. Its cost: a master with no replica
//     connected takes no writes (run two replicas a host).
//   - With the master not answering (dead, or alive on the far side of a
//     partition), a failover first stops every replica's I/O thread, so
//     the old master loses its acknowledgements before anything is
//     chosen, and refuses while any replica does not answer: that
//     replica could hold, and still be acknowledging, commits the others
//     lack. No ID the old master handed out is handed out again.
//   - While a host fails over, writes to its shards wait in the servers
//     (the host's ranges are read-only in the map, as in a shard move)
//     and run on the new master once the map names it.
//   - A former master is fenced: read_only when it answers (the servers'
//     MySQL user must not hold READ_ONLY ADMIN or SUPER, which ignore it),
//     listed as fenced in the map, and taken back only as a replica, by
//     AddReplica, which refuses it while it holds transactions the new
//     master lacks.
//   - Two failovers never run at once: each holds the lock of moves (which
//     shard moves hold too), and the automatic one runs in one elected
//     server.
//   - A failover is recorded where the map lives (RecordKey in etcd,
//     RecordPath beside a map file) when it starts and when it ends, for
//     the fleet page; the record is best-effort and never fails a
//     failover nor holds it up more than a couple of seconds.
package failover
