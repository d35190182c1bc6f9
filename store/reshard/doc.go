// Package reshard moves a range of shards from the host(s) the shard map
// places them on to another host of the map: `pinstore move-shards`. It
// works on the map file and on the MySQL hosts alone, with pools of its own
// (topology.Dial); it never imports package store, and servers take part
// only by following the map file (and, with Options.Confirm, by reporting
// the map they route by).
//
// The protocol. A move copies each shard database of the range, table by
// table in primary-key chunks, from its source host to the target host,
// while clients keep reading and writing the source, then runs a catch-up
// pass (only chunks whose sums differ are copied). It then holds writes by
// rewriting the map file with the range read_only (servers reloading the
// map answer writes to it with EMoving), waits the settle time so that
// every write routed on the old map has finished, copies what changed
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
//   - The lock file <map file>.move (LockPath; YAML, see moveState) records
//     the move in progress: created when a move starts, deleted when it
//     ends (finished, or rolled back with Abort); a move stopped by an error
//     keeps it. While a move-shards process runs it holds an exclusive
//     flock(2) on that file, so a second process is refused; a killed
//     process releases the lock and the file stays, so running the same
//     command again resumes. The file names the range, the target and the
//     source hosts.
//   - Where a move stands is read from the map file itself, never from the
//     lock file: the range on its source hosts writable (copy), read-only
//     (hold), or on the target writable (switched). Any other placement
//     means the map was edited during the move and is refused.
//   - A map rewrite is whole-file atomic (temp file, fsync, rename, fsync
//     of the directory): a server reading the file sees the old map or the
//     new one, never a mix. The rewrite re-reads the file first, so an
//     operator's unrelated edit is kept, and nothing is written unless the
//     result validates with a writable range open for new users.
//   - Every step is idempotent: copying makes the target an exact copy
//     chunk by chunk (deleting what the source lacks), map writes are
//     whole-file replacements, drops are DROP DATABASE IF EXISTS.
//   - Refusals and failed verifications are *model.Error (EInvalid or
//     EConflict); a refused move changes nothing.
//
// Where things are: move.go runs a move step by step (copy, hold, switch,
// drop, abort); lock.go is the lock file and reading the step from the map;
// plan.go checks a new move against the map and the hosts; mapfile.go
// reads, rewrites and atomically replaces the map file; hosts.go holds the
// pools; copy.go copies and verifies shards chunk by chunk; tables.go is a
// shard table's shape and the SQL of one chunk (key ranges, checksums).
package reshard
