package shardmap

import (
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	const hosts = `hosts:
  a: {master: "root@tcp(127.0.0.1:3306)/"}
  b: {master: "root@tcp(127.0.0.1:3307)/", replica: "root@tcp(127.0.0.1:3308)/"}
`
	tests := []struct {
		name string
		in   string
		err  string // substring; "" means valid
	}{
		{"two hosts", "shards: 16\n" + hosts + "ranges:\n - {shards: 0-7, host: a}\n - {shards: 8-15, host: b, open: false}\n", ""},
		{"unordered ranges", "shards: 16\n" + hosts + "ranges:\n - {shards: 8-15, host: b}\n - {shards: 0-7, host: a}\n", ""},
		{"json", `{"shards":4,"hosts":{"a":{"master":"root@tcp(127.0.0.1:3306)/"}},"ranges":[{"shards":"0-3","host":"a"}]}`, ""},
		{"default count", hosts + "ranges:\n - {shards: 0-4095, host: a}\n", ""},
		{"gap", "shards: 16\n" + hosts + "ranges:\n - {shards: 0-6, host: a}\n - {shards: 8-15, host: b}\n", "gap: shards 7-7"},
		{"gap at end", "shards: 16\n" + hosts + "ranges:\n - {shards: 0-7, host: a}\n - {shards: 8-14, host: b}\n", "gap: shards 15-15"},
		{"overlap", "shards: 16\n" + hosts + "ranges:\n - {shards: 0-8, host: a}\n - {shards: 8-15, host: b}\n", "overlaps"},
		{"outside", "shards: 16\n" + hosts + "ranges:\n - {shards: 0-16, host: a}\n", "outside 0-15"},
		{"unknown host", "shards: 16\n" + hosts + "ranges:\n - {shards: 0-15, host: c}\n", `unknown host "c"`},
		{"bad dsn", "shards: 4\nhosts:\n  a: {master: \"root:secret@tcp(127.0.0.1:3306\"}\nranges:\n - {shards: 0-3, host: a}\n", `host "a" master DSN does not parse`},
		{"dsn with db", "shards: 4\nhosts:\n  a: {master: \"root@tcp(127.0.0.1:3306)/db00001\"}\nranges:\n - {shards: 0-3, host: a}\n", "names database"},
		{"reversed range", "shards: 16\n" + hosts + "ranges:\n - {shards: 7-0, host: a}\n", "bad shard range"},
		{"negative", "shards: 16\n" + hosts + "ranges:\n - {shards: -1-15, host: a}\n", "bad shard range"},
		{"none open", "shards: 4\n" + hosts + "ranges:\n - {shards: 0-3, host: a, open: false}\n", "no range is open"},
		{"only open range read-only", "shards: 8\n" + hosts + "ranges:\n - {shards: 0-3, host: a, read_only: true}\n - {shards: 4-7, host: b, open: false}\n", "no writable range open"},
		{"bad prefix", "shards: 4\ndb_prefix: \"db;drop\"\n" + hosts + "ranges:\n - {shards: 0-3, host: a}\n", "db_prefix"},
		{"unknown field", "shards: 4\nshard_count: 3\n" + hosts + "ranges:\n - {shards: 0-3, host: a}\n", "shard_count"},
		{"too many shards", "shards: 70000\n" + hosts + "ranges:\n - {shards: 0-69999, host: a}\n", "shards must be"},
		{"no hosts", "shards: 4\nranges:\n - {shards: 0-3, host: a}\n", "no hosts"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := Parse([]byte(tt.in), DefaultShards, DefaultDBPrefix)
			if tt.err == "" {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				if r, ok := m.RangeOf(m.Shards - 1); !ok || r.Last != m.Shards-1 {
					t.Fatalf("RangeOf(last) = %+v, %v", r, ok)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Fatalf("error = %v, want it to mention %q", err, tt.err)
			}
			if strings.Contains(err.Error(), "secret") {
				t.Fatalf("error leaks a password: %v", err)
			}
		})
	}
}

func TestShardMapRoundTrip(t *testing.T) {
	m, err := SingleHost(DefaultDSN, DefaultShards, DefaultDBPrefix)
	if err != nil {
		t.Fatal(err)
	}
	if m.DBName(0) != "db00000" || m.DBName(4095) != "db04095" {
		t.Fatalf("names %s %s", m.DBName(0), m.DBName(4095))
	}
	r, ok := m.RangeOf(3429)
	if !ok || r.Host != "default" || !r.IsOpen() {
		t.Fatalf("RangeOf = %+v %v", r, ok)
	}
	if _, ok := m.RangeOf(4096); ok {
		t.Fatal("shard 4096 found in a 4096-shard map")
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte("shards: 16\nhosts:\n  a: {master: \"root@tcp(127.0.0.1:3306)/\"}\nranges:\n - {shards: 0-15, host: a}\n"))
	f.Add([]byte(`{"shards":4,"hosts":{"a":{"master":"x@tcp(h:1)/"}},"ranges":[{"shards":"0-1","host":"a"},{"shards":"2-3","host":"a"}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := Parse(data, 64, "db")
		if err != nil {
			return
		}
		// A map that validates covers every shard exactly once.
		for s := 0; s < m.Shards; s++ {
			if _, ok := m.RangeOf(s); !ok {
				t.Fatalf("shard %d uncovered in an accepted map", s)
			}
		}
	})
}
