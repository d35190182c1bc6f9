package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"time"
)

// dropDatabases drops the shard databases <prefix>NNNNN.
func dropDatabases(db *sql.DB, prefix string) error {
	if db == nil {
		return fmt.Errorf("-drop needs -dsn")
	}
	rows, err := db.Query("SHOW DATABASES")
	if err != nil {
		return err
	}
	re := regexp.MustCompile("^" + regexp.QuoteMeta(prefix) + `\d{5}$`)
	var names []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			rows.Close()
			return err
		}
		if re.MatchString(n) {
			names = append(names, n)
		}
	}
	rows.Close()
	for _, n := range names {
		if _, err := db.Exec("DROP DATABASE `" + n + "`"); err != nil {
			return err
		}
	}
	if len(names) > 0 {
		fmt.Printf("chaos: dropped %d databases %s*\n", len(names), prefix)
	}
	return nil
}

// waitFeedBacklog polls the server's pinstore_feed_fanout_backlog gauge
// until it reads 0 (or limit passes) and says how long that took.
func waitFeedBacklog(c *client, limit time.Duration) string {
	start := time.Now()
	for time.Since(start) < limit {
		a := c.do(context.Background(), "GET", "/metrics", nil, "")
		for _, line := range strings.Split(string(a.body), "\n") {
			if line == "pinstore_feed_fanout_backlog 0" {
				return time.Since(start).Round(100 * time.Millisecond).String()
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return "not drained within " + limit.String()
}

// heal is how long pairs and feeds took to be whole with no command run.
type heal struct {
	marksCleared          time.Duration // since the last server start, until no pair_outbox mark was left (-1: not measured)
	afterLoad, afterStart time.Duration // since the load ended, since the last server start: a dry-run repair found nothing
	checks                int           // dry-run repairs run
	healed                bool
	left                  string // what the last dry run found, when not healed
}

func (h heal) String() string {
	if !h.healed {
		return fmt.Sprintf("NOT healed after %s (%d dry runs): %s", h.afterLoad.Round(100*time.Millisecond), h.checks, h.left)
	}
	marks := ""
	if h.marksCleared >= 0 {
		marks = fmt.Sprintf("every pair_outbox mark settled %s after the last server start; ", h.marksCleared.Round(100*time.Millisecond))
	}
	return fmt.Sprintf("%sa dry-run repair found nothing %s after the load ended, %s after the last server start (%d dry-run repairs)",
		marks, h.afterLoad.Round(100*time.Millisecond), h.afterStart.Round(100*time.Millisecond), h.checks)
}

// waitHealed waits until no shard holds a pair_outbox mark (with db; every
// 100 ms), then runs `pinstore repair --dry-run` until it finds no pair
// and no feed row to fix, or limit passes.
func waitHealed(srv *server, db *sql.DB, prefix string, shards int, loadEnd time.Time, limit time.Duration) heal {
	h := heal{marksCleared: -1}
	if db != nil {
		var q strings.Builder
		q.WriteString("SELECT 0")
		for n := range shards {
			fmt.Fprintf(&q, " + (SELECT COUNT(*) FROM %s%05d.pair_outbox)", prefix, n)
		}
		for time.Since(loadEnd) < limit {
			var left int
			if err := db.QueryRow(q.String()).Scan(&left); err == nil && left == 0 {
				h.marksCleared = time.Since(srv.startedAt())
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	for time.Since(loadEnd) < limit {
		out, err := srv.runTool(context.Background(), "repair", "--dry-run")
		h.checks++
		p, f := broken(string(out))
		if err == nil && p+f == 0 {
			h.healed = true
			h.afterLoad, h.afterStart = time.Since(loadEnd), time.Since(srv.startedAt())
			return h
		}
		h.left = fmt.Sprintf("%d pairs, %d feed rows (%v)", p, f, err)
		time.Sleep(500 * time.Millisecond)
	}
	h.afterLoad = time.Since(loadEnd)
	return h
}

// broken counts what a repair report fixed (or, dry, would fix): pairs
// with a dead end, a missing or an orphan inverse, and feed rows missing or
// stale. An unreadable report counts as one of each.
func broken(js string) (pairs, feeds int) {
	var r struct {
		Pairs []struct {
			DeadEndpoint   int `json:"dead_endpoint"`
			MissingInverse int `json:"missing_inverse"`
			OrphanInverse  int `json:"orphan_inverse"`
		} `json:"pairs"`
		Feeds struct {
			Missing, Stale int
		} `json:"feeds"`
	}
	if json.Unmarshal([]byte(strings.TrimSpace(js)), &r) != nil {
		return 1, 1
	}
	for _, p := range r.Pairs {
		pairs += p.DeadEndpoint + p.MissingInverse + p.OrphanInverse
	}
	return pairs, r.Feeds.Missing + r.Feeds.Stale
}

// repairLine summarizes repair's JSON report.
func repairLine(js string) string {
	var r struct {
		DryRun bool `json:"dry_run"`
		Pairs  []struct {
			Mapping        string `json:"mapping"`
			Checked        int    `json:"checked"`
			MissingInverse int    `json:"missing_inverse"`
			OrphanInverse  int    `json:"orphan_inverse"`
		} `json:"pairs"`
		Feeds struct {
			Follows, Rows, Missing, Stale int
		} `json:"feeds"`
	}
	if json.Unmarshal([]byte(js), &r) != nil {
		return js
	}
	var parts []string
	for _, p := range r.Pairs {
		parts = append(parts, fmt.Sprintf("%s: %d rows checked, %d missing inverse added, %d orphan inverse removed", p.Mapping, p.Checked, p.MissingInverse, p.OrphanInverse))
	}
	f := r.Feeds
	parts = append(parts, fmt.Sprintf("user_feed: %d follows and %d rows checked, %d missing rows added, %d stale removed", f.Follows, f.Rows, f.Missing, f.Stale))
	return strings.Join(parts, "; ")
}
