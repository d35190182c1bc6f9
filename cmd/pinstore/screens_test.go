package main

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// objectCounts and viewer are the parts of an object a screen shows.
type objectCounts struct {
	ID     string           `json:"id"`
	Counts map[string]int64 `json:"counts"`
	Viewer map[string]bool  `json:"viewer"`
}

type countsList struct {
	Items []objectCounts `json:"items"`
}

// What a product's screens need, end to end through the real server (every
// response validated against openapi.yaml): unique usernames found in one
// request, "did I like / do I follow" one at a time and for a set, lists
// carrying the viewer's state, counts on objects, time ranges.
func TestScreens(t *testing.T) {
	s := startServer(t)

	// Usernames: unique in any case, found by name, freed by a rename.
	ann := s.create("/v1/users", map[string]any{"username": "Ann"})
	p := s.fail(http.StatusConflict, "username_taken", http.MethodPost, "/v1/users", map[string]any{"username": "aNN"})
	if !strings.Contains(p.Detail, "aNN") {
		t.Fatalf("409 detail %q", p.Detail)
	}
	if got := s.get("/v1/usernames/ANN"); got.ID != ann.ID || got.Username != "Ann" {
		t.Fatalf("by username: %+v", got)
	}
	s.fail(http.StatusNotFound, "not_found", http.MethodGet, "/v1/usernames/nobody", nil)
	s.fail(http.StatusBadRequest, "invalid_argument", http.MethodGet, "/v1/usernames/"+url.PathEscape("no spaces"), nil)
	bob := s.create("/v1/users", map[string]any{"username": "bob"})
	s.fail(http.StatusConflict, "username_taken", http.MethodPatch, "/v1/users/"+bob.ID, map[string]any{"username": "ann"})
	s.must(http.StatusOK, http.MethodPatch, "/v1/users/"+ann.ID, map[string]any{"username": "anne"})
	s.fail(http.StatusNotFound, "not_found", http.MethodGet, "/v1/usernames/ann", nil)
	s.must(http.StatusOK, http.MethodPatch, "/v1/users/"+bob.ID, map[string]any{"username": "Ann"})
	if got := s.get("/v1/usernames/ann"); got.ID != bob.ID {
		t.Fatalf("the freed name: %+v", got)
	}

	// 32 concurrent creates of one name: exactly one 201.
	var wg sync.WaitGroup
	statuses := make([]int, 32)
	for i := range statuses {
		wg.Go(func() {
			statuses[i] = s.req(http.MethodPost, "/v1/users", map[string]any{"username": []string{"Zed", "zed", "ZED", "zEd"}[i%4]}).Status
		})
	}
	wg.Wait()
	created := 0
	for _, st := range statuses {
		switch st {
		case http.StatusCreated:
			created++
		case http.StatusConflict:
		default:
			t.Fatalf("a concurrent create answered %d", st)
		}
	}
	if created != 1 {
		t.Fatalf("%d of 32 concurrent creates of one name succeeded", created)
	}

	// Viewer edges.
	carol := s.create("/v1/users", map[string]any{"username": "carol"})
	board := s.create("/v1/boards", map[string]any{"owner_id": carol.ID, "name": "b"})
	var pins []string
	var marks []time.Time
	for i := range 4 {
		marks = append(marks, time.Now())
		time.Sleep(3 * time.Millisecond)
		pins = append(pins, s.create("/v1/pins", map[string]any{"board_id": board.ID, "description": fmt.Sprint(i)}).ID)
		time.Sleep(3 * time.Millisecond)
	}
	s.must(http.StatusNoContent, http.MethodPut, "/v1/users/"+bob.ID+"/likes/"+pins[1], nil)
	s.must(http.StatusNoContent, http.MethodPut, "/v1/users/"+bob.ID+"/likes/"+pins[3], nil)
	s.must(http.StatusNoContent, http.MethodPut, "/v1/users/"+ann.ID+"/likes/"+pins[3], nil)
	s.must(http.StatusNoContent, http.MethodPut, "/v1/users/"+bob.ID+"/following/"+carol.ID, nil)
	s.must(http.StatusNoContent, http.MethodGet, "/v1/users/"+bob.ID+"/likes/"+pins[1], nil)
	s.fail(http.StatusNotFound, "not_found", http.MethodGet, "/v1/users/"+bob.ID+"/likes/"+pins[0], nil)
	s.must(http.StatusNoContent, http.MethodGet, "/v1/users/"+bob.ID+"/following/"+carol.ID, nil)
	s.fail(http.StatusNotFound, "not_found", http.MethodGet, "/v1/users/"+bob.ID+"/following/"+ann.ID, nil)
	var liked struct {
		Items []struct {
			ID    string `json:"id"`
			Liked bool   `json:"liked"`
		} `json:"items"`
	}
	s.must(http.StatusOK, http.MethodGet, "/v1/users/"+bob.ID+"/likes/contains?ids="+strings.Join([]string{pins[3], pins[0], pins[1], board.ID}, ","), nil).decode(t, &liked)
	var got []string
	for _, it := range liked.Items {
		got = append(got, fmt.Sprintf("%s=%v", it.ID, it.Liked))
	}
	if want := []string{pins[3] + "=true", pins[0] + "=false", pins[1] + "=true", board.ID + "=false"}; !slices.Equal(got, want) {
		t.Fatalf("likes/contains %v, want %v", got, want)
	}
	var following struct {
		Items []struct {
			ID        string `json:"id"`
			Following bool   `json:"following"`
		} `json:"items"`
	}
	s.must(http.StatusOK, http.MethodGet, "/v1/users/"+bob.ID+"/following/contains?ids="+ann.ID+","+carol.ID, nil).decode(t, &following)
	if len(following.Items) != 2 || following.Items[0].Following || !following.Items[1].Following {
		t.Fatalf("following/contains %+v", following)
	}

	// A board page for a viewer carries what the viewer liked, and counts.
	var page countsList
	s.must(http.StatusOK, http.MethodGet, "/v1/boards/"+board.ID+"/pins?viewer="+bob.ID, nil).decode(t, &page)
	flags := map[string]bool{}
	for _, it := range page.Items {
		flags[it.ID] = it.Viewer["liked"]
		if it.ID == pins[3] && it.Counts["likes"] != 2 {
			t.Fatalf("pin 3's counts %v", it.Counts)
		}
	}
	if len(flags) != 4 || !flags[pins[1]] || !flags[pins[3]] || flags[pins[0]] || flags[pins[2]] {
		t.Fatalf("viewer state on the board page: %v", flags)
	}
	s.fail(http.StatusBadRequest, "invalid_argument", http.MethodGet, "/v1/users/"+carol.ID+"/boards?viewer="+bob.ID, nil)
	var followers countsList
	s.must(http.StatusOK, http.MethodGet, "/v1/users/"+carol.ID+"/followers?viewer="+ann.ID, nil).decode(t, &followers)
	if len(followers.Items) != 1 || followers.Items[0].Viewer["following"] {
		t.Fatalf("carol's followers for ann: %+v", followers)
	}
	var feed countsList
	s.must(http.StatusOK, http.MethodGet, "/v1/users/"+bob.ID+"/feed?viewer="+bob.ID, nil).decode(t, &feed)
	for _, it := range feed.Items { // the feed may still be filling: what is there is right
		if it.Viewer["liked"] != (it.ID == pins[1] || it.ID == pins[3]) {
			t.Fatalf("feed viewer state %+v", it)
		}
	}

	// Counts on single objects.
	var pin3, carolC, boardC objectCounts
	s.must(http.StatusOK, http.MethodGet, "/v1/pins/"+pins[3], nil).decode(t, &pin3)
	s.must(http.StatusOK, http.MethodGet, "/v1/users/"+carol.ID, nil).decode(t, &carolC)
	s.must(http.StatusOK, http.MethodGet, "/v1/boards/"+board.ID, nil).decode(t, &boardC)
	if pin3.Counts["likes"] != 2 || pin3.Counts["comments"] != 0 || boardC.Counts["pins"] != 4 ||
		carolC.Counts["followers"] != 1 || carolC.Counts["boards"] != 1 || carolC.Counts["pins"] != 4 || carolC.Counts["following"] != 0 {
		t.Fatalf("counts: pin %v, board %v, carol %v", pin3.Counts, boardC.Counts, carolC.Counts)
	}

	// Time ranges page by cursor within the range.
	q := "?since=" + url.QueryEscape(marks[1].UTC().Format(time.RFC3339Nano)) + "&until=" + url.QueryEscape(marks[3].UTC().Format(time.RFC3339Nano))
	ids, _ := s.all("/v1/boards/"+board.ID+"/pins"+q, 1)
	if !slices.Equal(ids, []string{pins[2], pins[1]}) {
		t.Fatalf("board pins in range %v, want %v", ids, []string{pins[2], pins[1]})
	}
	s.fail(http.StatusBadRequest, "invalid_argument", http.MethodGet, "/v1/boards/"+board.ID+"/pins?since=yesterday", nil)
	s.fail(http.StatusBadRequest, "invalid_argument", http.MethodGet, "/v1/boards/"+board.ID+"/pins?since="+url.QueryEscape(marks[3].UTC().Format(time.RFC3339Nano))+"&until="+url.QueryEscape(marks[1].UTC().Format(time.RFC3339Nano)), nil)
	s.must(http.StatusNoContent, http.MethodPut, "/v1/boards/"+board.ID+"/pins/"+pins[0]+"/position", map[string]any{"before": pins[3]})
	p = s.fail(http.StatusBadRequest, "invalid_argument", http.MethodGet, "/v1/boards/"+board.ID+"/pins"+q, nil)
	if !strings.Contains(p.Detail, "chosen by hand") {
		t.Fatalf("a hand-ordered board's refusal: %q", p.Detail)
	}
}
