package failover

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestRecordRoundTrip: a failover's record, written through the file
// recorder beside a map file when it starts and when it ends, decodes to
// what happened: running with the old master and the time so far, then
// done (or failed, the error on the step it failed in) with the report's
// figures and every step timed.
func TestRecordRoundTrip(t *testing.T) {
	mapFile := filepath.Join(t.TempDir(), "shards.yaml")
	read := func() string {
		t.Helper()
		b, err := os.ReadFile(RecordPath(mapFile))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	ctx := context.Background()
	for _, c := range []struct {
		name  string
		err   error
		phase string
	}{
		{"done", nil, PhaseDone},
		{"failed", os.ErrDeadlineExceeded, PhaseFailed},
	} {
		t.Run(c.name, func(t *testing.T) {
			start := time.Now().Add(-time.Second)
			j := newJournal(context.Background(), Options{Host: "a", Record: FileRecorder(mapFile)}, start, t.Logf)
			j.begin("lock")
			j.begin("read map")
			j.started(ctx, "10.0.0.1:3306")
			st, err := Status([]byte(read()), time.Now())
			if err != nil {
				t.Fatal(err)
			}
			if st.Phase != PhaseRunning || st.Host != "a" || st.By != "pinstore failover" || st.OldMaster != "10.0.0.1:3306" || st.Finished != nil || st.DurationSeconds < 1 {
				t.Fatalf("running record: %+v", st)
			}
			j.begin("promote")
			rep := Report{Host: "a", OldMaster: "10.0.0.1:3306", NewMaster: "10.0.0.2:3306", Answered: true, Promoted: "0-1-42",
				Lost: 0, LostNote: "applied all", Repointed: []string{"10.0.0.3:3306"}, Held: 300 * time.Millisecond, MapVersion: "abc"}
			if why := j.finish(ctx, rep, c.err); why != "" {
				t.Fatalf("finish: %s", why)
			}
			st, err = Status([]byte(read()), time.Now().Add(time.Hour))
			if err != nil {
				t.Fatal(err)
			}
			if st.Phase != c.phase || st.NewMaster != "10.0.0.2:3306" || st.PromotedAt != "0-1-42" || st.Lost == nil || *st.Lost != 0 ||
				st.Finished == nil || st.DurationSeconds < 1 || st.DurationSeconds > 60 || st.WritesHeldSeconds != 0.3 || !st.OldMasterAnswered || st.MapVersion != "abc" {
				t.Fatalf("final record: %+v", st)
			}
			var names []string
			for _, s := range st.Steps {
				names = append(names, s.Name)
				if s.Seconds < 0 || s.Started.Before(start.UTC().Truncate(time.Second)) {
					t.Fatalf("step %+v", s)
				}
			}
			if got := strings.Join(names, ","); got != "lock,read map,promote" {
				t.Fatalf("steps %s", got)
			}
			last := st.Steps[len(st.Steps)-1]
			if (c.err == nil) != (last.Error == "" && st.Error == "") {
				t.Fatalf("error %q on the record, %q on its last step, want them for %v", st.Error, last.Error, c.err)
			}
		})
	}
}

// TestRecordFailureDoesNotFail: a record that cannot be written (its
// directory is gone) is reported, and the failover's end is recorded as
// if nothing happened, within the record's timeout.
func TestRecordFailureDoesNotFail(t *testing.T) {
	mapFile := filepath.Join(t.TempDir(), "gone", "shards.yaml")
	var said []string
	j := newJournal(context.Background(), Options{Host: "a", Record: FileRecorder(mapFile)}, time.Now(), func(f string, a ...any) { said = append(said, f) })
	t0 := time.Now()
	j.started(context.Background(), "m:3306")
	why := j.finish(context.Background(), Report{Host: "a", Lost: -1}, nil)
	if took := time.Since(t0); took > 2*recordTimeout {
		t.Fatalf("recording took %v", took)
	}
	if !strings.Contains(why, "recording the failover (done) failed") || len(said) != 2 {
		t.Fatalf("why %q, said %q", why, said)
	}
	if _, err := Status([]byte("{"), time.Now()); err == nil {
		t.Fatal("a broken record decoded")
	}
}
