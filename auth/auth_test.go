package auth

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pinstore/pinstore/idcodec"
	"github.com/pinstore/pinstore/model"
)

var (
	testSecret = []byte("test-secret-test-secret-test-secret!")
	alice      = idcodec.MustEncode(3429, idcodec.TypeUser, 733)
	t0         = time.Unix(1_800_000_000, 0)
)

func signer(t testing.TB, secret []byte) *Signer {
	t.Helper()
	s, err := NewSigner(secret)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestMintVerify(t *testing.T) {
	s := signer(t, testSecret)
	tok, err := s.Mint(alice, t0.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(tok, UserTokenPrefix) || !TokenSyntaxOK(tok) {
		t.Fatalf("token %q", tok)
	}
	c, err := s.Verify(tok, t0)
	if err != nil || c.UserID != alice || !c.Expires.Equal(t0.Add(time.Hour)) {
		t.Fatalf("Verify = %+v, %v", c, err)
	}

	other := idcodec.MustEncode(3429, idcodec.TypeUser, 734)
	bobTok, _ := s.Mint(other, t0.Add(time.Hour))
	sig := tok[strings.LastIndexByte(tok, '.')+1:]
	flip := func(s string, i int) string {
		b := []byte(s)
		if b[i] == 'A' {
			b[i] = 'B'
		} else {
			b[i] = 'A'
		}
		return string(b)
	}
	cases := []struct {
		name string
		tok  string
		now  time.Time
		s    *Signer
		want error
	}{
		{"expired at the second", tok, t0.Add(time.Hour), s, ErrExpired},
		{"expired long ago", tok, t0.Add(48 * time.Hour), s, ErrExpired},
		{"wrong secret", tok, t0, signer(t, []byte("another-secret-another-secret-another")), ErrBadToken},
		{"user swapped", strings.Replace(tok, fmtID(alice), fmtID(other), 1), t0, s, ErrBadToken},
		{"expiry extended", strings.Replace(tok, ".1800003600.", ".1900003600.", 1), t0, s, ErrBadToken},
		{"signature from another token", tok[:len(tok)-len(sig)] + bobTok[strings.LastIndexByte(bobTok, '.')+1:], t0, s, ErrBadToken},
		{"signature flipped", flip(tok, len(tok)-5), t0, s, ErrBadToken},
		{"signature truncated", tok[:len(tok)-1], t0, s, ErrMalformed},
		{"no signature", tok[:strings.LastIndexByte(tok, '.')], t0, s, ErrMalformed},
		{"leading zero", strings.Replace(tok, "pu1.", "pu1.0", 1), t0, s, ErrMalformed},
		{"signed exp", strings.Replace(tok, ".1800003600.", ".+1800003600.", 1), t0, s, ErrMalformed},
		{"board id", strings.Replace(tok, fmtID(alice), fmtID(idcodec.MustEncode(3429, idcodec.TypeBoard, 733)), 1), t0, s, ErrMalformed},
		{"other version", strings.Replace(tok, "pu1.", "pu2.", 1), t0, s, ErrMalformed},
		{"empty", "", t0, s, ErrMalformed},
		{"huge", tok + strings.Repeat("A", 600), t0, s, ErrMalformed},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if _, err := c.s.Verify(c.tok, c.now); !errors.Is(err, c.want) {
				t.Fatalf("Verify(%q) = %v, want %v", c.tok, err, c.want)
			}
		})
	}
}

func TestMintRefuses(t *testing.T) {
	if _, err := NewSigner([]byte("short")); !errors.Is(err, ErrWeakSecret) {
		t.Fatalf("short secret: %v", err)
	}
	s := signer(t, testSecret)
	if _, err := s.Mint(idcodec.MustEncode(1, idcodec.TypePin, 1), t0); err == nil {
		t.Fatal("minted for a pin id")
	}
	if _, err := s.Mint(alice, time.Unix(0, 0)); err == nil {
		t.Fatal("minted with expiry 0")
	}
}

