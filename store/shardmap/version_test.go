package shardmap

import "testing"

func TestRewrite(t *testing.T) {
	const hosts = "hosts:\n  a: {master: \"root@tcp(127.0.0.1:3306)/\"}\n  b: {master: \"root@tcp(127.0.0.1:3307)/\"}\n"
	parse := func(ranges string) *Map {
		t.Helper()
		m, err := Parse([]byte("shards: 16\n"+hosts+"ranges:\n"+ranges), DefaultShards, DefaultDBPrefix)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	toB := func(r *Range) { r.Host = "b" }
	ro := func(r *Range) { r.ReadOnly = true }
	tests := []struct {
		name        string
		ranges      string
		first, last int
		fn          func(*Range)
		want        string
	}{
		{"inside one range", " - {shards: 0-15, host: a}\n", 4, 7, toB, "0-3@a 4-7@b 8-15@a"},
		{"whole range", " - {shards: 0-7, host: a}\n - {shards: 8-15, host: b}\n", 0, 7, ro, "0-7@a(ro) 8-15@b"},
		{"across ranges", " - {shards: 0-7, host: a}\n - {shards: 8-15, host: a, open: false}\n", 6, 9, toB, "0-5@a 6-7@b 8-9@b(closed) 10-15@a(closed)"},
		{"merges back", " - {shards: 0-11, host: a, read_only: true}\n - {shards: 12-15, host: b}\n", 4, 7, func(r *Range) { r.ReadOnly = false }, "0-3@a(ro) 4-7@a 8-11@a(ro) 12-15@b"},
		{"no-op keeps boundaries", " - {shards: 0-7, host: a}\n - {shards: 8-15, host: a}\n", 2, 9, func(*Range) {}, "0-7@a 8-15@a"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parse(tt.ranges).Rewrite(tt.first, tt.last, tt.fn)
			if err != nil {
				t.Fatal(err)
			}
			if s := got.Summary(); s != tt.want {
				t.Fatalf("got  %s\nwant %s", s, tt.want)
			}
			// The file form parses back to the same map.
			b, _ := got.Marshal()
			back, err := Parse(b, DefaultShards, DefaultDBPrefix)
			if err != nil || back.Version() != got.Version() {
				t.Fatalf("round trip: %v\n%s", err, b)
			}
		})
	}
}

func TestVersionIgnoresFormatting(t *testing.T) {
	a, err := Parse([]byte("shards: 8\nhosts:\n  a: {master: \"root@tcp(127.0.0.1:3306)/\"}\nranges:\n - {shards: 0-7, host: a}\n"), DefaultShards, DefaultDBPrefix)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Parse([]byte(`{"shards": 8, "hosts": {"a": {"master": "root@tcp(127.0.0.1:3306)/"}}, "ranges": [{"shards": "0-7", "host": "a"}]}`), DefaultShards, DefaultDBPrefix)
	if err != nil {
		t.Fatal(err)
	}
	if a.Version() != b.Version() {
		t.Fatalf("the same map in YAML and JSON: versions %s and %s", a.Version(), b.Version())
	}
	c, _ := a.Rewrite(0, 3, func(r *Range) { r.ReadOnly = true })
	if c.Version() == a.Version() {
		t.Fatal("a read-only range did not change the version")
	}
}
