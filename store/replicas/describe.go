package replicas

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/pinstore/pinstore/cluster/fleet"
	"github.com/pinstore/pinstore/store/topology"
)

// HostReport is what a host's master and replicas say about replication,
// for the admin route and `pinstore shards`.
type HostReport struct {
	GTIDPosition string // the master's @@gtid_binlog_pos ("" when it did not answer)
	SemiSync     bool   // the master is in semi-synchronous mode now
	Replicas     []fleet.ReplicaInfo
}

// Describe probes h's master and each replica (Probe, within ctx) and
// reports them, with the tracker's lag where it measures it (t may be
// nil: a command with no tracker running). A replica that does not
// answer, or replicates from another server than h's master, is reported
// as such, never as replicating.
func (t *Tracker) Describe(ctx context.Context, h *topology.Host) HostReport {
	var rep HostReport
	if len(h.Replicas) == 0 {
		return rep
	}
	c, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	master, merr := Probe(c, h.DB)
	if merr == nil {
		rep.GTIDPosition, rep.SemiSync = master.Binlog.String(), master.SemiSyncMasterOn
	}
	rep.Replicas = make([]fleet.ReplicaInfo, len(h.Replicas))
	var wg sync.WaitGroup
	for i, r := range h.Replicas {
		wg.Go(func() {
			info := fleet.ReplicaInfo{Addr: r.Addr}
			defer func() { rep.Replicas[i] = info }()
			s, err := Probe(c, r.DB)
			if err != nil {
				info.Error = fmt.Sprintf("replica %s is not answering", r.Addr)
				return
			}
			info.OK, info.GTIDPosition, info.SemiSync = true, s.Applied.String(), s.SemiSyncSlaveOn
			if merr == nil {
				info.Behind = s.Applied.Behind(master.Binlog)
			}
			if t != nil {
				if lag, ok := t.Lag(h, r); ok {
					ms := lag.Milliseconds()
					info.LagMS = &ms
					info.ServesReads = h.ReplicaReads && lag <= t.cfg.LagBound
				}
			}
			if s.Replica == nil {
				info.Error = "not replicating: no master configured (CHANGE MASTER TO)"
				return
			}
			info.IOThread, info.SQLThread = s.Replica.IORunning, s.Replica.SQLRunning
			info.SecondsBehindMaster = s.Replica.SecondsBehd
			info.Replicating = s.Replica.Running()
			if why := s.Replica.Broken(); why != "" {
				info.Error = why
			}
			if from := "tcp(" + s.Replica.MasterAddr + ")"; from != h.Addr {
				info.Replicating = false
				info.Error = join(info.Error, fmt.Sprintf("replicates from %s, not from the host's master %s", s.Replica.MasterAddr, h.Addr))
			}
			if e := s.Errant(); len(e) > 0 {
				info.Error = join(info.Error, "errant transactions (written on the replica itself): "+e.String())
			}
		})
	}
	wg.Wait()
	return rep
}

func join(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}
