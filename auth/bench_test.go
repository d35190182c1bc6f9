package auth

import (
	"testing"
	"time"
)

// BenchmarkAuthenticate is the work of authenticating one request with a
// token that verified before (the usual case: a client sends its token on
// every request), and the rate limit's check after it.
func BenchmarkAuthenticate(b *testing.B) {
	st, err := ParseServiceTokens([]byte(HashLine("reader", ScopeRead, "reader-secret-0123456789abcdef0123")))
	if err != nil {
		b.Fatal(err)
	}
	a, err := New(Config{Service: st, UserSecret: testSecret, Rate: 1e9, Burst: 1e9})
	if err != nil {
		b.Fatal(err)
	}
	userTok, err := a.signer.Mint(alice, time.Now().Add(time.Hour))
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct{ name, header string }{
		{"service-token", "Bearer reader-secret-0123456789abcdef0123"},
		{"user-token", "Bearer " + userTok},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				p, err := a.Authenticate(c.header)
				if err != nil {
					b.Fatal(err)
				}
				if err := a.Allow(p); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
