package shardsql

import (
	"testing"
	"time"
)

// BenchmarkMeterDone: what the metering costs a round trip, its clock
// reads included (the round trip itself takes tens of microseconds).
//
//	go test -run '^$' -bench MeterDone ./store/shardsql
func BenchmarkMeterDone(b *testing.B) {
	m := &Meter{}
	NewRoundTrips(nil).Name(m, "h", RoleMaster)
	b.ReportAllocs()
	for b.Loop() {
		m.done(time.Now(), nil)
	}
}
