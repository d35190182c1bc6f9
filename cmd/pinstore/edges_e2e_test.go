package main

// The edge checks (does a user like a pin, follow a user; one or a set)
// on the real server with the object cache on: the objects they must see
// come from the cache, not from reads by id on MySQL, and they still
// report no edge to a deleted object nor to a secret pin the caller may
// not see.

import (
	"bufio"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/jmoiron/sqlx"
)

// metric is the value of an unlabelled series in the server's /metrics.
func (s *server) metric(name string) float64 {
	s.t.Helper()
	body := s.must(http.StatusOK, http.MethodGet, "/metrics", nil).Body
	sc := bufio.NewScanner(strings.NewReader(string(body)))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				s.t.Fatalf("%s: %v", name, err)
			}
			return f
		}
	}
	s.t.Fatalf("/metrics has no %s", name)
	return 0
}

// edgeContains is the body of a contains form.
type edgeContains struct {
	Items []struct {
		ID        string `json:"id"`
		Liked     *bool  `json:"liked"`
		Following *bool  `json:"following"`
	} `json:"items"`
}

// flags is what a contains form said of each id, in order.
func (c edgeContains) flags() []bool {
	out := make([]bool, len(c.Items))
	for i, it := range c.Items {
		out[i] = it.Liked != nil && *it.Liked || it.Following != nil && *it.Following
	}
	return out
}

