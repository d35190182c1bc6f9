// Package etcdtopo keeps pinstore's topology in etcd, for fleets of
// several servers: the shard map under one key, which every server
// watches; each running server's registration under a lease of its own;
// and the state and lock of a shard move. It is the etcd side of
// PINSTORE_TOPOLOGY=etcd://host:2379,host:2379/prefix; the map file stays
// the default, and one machine needs no etcd.
//
// Key layout under the prefix P (default /pinstore):
//
//	P/map            the shard map, YAML in canonical form (shardmap.Map.Marshal)
//	P/servers/<id>   one per running server: JSON Registration, under the server's lease
//	P/move           the shard move in progress (its state, written by move-shards)
//	P/locks/move/…   the lock a running move-shards holds (a lease-bound etcd mutex);
//	                 pinstore failover holds it too
//	P/failover/leader/…  the election of the server that runs automatic failover (package failover)
//
// Invariants:
//   - Every change of a key here is a compare-and-swap on the revision
//     the writer read (CAS): of two writers that read the same revision,
//     one wins and the other gets EConflict saying what changed. Nothing
//     is written that shardmap would not validate.
//   - A server routes only by a map that validated: a map in etcd that
//     does not (put there by hand) is logged and reported by Health, and
//     the map in force stays. Shard count and database prefix never change
//     under a running server.
//   - A registration lives as long as its server's lease: a server that
//     dies or loses etcd for longer than the lease TTL disappears from
//     Servers, and one that stops cleanly revokes its lease at once.
//   - etcd unreachable: servers keep routing by the map they have and say
//     so (Health), writes to etcd fail with EUnavailable, and the watch and
//     the lease resume by themselves when etcd is back.
//
// The pieces are meant to be reused: CAS for any key, Registrations for
// anything that judges servers (a failover leader), leases for anything
// that must vanish with its owner.
package etcdtopo
