package shardmap

import (
	"os"
	"strings"
	"testing"
)

// TestEditKeepsTheFile: Edit changes the lines of the ranges a move
// changed and nothing else, whatever the file's indentation and list
// style, and the result reads back as the new map.
func TestEditKeepsTheFile(t *testing.T) {
	compose, err := os.ReadFile("../../deploy/shardmap.compose.yaml")
	if err != nil {
		t.Fatal(err)
	}
	fourSpaces := "# four spaces, lists at the key's depth\nshards: 8\nhosts:\n    a:\n        master: 'root@tcp(10.0.0.1:3306)/'   # A\n    b:\n        master: 'root@tcp(10.0.0.2:3306)/'\nranges:\n- shards: 0-7   # all of them\n  host: a\n"
	for _, tc := range []struct {
		name        string
		file        string
		first, last int
		to          string
		want        []string // lines of the result
	}{
		{"compose", string(compose), 0, 1023, "mysql-b", []string{`  - {shards: 0-1023, host: mysql-b}`, `  - {shards: 1024-2047, host: mysql-a}`}},
		{"four spaces", fourSpaces, 4, 7, "b", []string{"- shards: 0-3 # all of them", "- shards: 4-7", "  host: b"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := Parse([]byte(tc.file), 4096, "db")
			if err != nil {
				t.Fatal(err)
			}
			next, err := m.Rewrite(tc.first, tc.last, func(r *Range) { r.Host = tc.to })
			if err != nil {
				t.Fatal(err)
			}
			out, err := Edit([]byte(tc.file), next)
			if err != nil {
				t.Fatal(err)
			}
			back, err := Parse(out, 4096, "db")
			if err != nil || back.Version() != next.Version() {
				t.Fatalf("reads back as %v (%v):\n%s", back, err, out)
			}
			lines := map[string]bool{}
			for _, l := range strings.Split(string(out), "\n") {
				lines[l] = true
			}
			for _, w := range tc.want {
				if !lines[w] {
					t.Errorf("no line %q in:\n%s", w, out)
				}
			}
			for _, l := range strings.Split(tc.file, "\n") {
				if !lines[l] && !strings.Contains(l, "shards: ") && !strings.Contains(l, "host: ") {
					t.Errorf("line %q lost:\n%s", l, out)
				}
			}
		})
	}
}
