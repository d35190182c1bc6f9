package metrics

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

func TestRegisterSharesTheFirstCollector(t *testing.T) {
	reg := prometheus.NewRegistry()
	opts := prometheus.CounterOpts{Name: "pinstore_test_total", Help: "test"}
	first := Register(reg, prometheus.NewCounter(opts))
	second := Register(reg, prometheus.NewCounter(opts))
	second.Inc()
	if first != second {
		t.Fatal("a second registration did not return the first counter")
	}
	if got := Register[prometheus.Counter](nil, first); got != first {
		t.Fatal("a nil registerer did not return the collector itself")
	}
	// Another shape under the same name: not registered, still usable.
	other := Register(reg, prometheus.NewGauge(prometheus.GaugeOpts{Name: "pinstore_test_total", Help: "test"}))
	other.Set(1)
}
