package lanes

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/pinstore/pinstore/internal/metrics"
)

// Stats counts the jobs one kind of queue ran (reads by id, edge checks)
// and the statements that ran them: jobs per statement is the batching
// factor. One Stats is shared by every host's queue of that kind.
type Stats struct {
	Jobs, Statements prometheus.Counter
}

// NewStats registers the two counters on reg (nil: a private registry):
// name+"s_total", the jobs, and name+"_statements_total". jobs says what
// a job is in the first one's help.
func NewStats(reg prometheus.Registerer, name, jobs string) *Stats {
	return &Stats{
		Jobs: metrics.Register(reg, prometheus.NewCounter(prometheus.CounterOpts{
			Name: name + "s_total",
			Help: jobs + ", alone or batched.",
		})),
		Statements: metrics.Register(reg, prometheus.NewCounter(prometheus.CounterOpts{
			Name: name + "_statements_total",
			Help: "Statements that ran them: jobs per statement is the batching factor.",
		})),
	}
}

// Count adds one statement that ran jobs jobs (Ops.Count); a nil Stats
// counts nothing.
func (st *Stats) Count(jobs int) {
	if st == nil {
		return
	}
	st.Statements.Inc()
	st.Jobs.Add(float64(jobs))
}
