// Package reshard moves a range of shards from the host(s) the shard map
// places them on to another host of the map: `pinstore move-shards`. It
// works on the map's Home (the map file, or etcd: package etcdtopo) and on
// the MySQL hosts alone, with pools of its own (topology.Dial); it never
// imports package store, and servers take part only by following the map
// (and, with Options.Confirm, by reporting the map they route by and that
// writes routed by older maps have ended: servers on etcd do).
//
// The protocol. A move copies each shard database of the range, table by
// table in primary-key chunks, from its source host to the target host,
// while clients keep reading and writing the source, then runs a catch-up
// pass (only chunks whose sums differ are copied). It then holds writes by
// rewriting the map with the range read_only (servers then keep writes to
// it waiting, topology.Router.EnterShard, and refuse them with EMoving if
// the hold outlasts their buffer), waits until every write routed on the
// old map has finished (Confirm, or the settle time), copies what changed
// meanwhile and verifies every table in the same final pass (row count and
// a 64-bit XOR of per-row MD5s, chunk by chunk, equal on both hosts; any
// difference rolls the map back), and rewrites the map with the range on
// the target, writable. After another settle time, when no server can
// still route to the source, it checks that no source changed since the
// final pass (a late write keeps that source database and fails the move
// loudly) and drops the source databases.
//
// Invariants:
//   - IDs never change: a shard keeps its number and database name, and
//     AUTO_INCREMENT counters on the target are raised to the source's.
//   - The Home's lock of moves records the move in progress (YAML, see
//     moveState): with a map file, the lock file <map file>.move
//     (LockPath), flocked while a move-shards runs; with etcd, the key
//     P/move, written only while the mover holds a lease-bound etcd mutex.
//     It is created when a move starts and deleted when it ends (finished,
//     or rolled back with Abort); a move stopped by an error keeps it. A
//     second process is refused while one runs; a killed process releases
//     the lock (etcd: within the lease TTL) and the state stays, so running
//     the same command again resumes. It names the range, the target and
//     the source hosts.
//   - Where a move stands is read from the map itself, never from the
//     recorded state: the range on its source hosts writable (copy), read-only
//     (hold), or on the target writable (switched). Any other placement
//     means the map was edited during the move and is refused.
//   - A map rewrite re-reads the map first, so an operator's unrelated edit
//     is kept, writes nothing unless the result validates with a writable
//     range open for new users, and is a compare-and-swap on the revision
//     it read (etcd's revision; the file's content hash, compared just
//     before the atomic replace: temp file, fsync, rename, fsync of the
//     directory): a change made meanwhile by anyone makes it EConflict.
//   - Every step is idempotent: copying makes the target an exact copy
//     chunk by chunk (deleting what the source lacks), map writes are
//     whole-file replacements, drops are DROP DATABASE IF EXISTS.
//   - Refusals and failed verifications are *model.Error (EInvalid or
//     EConflict); a refused move changes nothing.
//
// Where things are: move.go runs a move step by step (copy, hold, switch,
// drop, abort); home.go is where the map lives (Home) and the map file's
// implementation; lock.go is the move's state and reading the step from
// the map; plan.go checks a new move against the map and the hosts;
// mapfile.go rewrites the map by compare-and-swap; hosts.go holds the
// pools; copy.go copies and verifies shards chunk by chunk; tables.go is a
// shard table's shape and the SQL of one chunk (key ranges, checksums).
package reshard
