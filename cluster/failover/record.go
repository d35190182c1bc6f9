package failover

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/pinstore/pinstore/cluster/etcdtopo"
	"github.com/pinstore/pinstore/cluster/fleet"
	"github.com/pinstore/pinstore/internal/atomicfile"
	"github.com/pinstore/pinstore/internal/tracing"
)

// Where the record of the failover in progress, or the last one, lives:
// beside the map. It is JSON of fleet.FailoverStatus.
const (
	// RecordKey is its etcd key under the topology's prefix
	// (etcdtopo.Client.Key).
	RecordKey = "failover/last"
	// recordTimeout bounds how long a failover waits for its record to be
	// written.
	recordTimeout = 2 * time.Second
)

// Phases of a failover's record.
const (
	PhaseRunning = "running"
	PhaseDone    = "done"
	PhaseFailed  = "failed"
)

// RecordPath is the file of the record beside the map file mapFile.
func RecordPath(mapFile string) string { return mapFile + ".failover" }

// Recorder keeps the record of the failover in progress, or the last one,
// where the map lives (EtcdRecorder, FileRecorder).
type Recorder interface {
	SaveFailover(ctx context.Context, record []byte) error
}

// EtcdRecorder keeps the record at RecordKey in the topology.
func EtcdRecorder(c *etcdtopo.Client) Recorder { return etcdRecorder{c} }

type etcdRecorder struct{ c *etcdtopo.Client }

func (r etcdRecorder) SaveFailover(ctx context.Context, record []byte) error {
	_, err := r.c.Etcd().Put(ctx, r.c.Key(RecordKey), string(record))
	return err
}

// FileRecorder keeps the record in RecordPath(mapFile), replaced
// atomically.
func FileRecorder(mapFile string) Recorder { return fileRecorder(RecordPath(mapFile)) }

type fileRecorder string

func (r fileRecorder) SaveFailover(_ context.Context, record []byte) error {
	return atomicfile.Write(string(r), record)
}

// Status decodes a record as saved; a running failover's duration is the
// time since it started, as of now.
func Status(record []byte, now time.Time) (*fleet.FailoverStatus, error) {
	var st fleet.FailoverStatus
	if err := json.Unmarshal(record, &st); err != nil {
		return nil, fmt.Errorf("failover.Status: the record does not decode: %w", err)
	}
	if st.Phase == PhaseRunning {
		st.DurationSeconds = max(now.Sub(st.Started).Seconds(), 0)
	}
	return &st, nil
}

// journal is the record of one failover as it runs: its steps, timed,
// and the record saved through opt.Record when the failover starts and
// when it ends.
//
// Recording is best-effort: the failover never fails because its record
// could not be written, and waits at most recordTimeout for each write
// (a write still running then finishes in the background, and an older
// write never lands over a newer one); the failure is said on Progress
// and in Report.RecordError.
//
// With tracing on, each step is also a child span ("failover promote") of
// the command's span in ctx.
type journal struct {
	rec  Recorder
	say  func(format string, args ...any)
	st   fleet.FailoverStatus
	step int // index of the step running in st.Steps; -1: none
	ctx  context.Context
	span trace.Span // the running step's span; nil when not traced

	mu      sync.Mutex // held by a write in progress
	seq     int        // writes started
	written int        // the newest write that ran
	failed  string     // why the last write failed
}

func newJournal(ctx context.Context, opt Options, start time.Time, say func(string, ...any)) *journal {
	by := opt.By
	if by == "" {
		by = "pinstore failover"
	}
	return &journal{rec: opt.Record, say: say, step: -1, ctx: ctx,
		st: fleet.FailoverStatus{Host: opt.Host, By: by, Phase: PhaseRunning, Started: start.UTC(), Steps: []fleet.FailoverStep{}}}
}

// begin ends the step running, if any, and starts the step name.
func (j *journal) begin(name string) {
	now := time.Now()
	j.end(now, nil)
	j.st.Steps = append(j.st.Steps, fleet.FailoverStep{Name: name, Started: now.UTC()})
	j.step = len(j.st.Steps) - 1
	_, j.span = tracing.Child(j.ctx, "failover "+name, trace.SpanKindInternal, attribute.String("pinstore.host", j.st.Host))
}

// end ends the step running with err.
func (j *journal) end(now time.Time, err error) {
	if j.step < 0 {
		return
	}
	s := &j.st.Steps[j.step]
	s.Seconds = now.Sub(s.Started).Seconds()
	if err != nil {
		s.Error = err.Error()
	}
	j.step = -1
	if j.span != nil {
		tracing.Fail(j.span, err)
		j.span.End(trace.WithTimestamp(now))
		j.span = nil
	}
}

// started records the failover as running, from oldMaster.
func (j *journal) started(ctx context.Context, oldMaster string) {
	j.st.OldMaster = oldMaster
	j.save(ctx)
}

// finish records the failover's end from its report and error, and
// returns why the record could not be written, if it could not.
func (j *journal) finish(ctx context.Context, rep Report, err error) string {
	now := time.Now()
	j.end(now, err)
	st := &j.st
	st.OldMaster, st.NewMaster = rep.OldMaster, rep.NewMaster
	st.Phase, st.Finished = PhaseDone, &now
	st.DurationSeconds = now.Sub(st.Started).Seconds()
	st.WritesHeldSeconds = rep.Held.Seconds()
	st.OldMasterAnswered, st.PromotedAt = rep.Answered, rep.Promoted
	if rep.Lost >= 0 && rep.Promoted != "" {
		st.Lost = &rep.Lost
	}
	st.LostNote, st.Unacknowledged = rep.LostNote, rep.Unacknowledged
	st.Repointed, st.NotRepointed, st.MapVersion = rep.Repointed, rep.Failed, rep.MapVersion
	if err != nil {
		st.Phase, st.Error = PhaseFailed, err.Error()
	}
	j.save(ctx)
	return j.failed
}

// save writes the record as it is now, waiting at most recordTimeout.
func (j *journal) save(ctx context.Context) {
	if j.rec == nil {
		return
	}
	data, err := json.Marshal(j.st)
	if err != nil {
		return
	}
	j.seq++
	seq := j.seq
	done := make(chan error, 1)
	go func() {
		c, cancel := context.WithTimeout(context.WithoutCancel(ctx), recordTimeout)
		defer cancel()
		j.mu.Lock()
		defer j.mu.Unlock()
		if seq < j.written {
			done <- nil // a newer record is written already
			return
		}
		j.written = seq
		done <- j.rec.SaveFailover(c, data)
	}()
	select {
	case err = <-done:
	case <-time.After(recordTimeout):
		err = fmt.Errorf("no answer within %v", recordTimeout)
	}
	j.failed = ""
	if err != nil {
		j.failed = fmt.Sprintf("recording the failover (%s) failed: %v; the failover goes on", j.st.Phase, err)
		j.say("%s", j.failed)
	}
}
