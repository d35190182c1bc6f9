package api

import (
	"math"
	"testing"
)

// TestQuantile: the p99 the fleet route shows interpolates within the
// bucket the rank falls in, as Prometheus' histogram_quantile does.
func TestQuantile(t *testing.T) {
	for _, c := range []struct {
		name    string
		buckets map[float64]uint64
		count   uint64
		q, want float64
	}{
		{"no samples", map[float64]uint64{0.1: 0, math.Inf(1): 0}, 0, 0.99, 0},
		{"all in the first bucket", map[float64]uint64{0.1: 100, 1: 100, math.Inf(1): 100}, 100, 0.99, 0.099},
		{"within the second bucket", map[float64]uint64{0.1: 50, 1: 100, math.Inf(1): 100}, 100, 0.99, 0.1 + 0.9*49/50},
		{"past the last bound", map[float64]uint64{0.1: 0, 1: 0, math.Inf(1): 10}, 10, 0.99, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := quantile(c.q, c.buckets, c.count); math.Abs(got-c.want) > 1e-9 {
				t.Fatalf("quantile = %v, want %v", got, c.want)
			}
		})
	}
}
