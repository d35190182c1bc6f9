package topology

import (
	"testing"
	"time"
)

// TestWriteBufferOutlastsMoveHold: the default write buffer is the one
// derived from the default map poll and query timeout, and outlasts what a
// move at its default settle with a map file holds a write: the settle,
// then the server's poll of the switched map, with time left for the
// final pass.
func TestWriteBufferOutlastsMoveHold(t *testing.T) {
	if got := WriteBufferFor(DefaultMapPoll, DefaultQueryTimeout); got != DefaultWriteBuffer {
		t.Fatalf("WriteBufferFor(defaults) = %v, DefaultWriteBuffer %v", got, DefaultWriteBuffer)
	}
	for _, poll := range []time.Duration{100 * time.Millisecond, DefaultMapPoll, 10 * time.Second} {
		hold := MoveSettle(poll, DefaultQueryTimeout) + poll
		if buf := WriteBufferFor(poll, DefaultQueryTimeout); buf-hold < 4*time.Second {
			t.Errorf("poll %v: buffer %v leaves %v for the final pass after a hold of %v", poll, buf, buf-hold, hold)
		}
	}
}
