// Package backup takes, verifies and restores backups of the shard map's
// hosts, with MariaDB's own tools: mariadb-backup for a hot physical copy,
// mariadb-binlog for the binary logs between backups (point-in-time
// restore) and mariadb-dump for a shard database loaded back into a live
// master.
//
// A backup is a directory: data/ (what mariadb-backup --backup wrote),
// binlog/ (the source's binary logs from the backup's position to the
// moment its checksums were taken), backup.log (the tool's output) and
// manifest.json (Manifest), which says everything a restore needs without
// the server that made it: the deployment (shard count, database prefix),
// the host and the ranges it held at a map version, the GTID position, the
// server's InnoDB layout, sizes, times, the tools' versions, and a
// checksum of every table of every shard database taken in one consistent
// snapshot at a known GTID.
//
// The promises:
//   - Nothing is stopped: a backup reads a caught-up replica of the host
//     when it has one, else its master, while writes go on; neither
//     replication nor shard moves are held.
//   - A backup is proven, not assumed: Verify restores it into a scratch
//     mariadbd, replays its binary logs to the checksums' position and
//     compares every table; the result is recorded in the manifest, and a
//     backup never verified says so.
//   - A backup that could restore wrong is refused, not written: the map
//     changed while it ran (a shard move, a failover), a mariadb-backup of
//     another version than the server's, a target that is not empty, a
//     server without a binary log.
//   - Bad input changes nothing: a manifest that does not parse, a backup of
//     another deployment, a GTID or time the binary logs do not cover, a
//     data directory that is not empty, a shard that has moved to another
//     host since the backup, are refused before anything is written.
//
// Each step of Backup, Verify and Restore (choosing the source, the copy,
// the checksums, a prepare, a replay, ...) runs as a child span of the
// span in the caller's context, when it records (tracing.Phase).
//
// The package reads the map only (MapReader); it never imports package
// store.
package backup
