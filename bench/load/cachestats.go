package main

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// cacheCounts are the server's object cache counters at one moment, read
// from its /metrics; ok is false when the server does not report them
// (the cache is off, or /metrics is unreachable).
type cacheCounts struct {
	hits, misses float64
	ok           bool
}

// readCacheCounts scrapes pinstore_object_cache_hits_total and
// pinstore_object_cache_misses_total.
func (a *apiClient) readCacheCounts(ctx context.Context) cacheCounts {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, a.base+"/metrics", nil)
	if err != nil {
		return cacheCounts{}
	}
	if a.auth != "" {
		req.Header.Set("Authorization", a.auth)
	}
	resp, err := a.hc.Do(req)
	if err != nil {
		return cacheCounts{}
	}
	defer resp.Body.Close()
	var c cacheCounts
	var seen int
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		name, val, ok := strings.Cut(sc.Text(), " ")
		if !ok {
			continue
		}
		var dst *float64
		switch name {
		case "pinstore_object_cache_hits_total":
			dst = &c.hits
		case "pinstore_object_cache_misses_total":
			dst = &c.misses
		default:
			continue
		}
		if v, err := strconv.ParseFloat(val, 64); err == nil {
			*dst = v
			seen++
		}
	}
	c.ok = seen == 2 && resp.StatusCode == http.StatusOK
	return c
}

// cacheDelta accumulates the counters' growth over the api side's rounds.
type cacheDelta struct {
	hits, misses float64
	ok           bool
}

func (d *cacheDelta) add(before, after cacheCounts) {
	if !before.ok || !after.ok {
		return
	}
	d.hits += after.hits - before.hits
	d.misses += after.misses - before.misses
	d.ok = true
}

// String is the hit ratio with the lookups it counts, or "–" when the
// server reported no cache counters or saw no lookups.
func (d cacheDelta) String() string {
	n := d.hits + d.misses
	if !d.ok || n == 0 {
		return "–"
	}
	return fmt.Sprintf("%.1f%% of %.0f", 100*d.hits/n, n)
}
