package reshard

import (
	"testing"
	"time"
)

// A backlog is small below catchUpSmall, or once it stops shrinking with
// passes short enough to hold writes for; a shrinking or slow backlog
// takes more passes.
func TestBacklogSmall(t *testing.T) {
	for _, c := range []struct {
		name      string
		pass      int
		n, prev   int64
		took      time.Duration
		wantSmall bool
	}{
		{"under the threshold", 3, catchUpSmall, 5000, 10 * time.Second, true},
		{"first pass, large", 1, 190_000, 0, time.Second, false},
		{"still shrinking", 3, 1226, 2744, time.Second, false},
		{"stalled, short passes", 4, 1172, 1226, 1800 * time.Millisecond, true},
		{"stalled, growing a little", 9, 1214, 1144, 1500 * time.Millisecond, true},
		{"stalled, passes too long to hold for", 9, 1214, 1144, stalledHold + time.Millisecond, false},
		{"growing fast after the check", 6, 6000, 1100, time.Second, true},
		{"shrinking by more than a tenth", 5, 1800, 2001, time.Second, false},
	} {
		if got := backlogSmall(c.pass, c.n, c.prev, c.took); got != c.wantSmall {
			t.Errorf("%s: backlogSmall(%d, %d, %d, %v) = %v, want %v", c.name, c.pass, c.n, c.prev, c.took, got, c.wantSmall)
		}
	}
}
