// Package netlab gives tests a small network of their own to break: one
// Linux network namespace per node (`ip netns`), each with a veth on a
// bridge in the root namespace and an address on a private /24 the lab
// chooses, processes started inside a node (`ip netns exec`), and links
// between chosen pairs of nodes cut and healed while those processes run,
// as Jepsen's partitions do.
//
// Invariants:
//
//   - Traffic goes only to addresses the lab's namespaces own: the /24 is
//     one no interface of the machine has, and the root namespace (where
//     the test itself runs) keeps a link to every node that no cut
//     touches.
//   - A cut drops packets silently in both directions (an nftables rule
//     on the bridge's forward path, in the lab's own table), as a failed
//     network does: connections hang and time out, none is refused.
//     Heal removes the rules at once, in one netlink transaction.
//   - Everything a lab creates is named after the test binary's process
//     id (namespaces nl<pid><k>-NAME, links nl<pid><k>…, nftables table
//     netlab_nl<pid><k>) and removed by tb.Cleanup, also after a failure;
//     a lab first removes what runs whose process is gone left behind.
//   - Processes started in a node die with the test binary (Pdeathsig,
//     through testenv.StartPinned), and are killed when the test ends.
//   - Without the capability (root, the `ip` command of iproute2,
//     network namespaces, nftables in the kernel) a test is skipped,
//     saying why; with CI=true it fails instead.
//
// The etcd a lab starts in a node runs in a helper process: the test
// binary itself, started again inside the node. A package using
// [Lab.StartEtcd] calls [Helper] first thing in its TestMain.
package netlab
