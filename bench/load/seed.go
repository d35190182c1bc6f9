package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// apiClient is a keep-alive HTTP client sized to the load: one idle
// connection per worker, so connections are reused, never re-dialled.
type apiClient struct {
	base string
	auth string // the Authorization header ("Bearer <token>"), "" for none
	hc   *http.Client
	lean *leanClient // when set, requests go through it instead of hc
}

func newAPIClient(base, token string, conns int) *apiClient {
	tr := &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        conns * 2,
		MaxIdleConnsPerHost: conns * 2,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
	}
	a := &apiClient{base: base, hc: &http.Client{Transport: tr, Timeout: 30 * time.Second}}
	if token != "" {
		a.auth = "Bearer " + token
	}
	return a
}

type httpError struct {
	status int
	body   string
}

func (e *httpError) Error() string { return fmt.Sprintf("HTTP %d: %.200s", e.status, e.body) }

// do sends one request and reads the whole response; out (optional)
// receives the decoded JSON body. A non-2xx status is an error.
func (a *apiClient) do(ctx context.Context, method, path, ctype string, body []byte, out any) error {
	if a.lean != nil {
		return a.lean.do(ctx, method, path, ctype, body, out)
	}
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, a.base+path, rd)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", ctype)
	}
	if a.auth != "" {
		req.Header.Set("Authorization", a.auth)
	}
	resp, err := a.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		b, _ := io.ReadAll(resp.Body)
		return &httpError{resp.StatusCode, string(b)}
	}
	if out != nil {
		return json.NewDecoder(resp.Body).Decode(out)
	}
	_, err = io.Copy(io.Discard, resp.Body)
	return err
}

func (a *apiClient) postJSON(ctx context.Context, path string, body any, out any) error {
	b, err := json.Marshal(body)
	if err != nil {
		return err
	}
	return a.do(ctx, http.MethodPost, path, "application/json", b, out)
}

type created struct {
	ID string `json:"id"`
}

func (a *apiClient) create(ctx context.Context, path string, body any) (uint64, error) {
	var c created
	if err := a.postJSON(ctx, path, body, &c); err != nil {
		return 0, err
	}
	return strconv.ParseUint(c.ID, 10, 64)
}

// State is the seeded data set, with the ids the scenarios use.
type State struct {
	Users       []uint64   `json:"users"`  // every seeded user; Users[i] owns Boards[i]
	Boards      []uint64   `json:"boards"` // one board per user
	BigOwner    uint64     `json:"big_owner"`
	BigBoard    uint64     `json:"big_board"`
	BigPins     int        `json:"big_pins"`
	Feeder      uint64     `json:"feeder"`        // follows every Followees user
	Followees   []int      `json:"followees"`     // indexes into Users
	Heavy       []int      `json:"heavy"`         // heavily followed users (indexes)
	Others      []int      `json:"others"`        // users whose boards take the create-pin load
	BoardPins   [][]uint64 `json:"board_pins"`    // pins of Boards[i] (big board excluded)
	Pins        []uint64   `json:"pins"`          // every seeded pin (big board included)
	Cursor10k   string     `json:"cursor_10k"`    // API cursor after 10,000 entries of BigBoard (desc)
	Depth10kSeq int64      `json:"depth_10k_seq"` // (sequence, to_id) of entry 10,000 (for the baseline keyset)
	Depth10kTo  uint64     `json:"depth_10k_to"`
	SeededIn    string     `json:"seeded_in"`
}

const (
	nFollowees   = 200
	nOthers      = 58
	nHeavy       = 5
	pinsPerBoard = 5
	randFollows  = 5
)

