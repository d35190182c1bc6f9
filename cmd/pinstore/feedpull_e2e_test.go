package main

import (
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"
)

// TestServeHybridFeed: with PINSTORE_FEED_PULL_THRESHOLD=2 on the real
// server, an author with two followers is pulled. A feed merging a
// pulled and a pushed author pages by cursor newest first, each pin once;
// a new follower of the pulled author sees all their pins at once; an
// unfollow removes them; a deleted pulled pin leaves the feed.
func TestServeHybridFeed(t *testing.T) {
	s := startServerEnv(t, map[string]string{"PINSTORE_FEED_PULL_THRESHOLD": "2"})
	user := func(name string) string { return s.create("/v1/users", map[string]any{"username": name}).ID }
	celeb, plain, bob, eve, carol := user("celeb"), user("plain"), user("bob"), user("eve"), user("carol")
	cb := s.create("/v1/boards", map[string]any{"owner_id": celeb, "name": "c"}).ID
	pb := s.create("/v1/boards", map[string]any{"owner_id": plain, "name": "p"}).ID
	follow := func(who, whom string, on bool) {
		method := http.MethodPut
		if !on {
			method = http.MethodDelete
		}
		s.must(http.StatusNoContent, method, "/v1/users/"+who+"/following/"+whom, nil)
	}
	follow(bob, celeb, true)
	follow(eve, celeb, true) // two followers: celeb is pulled from the next pin
	follow(bob, plain, true) // one: plain is pushed
	var created []string     // oldest first
	for i := range 8 {
		board := cb
		if i%2 == 1 {
			board = pb
		}
		created = append(created, s.create("/v1/pins", map[string]any{"board_id": board, "link": fmt.Sprintf("https://example.org/%d", i)}).ID)
		time.Sleep(3 * time.Millisecond) // distinct sequences: the expected order is creation order
	}
	want := slices.Clone(created)
	slices.Reverse(want)
	var celebPins []string
	for _, id := range want {
		if slices.Index(created, id)%2 == 0 {
			celebPins = append(celebPins, id)
		}
	}
	// Bob's feed fills as the fan-out and the pulled author's one-time job run.
	deadline := time.Now().Add(10 * time.Second)
	for {
		feed, _ := s.all("/v1/users/"+bob+"/feed", 3)
		if slices.Equal(feed, want) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("bob's feed %v, want %v", feed, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, limit := range []int{1, 2, 5, 100} {
		feed, _ := s.all("/v1/users/"+bob+"/feed", limit)
		equalIDs(t, fmt.Sprintf("bob's feed by %d", limit), feed, want)
	}
	// A new follower of the pulled author sees every pin of theirs at once.
	follow(carol, celeb, true)
	feed, _ := s.all("/v1/users/"+carol+"/feed", 2)
	equalIDs(t, "carol's feed right after following", feed, celebPins)
	// A deleted pulled pin leaves every feed at once.
	s.must(http.StatusNoContent, http.MethodDelete, "/v1/pins/"+celebPins[0], nil)
	feed, _ = s.all("/v1/users/"+carol+"/feed", 2)
	equalIDs(t, "carol's feed after a delete", feed, celebPins[1:])
	// Unfollowing removes them at once.
	follow(carol, celeb, false)
	if feed, _ := s.all("/v1/users/"+carol+"/feed", 2); len(feed) != 0 {
		t.Fatalf("carol's feed after unfollowing: %v", feed)
	}
}