func TestEdgeChecksReadTheObjectCache(t *testing.T) {
	s := startServer(t)
	ann := s.create("/v1/users", map[string]any{"username": "ann"})
	bob := s.create("/v1/users", map[string]any{"username": "bob"})
	cat := s.create("/v1/users", map[string]any{"username": "cat"})
	annTok, bobTok, catTok := mintUserToken(t, ann.ID, "1h"), mintUserToken(t, bob.ID, "1h"), mintUserToken(t, cat.ID, "1h")
	open := s.create("/v1/boards", map[string]any{"owner_id": ann.ID, "name": "open"})
	hidden := s.create("/v1/boards", map[string]any{"owner_id": ann.ID, "name": "hidden later"})
	pin := s.create("/v1/pins", map[string]any{"board_id": open.ID, "link": "https://example.com/p"})
	secret := s.create("/v1/pins", map[string]any{"board_id": hidden.ID, "link": "https://example.com/s"})
	s.must(http.StatusNoContent, http.MethodPut, "/v1/users/"+bob.ID+"/likes/"+pin.ID, nil)
	s.must(http.StatusNoContent, http.MethodPut, "/v1/users/"+bob.ID+"/likes/"+secret.ID, nil)
	s.must(http.StatusNoContent, http.MethodPut, "/v1/users/"+bob.ID+"/following/"+ann.ID, nil)
	s.as(annTok, http.StatusOK, http.MethodPatch, "/v1/boards/"+hidden.ID, map[string]any{"secret": true})

	likes, follows := "/v1/users/"+bob.ID+"/likes/", "/v1/users/"+bob.ID+"/following/"
	contains := func(tok, path string) []bool {
		t.Helper()
		var c edgeContains
		s.as(tok, http.StatusOK, http.MethodGet, path, nil).decode(t, &c)
		return c.flags()
	}
	checks := func() {
		t.Helper()
		s.as(e2eReadToken, http.StatusNoContent, http.MethodGet, likes+pin.ID, nil)
		s.as(bobTok, http.StatusNoContent, http.MethodGet, likes+pin.ID, nil)
		s.as(e2eReadToken, http.StatusNoContent, http.MethodGet, follows+ann.ID, nil)
		s.as(e2eReadToken, http.StatusNotFound, http.MethodGet, follows+cat.ID, nil)
		if got := contains(e2eReadToken, likes+"contains?ids="+pin.ID+","+secret.ID+","+open.ID); fmt.Sprint(got) != "[true true false]" {
			t.Fatalf("likes/contains as a service: %v", got)
		}
		if got := contains(e2eReadToken, follows+"contains?ids="+ann.ID+","+cat.ID); fmt.Sprint(got) != "[true false]" {
			t.Fatalf("following/contains: %v", got)
		}
	}
	checks() // fills the cache with bob, ann and the pins
	reads, hits := s.metric("pinstore_point_reads_total"), s.metric("pinstore_object_cache_hits_total")
	const rounds = 5
	for range rounds {
		checks()
	}
	if got := s.metric("pinstore_point_reads_total") - reads; got != 0 {
		t.Fatalf("%d rounds of edge checks read %v objects by id from MySQL, want none", rounds, got)
	}
	// Per round: bob, once for each of the 6 checks; the pin liked, read
	// by the check as a service and by the guard for bob's token (whose
	// check uses the guard's read); ann followed; both pins liked in the
	// first contains; ann in the second. A follow not found reads nothing.
	if got, want := s.metric("pinstore_object_cache_hits_total")-hits, float64(rounds*(6+2+1+2+1)); got != want {
		t.Fatalf("%d rounds of edge checks: %v cache hits, want %v", rounds, got, want)
	}

	// Secrecy: the secret pin is liked, but only its owner and services
	// are told so; to anyone else it is as absent as a missing pin.
	s.as(e2eReadToken, http.StatusNoContent, http.MethodGet, likes+secret.ID, nil)
	s.as(annTok, http.StatusNoContent, http.MethodGet, likes+secret.ID, nil)
	for _, tok := range []string{bobTok, catTok} {
		s.as(tok, http.StatusNotFound, http.MethodGet, likes+secret.ID, nil)
		if got := contains(tok, likes+"contains?ids="+pin.ID+","+secret.ID); fmt.Sprint(got) != "[true false]" {
			t.Fatalf("likes/contains as a user who may not see the secret pin: %v", got)
		}
	}
	if got := contains(annTok, likes+"contains?ids="+pin.ID+","+secret.ID); fmt.Sprint(got) != "[true true]" {
		t.Fatalf("likes/contains as the secret pin's owner: %v", got)
	}
	// Made public, the pin shows at once; secret again, it hides at once.
	s.as(annTok, http.StatusOK, http.MethodPatch, "/v1/boards/"+hidden.ID, map[string]any{"secret": false})
	s.as(catTok, http.StatusNoContent, http.MethodGet, likes+secret.ID, nil)
	s.as(annTok, http.StatusOK, http.MethodPatch, "/v1/boards/"+hidden.ID, map[string]any{"secret": true})
	s.as(catTok, http.StatusNotFound, http.MethodGet, likes+secret.ID, nil)

	// Deletes: an edge whose object is gone is not reported, even while
	// its row is still in the list (the removal after the delete's own
	// transaction not done yet): the row is put back by hand here.
	dan := s.create("/v1/users", map[string]any{"username": "dan"})
	s.must(http.StatusNoContent, http.MethodPut, follows+dan.ID, nil)
	s.as(e2eReadToken, http.StatusNoContent, http.MethodGet, follows+dan.ID, nil) // dan is cached
	s.as(e2eReadToken, http.StatusNoContent, http.MethodGet, likes+pin.ID, nil)   // and the pin
	s.must(http.StatusNoContent, http.MethodDelete, "/v1/users/"+dan.ID, nil)
	s.must(http.StatusNoContent, http.MethodDelete, "/v1/pins/"+pin.ID, nil)
	s.putEdgeRow(bob.ID, "user_following", dan.ID)
	s.putEdgeRow(bob.ID, "user_likes", pin.ID)
	for _, tok := range []string{e2eReadToken, bobTok, annTok} {
		s.as(tok, http.StatusNotFound, http.MethodGet, follows+dan.ID, nil)
		s.as(tok, http.StatusNotFound, http.MethodGet, likes+pin.ID, nil)
		if got := contains(tok, follows+"contains?ids="+dan.ID+","+ann.ID); fmt.Sprint(got) != "[false true]" {
			t.Fatalf("following/contains after dan's delete: %v", got)
		}
		if got := contains(tok, likes+"contains?ids="+pin.ID); fmt.Sprint(got) != "[false]" {
			t.Fatalf("likes/contains after the pin's delete: %v", got)
		}
	}
	// A deleted user has no edges at all: 404 at once, though cached.
	s.must(http.StatusNoContent, http.MethodDelete, "/v1/users/"+bob.ID, nil)
	s.as(e2eReadToken, http.StatusNotFound, http.MethodGet, follows+ann.ID, nil)
	s.as(e2eReadToken, http.StatusNotFound, http.MethodGet, likes+"contains?ids="+secret.ID, nil)
}

// putEdgeRow writes the row from→to of a list straight into from's shard,
// as a list holds it before a delete's removals have run.
func (s *server) putEdgeRow(from, table, to string) {
	s.t.Helper()
	db, err := sqlx.Open("mysql", s.dsn)
	if err != nil {
		s.t.Fatal(err)
	}
	defer db.Close()
	f, err := strconv.ParseUint(from, 10, 64)
	if err != nil {
		s.t.Fatal(err)
	}
	name := quoteIdent(fmt.Sprintf("%s%05d", s.prefix, f>>46&0xffff)) + "." + table
	if _, err := db.Exec("INSERT IGNORE INTO "+name+" (from_id, to_id, sequence) VALUES (?, ?, 1)", from, to); err != nil {
		s.t.Fatal(err)
	}
}