// parallel runs fn(i) for i in [0, n) on conns goroutines and returns the
// first error.
func parallel(ctx context.Context, conns, n int, fn func(i int) error) error {
	var next atomic.Int64
	var first atomic.Pointer[error]
	var wg sync.WaitGroup
	for w := 0; w < conns; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for first.Load() == nil && ctx.Err() == nil {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if err := fn(i); err != nil {
					first.CompareAndSwap(nil, &err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if e := first.Load(); e != nil {
		return *e
	}
	return ctx.Err()
}

func loadOrSeed(ctx context.Context, c config, a *apiClient) (*State, error) {
	if c.state != "" {
		if raw, err := os.ReadFile(c.state); err == nil {
			var st State
			if err := json.Unmarshal(raw, &st); err != nil {
				return nil, fmt.Errorf("state %s: %w", c.state, err)
			}
			fmt.Fprintf(os.Stderr, "loaded seed state from %s (%d users, %d pins)\n", c.state, len(st.Users), len(st.Pins))
			return &st, nil
		}
	}
	st, err := seed(ctx, c, a)
	if err != nil {
		return nil, fmt.Errorf("seed: %w", err)
	}
	if c.state != "" {
		raw, _ := json.MarshalIndent(st, "", " ")
		if err := os.WriteFile(c.state, raw, 0o644); err != nil {
			return nil, err
		}
	}
	return st, nil
}

// seed builds the data set through the API:
//   - user 0 owns the big board (c.boardPins pins);
//   - user 1 (the feeder) follows the 200 followees, who have 5 pins each;
//   - the first 5 followees are heavily followed: every seeded user
//     follows them; every user also follows 5 random others;
//   - 58 other users with 5 pins each, whose boards take the create-pin
//     load (so writes never disturb the big board or the feed).
func seed(ctx context.Context, c config, a *apiClient) (*State, error) {
	t0 := time.Now()
	run := strconv.FormatInt(time.Now().UnixNano()%1e9, 36)
	nUsers := 2 + nFollowees + nOthers
	st := &State{Users: make([]uint64, nUsers), Boards: make([]uint64, nUsers), BoardPins: make([][]uint64, nUsers)}
	logf := func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, "seed %6.1fs: "+format+"\n", append([]any{time.Since(t0).Seconds()}, args...)...)
	}
	err := parallel(ctx, c.conns, nUsers, func(i int) error {
		id, err := a.create(ctx, "/v1/users", map[string]any{"username": fmt.Sprintf("bench_%s_%d", run, i), "display_name": fmt.Sprintf("Bench user %d", i)})
		if err != nil {
			return err
		}
		st.Users[i] = id
		b, err := a.create(ctx, "/v1/boards", map[string]any{"owner_id": strconv.FormatUint(id, 10), "name": fmt.Sprintf("Board %d", i), "description": "load harness board"})
		st.Boards[i] = b
		return err
	})
	if err != nil {
		return nil, err
	}
	logf("%d users and boards", nUsers)
	st.BigOwner, st.BigBoard, st.Feeder = st.Users[0], st.Boards[0], st.Users[1]
	for i := 0; i < nFollowees; i++ {
		st.Followees = append(st.Followees, 2+i)
	}
	st.Heavy = st.Followees[:nHeavy]
	for i := 0; i < nOthers; i++ {
		st.Others = append(st.Others, 2+nFollowees+i)
	}

	// Pins: the big board, then 5 on every followee's and other's board.
	type pinJob struct{ user int }
	var jobs []pinJob
	for i := 0; i < c.boardPins; i++ {
		jobs = append(jobs, pinJob{0})
	}
	for _, u := range append(append([]int{}, st.Followees...), st.Others...) {
		for k := 0; k < pinsPerBoard; k++ {
			jobs = append(jobs, pinJob{u})
		}
	}
	pins := make([]uint64, len(jobs))
	err = parallel(ctx, c.conns, len(jobs), func(i int) error {
		u := jobs[i].user
		id, err := a.create(ctx, "/v1/pins", map[string]any{
			"board_id":    strconv.FormatUint(st.Boards[u], 10),
			"link":        fmt.Sprintf("https://example.com/p/%d", i),
			"description": fmt.Sprintf("Pin %d of user %d: a reasonably sized description for a realistic document", i, u),
			"image_url":   fmt.Sprintf("https://img.example.com/%d.jpg", i),
		})
		pins[i] = id
		if i > 0 && i%2000 == 0 {
			logf("%d pins", i)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	for i, j := range jobs {
		if j.user != 0 {
			st.BoardPins[j.user] = append(st.BoardPins[j.user], pins[i])
		}
	}
	st.Pins, st.BigPins = pins, c.boardPins
	logf("%d pins (%d on the big board)", len(pins), c.boardPins)

	// Follows.
	type edge struct{ from, to int }
	var edges []edge
	for _, f := range st.Followees {
		edges = append(edges, edge{1, f})
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for u := range st.Users {
		for _, h := range st.Heavy {
			if u != h && u != 1 {
				edges = append(edges, edge{u, h})
			}
		}
		for k := 0; k < randFollows; k++ {
			if v := rng.IntN(nUsers); v != u {
				edges = append(edges, edge{u, v})
			}
		}
	}
	err = parallel(ctx, c.conns, len(edges), func(i int) error {
		e := edges[i]
		return a.do(ctx, http.MethodPut, fmt.Sprintf("/v1/users/%d/following/%d", st.Users[e.from], st.Users[e.to]), "", nil, nil)
	})
	if err != nil {
		return nil, err
	}
	logf("%d follows", len(edges))

	// Walk the big board's cursor to depth 10,000 once.
	if c.boardPins >= 10000+50 {
		cur := ""
		var last struct {
			Items      []json.RawMessage `json:"items"`
			NextCursor string            `json:"next_cursor"`
		}
		for depth := 0; depth < 10000; depth += 250 {
			path := fmt.Sprintf("/v1/boards/%d/pins?limit=250", st.BigBoard)
			if cur != "" {
				path += "&cursor=" + url.QueryEscape(cur)
			}
			last.NextCursor = ""
			if err := a.do(ctx, http.MethodGet, path, "", nil, &last); err != nil {
				return nil, err
			}
			if len(last.Items) != 250 || last.NextCursor == "" {
				return nil, fmt.Errorf("cursor walk: page at depth %d has %d items", depth, len(last.Items))
			}
			cur = last.NextCursor
		}
		st.Cursor10k = cur
		logf("walked the big board's cursor to depth 10,000")
	}
	st.SeededIn = time.Since(t0).Round(100 * time.Millisecond).String()
	return st, nil
}

var errNoWork = errors.New("nothing to do")
