package main

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// summary is what the run prints.
type summary struct {
	cfg            config
	elapsed        time.Duration
	st             *stats
	unknownCreates map[string]int
	resolved       map[string]int // creates with an unknown outcome, by what their retry found
	kills          int
	flaps          int
	killErrors     []string
	repair         string
	repairDry      string
	backlogWait    string // how long the feed fan-out took to drain before the checks
	heal           heal   // how long until no pair or feed row was left to repair
	// reads checked against the acknowledged version (fresh.go): stale ones
	// within staleBound of a fault, the longest such window, and the others
	freshChecked int64
	staleWithin  int
	staleLongest time.Duration
	staleBad     []string
	res          *results
	objects      map[string]int
	pairs        map[string]int
	verifyTime   time.Duration
}

func (s *summary) print(w io.Writer) {
	st := s.st
	att, ack := sum(st.attempted), sum(st.acked)
	fmt.Fprintf(w, "\n=== chaos summary ===\n")
	fmt.Fprintf(w, "load: %s at %d connections; kills %d (every %s), redis flaps %d (every %s, %s, down %s)\n",
		s.elapsed.Round(time.Second), s.cfg.conns, s.kills, durOrNever(s.cfg.killEvery), s.flaps, durOrNever(s.cfg.flapEvery), s.cfg.redisMode, s.cfg.redisDown)
	fmt.Fprintf(w, "operations attempted %d, acknowledged %d (%.0f/s acknowledged)\n", att, ack, float64(ack)/s.elapsed.Seconds())
	fmt.Fprintf(w, "  %-16s %9s %9s %8s\n", "op", "attempted", "acked", "mean ms")
	for _, op := range sortedKeys(st.attempted) {
		fmt.Fprintf(w, "  %-16s %9d %9d %8.1f\n", op, st.attempted[op], st.acked[op], float64(st.latency[op].Milliseconds())/float64(st.attempted[op]))
	}
	fmt.Fprintf(w, "writes attempted %d, acknowledged %d; write outcomes: %s\n", sum(st.outcomes), st.outcomes[acked.String()], kv(st.outcomes))
	fmt.Fprintf(w, "errors by kind: %s\n", kv(st.kinds))
	fmt.Fprintf(w, "creates with unknown outcome resolved by a retry with their Idempotency-Key: %d (%s)\n", resolvedCount(s.resolved), kv(s.resolved))
	fmt.Fprintf(w, "creates with unknown outcome (IDs never learnt): %s\n", kv(s.unknownCreates))
	for _, e := range s.killErrors {
		fmt.Fprintf(w, "fault injection error: %s\n", e)
	}
	fmt.Fprintf(w, "tracked: %s; pairs %s\n", kv(s.objects), kv(s.pairs))
	fmt.Fprintf(w, "feed fan-out backlog drained in %s\n", s.backlogWait)
	fmt.Fprintf(w, "healing, no command run: %s\n", s.heal)
	fmt.Fprintf(w, "fresh reads: %d reads checked against the version acknowledged before them; %d stale within %v of a fault's end (longest %v); %d stale outside\n",
		s.freshChecked, s.staleWithin, staleBound, s.staleLongest.Round(time.Millisecond), len(s.staleBad))
	fmt.Fprintf(w, "repair, after the checks: %s\n", repairLine(s.repair))
	fmt.Fprintf(w, "repair --dry-run afterwards: %s\n", repairLine(s.repairDry))
	fmt.Fprintf(w, "verification (%s): %d checks passed, %d mismatches\n", s.verifyTime.Round(time.Millisecond), sum(s.res.checks), sum(s.res.mismatches))
	for _, k := range sortedKeys(s.res.checks) {
		fmt.Fprintf(w, "  ok       %7d  %s\n", s.res.checks[k], k)
	}
	for _, k := range sortedKeys(s.res.excluded) {
		fmt.Fprintf(w, "  excluded %7d  %s\n", s.res.excluded[k], k)
	}
	for _, k := range sortedKeys(s.res.explained) {
		fmt.Fprintf(w, "  explained %6d  %s\n", s.res.explained[k], k)
	}
	for _, k := range sortedKeys(s.res.mismatches) {
		fmt.Fprintf(w, "  MISMATCH %7d  %s\n", s.res.mismatches[k], k)
	}
	for i, d := range s.res.explDetail {
		if i >= s.cfg.maxListPrinted {
			fmt.Fprintf(w, "  … %d more\n", len(s.res.explDetail)-i)
			break
		}
		fmt.Fprintf(w, "  explained: %s\n", d)
	}
	for i, d := range s.res.details {
		if i >= s.cfg.maxListPrinted {
			fmt.Fprintf(w, "  … %d more\n", len(s.res.details)-i)
			break
		}
		fmt.Fprintf(w, "  MISMATCH: %s\n", d)
	}
	if sum(s.res.mismatches) == 0 {
		fmt.Fprintf(w, "result: PASS — no acknowledged write lost, every count equals its list\n")
	} else {
		fmt.Fprintf(w, "result: FAIL — %d mismatches\n", sum(s.res.mismatches))
	}
}

func (s *summary) printMarkdown(w io.Writer) {
	st := s.st
	att, ack := sum(st.attempted), sum(st.acked)
	fmt.Fprintf(w, "\n| figure | value |\n| --- | ---: |\n")
	row := func(k string, v any) { fmt.Fprintf(w, "| %s | %v |\n", k, v) }
	row("duration, connections", fmt.Sprintf("%s, %d", s.elapsed.Round(time.Second), s.cfg.conns))
	row("server kills (SIGKILL + restart)", s.kills)
	row("Redis flaps ("+s.cfg.redisMode+", down "+s.cfg.redisDown.String()+")", s.flaps)
	row("operations attempted", att)
	row("acknowledged", fmt.Sprintf("%d (%.0f/s)", ack, float64(ack)/s.elapsed.Seconds()))
	row("writes attempted / acknowledged", fmt.Sprintf("%d / %d", sum(st.outcomes), st.outcomes[acked.String()]))
	row("write outcomes", kv(st.outcomes))
	row("errors by kind", kv(st.kinds))
	row("creates with unknown outcome resolved by a retry (same key)", fmt.Sprintf("%d (%s)", resolvedCount(s.resolved), kv(s.resolved)))
	row("creates with unknown outcome", kv(s.unknownCreates))
	row("tracked objects / pairs", kv(s.objects)+"; "+kv(s.pairs))
	row("healing, no command run", s.heal)
	row("fresh reads checked / stale within the bound (longest) / stale outside", fmt.Sprintf("%d / %d (%v) / %d", s.freshChecked, s.staleWithin, s.staleLongest.Round(time.Millisecond), len(s.staleBad)))
	row("repair, after the checks", repairLine(s.repair))
	row("checks passed", sum(s.res.checks))
	row("excluded (unknown outcome)", sum(s.res.excluded))
	row("explained by an unacknowledged delete", sum(s.res.explained))
	row("**mismatches**", fmt.Sprintf("**%d**", sum(s.res.mismatches)))
}

func durOrNever(d time.Duration) string {
	if d == 0 {
		return "never"
	}
	return d.String()
}

func kv(m map[string]int) string {
	if len(m) == 0 {
		return "none"
	}
	var parts []string
	for _, k := range sortedKeys(m) {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}

// resolvedCount counts the unknown outcomes a retry made known.
func resolvedCount(m map[string]int) int {
	n := 0
	for k, v := range m {
		if !strings.HasSuffix(k, " unresolved") {
			n += v
		}
	}
	return n
}
