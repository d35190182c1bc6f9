package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"
)

// worker is one connection's state: its random source and what its own
// writes created (so deletes have something to delete).
type worker struct {
	id      int
	rng     *rand.Rand
	liked   [][2]uint64 // (user, pin) pairs this worker liked
	created []uint64    // pins this worker created (addnode) and may delete
}

// opFunc performs one operation and returns the name it is reported under
// ("" = the scenario's name).
type opFunc func(ctx context.Context, w *worker) (string, error)

type scenario struct {
	note string
	api  opFunc
	base opFunc
	// limit, when set, is the cache's own limit: go-redis reading the very
	// object-cache entries the api side reads, with nothing around it.
	limit opFunc
}

type opStats struct {
	lat    []time.Duration
	errors int
}

// add appends o's latencies and errors to s.
func (s *opStats) add(o *opStats) {
	s.lat = append(s.lat, o.lat...)
	s.errors += o.errors
}

// addOps adds every operation's figures of src to dst.
func addOps(dst, src map[string]*opStats) {
	for k, v := range src {
		d := dst[k]
		if d == nil {
			d = &opStats{}
			dst[k] = d
		}
		d.add(v)
	}
}

type runResult struct {
	ran      bool
	elapsed  time.Duration
	ops      map[string]*opStats
	total    opStats
	firstErr string
	cpu      cpuTimes // CPU time spent during the measured window, by process
}

func (r runResult) opsPerSec() float64 {
	if r.elapsed <= 0 {
		return 0
	}
	return float64(len(r.total.lat)) / r.elapsed.Seconds()
}

// merge adds another measurement of the same operation (one round).
func (r *runResult) merge(o runResult) {
	if !o.ran {
		return
	}
	if r.ops == nil {
		r.ops = map[string]*opStats{}
	}
	r.ran = true
	r.elapsed += o.elapsed
	r.cpu = r.cpu.add(o.cpu)
	addOps(r.ops, o.ops)
	for _, st := range r.ops {
		slices.Sort(st.lat)
	}
	r.total.add(&o.total)
	slices.Sort(r.total.lat)
	if r.firstErr == "" {
		r.firstErr = o.firstErr
	}
}

func pct(lat []time.Duration, p float64) time.Duration {
	if len(lat) == 0 {
		return 0
	}
	i := int(p*float64(len(lat))+0.5) - 1
	if i < 0 {
		i = 0
	}
	if i >= len(lat) {
		i = len(lat) - 1
	}
	return lat[i]
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f", float64(d)/1e6) }

func (r runResult) summary() string {
	s := fmt.Sprintf("%.0f ops/s  p50 %s ms  p95 %s ms  p99 %s ms  errors %d", r.opsPerSec(),
		ms(pct(r.total.lat, .50)), ms(pct(r.total.lat, .95)), ms(pct(r.total.lat, .99)), r.total.errors)
	if r.firstErr != "" {
		s += "  (first error: " + r.firstErr + ")"
	}
	return s
}

// measure runs op on c.conns workers: c.warmup unmeasured, then c.duration
// measured. Only successful operations count as throughput; errors are
// counted separately.
func measure(ctx context.Context, c config, op opFunc) runResult {
	res := runResult{ran: true, ops: map[string]*opStats{}}
	if op == nil {
		return res
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	start := time.Now()
	measureFrom := start.Add(c.warmup)
	stopAt := measureFrom.Add(c.duration)
	cpuStart := make(chan cpuTimes, 1)
	go func() {
		time.Sleep(time.Until(measureFrom))
		cpuStart <- readCPU(c.pids)
	}()
	for i := 0; i < c.conns; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			w := &worker{id: i, rng: rand.New(rand.NewPCG(uint64(i)+1, uint64(time.Now().UnixNano())))}
			local := map[string]*opStats{}
			var firstErr string
			for ctx.Err() == nil {
				t0 := time.Now()
				if t0.After(stopAt) {
					break
				}
				name, err := op(ctx, w)
				d := time.Since(t0)
				if t0.Before(measureFrom) {
					continue
				}
				st := local[name]
				if st == nil {
					st = &opStats{}
					local[name] = st
				}
				if err != nil {
					st.errors++
					if firstErr == "" {
						firstErr = name + ": " + err.Error()
					}
					continue
				}
				st.lat = append(st.lat, d)
			}
			mu.Lock()
			addOps(res.ops, local)
			if res.firstErr == "" {
				res.firstErr = firstErr
			}
			mu.Unlock()
		}(i)
	}
	wg.Wait()
	res.cpu = readCPU(c.pids).sub(<-cpuStart)
	res.elapsed = c.duration
	if end := time.Since(measureFrom); end < c.duration {
		res.elapsed = end
	}
	for _, v := range res.ops {
		slices.Sort(v.lat)
		res.total.add(v)
	}
	slices.Sort(res.total.lat)
	return res
}

type scenarioResult struct {
	name  string
	note  string
	api   runResult
	base  runResult
	limit runResult // the Redis limit, when the scenario has one
	// object cache lookups on the server during the api side (its
	// warm-ups included), from /metrics
	cache cacheDelta
}

// loadAvg is the 1, 5 and 15 minute load averages (/proc/loadavg), "?"
// where there is none.
func loadAvg() string {
	raw, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(raw)); err == nil && len(f) >= 3 {
		return strings.Join(f[:3], " ")
	}
	return "?"
}

func hostInfo() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d CPUs (runtime.NumCPU)", runtime.NumCPU())
	if raw, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, l := range strings.Split(string(raw), "\n") {
			if strings.HasPrefix(l, "MemTotal:") {
				fmt.Fprintf(&b, ", %s", strings.Join(strings.Fields(l), " "))
			}
		}
	}
	return b.String()
}

