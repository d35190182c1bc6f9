package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/pinstore/pinstore/auth"
)

func TestTokenCommands(t *testing.T) {
	env := map[string]string{"PINSTORE_TOKEN_SECRET": e2eTokenSecret}
	getenv := func(k string) string { return env[k] }
	var out, errOut bytes.Buffer
	if err := runToken([]string{"mint", "--user", "241294629943640797", "--ttl", "2h"}, getenv, nil, &out, &errOut); err != nil {
		t.Fatal(err)
	}
	sg, _ := auth.NewSigner([]byte(e2eTokenSecret))
	c, err := sg.Verify(strings.TrimSpace(out.String()), time.Now())
	if err != nil || c.UserID != 241294629943640797 || time.Until(c.Expires) < 119*time.Minute {
		t.Fatalf("minted token: %+v, %v", c, err)
	}
	if strings.Contains(errOut.String(), e2eTokenSecret) {
		t.Fatal("mint shows the secret")
	}
	for _, args := range [][]string{
		{"mint"},
		{"mint", "--user", "241294492511762325"}, // a pin
		{"mint", "--user", "241294629943640797", "--ttl", "-1h"},
	} {
		if err := runToken(args, getenv, nil, &out, &errOut); err == nil {
			t.Fatalf("%v: no error", args)
		}
	}
	if err := runToken([]string{"mint", "--user", "241294629943640797"}, func(string) string { return "" }, nil, &out, &errOut); err == nil {
		t.Fatal("minted without a secret")
	}

	out.Reset()
	if err := runToken([]string{"hash", "--name", "feed", "--scopes", "read,write"}, getenv, strings.NewReader("s3cret-s3cret-s3cret-s3cret-s3cret\n"), &out, &errOut); err != nil {
		t.Fatal(err)
	}
	st, err := auth.ParseServiceTokens(out.Bytes())
	if err != nil {
		t.Fatalf("hash line %q does not parse: %v", out.String(), err)
	}
	if tok, ok := st.Lookup("s3cret-s3cret-s3cret-s3cret-s3cret"); !ok || tok.Name != "feed" || tok.Scopes != auth.ScopeRead|auth.ScopeWrite {
		t.Fatalf("lookup: %+v %v", tok, ok)
	}
	if strings.Contains(out.String(), "s3cret") {
		t.Fatal("hash prints the secret")
	}
	for _, in := range []string{"", "\n", "pu1.abc", "has space", strings.Repeat("x", 5000)} {
		if err := runToken([]string{"hash"}, getenv, strings.NewReader(in), &out, &errOut); err == nil {
			t.Fatalf("hash of %.20q: no error", in)
		}
	}
}
