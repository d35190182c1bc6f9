package reshard

import (
	"context"
	"fmt"
	"time"

	"github.com/pinstore/pinstore/internal/tracing"
)

// Phases is the time of each phase of a cut-over (Report.Phases); Held
// is, up to the map reads between them, Settle+Final+Arrival+Switch.
type Phases struct {
	Hold    time.Duration // writing the read-only map
	Settle  time.Duration // until every server routes by it and older writes ended
	Final   time.Duration // final pass: last changes applied and verified
	Arrival time.Duration // marking the arrival on the taking side
	Switch  time.Duration // writing the switched map (writes flow again from its load)
}

// String is the phases as a progress line shows them.
func (p Phases) String() string {
	return fmt.Sprintf("hold %v, settle %v, final pass %v, arrival %v, switch %v",
		round(p.Hold), round(p.Settle), round(p.Final), round(p.Arrival), round(p.Switch))
}

// Report is what a move did and how long it took.
type Report struct {
	Shards     int           // shards in the range
	From       []string      // "first-last@host" of the range before the move
	To         string        // target host
	Resumed    string        // where a resumed move started (the map's step); "" for a new move
	Rows       int64         // rows written to the target by the first pass
	Passes     int           // catch-up passes while writes flowed
	CatchUp    int64         // change log entries applied by them
	FinalRows  int64         // change log entries applied while writes were held
	Verified   int64         // keys compared row by row while writes were held
	Copy       time.Duration // first pass and catch-up passes, writes still flowing
	Final      time.Duration // final pass and verification, writes held
	Held       time.Duration // from the read-only map to the switched map
	Phases     Phases        // the cut-over's time, phase by phase
	Kept       int64         // target changes applied to the old copies after the switch (Keep)
	Total      time.Duration
	Switched   bool   // the range is on its new host (or, after a revert, back on its source)
	Dropped    int    // databases dropped at the end of the move
	MapVersion string // version of the map left in force
	Aborted    bool   // the move was rolled back before its switch (Abort)
	Reverted   bool   // the range was moved back to its source hosts (Revert)
	Finished   bool   // the move is over: no state, change log or trigger left
}

// phase runs one phase of a move as a child span of the command's span
// ("move-shards copy and catch-up"), when the command is traced.
func phase(ctx context.Context, name string, fn func(context.Context) error) error {
	return tracing.Phase(ctx, "move-shards "+name, fn)
}

func round(d time.Duration) time.Duration { return d.Round(time.Millisecond) }
