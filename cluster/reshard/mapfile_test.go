package reshard_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pinstore/pinstore/cluster/reshard"
	"github.com/pinstore/pinstore/store/shardmap"
)

// commentedMap is a map file as an operator keeps it: comments above,
// beside and below, blank lines, flow and block styles, quoting.
const commentedMap = `# The shard map of the fleet: 16 shards on two hosts.
# Edit and save it while pinstore runs: the servers reload it.
shards: 16
db_prefix: cm

# the hosts (DSNs name no database)
hosts:
  mysql-a:  # the old one
    master: "root@tcp(127.0.0.1:3306)/"
    replicas: ["root@tcp(127.0.0.2:3306)/"]
  mysql-b: {master: "root@tcp(127.0.0.3:3306)/"}   # new in March

ranges:
  # users 0-7 were here first
  - {shards: "0-7", host: mysql-a}
  - shards: 8-15
    host: mysql-b   # keep open
# end of the map
`

// TestMapFileRewriteKeepsComments: a rewrite of the map file (what a move,
// a failover and a replica add do, through FileHome.WriteMap) changes
// only what changed: the operator's comments, blank lines, quoting and
// styles stay, every other line is byte for byte the same, and the file
// reads back as the new map. A JSON map file stays JSON.
func TestMapFileRewriteKeepsComments(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "shardmap.yaml")
	if err := os.WriteFile(path, []byte(commentedMap), 0o644); err != nil {
		t.Fatal(err)
	}
	home := reshard.FileHome(path)
	m, rev, err := home.ReadMap(ctx, 4096, "db")
	if err != nil {
		t.Fatal(err)
	}
	// A move's steps: shards 4-7 read-only, then on mysql-b.
	held, err := m.Rewrite(4, 7, func(r *shardmap.Range) { r.ReadOnly = true })
	if err != nil {
		t.Fatal(err)
	}
	if rev, err = home.WriteMap(ctx, held, rev, "Rewritten by pinstore move-shards (test: held)"); err != nil {
		t.Fatal(err)
	}
	moved, err := held.Rewrite(4, 7, func(r *shardmap.Range) { r.Host, r.ReadOnly = "mysql-b", false })
	if err != nil {
		t.Fatal(err)
	}
	if _, err = home.WriteMap(ctx, moved, rev, "Rewritten by pinstore move-shards (test: switched)"); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	text := string(got)
	for _, l := range strings.Split(commentedMap, "\n") {
		if strings.Contains(l, `"0-7"`) {
			continue // the one line the move changed
		}
		if !strings.Contains(text, l+"\n") {
			t.Errorf("the rewritten file lost the line %q:\n%s", l, text)
		}
	}
	for _, w := range []string{"  - {shards: 0-3, host: mysql-a}\n", "  - {shards: 4-7, host: mysql-b}\n", "\n\nranges:\n", "(test: switched)"} {
		if !strings.Contains(text, w) {
			t.Errorf("the rewritten file lacks %q:\n%s", w, text)
		}
	}
	if strings.Contains(text, "(test: held)") {
		t.Errorf("the note of an earlier rewrite stayed:\n%s", text)
	}
	back, _, err := home.ReadMap(ctx, 4096, "db")
	if err != nil || back.Version() != moved.Version() {
		t.Fatalf("the file reads back as %v (%v), want version %s:\n%s", back, err, moved.Version(), text)
	}

	// A failover's rewrite of a host (new master, the old one fenced).
	m, rev, _ = home.ReadMap(ctx, 4096, "db")
	next := *m
	next.Hosts = map[string]shardmap.HostSpec{}
	for k, v := range m.Hosts {
		next.Hosts[k] = v
	}
	a := next.Hosts["mysql-a"]
	a.Master, a.Fenced = "root@tcp(127.0.0.2:3306)/", []string{"root@tcp(127.0.0.1:3306)/"}
	next.Hosts["mysql-a"] = a.WithReplicas(nil)
	if _, err := home.WriteMap(ctx, &next, rev, "Rewritten by pinstore failover (test)"); err != nil {
		t.Fatal(err)
	}
	got, _ = os.ReadFile(path)
	for _, w := range []string{"# The shard map of the fleet", "  mysql-a:  # the old one\n", "    master: root@tcp(127.0.0.2:3306)/\n", "# end of the map\n", "  mysql-b: {master: \"root@tcp(127.0.0.3:3306)/\"}   # new in March\n"} {
		if !strings.Contains(string(got), w) {
			t.Errorf("after a failover's rewrite the file lacks %q:\n%s", w, got)
		}
	}
	if back, _, err := home.ReadMap(ctx, 4096, "db"); err != nil || back.Version() != next.Version() {
		t.Fatalf("after a failover's rewrite: %v\n%s", err, got)
	}

	// JSON stays JSON.
	jpath := filepath.Join(t.TempDir(), "shardmap.json")
	js := `{"shards": 16, "db_prefix": "cm", "hosts": {"a": {"master": "root@tcp(127.0.0.1:3306)/"}, "b": {"master": "root@tcp(127.0.0.3:3306)/"}}, "ranges": [{"shards": "0-15", "host": "a"}]}`
	if err := os.WriteFile(jpath, []byte(js), 0o644); err != nil {
		t.Fatal(err)
	}
	jh := reshard.FileHome(jpath)
	jm, jrev, err := jh.ReadMap(ctx, 4096, "db")
	if err != nil {
		t.Fatal(err)
	}
	jmoved, err := jm.Rewrite(8, 15, func(r *shardmap.Range) { r.Host = "b" })
	if err != nil {
		t.Fatal(err)
	}
	if _, err := jh.WriteMap(ctx, jmoved, jrev, "Rewritten by pinstore move-shards (test)"); err != nil {
		t.Fatal(err)
	}
	jgot, _ := os.ReadFile(jpath)
	var parsed map[string]any
	if err := json.Unmarshal(jgot, &parsed); err != nil {
		t.Fatalf("the JSON map file is no longer JSON (%v):\n%s", err, jgot)
	}
	if back, _, err := jh.ReadMap(ctx, 4096, "db"); err != nil || back.Version() != jmoved.Version() {
		t.Fatalf("the JSON file reads back wrong: %v\n%s", err, jgot)
	}
}
