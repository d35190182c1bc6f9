package failover

import (
	"strings"
	"testing"

	"github.com/pinstore/pinstore/store/replicas"
)

func pos(t *testing.T, s string) replicas.Pos {
	t.Helper()
	p, err := replicas.ParsePos(s)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// A replica a transaction behind another may be promoted while the master
// answers (it receives the rest before the promotion), never once the
// master is gone (the rest would be lost); the replica that holds the most
// is the one chosen without --to.
func TestChooseBehindAnotherReplica(t *testing.T) {
	servers := func() []*server {
		return []*server{
			{addr: "r1:3306", dsn: "r1", has: pos(t, "0-1-410")},
			{addr: "r2:3306", dsn: "r2", has: pos(t, "0-1-411")},
		}
	}
	if c, err := choose("a", "r1:3306", servers(), true); err != nil || c.addr != "r1:3306" {
		t.Fatalf("with the master up, promoting the replica behind: %v, %v", c, err)
	}
	_, err := choose("a", "r1:3306", servers(), false)
	if err == nil || !strings.Contains(err.Error(), "refused to promote r1:3306: it is behind: it holds 0-1-410, but r2:3306 holds 0-1-411") {
		t.Fatalf("with the master gone, promoting the replica behind: %v", err)
	}
	for _, up := range []bool{true, false} {
		if c, err := choose("a", "", servers(), up); err != nil || c.addr != "r2:3306" {
			t.Fatalf("choosing (master up %v): %v, %v, want r2", up, c, err)
		}
	}
	s := servers()
	s[0].why = "its replication SQL thread is stopped"
	if _, err := choose("a", "r1:3306", s, true); err == nil || !strings.Contains(err.Error(), "SQL thread is stopped") {
		t.Fatalf("a replica that may not be promoted, master up: %v", err)
	}
}