func hexHash(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

func TestParseServiceTokens(t *testing.T) {
	good := `tokens:
  - name: feed
    sha256: ` + hexHash("feed-secret") + `
    scopes: [read]
  - {name: ops.admin, sha256: ` + strings.ToUpper(hexHash("ops-secret")) + `, scopes: [read, write, admin]}
`
	st, err := ParseServiceTokens([]byte(good))
	if err != nil {
		t.Fatal(err)
	}
	if st.Len() != 2 {
		t.Fatalf("%d tokens", st.Len())
	}
	if tok, ok := st.Lookup("ops-secret"); !ok || tok.Name != "ops.admin" || tok.Scopes != ScopeRead|ScopeWrite|ScopeAdmin {
		t.Fatalf("Lookup(ops-secret) = %+v, %v", tok, ok)
	}
	if tok, ok := st.Lookup("feed-secret"); !ok || tok.Name != "feed" || tok.Scopes != ScopeRead {
		t.Fatalf("Lookup(feed-secret) = %+v, %v", tok, ok)
	}
	for _, s := range []string{"", "feed-secre", "feed-secret\n", hexHash("feed-secret")} {
		if _, ok := st.Lookup(s); ok {
			t.Fatalf("Lookup(%q) matched", s)
		}
	}

	jsonFile := `{"tokens":[{"name":"j","sha256":"` + hexHash("j") + `","scopes":["write"]}]}`
	if st, err := ParseServiceTokens([]byte(jsonFile)); err != nil || st.Len() != 1 {
		t.Fatalf("JSON file: %v", err)
	}
	list := `- {name: l, sha256: ` + hexHash("l") + `, scopes: [read]}`
	if st, err := ParseServiceTokens([]byte(list)); err != nil || st.Len() != 1 {
		t.Fatalf("bare list: %v", err)
	}
	if st, err := ParseServiceTokens([]byte(HashLine("x", ScopeRead|ScopeAdmin, "s"))); err != nil || st.Tokens()[0].Scopes != ScopeRead|ScopeAdmin {
		t.Fatalf("HashLine output does not parse back: %v", err)
	}

	bad := map[string]string{
		"empty":          ``,
		"no tokens":      `tokens: []`,
		"secret as hash": `[{name: a, sha256: my-secret, scopes: [read]}]`,
		"short hash":     `[{name: a, sha256: abcd, scopes: [read]}]`,
		"no scopes":      `[{name: a, sha256: ` + hexHash("a") + `}]`,
		"unknown scope":  `[{name: a, sha256: ` + hexHash("a") + `, scopes: [root]}]`,
		"misspelt field": `[{name: a, sha256: ` + hexHash("a") + `, scope: [read]}]`,
		"bad name":       `[{name: "user:1", sha256: ` + hexHash("a") + `, scopes: [read]}]`,
		"no name":        `[{sha256: ` + hexHash("a") + `, scopes: [read]}]`,
		"duplicate name": `[{name: a, sha256: ` + hexHash("a") + `, scopes: [read]}, {name: a, sha256: ` + hexHash("b") + `, scopes: [read]}]`,
		"duplicate hash": `[{name: a, sha256: ` + hexHash("a") + `, scopes: [read]}, {name: b, sha256: ` + hexHash("a") + `, scopes: [read]}]`,
	}
	for name, f := range bad {
		t.Run(name, func(t *testing.T) {
			_, err := ParseServiceTokens([]byte(f))
			if err == nil {
				t.Fatalf("parsed %q", f)
			}
			if strings.Contains(err.Error(), hexHash("a")) || strings.Contains(err.Error(), "my-secret") {
				t.Fatalf("error shows a hash or secret: %v", err)
			}
		})
	}
}

// TestLookupConstantTime checks Lookup inspects every entry whatever
// matches: a match on the first entry costs as many comparisons as none.
// (Timing itself is too noisy to test; the code path is what matters:
// subtle.ConstantTimeCompare and no early return.)
func TestLookupConstantTime(t *testing.T) {
	var f strings.Builder
	f.WriteString("tokens:\n")
	for i := 0; i < 100; i++ {
		f.WriteString("  " + HashLine("t"+string(rune('a'+i%26))+strings.Repeat("x", i/26), ScopeRead, "secret-"+string(rune(i+40))) + "\n")
	}
	st, err := ParseServiceTokens([]byte(f.String()))
	if err != nil {
		t.Fatal(err)
	}
	first, last := "secret-"+string(rune(40)), "secret-"+string(rune(139))
	for _, s := range []string{first, last} {
		if _, ok := st.Lookup(s); !ok {
			t.Fatalf("Lookup(%q) missed", s)
		}
	}
	allocs := testing.AllocsPerRun(100, func() { st.Lookup(first) })
	if allocs != 0 {
		t.Fatalf("Lookup allocates %v times", allocs)
	}
}

func TestAuthenticate(t *testing.T) {
	st, err := ParseServiceTokens([]byte(HashLine("reader", ScopeRead, "reader-secret")))
	if err != nil {
		t.Fatal(err)
	}
	now := t0
	a, err := New(Config{Service: st, UserSecret: testSecret, Rate: 1, Burst: 2, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	userTok, _ := signer(t, testSecret).Mint(alice, t0.Add(time.Minute))

	p, err := a.Authenticate("Bearer reader-secret")
	if err != nil || p.Name != "reader" || p.Kind != KindService || !p.Has(ScopeRead) || p.Has(ScopeWrite) || p.MayActAs(alice) {
		t.Fatalf("reader: %+v, %v", p, err)
	}
	p, err = a.Authenticate("bearer " + userTok)
	if err != nil || p.Name != UserName(alice) || !p.IsUser() || !p.MayActAs(alice) || p.MayActAs(alice+1) || p.Has(ScopeAdmin) {
		t.Fatalf("user: %+v, %v", p, err)
	}
	for _, h := range []string{"", "Bearer", "Bearer ", "Basic abc", "Bearer wrong", "Bearer reader-secret extra", "Bearer " + userTok + "x", "reader-secret"} {
		_, err := a.Authenticate(h)
		if !model.IsCode(err, model.EUnauthorized) {
			t.Fatalf("Authenticate(%q) = %v", h, err)
		}
		if strings.Contains(model.ErrorMessage(err), "secret") && h != "" {
			t.Fatalf("message %q", model.ErrorMessage(err))
		}
	}
	now = t0.Add(time.Minute)
	if _, err := a.Authenticate("Bearer " + userTok); model.ErrorMessage(err) != "the token has expired" {
		t.Fatalf("expired: %v", err)
	}

	// Rate: burst 2, then 1/s, per principal.
	reader := Principal{Name: "reader"}
	for i := 0; i < 2; i++ {
		if err := a.Allow(reader); err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
	}
	err = a.Allow(reader)
	var rl *RateLimitError
	if !errors.As(err, &rl) || !model.IsCode(err, model.ERateLimited) || rl.RetryAfter() != "1" {
		t.Fatalf("third request: %v", err)
	}
	if err := a.Allow(Principal{Name: "other"}); err != nil {
		t.Fatalf("another principal: %v", err)
	}
	now = now.Add(time.Second)
	if err := a.Allow(reader); err != nil {
		t.Fatalf("after a second: %v", err)
	}

	if _, err := New(Config{}); !errors.Is(err, ErrNoTokens) {
		t.Fatalf("no tokens: %v", err)
	}
}

func TestLimiterForgetsIdleBuckets(t *testing.T) {
	now := t0
	l := NewLimiter(10, 10, func() time.Time { return now })
	for i := 0; i < 1000; i++ {
		l.Allow(UserName(uint64(i)))
	}
	now = now.Add(5 * time.Second)
	l.Allow("late")
	if n := l.Len(); n != 1 {
		t.Fatalf("%d buckets after the sweep, want 1", n)
	}
	if ok, _ := NewLimiter(0, 0, nil).Allow("x"); !ok {
		t.Fatal("rate 0 should not limit")
	}
}

func TestScopes(t *testing.T) {
	s, err := ParseScopes("read, admin")
	if err != nil || s != ScopeRead|ScopeAdmin || s.String() != "read,admin" {
		t.Fatalf("ParseScopes = %v, %v", s, err)
	}
	if _, err := ParseScopes("read,root"); err == nil {
		t.Fatal("root accepted")
	}
	w := Principal{Kind: KindService, Scopes: ScopeWrite}
	if !w.Has(ScopeRead) || !w.Has(ScopeWrite) || w.Has(ScopeAdmin) || !w.MayActAs(alice) {
		t.Fatal("write implies read, not admin, and a service acts for anyone")
	}
}

// FuzzParseUserToken: parsing never panics, whatever parses re-encodes to
// the same text, and nothing but a signed token verifies.
func FuzzParseUserToken(f *testing.F) {
	s := signer(f, testSecret)
	tok, _ := s.Mint(alice, t0.Add(time.Hour))
	f.Add(tok)
	f.Add("pu1.1.1.")
	f.Add("pu1..." + strings.Repeat("A", 43))
	f.Add("Bearer " + tok)
	f.Fuzz(func(t *testing.T, in string) {
		c, body, sig, err := ParseUserToken(in)
		if err == nil {
			want := UserTokenPrefix + fmtID(c.UserID) + "." + fmtInt(c.Expires.Unix())
			if body != want || body+"."+sig != in {
				t.Fatalf("%q parsed to %+v, which encodes as %q", in, c, want)
			}
		}
		got, err := s.Verify(in, t0)
		if err == nil && in != tok {
			re, _ := s.Mint(got.UserID, got.Expires)
			if re != in {
				t.Fatalf("%q verified but is not what Mint makes (%q)", in, re)
			}
		}
		_, _ = bearer("Bearer " + in)
	})
}

func fmtID(id uint64) string { return strconv.FormatUint(id, 10) }
func fmtInt(n int64) string  { return strconv.FormatInt(n, 10) }
