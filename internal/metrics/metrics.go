// Package metrics holds what pinstore's packages share for Prometheus.
package metrics

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// Register registers col on reg (nil: nowhere) and returns the collector
// to use: col, or the one reg already holds under the same name and shape
// (a second store or cache on one registry shares the first's). A
// conflicting collector of another shape leaves col unregistered rather
// than fail; the caller works without that metric.
func Register[C prometheus.Collector](reg prometheus.Registerer, col C) C {
	if reg == nil {
		return col
	}
	if err := reg.Register(col); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing
			}
		}
	}
	return col
}
