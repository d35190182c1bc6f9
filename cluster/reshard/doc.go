// Package reshard moves a range of shards from the host(s) the shard map
// places them on to another host of the map: `pinstore move-shards`. It
// works on the map's Home (the map file, or etcd: package etcdtopo) and on
// the MySQL hosts alone, with pools of its own (topology.Dial); it never
// imports package store, and servers take part only by following the map
// (and, with Options.Confirm, by reporting the map they route by and that
// writes routed by older maps have ended: servers on etcd do).
//
// The protocol. A move first creates, in each shard database of the range
// on its source host, a change log (the table reshard_log) and triggers on
// every other table that record there the primary key of each row that
// changes, in the same transaction as the change. Then it copies each
// shard, table by table in primary-key chunks, to the target host while
// clients keep reading and writing the source, and creates the same log
// and triggers on the target's copy. Catch-up passes, still live, apply
// the source's log to the target: exactly the logged keys are copied (the
// source's row replaces the target's, or the target's is deleted when the
// source has none), and the applied entries are deleted; passes repeat
// until one has little left to apply, and a check counts every table's
// rows on both hosts, the source's in one snapshot with its log (each log
// entry records whether its change inserted or deleted a row, so from then
// on every applied entry carries both counts forward without reading a
// table: rowCounts). Then it holds writes by rewriting the map with the range
// read_only (servers keep writes to it waiting, topology.Router.EnterShard,
// and refuse them with EMoving only if the hold outlasts their buffer),
// waits until every write routed on the old map has finished (Confirm, or
// the settle time), applies the last entries of the log, verifies (the rows
// of every key applied while held are the same on both hosts; every table
// has as many rows on both, by the counts carried forward from the check;
// the source's log is still empty; any difference rolls the map back), and
// rewrites the map with the range on the target, writable. The hold grows
// with the writes made since the last catch-up pass, not with the shards'
// size or their number of tables: it reads the change logs and the rows
// of the keys they name, and opens only the tables that changed. (A move
// carried on at its hold, with no check in that run, counts every table
// while held instead.)
//
// The move then stays open, and reversible: the target's triggers log
// every client write it takes from the switch on, so Revert applies them
// to the old copies (catch-up passes, then the same hold and switch the
// other way) and loses nothing; Keep applies them as they come for a
// while after the switch. Finish ends the move: once no server can route
// to the old copies, it checks their logs are empty (a write routed on an
// old map that reached an old copy after the final pass is in its log:
// then nothing is dropped and the move stays open, EConflict), drops the
// old copies, and removes the target's log and triggers.
//
// Why a change log written by triggers. The binary log would need every
// host to run with it on and the move to read and decode row events; row
// versions (an updated-at column) would miss deletes and need a schema
// change of every table. A log table filled by triggers needs nothing of
// the hosts or of the migrations: the move creates it when it starts and
// removes it when it ends, it holds keys only (the rows are read from the
// source when applied, so many changes of one row cost one copy), a change
// and its log entry commit or roll back together, and it works the same way
// in both directions. Its costs: one extra insert per changed row while a
// move is open, and a trigger statement per table and event when it starts
// and ends, which MariaDB cannot run at once on one server without
// stray files (hosts.ddlLock), so they run one at a time per host.
//
// Exactness. The triggers of a table exist before the copy reads it
// (CREATE TRIGGER waits for the transactions that use the table), so every
// change is in the copy or in the log, or both. An entry is deleted only
// after its key was copied from a read made after the entry committed,
// and only by its own sequence number, so an entry that commits late with
// a lower number is applied by a later pass. The move's own writes set a
// session variable the triggers check, so they are never logged. The log
// itself is never copied, counted or verified. Tables added by a later
// migration are listed the way the copy lists them (listTables); a move
// starts only on the newest schema (plan), and a table that a migration
// adds during the move (it would have no trigger) stops the pass while
// writes are held, which then gives writes back to the source.
//
// Invariants:
//   - IDs never change: a shard keeps its number and database name. The
//     AUTO_INCREMENT counters of the side that takes over are raised past
//     the other's at the check (by autoIncMargin), and again while writes
//     are held for the tables that changed since, so no id the other side
//     handed out is handed out again (unless more than autoIncMargin ids
//     were taken by inserts that rolled back between the check and the
//     hold, in a table with no committed insert meanwhile). No id of a
//     committed row is ever reused.
//   - The Home's lock of moves records the move in progress (YAML, see
//     moveState): with a map file, the lock file <map file>.move
//     (LockPath), flocked while a move-shards runs; with etcd, the key
//     P/move, written only while the mover holds a lease-bound etcd mutex.
//     It is created when a move starts and deleted when it ends (finished,
//     reverted, or rolled back with Abort); a move stopped by an error, or
//     switched and not finished, keeps it. A second process is refused
//     while one runs, and a second move while one is open; a killed process
//     releases the lock (etcd: within the lease TTL) and the state stays,
//     so running the same command again carries the move on.
//   - Where a move stands is read from the map itself: the range on its
//     source hosts writable (copy) or read-only (hold), or on the target
//     writable (switched) or read-only (a revert's hold). The recorded
//     step adds only what the map cannot say: that a revert, or the end of
//     the move, has begun. Any other placement means the map was edited
//     during the move and is refused. The map names one host per shard at
//     every step, so no shard is ever claimed by two hosts.
//   - A map rewrite re-reads the map first, so an operator's unrelated edit
//     is kept, writes nothing unless the result validates with a writable
//     range open for new users, and is a compare-and-swap on the revision
//     it read (etcd's revision; the file's content hash, compared just
//     before the atomic replace: temp file, fsync, rename, fsync of the
//     directory): a change made meanwhile by anyone makes it EConflict.
//   - Every step is idempotent: copying makes the target an exact copy
//     chunk by chunk (deleting what the source lacks), applying a log entry
//     twice copies the same key twice, map writes are whole-map
//     replacements, trigger and database statements are IF [NOT] EXISTS.
//   - Refusals and failed verifications are *model.Error (EInvalid or
//     EConflict); a refused move changes nothing.
//
// Where things are: move.go runs a move step by step (copy, catch-up,
// cutover, keep, finish, abort); revert.go moves a switched range back;
// changelog.go is the change log, its triggers, applying it and verifying
// what it applied; home.go is where the map lives (Home) and the map
// file's implementation; lock.go is the move's state and reading the step
// from the map; plan.go checks a new move against the map and the hosts;
// mapfile.go rewrites the map by compare-and-swap; hosts.go holds the
// pools; copy.go copies shards chunk by chunk and runs the passes over
// every shard; tables.go is a shard table's shape and the SQL of one chunk
// (key ranges, checksums).
package reshard
