package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
)

func runCmd(t *testing.T, env map[string]string, args ...string) (string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	err := run(context.Background(), args, func(k string) string { return env[k] }, &out, &errOut)
	return out.String(), err
}

func TestIDDecode(t *testing.T) {
	out, err := runCmd(t, nil, "id", "decode", "241294492511762325")
	if err != nil {
		t.Fatal(err)
	}
	want := `{"id":"241294492511762325","shard":3429,"type":1,"type_name":"pin","local_id":7075733}`
	if strings.TrimSpace(out) != want {
		t.Fatalf("got  %s\nwant %s", out, want)
	}
	for _, bad := range []string{"-1", "18446744073709551616", "abc", "4611686018427387904", "1"} {
		if _, err := runCmd(t, nil, "id", "decode", bad); err == nil {
			t.Errorf("decode %s: no error", bad)
		}
	}
}

func TestIDEncode(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--shard", "3429", "--type", "board", "--local", "1337"}, "241294561224164665"},
		{[]string{"--shard", "3429", "--type", "3", "--local", "733"}, "241294629943640797"},
	}
	for _, tt := range tests {
		out, err := runCmd(t, nil, append([]string{"id", "encode"}, tt.args...)...)
		if err != nil || strings.TrimSpace(out) != tt.want {
			t.Fatalf("encode %v = %q, %v; want %s", tt.args, out, err, tt.want)
		}
	}
	for _, bad := range [][]string{
		{"--shard", "65536", "--type", "pin", "--local", "1"},
		{"--shard", "1", "--type", "pins", "--local", "1"},
		{"--shard", "1", "--type", "pin", "--local", "68719476736"},
	} {
		if _, err := runCmd(t, nil, append([]string{"id", "encode"}, bad...)...); err == nil {
			t.Errorf("encode %v: no error", bad)
		}
	}
	// decode(encode(x)) round trip through the command line.
	out, _ := runCmd(t, nil, "id", "encode", "--shard", "7", "--type", "comment", "--local", "99")
	dec, err := runCmd(t, nil, "id", "decode", strings.TrimSpace(out))
	var got idJSON
	if err != nil || json.Unmarshal([]byte(dec), &got) != nil || got.Shard != 7 || got.TypeName != "comment" || got.LocalID != 99 {
		t.Fatalf("round trip: %s %v", dec, err)
	}
}
