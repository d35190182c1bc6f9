// Package jepsen proves, Jepsen-style, what pinstore promises under
// network partitions: no acknowledged write is lost and no ID is given to
// two objects. Its test (TestPartition) runs the real binary and MariaDB
// servers each in a network namespace of its own (package netlab), cuts
// links between them while writers keep a ledger of every acknowledged
// write, and checks the ledger against what reads back once the network
// is healed. The package holds tests only; see docs/partitions.md.
package jepsen
