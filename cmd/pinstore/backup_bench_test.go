package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestBackupLoadBench measures what a running backup costs the API: the
// real server on a host with one replica (semi-synchronous, as the README
// sets it up), 4 writers creating pins and 4 readers getting them, in
// rounds without and with `pinstore backup` running back to back,
// alternating, three of each; then the same with the backup taken from
// the master (PINSTORE_BENCH_BACKUP_FROM=master: a host without a
// replica). PINSTORE_BENCH_BACKUP is a round's length:
//
//	PINSTORE_BENCH_BACKUP=15s go test -count=1 -run TestBackupLoadBench -v ./cmd/pinstore
func TestBackupLoadBench(t *testing.T) {
	round, _ := time.ParseDuration(os.Getenv("PINSTORE_BENCH_BACKUP"))
	if round <= 0 {
		t.Skip("set PINSTORE_BENCH_BACKUP to a round's length to run the backup benchmark")
	}
	replicas := 1
	if os.Getenv("PINSTORE_BENCH_BACKUP_FROM") == "master" {
		replicas = 0
	}
	const writers, readers, pairs = 4, 4, 3
	f := startReplFleet(t, map[string]string{"PINSTORE_RATE_LIMIT": "0"}, replicas)
	s := startServerEnv(t, f.env)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: writers + readers}}
	do := func(method, path, body string, want int) (string, error) {
		req, _ := http.NewRequest(method, s.base+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+e2eAdminToken)
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := client.Do(req)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != want {
			return "", fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, b)
		}
		return string(b), nil
	}
	u := s.create("/v1/users", map[string]any{"username": "bkbench"})
	boards := make([]string, writers)
	for w := range boards {
		boards[w] = s.create("/v1/boards", map[string]any{"owner_id": u.ID, "name": fmt.Sprint("b", w)}).ID
	}
	var pins []string
	for i := range 200 {
		pins = append(pins, s.create("/v1/pins", map[string]any{"board_id": boards[i%writers], "description": "seed"}).ID)
	}

	type result struct {
		creates, gets       int
		createP99, getP99   time.Duration
		backups, backupFail int
	}
	// load runs the writers and readers for one round, and backups back
	// to back meanwhile when backups is set.
	load := func(backups bool) result {
		var mu sync.Mutex
		var creates, gets []time.Duration
		var wg sync.WaitGroup
		end := time.Now().Add(round)
		for w := range writers + readers {
			wg.Go(func() {
				for i := 0; time.Now().Before(end); i++ {
					start := time.Now()
					var err error
					if w < writers {
						_, err = do("POST", "/v1/pins", `{"board_id":"`+boards[w]+`","description":"a pin of the benchmark"}`, 201)
					} else {
						_, err = do("GET", "/v1/pins/"+pins[(w*31+i)%len(pins)], "", 200)
					}
					if err != nil {
						t.Error(err)
						return
					}
					d := time.Since(start)
					mu.Lock()
					if w < writers {
						creates = append(creates, d)
					} else {
						gets = append(gets, d)
					}
					mu.Unlock()
				}
			})
		}
		var r result
		if backups {
			for i := 0; time.Now().Before(end); i++ {
				dir := filepath.Join(t.TempDir(), fmt.Sprint("backup-", i))
				if out, err := runCmd(t, f.env, "backup", "--host", "a", "--to", dir); err != nil {
					t.Errorf("backup %d: %v\n%s", i, err, out)
					r.backupFail++
					break
				} else {
					r.backups++
				}
				os.RemoveAll(dir)
			}
		}
		wg.Wait()
		p99 := func(ds []time.Duration) time.Duration {
			if len(ds) == 0 {
				return 0
			}
			slices.Sort(ds)
			return ds[int(0.99*float64(len(ds)-1))]
		}
		r.creates, r.gets, r.createP99, r.getP99 = len(creates), len(gets), p99(creates), p99(gets)
		return r
	}
	var sums [2]result
	for p := range 2 * pairs {
		with := p%2 == 1
		r := load(with)
		t.Logf("round %d, backups %v: create-pin %.0f/s (p99 %v), get-pin %.0f/s (p99 %v); backups taken %d, failed %d",
			p, with, float64(r.creates)/round.Seconds(), r.createP99.Round(100*time.Microsecond), float64(r.gets)/round.Seconds(), r.getP99.Round(100*time.Microsecond), r.backups, r.backupFail)
		i := 0
		if with {
			i = 1
			if r.backups == 0 || r.backupFail > 0 {
				t.Errorf("round %d: %d backups taken, %d failed", p, r.backups, r.backupFail)
			}
		}
		sums[i].creates += r.creates
		sums[i].gets += r.gets
	}
	from := "a replica"
	if replicas == 0 {
		from = "the master"
	}
	t.Logf("with backups from %s running, create-pin at %.2f and get-pin at %.2f of their rate without",
		from, float64(sums[1].creates)/float64(sums[0].creates), float64(sums[1].gets)/float64(sums[0].gets))
}
