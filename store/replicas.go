package store

import (
	"context"
	"sync"

	"github.com/pinstore/pinstore/store/replicas"
	"github.com/pinstore/pinstore/store/topology"
)

// Replica reads (package replicas) reach the store through four hooks,
// each marked "replica hook" where it sits:
//
//   - the pool a read uses: reader (list pages, counts, feed pages, reads
//     by id that fill no cache) asks the tracker, which answers the
//     master unless a replica may serve the read;
//   - the object cache is filled from masters only: cachedObjects loads
//     its misses under replicas.OnMaster, so a fill never holds a copy
//     older than the one its lease's invalidation dropped;
//   - a commit's GTID: inTx runs a request's transaction through
//     replicas.Begin and notes its GTID for the response's token;
//   - what the admin route and `pinstore shards` show of each replica
//     (Hosts).

// startReplicas starts the tracker's polls under ctx.
func (s *shards) startReplicas(ctx context.Context, wg *sync.WaitGroup) {
	s.replicas = replicas.NewTracker(s.router, s.cfg.Replicas)
	wg.Go(func() { s.replicas.Run(ctx) })
}

// reader is the pool a read of sh uses (replica hook).
func (s *shards) reader(ctx context.Context, sh topology.Shard) replicas.Reader {
	return s.replicas.Pick(ctx, sh.Host)
}

// hostReader is reader for a host.
func (s *shards) hostReader(ctx context.Context, h *topology.Host) replicas.Reader {
	return s.replicas.Pick(ctx, h)
}

// Replicas is the tracker of the hosts' replicas: their lag, and whether
// each master answers (the failover monitor reads it).
func (s *Ops) Replicas() *replicas.Tracker { return s.replicas }
