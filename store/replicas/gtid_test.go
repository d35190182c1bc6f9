package replicas

import (
	"strings"
	"testing"
)

func TestParsePos(t *testing.T) {
	tests := []struct {
		name, in, want, err string
	}{
		{"empty", "", "", ""},
		{"one", "0-1-100", "0-1-100", ""},
		{"domains sorted", "2-1-5,0-3-9", "0-3-9,2-1-5", ""},
		{"wrapped as SHOW SLAVE STATUS writes it", "0-1-100,\n1-2-7 ", "0-1-100,1-2-7", ""},
		{"a domain twice keeps the higher", "0-1-100,0-2-120,0-1-90", "0-2-120", ""},
		{"two parts", "0-1", "", "not domain-server-sequence"},
		{"not numbers", "0-x-1", "", "unsigned numbers"},
		{"negative", "0-1--1", "", "not domain-server-sequence"},
		{"domain too big", "4294967296-1-1", "", "unsigned numbers"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := ParsePos(tt.in)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("ParsePos(%q) = %v, %v; want an error mentioning %q", tt.in, p, err, tt.err)
				}
				return
			}
			if err != nil || p.String() != tt.want {
				t.Fatalf("ParsePos(%q) = %q, %v; want %q", tt.in, p, err, tt.want)
			}
		})
	}
}

func TestPosCompare(t *testing.T) {
	pos := func(s string) Pos {
		p, err := ParsePos(s)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	tests := []struct {
		name   string
		p, q   string
		covers bool
		behind uint64
		merged string
	}{
		{"equal", "0-1-10", "0-1-10", true, 0, "0-1-10"},
		{"ahead", "0-1-12", "0-1-10", true, 0, "0-1-12"},
		{"behind", "0-1-7", "0-1-10", false, 3, "0-1-10"},
		{"promoted master numbers on", "0-2-15", "0-1-10", true, 0, "0-2-15"},
		{"missing a domain", "0-1-10", "0-1-10,1-1-4", false, 4, "0-1-10,1-1-4"},
		{"anything covers nothing", "", "", true, 0, ""},
		{"nothing covers something", "", "0-1-1", false, 1, "0-1-1"},
		{"two domains behind", "0-1-8,1-1-1", "0-1-10,1-1-4", false, 5, "0-1-10,1-1-4"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, q := pos(tt.p), pos(tt.q)
			if got := p.Covers(q); got != tt.covers {
				t.Errorf("%q.Covers(%q) = %v", tt.p, tt.q, got)
			}
			if got := p.Behind(q); got != tt.behind {
				t.Errorf("%q.Behind(%q) = %d, want %d", tt.p, tt.q, got, tt.behind)
			}
			if got := p.Merge(q).String(); got != tt.merged {
				t.Errorf("%q.Merge(%q) = %q, want %q", tt.p, tt.q, got, tt.merged)
			}
			if p.String() != pos(tt.p).String() {
				t.Errorf("Merge changed its receiver: %q", p)
			}
		})
	}
}

func TestToken(t *testing.T) {
	tests := []struct {
		name, in, want, err string
	}{
		{"empty", "", "", ""},
		{"one host", "a=0-1-5", "a=0-1-5", ""},
		{"sorted", "b=0-2-9;a=0-1-5,1-1-2", "a=0-1-5,1-1-2;b=0-2-9", ""},
		{"spaces", " a=0-1-5 ; b=0-2-9 ", "a=0-1-5;b=0-2-9", ""},
		{"no position", "a", "", "not host=position"},
		{"bad host", "a b=0-1-1", "", "not host=position"},
		{"host twice", "a=0-1-1;a=0-1-2", "", "twice"},
		{"bad position", "a=0-1", "", `for host "a"`},
		{"too long", "a=" + strings.Repeat("0-1-1,", 1000), "", "longer than"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tok, err := ParseToken(tt.in)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("ParseToken(%q) = %v, %v; want an error mentioning %q", tt.in, tok, err, tt.err)
				}
				return
			}
			if err != nil || tok.String() != tt.want {
				t.Fatalf("ParseToken(%q) = %q, %v; want %q", tt.in, tok, err, tt.want)
			}
		})
	}
	a, _ := ParseToken("a=0-1-5;b=0-2-9")
	b, _ := ParseToken("a=0-1-7;c=1-3-1")
	if got := a.Merge(b).String(); got != "a=0-1-7;b=0-2-9;c=1-3-1" {
		t.Fatalf("Merge = %q", got)
	}
	if a.String() != "a=0-1-5;b=0-2-9" {
		t.Fatalf("Merge changed its receiver: %q", a)
	}
}

// TestRequestToken checks what a response's token holds: the token the
// request sent, merged with the positions of the commits it made, on
// every host, and that only a read request's reads may go to replicas.
func TestRequestToken(t *testing.T) {
	sent, _ := ParseToken("a=0-1-5;b=0-2-9")
	ctx := WithRequest(t.Context(), sent, true)
	if readsReplicas(ctx) {
		t.Error("a write request's reads may go to replicas")
	}
	if got := ResponseToken(ctx); got != "a=0-1-5;b=0-2-9" {
		t.Errorf("a request that committed nothing answers %q, want the token it sent", got)
	}
	note(ctx, "a", Pos{{Domain: 0, Server: 1, Seq: 8}})
	note(ctx, "c", Pos{{Domain: 0, Server: 3, Seq: 2}})
	note(ctx, "a", Pos{{Domain: 0, Server: 1, Seq: 7}})
	if got := ResponseToken(ctx); got != "a=0-1-8;b=0-2-9;c=0-3-2" {
		t.Errorf("ResponseToken = %q", got)
	}
	read := WithRequest(t.Context(), nil, false)
	if !readsReplicas(read) || readsReplicas(OnMaster(read)) || readsReplicas(t.Context()) {
		t.Error("reads may go to replicas only for a read request, and not under OnMaster")
	}
	if p, ok := sentFor(ctx, "b"); !ok || p.String() != "0-2-9" {
		t.Errorf("sentFor(b) = %q, %v", p, ok)
	}
	if _, ok := sentFor(read, "b"); ok {
		t.Error("a request without a token has one")
	}
	if ResponseToken(t.Context()) != "" {
		t.Error("outside a request there is a token")
	}
}
