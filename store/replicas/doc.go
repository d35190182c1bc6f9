// Package replicas decides which server of a host answers a read: the
// host's master, or one of its MariaDB replicas when the shard map lets
// them serve reads (a host's replica_reads). It measures each replica's
// lag (Tracker), carries the consistency tokens of client requests
// (Token, the Pinstore-Consistency header), runs a write transaction on a
// master connection of its own so that its GTID can go into the token
// (Commit), and reports what masters and replicas say about replication
// for the admin route, `pinstore shards` and failover (Describe, Server).
//
// Invariants:
//   - Writes, and reads outside a read request (OnMaster, background
//     work, cache fills), always go to the master: a replica never feeds
//     the object cache, and never answers a write's own reads.
//   - A read with no token goes to a replica only when the tracker's lag
//     measure, an upper bound that needs no clock agreement between
//     servers, is within the lag bound (default 100 ms). A replica that
//     has not been measured, or does not answer, is never used.
//   - A read with a token goes to a replica only once that replica has
//     applied the token's GTID position for the host (or does so within
//     the wait, MASTER_GTID_WAIT); otherwise it goes to the master. So a
//     client that sends back the token of its write reads that write.
//   - GTID positions stay meaningful across a failover: in one replication
//     domain sequence numbers only grow (gtid_strict_mode), so a token
//     taken before a promotion still covers the right writes after it.
//   - A replica that replicates from another server than its host's
//     master, or whose replication is stopped or broken, is reported as
//     such, never as replicating.
package replicas
