package lanes

import "time"

// DefaultLanes is the statements out to a host at once when Tuning.Lanes
// is not set.
const DefaultLanes = 2

// Tuning is what a server sets of every host's queues of one kind (reads
// by id, edge checks): the Config of pointread and edgeread alike, so the
// two kinds take one setting (PINSTORE_POINT_READ_LANES) the same way.
type Tuning struct {
	Lanes   int           // statements out to a host at once; default DefaultLanes
	Timeout time.Duration // deadline of a batch statement, which serves many callers; default 5s
	Stats   *Stats        // counters shared by every host; nil counts nothing
}

// NewTuned returns a host's queue of one kind: t's lanes and deadline,
// statements of at most maxBatch jobs, each statement counted on t.Stats.
func NewTuned[J any](t Tuning, maxBatch int, ops Ops[J]) *Queue[J] {
	if t.Lanes <= 0 {
		t.Lanes = DefaultLanes
	}
	ops.Count = t.Stats.Count
	return New(Config{Lanes: t.Lanes, Timeout: t.Timeout, MaxBatch: maxBatch}, ops)
}
