package store

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/pinstore/pinstore/store/shardmap"

	"github.com/pinstore/pinstore/internal/testenv"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testenv.Cleanup()
	os.Exit(code)
}

const testShards = 8

// openTest migrates a private set of testShards shards spread over the
// given hosts (equal ranges) and opens a store on them. Without hosts, all
// shards are on the shared MariaDB.
func openTest(t *testing.T, dsns ...string) (*Store, *shardmap.Map) {
	t.Helper()
	return openTestB(t, dsns...)
}

func openTestB(t testing.TB, dsns ...string) (*Store, *shardmap.Map) {
	t.Helper()
	return openTestWith(t, nil, dsns...)
}

// openTestWith is openTest with tune applied to the store's Config.
func openTestWith(t testing.TB, tune func(*Config), dsns ...string) (*Store, *shardmap.Map) {
	t.Helper()
	if len(dsns) == 0 {
		dsns = []string{testenv.MySQLDSN(t)}
	}
	prefix := testenv.UniquePrefix(t, "st")
	var b strings.Builder
	fmt.Fprintf(&b, "shards: %d\ndb_prefix: %s\nhosts:\n", testShards, prefix)
	for i, d := range dsns {
		fmt.Fprintf(&b, "  h%d: {master: %q}\n", i, d)
	}
	b.WriteString("ranges:\n")
	per := testShards / len(dsns)
	for i := range dsns {
		last := (i+1)*per - 1
		if i == len(dsns)-1 {
			last = testShards - 1
		}
		fmt.Fprintf(&b, "  - {shards: %d-%d, host: h%d}\n", i*per, last, i)
	}
	m, err := shardmap.Parse([]byte(b.String()), shardmap.DefaultShards, shardmap.DefaultDBPrefix)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range dsns {
		t.Cleanup(func() { testenv.DropDatabases(t, d, prefix) })
	}
	t.Cleanup(func() { testenv.DropKeys(t, testenv.RedisAddr(t), prefix) })
	cfg := Config{Map: m, CursorSecret: []byte("test"), Redis: RedisConfig{Addrs: []string{testenv.RedisAddr(t)}, Prefix: prefix + ":o:"}, ObjectCache: ObjectCacheConfig{Prefix: prefix + ":c:"}}
	if tune != nil {
		tune(&cfg)
	}
	s, err := Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if err := s.Migrate(context.Background(), MigrateOptions{}); err != nil {
		t.Fatal(err)
	}
	return s, m
}
