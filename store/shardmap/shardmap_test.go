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
		{"only open range read-only (a failover's hold)", "shards: 8\n" + hosts + "ranges:\n - {shards: 0-3, host: a, read_only: true}\n - {shards: 4-7, host: b, open: false}\n", ""},
		{"bad prefix", "shards: 4\ndb_prefix: \"db;drop\"\n" + hosts + "ranges:\n - {shards: 0-3, host: a}\n", "db_prefix"},
		{"unknown field", "shards: 4\nshard_count: 3\n" + hosts + "ranges:\n - {shards: 0-3, host: a}\n", "shard_count"},
		{"too many shards", "shards: 70000\n" + hosts + "ranges:\n - {shards: 0-69999, host: a}\n", "shards must be"},
		{"no hosts", "shards: 4\nranges:\n - {shards: 0-3, host: a}\n", "no hosts"},
		{"replicas", "shards: 4\nhosts:\n  a: {master: \"root@tcp(127.0.0.1:3306)/\", replicas: [\"root@tcp(127.0.0.1:3307)/\", \"root@tcp(127.0.0.1:3308)/\"], replica_reads: true}\nranges:\n - {shards: 0-3, host: a}\n", ""},
		{"replica and replicas", "shards: 4\nhosts:\n  a: {master: \"root@tcp(127.0.0.1:3306)/\", replica: \"root@tcp(127.0.0.1:3307)/\", replicas: [\"root@tcp(127.0.0.1:3308)/\"]}\nranges:\n - {shards: 0-3, host: a}\n", ""},
		{"replica reads without replicas", "shards: 4\nhosts:\n  a: {master: \"root@tcp(127.0.0.1:3306)/\", replica_reads: true}\nranges:\n - {shards: 0-3, host: a}\n", "replica_reads but no replicas"},
		{"replica is a master", "shards: 4\nhosts:\n  a: {master: \"root@tcp(127.0.0.1:3306)/\", replicas: [\"root@tcp(127.0.0.1:3307)/\"]}\n  b: {master: \"root@tcp(127.0.0.1:3307)/\"}\nranges:\n - {shards: 0-1, host: a}\n - {shards: 2-3, host: b}\n", "is the master of host \"b\""},
		{"replica of itself", "shards: 4\nhosts:\n  a: {master: \"root@tcp(127.0.0.1:3306)/\", replicas: [\"u@tcp(127.0.0.1:3306)/\"]}\nranges:\n - {shards: 0-3, host: a}\n", "is the master of host \"a\""},
		{"replica twice", "shards: 4\nhosts:\n  a: {master: \"root@tcp(127.0.0.1:3306)/\", replicas: [\"root@tcp(127.0.0.1:3307)/\", \"root@tcp(127.0.0.1:3307)/\"]}\nranges:\n - {shards: 0-3, host: a}\n", "already a replica of host \"a\""},
		{"fenced is a replica", "shards: 4\nhosts:\n  a: {master: \"root@tcp(127.0.0.1:3306)/\", replicas: [\"root@tcp(127.0.0.1:3307)/\"], fenced: [\"root@tcp(127.0.0.1:3307)/\"]}\nranges:\n - {shards: 0-3, host: a}\n", "already a replica"},
		{"bad replica dsn", "shards: 4\nhosts:\n  a: {master: \"root@tcp(127.0.0.1:3306)/\", replicas: [\"root:secret@tcp(127.0.0.1:3307\"]}\nranges:\n - {shards: 0-3, host: a}\n", `host "a" replica 1 DSN does not parse`},
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

func TestCheckWritable(t *testing.T) {
	const hosts = "hosts:\n  a: {master: \"root@tcp(127.0.0.1:3306)/\"}\n"
	held, err := Parse([]byte("shards: 8\n"+hosts+"ranges:\n - {shards: 0-3, host: a, read_only: true}\n - {shards: 4-7, host: a, open: false}\n"), DefaultShards, DefaultDBPrefix)
	if err != nil {
		t.Fatal(err)
	}
	if err := held.CheckWritable(); err == nil || !strings.Contains(err.Error(), "no writable range open") {
		t.Fatalf("CheckWritable of a map whose open range is read-only: %v", err)
	}
	free, err := Parse([]byte("shards: 8\n"+hosts+"ranges:\n - {shards: 0-3, host: a, read_only: true}\n - {shards: 4-7, host: a}\n"), DefaultShards, DefaultDBPrefix)
	if err != nil || free.CheckWritable() != nil {
		t.Fatalf("a map with a writable open range: %v, %v", err, free.CheckWritable())
	}
}

// TestReplicaForms checks that the one-replica form of older maps reads
// as a list of one, keeps its version (it is written back as it was), and
// that WithReplicas moves a host to the list form.
func TestReplicaForms(t *testing.T) {
	old := "shards: 4\nhosts:\n  a: {master: \"root@tcp(127.0.0.1:3306)/\", replica: \"root@tcp(127.0.0.1:3307)/\"}\nranges:\n - {shards: 0-3, host: a}\n"
	m, err := Parse([]byte(old), DefaultShards, DefaultDBPrefix)
	if err != nil {
		t.Fatal(err)
	}
	if got := m.Hosts["a"].ReplicaDSNs(); len(got) != 1 || got[0] != "root@tcp(127.0.0.1:3307)/" {
		t.Fatalf("ReplicaDSNs = %q", got)
	}
	b, err := m.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "replica: root@tcp(127.0.0.1:3307)/") || strings.Contains(string(b), "replicas:") {
		t.Fatalf("the old form is not written back as it was:\n%s", b)
	}
	back, err := Parse(b, DefaultShards, DefaultDBPrefix)
	if err != nil || back.Version() != m.Version() {
		t.Fatalf("round trip: %v, version %s → %s", err, m.Version(), back.Version())
	}
	h := m.Hosts["a"].WithReplicas([]string{"root@tcp(127.0.0.1:3307)/", "root@tcp(127.0.0.1:3308)/"})
	if h.Replica != "" || len(h.ReplicaDSNs()) != 2 {
		t.Fatalf("WithReplicas = %+v", h)
	}
	m.Hosts["a"] = h
	if err := m.Validate(); err != nil {
		t.Fatal(err)
	}
	if m.Version() == back.Version() {
		t.Fatal("a second replica did not change the map's version")
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
