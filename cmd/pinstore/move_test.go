package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pinstore/pinstore/internal/testenv"
	"github.com/pinstore/pinstore/store"
)

func TestMoveShardsArgs(t *testing.T) {
	env := map[string]string{"PINSTORE_SHARD_MAP": "/nonexistent/shards.yaml"}
	for _, tt := range []struct {
		name string
		env  map[string]string
		args []string
		want string
	}{
		{"no range", env, []string{"--to", "h1"}, "--range and --to are required"},
		{"no target", env, []string{"--range", "0-3"}, "--range and --to are required"},
		{"bad range", env, []string{"--range", "3-1", "--to", "h1"}, "bad shard range"},
		{"stray argument", env, []string{"--range", "0-1", "--to", "h1", "now"}, "unexpected arguments"},
		{"no map file", nil, []string{"--range", "0-1", "--to", "h1"}, "PINSTORE_SHARD_MAP"},
		{"bad poll", map[string]string{"PINSTORE_SHARD_MAP": "x", "PINSTORE_MAP_POLL": "often"}, []string{"--range", "0-1", "--to", "h1"}, "PINSTORE_MAP_POLL"},
		{"missing map file", env, []string{"--range", "0-1", "--to", "h1"}, "no such file"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := runCmd(t, tt.env, append([]string{"move-shards"}, tt.args...)...)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want one mentioning %q", err, tt.want)
			}
		})
	}
}

// TestMoveShardsCommand runs migrate and move-shards as an operator would,
// between the shared MariaDB and a host the test starts.
func TestMoveShardsCommand(t *testing.T) {
	a := testenv.MySQLDSN(t)
	b := testenv.StartHost(t, "cmd-move").DSN()
	prefix := testenv.UniquePrefix(t, "cm")
	for _, d := range []string{a, b} {
		t.Cleanup(func() { testenv.DropDatabases(t, d, prefix) })
	}
	path := filepath.Join(t.TempDir(), "shards.yaml")
	body := fmt.Sprintf("shards: 4\ndb_prefix: %s\nhosts:\n  h0: {master: %q}\n  h1: {master: %q}\nranges:\n  - {shards: 0-1, host: h0}\n  - {shards: 2-3, host: h1}\n", prefix, a, b)
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"PINSTORE_SHARD_MAP": path, "PINSTORE_REDIS_DISABLED": "true"}
	if _, err := runCmd(t, env, "migrate"); err != nil {
		t.Fatal(err)
	}
	out, err := runCmd(t, env, "move-shards", "--range", "0-1", "--to", "h1", "--settle", "100ms")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, want := range []string{"copy:", "writes held:", "final pass:", "switched:", "dropped 2 source databases", "writes held off"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	m, err := store.LoadShardMap(path, 4, prefix)
	if err != nil {
		t.Fatal(err)
	}
	if r, _ := m.RangeOf(0); r.Host != "h1" || r.ReadOnly {
		t.Fatalf("shard 0 in %+v", r)
	}
	if _, err := os.Stat(store.MoveLockPath(path)); !os.IsNotExist(err) {
		t.Fatalf("lock file: %v", err)
	}
	// Moving it again is refused: the range is on h1 already.
	if _, err := runCmd(t, env, "move-shards", "--range", "0-1", "--to", "h1"); err == nil || !strings.Contains(err.Error(), "already on") {
		t.Fatalf("second move: %v", err)
	}
}
