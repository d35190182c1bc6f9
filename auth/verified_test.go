package auth

import (
	"testing"
	"time"

	"github.com/pinstore/pinstore/model"
)

// A token that verified is remembered: its next request allocates
// nothing. The remembered tokens go when the service tokens are replaced,
// a user token's entry is not served past its expiry, only tokens that
// verified are remembered, and the cache stays within its bound.
func TestVerifiedTokens(t *testing.T) {
	st, err := ParseServiceTokens([]byte(HashLine("reader", ScopeRead, "reader-secret")))
	if err != nil {
		t.Fatal(err)
	}
	now := t0
	a, err := New(Config{Service: st, UserSecret: testSecret, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	userTok, _ := signer(t, testSecret).Mint(alice, t0.Add(time.Minute))
	for _, h := range []string{"Bearer reader-secret", "Bearer " + userTok} {
		first, err := a.Authenticate(h)
		if err != nil {
			t.Fatal(err)
		}
		if n := testing.AllocsPerRun(100, func() {
			if p, err := a.Authenticate(h); err != nil || p != first {
				t.Fatalf("again: %+v %v, want %+v", p, err, first)
			}
		}); n != 0 {
			t.Errorf("%.20s…: a remembered token costs %v allocations", h, n)
		}
	}
	if _, err := a.Authenticate("Bearer reader-secreT"); !model.IsCode(err, model.EUnauthorized) {
		t.Fatalf("a token one letter off a remembered one: %v", err)
	}
	if n := a.state.Load().verified.n.Load(); n != 2 {
		t.Fatalf("%d tokens remembered, want the 2 that verified", n)
	}

	// The tokens file now lists another token: the old one is refused at
	// once, remembered or not; user tokens verify again.
	other, _ := ParseServiceTokens([]byte(HashLine("writer", ScopeWrite, "writer-secret")))
	if err := a.SetServiceTokens(other); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Authenticate("Bearer reader-secret"); !model.IsCode(err, model.EUnauthorized) {
		t.Fatalf("a removed service token after the reload: %v", err)
	}
	if p, err := a.Authenticate("Bearer " + userTok); err != nil || p.UserID != alice {
		t.Fatalf("user token after the reload: %+v %v", p, err)
	}

	now = t0.Add(time.Minute) // the user token's expiry
	if _, err := a.Authenticate("Bearer " + userTok); model.ErrorMessage(err) != "the token has expired" {
		t.Fatalf("a remembered user token past its expiry: %v", err)
	}

	now = t0
	s := signer(t, testSecret)
	for i := range maxVerified + 10 {
		tok, err := s.Mint(alice+uint64(i), t0.Add(time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := a.Authenticate("Bearer " + tok); err != nil {
			t.Fatal(err)
		}
	}
	if n := a.state.Load().verified.n.Load(); n > maxVerified {
		t.Fatalf("%d tokens remembered, bound %d", n, maxVerified)
	}
}
