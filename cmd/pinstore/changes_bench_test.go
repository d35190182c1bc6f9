package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pinstore/pinstore/cluster/changes"
)

// TestChangeStreamLoadBench measures the change stream under the
// create-pin load: the delay from a create's acknowledgement to its event
// at a consumer of `pinstore changes`, and the create-pin throughput with
// the consumer running against without it, in alternating rounds of one
// run. PINSTORE_BENCH_CHANGES is each round's length:
//
//	PINSTORE_BENCH_CHANGES=10s go test -count=1 -run TestChangeStreamLoadBench -v ./cmd/pinstore
func TestChangeStreamLoadBench(t *testing.T) {
	round, _ := time.ParseDuration(os.Getenv("PINSTORE_BENCH_CHANGES"))
	if round <= 0 {
		t.Skip("set PINSTORE_BENCH_CHANGES to a round's length to run the change stream benchmark")
	}
	const writers, pairs = 8, 3
	f := startChangeFleetEnv(t, map[string]string{"PINSTORE_RATE_LIMIT": "0"})
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: writers}}
	post := func(path, body string) (string, error) {
		req, _ := http.NewRequest("POST", f.base+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+e2eAdminToken)
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 201 {
			return "", fmt.Errorf("POST %s: %d %s", path, resp.StatusCode, b)
		}
		var o object
		if err := json.Unmarshal(b, &o); err != nil {
			return "", err
		}
		return o.ID, nil
	}
	user, err := post("/v1/users", `{"username":"bench`+strings.TrimSuffix(f.prefix, "_")+`"}`)
	if err != nil {
		t.Fatal(err)
	}
	boards := make([]string, writers)
	for w := range boards {
		if boards[w], err = post("/v1/boards", `{"owner_id":"`+user+`","name":"b`+strconv.Itoa(w)+`"}`); err != nil {
			t.Fatal(err)
		}
	}

	var mu sync.Mutex
	acked := map[string]time.Time{}
	seen := map[string]time.Time{}
	// load creates pins from every writer for one round and returns how
	// many were acknowledged.
	load := func() int {
		var n sync.WaitGroup
		counts := make([]int, writers)
		end := time.Now().Add(round)
		for w := range writers {
			n.Add(1)
			go func() {
				defer n.Done()
				for time.Now().Before(end) {
					id, err := post("/v1/pins", `{"board_id":"`+boards[w]+`","description":"a pin of the benchmark"}`)
					if err != nil {
						t.Error(err)
						return
					}
					now := time.Now()
					mu.Lock()
					acked[id] = now
					mu.Unlock()
					counts[w]++
				}
			}()
		}
		n.Wait()
		total := 0
		for _, c := range counts {
			total += c
		}
		return total
	}
	// consume runs `pinstore changes` from now until stop, noting when
	// each created pin is told.
	consume := func(stop <-chan struct{}, ready chan<- struct{}) error {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		pr, pw := io.Pipe()
		var stderr bytes.Buffer
		done := make(chan error, 1)
		go func() {
			done <- run(ctx, []string{"changes", "--types", "pin"}, func(k string) string { return f.env[k] }, pw, &stderr)
			pw.Close()
		}()
		go func() { <-stop; cancel() }()
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		first := true
		for sc.Scan() {
			now := time.Now()
			if first {
				first = false
				close(ready)
			}
			var e changes.Event
			if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
				return err
			}
			if e.Kind == changes.Created {
				mu.Lock()
				seen[idStr(e.ID)] = now
				mu.Unlock()
			}
		}
		if err := <-done; err != nil {
			return fmt.Errorf("%v\n%s", err, stderr.String())
		}
		return nil
	}

	var without, with []float64
	for p := range 2 * pairs {
		if p%2 == 0 {
			without = append(without, float64(load())/round.Seconds())
			continue
		}
		stop, ready, consumed := make(chan struct{}), make(chan struct{}), make(chan error, 1)
		go func() { consumed <- consume(stop, ready) }()
		<-ready
		mu.Lock()
		clear(acked)
		clear(seen)
		mu.Unlock()
		began := time.Now()
		with = append(with, float64(load())/round.Seconds())
		// Every acknowledged create is told; then the consumer stops.
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			mu.Lock()
			missing := 0
			for id := range acked {
				if _, ok := seen[id]; !ok {
					missing++
				}
			}
			mu.Unlock()
			if missing == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d acknowledged creates not told within 30s", missing)
			}
		}
		close(stop)
		if err := <-consumed; err != nil {
			t.Fatal(err)
		}
		var delays, late []time.Duration
		for id, at := range acked {
			delays = append(delays, seen[id].Sub(at))
			if at.After(began.Add(round / 2)) {
				late = append(late, seen[id].Sub(at))
			}
		}
		slices.Sort(late)
		slices.Sort(delays)
		q := func(f float64) time.Duration { return delays[int(f*float64(len(delays)-1))] }
		t.Logf("round %d: %d creates told; delay from acknowledgement to event: min %v, median %v, p99 %v, max %v; in the round's second half p99 %v",
			p, len(delays), q(0).Round(100*time.Microsecond), q(0.5).Round(100*time.Microsecond), q(0.99).Round(100*time.Microsecond), q(1).Round(100*time.Microsecond),
			late[int(0.99*float64(len(late)-1))].Round(100*time.Microsecond))
	}
	var a, b float64
	for i := range pairs {
		a += with[i]
		b += without[i]
	}
	t.Logf("create-pin, %d writers, %v rounds: without the stream %.0f/s, with it %.0f/s (rounds %v and %v): ratio %.3f",
		writers, round, b/pairs, a/pairs, rounded(without), rounded(with), a/b)
}

func rounded(xs []float64) []int {
	out := make([]int, len(xs))
	for i, x := range xs {
		out[i] = int(x + 0.5)
	}
	return out
}
