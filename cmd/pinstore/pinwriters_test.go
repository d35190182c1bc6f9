package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/pinstore/pinstore/idcodec"
)

// pinWrite is one pin create a client made: its writer, when it was
// first sent, when it was acknowledged (zero: never) and the pin's ID.
type pinWrite struct {
	writer      int
	id          uint64
	sent, acked time.Time
}

// pinWriters create pins through a server, one writer a board, each
// create retried with its Idempotency-Key until it is answered 201 (a
// failover refuses some for a moment), recording every write.
type pinWriters struct {
	mu      sync.Mutex
	writes  []pinWrite
	retries int
	cancel  context.CancelFunc
	wg      sync.WaitGroup
}

// startPinWriters starts a writer for each board, together at rate
// creates a second (0: as fast as they are answered).
func startPinWriters(t *testing.T, base string, boards []string, rate float64) *pinWriters {
	ctx, cancel := context.WithCancel(context.Background())
	w := &pinWriters{cancel: cancel}
	client := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: len(boards)}}
	post := func(board, key string) (uint64, error) {
		body, _ := json.Marshal(map[string]any{"board_id": board, "description": key})
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/pins", bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+e2eAdminToken)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", key)
		resp, err := client.Do(req)
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusCreated {
			return 0, fmt.Errorf("%d %s", resp.StatusCode, truncate(b))
		}
		var o object
		if err := json.Unmarshal(b, &o); err != nil {
			return 0, err
		}
		return strconv.ParseUint(o.ID, 10, 64)
	}
	var every time.Duration
	if rate > 0 {
		every = time.Duration(float64(len(boards)) / rate * float64(time.Second))
	}
	for i, board := range boards {
		w.wg.Go(func() {
			next := time.Now()
			for n := 0; ctx.Err() == nil; n++ {
				if every > 0 {
					next = next.Add(every)
					select {
					case <-ctx.Done():
						return
					case <-time.After(time.Until(next)):
					}
				}
				pw := pinWrite{writer: i, sent: time.Now()}
				key := fmt.Sprintf("pw%d-%d-%d", i, n, pw.sent.UnixNano())
				for {
					id, err := post(board, key)
					if err == nil {
						pw.id, pw.acked = id, time.Now()
						break
					}
					if ctx.Err() != nil {
						break
					}
					if time.Since(pw.sent) > time.Minute {
						t.Errorf("writer %d: a create unanswered for a minute: %v", i, err)
						break
					}
					w.mu.Lock()
					w.retries++
					w.mu.Unlock()
					time.Sleep(50 * time.Millisecond)
				}
				w.mu.Lock()
				w.writes = append(w.writes, pw)
				w.mu.Unlock()
			}
		})
	}
	return w
}

// halt stops the writers and returns every write.
func (w *pinWriters) halt() []pinWrite {
	w.cancel()
	w.wg.Wait()
	return w.snapshot()
}

func (w *pinWriters) snapshot() []pinWrite {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]pinWrite(nil), w.writes...)
}

// restoredPins lists the pins of shards first…last of a restored copy
// reached at socket (a scratch mariadbd, Restore's Keep).
func restoredPins(t *testing.T, socket, prefix string, first, last int) map[uint64]bool {
	t.Helper()
	db, err := sql.Open("mysql", "root@unix("+socket+")/")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	got := map[uint64]bool{}
	for s := first; s <= last; s++ {
		rows, err := db.Query(fmt.Sprintf("SELECT local_id FROM %s%05d.pins", prefix, s))
		if err != nil {
			t.Fatalf("shard %d of the restored copy: %v", s, err)
		}
		for rows.Next() {
			var local uint64
			if err := rows.Scan(&local); err != nil {
				t.Fatal(err)
			}
			got[idcodec.MustEncode(uint32(s), idcodec.TypePin, local)] = true
		}
		rows.Close()
	}
	return got
}

// requireRestored checks the restored pins against the writes: every
// create acknowledged before ackedBy is there, none first sent at or after
// sentFrom (zero: not checked) is, and each writer's creates there are an
// unbroken run from its first (a copy of one moment: a writer waits for
// each answer). It returns how many were checked present and absent.
func requireRestored(t *testing.T, what string, got map[uint64]bool, writes []pinWrite, ackedBy, sentFrom time.Time) (present, absent int) {
	t.Helper()
	gap := map[int]*pinWrite{} // each writer's first acknowledged create missing
	for i := range writes {
		w := &writes[i]
		if w.acked.IsZero() {
			continue
		}
		in := got[w.id]
		switch {
		case w.acked.Before(ackedBy) && !in:
			t.Errorf("%s: pin %d (writer %d), acknowledged at %s before %s, is missing", what, w.id, w.writer, w.acked.Format(time.RFC3339Nano), ackedBy.Format(time.RFC3339Nano))
		case w.acked.Before(ackedBy):
			present++
		case !sentFrom.IsZero() && !w.sent.Before(sentFrom) && in:
			t.Errorf("%s: pin %d (writer %d), sent at %s, at or after %s, is there", what, w.id, w.writer, w.sent.Format(time.RFC3339Nano), sentFrom.Format(time.RFC3339Nano))
		case !sentFrom.IsZero() && !w.sent.Before(sentFrom):
			absent++
		}
		if g := gap[w.writer]; in && g != nil {
			t.Errorf("%s: writer %d's pin %d is there but its earlier acknowledged pin %d is not: not one moment's copy", what, w.writer, w.id, g.id)
		} else if !in && g == nil {
			gap[w.writer] = w
		}
	}
	return present, absent
}
