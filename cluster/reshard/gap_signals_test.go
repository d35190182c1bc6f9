package reshard_test

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

// hostSignals polls a host's InnoDB signals while TestMoveWriteGapBench
// runs, to tell what a pause of the whole host waited for: the redo log
// (the checkpoint age near its maximum, log waits), the buffer pool (no
// free page: wait_free) or threads piling up.
type hostSignals struct {
	name string
	db   *sql.DB

	mu      sync.Mutex
	began   time.Time
	samples []signalSample
}

type signalSample struct {
	at                      time.Duration // since began
	running, ckptPct, dirty int64
	waitFree, logWaits      int64 // cumulative
}

func (s signalSample) String() string {
	return fmt.Sprintf("+%.1fs running %d, checkpoint age %d%% of max, dirty pages %d, wait_free %d, log waits %d",
		s.at.Seconds(), s.running, s.ckptPct, s.dirty, s.waitFree, s.logWaits)
}

// watch samples every 100 ms until ctx ends.
func (h *hostSignals) watch(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(100 * time.Millisecond):
		}
		rows, err := h.db.QueryContext(ctx, `SELECT VARIABLE_NAME, VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME IN
			('THREADS_RUNNING','INNODB_CHECKPOINT_AGE','INNODB_CHECKPOINT_MAX_AGE','INNODB_BUFFER_POOL_PAGES_DIRTY','INNODB_BUFFER_POOL_WAIT_FREE','INNODB_LOG_WAITS')`)
		if err != nil {
			continue
		}
		v := map[string]int64{}
		for rows.Next() {
			var k string
			var n int64
			if rows.Scan(&k, &n) == nil {
				v[k] = n
			}
		}
		rows.Close()
		s := signalSample{running: v["THREADS_RUNNING"], dirty: v["INNODB_BUFFER_POOL_PAGES_DIRTY"],
			waitFree: v["INNODB_BUFFER_POOL_WAIT_FREE"], logWaits: v["INNODB_LOG_WAITS"]}
		if m := v["INNODB_CHECKPOINT_MAX_AGE"]; m > 0 {
			s.ckptPct = 100 * v["INNODB_CHECKPOINT_AGE"] / m
		}
		h.mu.Lock()
		s.at = time.Since(h.began)
		h.samples = append(h.samples, s)
		h.mu.Unlock()
	}
}

// restart forgets the samples and counts time from now.
func (h *hostSignals) restart() {
	h.mu.Lock()
	h.began, h.samples = time.Now(), nil
	h.mu.Unlock()
}

// report logs the peaks since restart and the samples around from (a
// slow write's start, since restart).
func (h *hostSignals) report(t *testing.T, phase string, around []time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.samples) == 0 {
		return
	}
	var peak signalSample
	first, last := h.samples[0], h.samples[len(h.samples)-1]
	for _, s := range h.samples {
		peak.running = max(peak.running, s.running)
		peak.ckptPct = max(peak.ckptPct, s.ckptPct)
		peak.dirty = max(peak.dirty, s.dirty)
	}
	t.Logf("BENCH %s, host %s: peak threads running %d, peak checkpoint age %d%% of max, peak dirty pages %d; %d buffer pool waits for a free page, %d redo log waits",
		phase, h.name, peak.running, peak.ckptPct, peak.dirty, last.waitFree-first.waitFree, last.logWaits-first.logWaits)
	for _, at := range around {
		var lines []string
		for _, s := range h.samples {
			if s.at >= at-time.Second && s.at <= at+2*time.Second {
				lines = append(lines, s.String())
			}
		}
		t.Logf("host %s around +%.1fs:\n\t%s", h.name, at.Seconds(), strings.Join(lines, "\n\t"))
	}
}