func cell(r runResult) (string, string) {
	if !r.ran {
		return "–", "–"
	}
	return fmt.Sprintf("%.0f", r.opsPerSec()), fmt.Sprintf("%s / %s / %s", ms(pct(r.total.lat, .5)), ms(pct(r.total.lat, .95)), ms(pct(r.total.lat, .99)))
}

// cpuCell is "a / b / c / d = total" in µs per op, and the total.
func cpuCell(r runResult) (string, float64) {
	n := len(r.total.lat)
	if !r.ran || n == 0 {
		return "–", 0
	}
	var parts []string
	for _, p := range cpuProcs {
		parts = append(parts, fmt.Sprintf("%.0f", float64(r.cpu[p].Microseconds())/float64(n)))
	}
	t := float64(r.cpu.total().Microseconds()) / float64(n)
	return strings.Join(parts, " / ") + fmt.Sprintf(" = **%.0f**", t), t
}

func renderMarkdown(c config, results []scenarioResult) string {
	var b strings.Builder
	fmt.Fprintf(&b, "\nRun %s: %s; -conns %d, -duration %s (after %s warm-up), -shards %d, -prefix %s, mode %s, -client %s, -rounds %d (api and baseline alternating); load average %s at the start, %s at the end.\n\n",
		time.Now().UTC().Format(time.RFC3339), hostInfo(), c.conns, c.duration, c.warmup, c.shards, c.prefix, c.mode, c.client, c.rounds, c.loadStart, loadAvg())
	b.WriteString("| scenario | api ops/s | api p50 / p95 / p99 ms | baseline ops/s | baseline p50 / p95 / p99 ms | api ÷ baseline | errors api/base | redis limit ops/s | api ÷ redis |\n")
	b.WriteString("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	ratioOf := func(a, b runResult) string {
		if a.ran && b.ran && b.opsPerSec() > 0 {
			return fmt.Sprintf("%.2f", a.opsPerSec()/b.opsPerSec())
		}
		return "–"
	}
	for _, r := range results {
		ao, al := cell(r.api)
		bo, bl := cell(r.base)
		lo, _ := cell(r.limit)
		if r.limit.total.errors > 0 {
			lo += fmt.Sprintf(" (%d errors)", r.limit.total.errors)
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %d/%d | %s | %s |\n", r.name, ao, al, bo, bl, ratioOf(r.api, r.base), r.api.total.errors, r.base.total.errors, lo, ratioOf(r.api, r.limit))
	}
	var hits strings.Builder
	for _, r := range results {
		if r.cache.ok {
			fmt.Fprintf(&hits, "| %s | %s |\n", r.name, r.cache)
		}
	}
	if hits.Len() > 0 {
		b.WriteString("\nObject cache hit ratio on the server during the api side (hits ÷ lookups, from /metrics, warm-ups included):\n\n| scenario | hits |\n| --- | ---: |\n")
		b.WriteString(hits.String())
	}
	var counted []string
	for _, p := range cpuProcs[1:] {
		if _, ok := c.pids[p]; ok {
			counted = append(counted, p+": the listener")
		} else {
			counted = append(counted, p+": every process so named")
		}
	}
	fmt.Fprintf(&b, "\nCPU time per completed operation, µs, by process (load = the load generator: HTTP client, or the driver in the baseline; %s), and baseline ÷ api of the total:\n\n", strings.Join(counted, ", "))
	b.WriteString("| scenario | api: " + strings.Join(cpuProcs, " / ") + " = total | baseline: " + strings.Join(cpuProcs, " / ") + " = total | baseline ÷ api | redis limit: " + strings.Join(cpuProcs, " / ") + " = total |\n| --- | ---: | ---: | ---: | ---: |\n")
	for _, r := range results {
		a, at := cpuCell(r.api)
		bs, bt := cpuCell(r.base)
		ls, _ := cpuCell(r.limit)
		ratio := "–"
		if at > 0 && bt > 0 {
			ratio = fmt.Sprintf("%.2f", bt/at)
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", r.name, a, bs, ratio, ls)
	}
	for _, r := range results {
		if len(r.api.ops) <= 1 && len(r.base.ops) <= 1 {
			continue
		}
		fmt.Fprintf(&b, "\n%s by operation (share of completed ops; p50 / p99 ms):\n\n", r.name)
		b.WriteString("| op | api share | api p50 / p99 | baseline share | baseline p50 / p99 |\n| --- | ---: | ---: | ---: | ---: |\n")
		names := map[string]bool{}
		for k := range r.api.ops {
			names[k] = true
		}
		for k := range r.base.ops {
			names[k] = true
		}
		var keys []string
		for k := range names {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		one := func(rr runResult, k string) (string, string) {
			st := rr.ops[k]
			if st == nil || len(rr.total.lat) == 0 {
				return "–", "–"
			}
			return fmt.Sprintf("%.2f%%", 100*float64(len(st.lat))/float64(len(rr.total.lat))), ms(pct(st.lat, .5)) + " / " + ms(pct(st.lat, .99))
		}
		for _, k := range keys {
			as, al := one(r.api, k)
			bs, bl := one(r.base, k)
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", k, as, al, bs, bl)
		}
	}
	var notes []string
	for _, r := range results {
		if r.api.firstErr != "" {
			notes = append(notes, fmt.Sprintf("- %s api first error: %s", r.name, r.api.firstErr))
		}
		if r.base.firstErr != "" {
			notes = append(notes, fmt.Sprintf("- %s baseline first error: %s", r.name, r.base.firstErr))
		}
	}
	if len(notes) > 0 {
		b.WriteString("\nErrors:\n\n" + strings.Join(notes, "\n") + "\n")
	}
	return b.String()
}
