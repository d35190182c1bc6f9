package main

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestServeFeedMergesFollowees: the feed merges the pins of several
// followed users (on different shards) newest first, across pages.
func TestServeFeedMergesFollowees(t *testing.T) {
	s := startServer(t)
	reader := s.create("/v1/users", map[string]any{"username": "reader"})
	var boards []string
	var followees []string
	for i := range 3 {
		u := s.create("/v1/users", map[string]any{"username": fmt.Sprintf("author%d", i)})
		followees = append(followees, u.ID)
		boards = append(boards, s.create("/v1/boards", map[string]any{"owner_id": u.ID, "name": "b"}).ID)
	}
	stranger := s.create("/v1/users", map[string]any{"username": "stranger"})
	strangerBoard := s.create("/v1/boards", map[string]any{"owner_id": stranger.ID, "name": "b"}).ID
	var pins []string
	for i := range 45 {
		time.Sleep(2 * time.Millisecond) // distinct milliseconds: newest first is creation order
		pins = append(pins, s.create("/v1/pins", map[string]any{"board_id": boards[i%3]}).ID)
		if i%5 == 0 {
			s.create("/v1/pins", map[string]any{"board_id": strangerBoard})
		}
	}
	for _, u := range followees {
		s.must(http.StatusNoContent, http.MethodPut, "/v1/users/"+reader.ID+"/following/"+u, nil)
	}
	for _, limit := range []int{1, 4, 10, 45, 250} {
		feed, _ := s.all("/v1/users/"+reader.ID+"/feed", limit)
		equalIDs(t, fmt.Sprintf("feed of 3 followees, limit %d", limit), feed, reversed(pins))
	}
	if c := s.count("/v1/users/" + reader.ID + "/following"); c != 3 {
		t.Fatalf("following count %d", c)
	}
	// Unfollow one: their pins leave the feed.
	s.must(http.StatusNoContent, http.MethodDelete, "/v1/users/"+reader.ID+"/following/"+followees[1], nil)
	var want []string
	for i, p := range pins {
		if i%3 != 1 {
			want = append(want, p)
		}
	}
	feed, _ := s.all("/v1/users/"+reader.ID+"/feed", 7)
	equalIDs(t, "feed after an unfollow", feed, reversed(want))

	// New pins reach followers' feeds (written in the background, within
	// moments); the unfollowed author's do not.
	time.Sleep(2 * time.Millisecond)
	skipped := s.create("/v1/pins", map[string]any{"board_id": boards[1]}).ID
	time.Sleep(2 * time.Millisecond)
	fresh := s.create("/v1/pins", map[string]any{"board_id": boards[0]}).ID
	want = append(want, fresh)
	deadline := time.Now().Add(10 * time.Second)
	for {
		feed, _ = s.all("/v1/users/"+reader.ID+"/feed", 7)
		if slices.Contains(feed, fresh) || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	equalIDs(t, "feed after new pins", feed, reversed(want))
	if slices.Contains(feed, skipped) {
		t.Fatalf("the unfollowed author's new pin %s is in the feed", skipped)
	}
}

// TestServeConcurrentEdits: of two edits made from the same version, one
// wins and the other gets 412; none is lost silently.
func TestServeConcurrentEdits(t *testing.T) {
	s := startServer(t)
	u := s.create("/v1/users", map[string]any{"username": "shared"})
	const editors = 8
	statuses := make(chan int, editors)
	for i := range editors {
		go func() {
			req, _ := http.NewRequest(http.MethodPatch, s.base+"/v1/users/"+u.ID, strings.NewReader(fmt.Sprintf(`{"display_name":"editor %d"}`, i)))
			req.Header.Set("Content-Type", "application/merge-patch+json")
			req.Header.Set("If-Match", `"1"`)
			resp, err := s.client.Do(req)
			if err != nil {
				statuses <- 0
				return
			}
			resp.Body.Close()
			statuses <- resp.StatusCode
		}()
	}
	won := 0
	for range editors {
		switch st := <-statuses; st {
		case http.StatusOK:
			won++
		case http.StatusPreconditionFailed:
		default:
			t.Errorf("concurrent PATCH: status %d", st)
		}
	}
	if won != 1 {
		t.Fatalf("%d concurrent edits of version 1 succeeded, want exactly 1", won)
	}
	if got := s.get("/v1/users/" + u.ID); got.Version != 2 {
		t.Fatalf("version %d after one successful edit", got.Version)
	}
}
