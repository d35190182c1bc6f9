package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pinstore/pinstore/internal/testenv"
)

// TestShardsShowsEveryHost: a host of the map that holds no range (here
// on a port nothing listens on) is shown and checked like the others:
// `pinstore shards` prints it DOWN and exits 1, and the admin route
// lists it, not answering.
func TestShardsShowsEveryHost(t *testing.T) {
	dsn := testenv.MySQLDSN(t)
	dead := fmt.Sprintf("root@tcp(127.0.0.1:%d)/", testenv.FreePort(t))
	prefix := testenv.UniquePrefix(t, "sh")
	t.Cleanup(func() { testenv.DropDatabases(t, dsn, prefix) })
	path := filepath.Join(t.TempDir(), "map.yaml")
	body := fmt.Sprintf("shards: %d\ndb_prefix: %s\nhosts:\n  a: {master: %q}\n  b: {master: %q}\nranges:\n  - {shards: 0-%d, host: a}\n",
		e2eShards, prefix, dsn, dead, e2eShards-1)
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := runCmd(t, map[string]string{"PINSTORE_MYSQL_DSN": dsn, "PINSTORE_SHARDS": fmt.Sprint(e2eShards), "PINSTORE_DB_PREFIX": prefix}, "migrate"); err != nil {
		t.Fatalf("migrate: %v\n%s", err, out)
	}
	env := map[string]string{"PINSTORE_SHARD_MAP": path, "PINSTORE_REDIS_DISABLED": "true"}
	out, err := runCmd(t, env, "shards")
	if err == nil || !strings.Contains(err.Error(), "1 of 2 hosts not answering: b") {
		t.Errorf("shards: err %v; want 1 of 2 hosts not answering: b\n%s", err, out)
	}
	var lineA, lineB string
	for _, l := range strings.Split(out, "\n") {
		switch {
		case strings.HasPrefix(l, "host a "):
			lineA = l
		case strings.HasPrefix(l, "host b "):
			lineB = l
		}
	}
	if !strings.HasSuffix(lineA, " up") || !strings.Contains(lineB, "DOWN") || !strings.Contains(out, "no shards") {
		t.Errorf("shards printed:\n%s", out)
	}

	s := startServerEnv(t, map[string]string{"PINSTORE_SHARD_MAP": path, "PINSTORE_DB_PREFIX": prefix})
	info := shardMapOf(t, s)
	var names []string
	for _, h := range info.Hosts {
		names = append(names, h.Name)
		if h.Name == "b" && (h.OK || h.Error == "") {
			t.Errorf("host b on a dead port: %+v", h)
		}
		if h.Name == "a" && !h.OK {
			t.Errorf("host a: %+v", h)
		}
	}
	if strings.Join(names, ",") != "a,b" {
		t.Errorf("/v1/admin/shard-map lists hosts %v, want a,b", names)
	}
}
