package main

import (
	"context"
	"fmt"
	"net/http"
	"time"
)

// Creates carry an Idempotency-Key, and a create whose outcome is unknown
// (the server died under it, answered 5xx, or the client gave up waiting)
// is sent again with the same key and body until its outcome is known: a
// create that had committed is answered with its first response
// (replayed), one that had not runs now. Every pin and board also carries
// a unique marker in its data, so the verifier can prove that no retry
// made an object twice (checkMarkers).

// retryFor bounds how long a worker retries one create: past a restart
// (about a second) and a dead request's key lease (30 s).
const retryFor = 90 * time.Second

// resolution counts what retries made of creates whose first outcome was
// unknown: "replayed" (it had committed), "ran" (it had not, and the
// retry created it), "rejected" (the retry was refused), "unresolved".
type resolution map[string]int

// marker is a create's unique marker: run, worker and sequence.
func (w *worker) marker(n int) string { return fmt.Sprintf("%s-%d-%d", w.runID, w.id, n) }

// create sends POST path with body under key, and while its outcome is
// unknown retries it with the same key. It returns the last answer.
func (w *worker) create(ctx context.Context, op, path string, body any, key string) answer {
	a := w.c.doKey(ctx, http.MethodPost, path, body, "", key)
	w.st.record(op, a, true)
	if a.outcome == acked || a.outcome == rejected {
		return a
	}
	res := "unresolved"
	wait := 100 * time.Millisecond
	for end := time.Now().Add(retryFor); time.Now().Before(end); {
		time.Sleep(wait + time.Duration(w.rng.IntN(200))*time.Millisecond)
		a = w.c.doKey(ctx, http.MethodPost, path, body, "", key)
		w.st.record(op+"_retry", a, false)
		if a.outcome == rejected && a.status == http.StatusConflict && problemCode(a.body) == "idempotency_key_in_use" {
			wait = time.Second // as its Retry-After says: the first request still runs, or died and holds the key for its lease
			continue
		}
		if a.outcome == acked && a.replayed {
			res = "replayed"
		} else if a.outcome == acked {
			res = "ran"
		} else if a.outcome == rejected {
			res = "rejected"
		}
		if a.outcome == acked || a.outcome == rejected {
			break
		}
	}
	w.resolved[op+" "+res]++
	return a
}
