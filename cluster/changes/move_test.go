package changes_test

import (
	"context"
	"database/sql"
	"fmt"
	"maps"
	"net"
	"testing"
	"time"

	"github.com/pinstore/pinstore/cluster/changes"
	"github.com/pinstore/pinstore/idcodec"
	"github.com/pinstore/pinstore/internal/testenv"
	"github.com/pinstore/pinstore/store/shardmap"
)

// TestMoveWritesTellNothingOnAReplica writes a pin as a move does
// (skip_replication set) and another as a client does on a master, and
// follows the binlog of its replica (what a failover's promoted replica
// serves): the replica applied both and flags the move's in its own
// binlog, so only the client's pin is told.
func TestMoveWritesTellNothingOnAReplica(t *testing.T) {
	prefix := testenv.UniquePrefix(t, "chf")
	master := newFleetOn(t, "flag-master", 1, prefix)
	replica := testenv.ReplicationHost(t, "flag-replica", 2)
	host, port, _ := net.SplitHostPort(master.host.Addr())
	replica.Exec(t,
		fmt.Sprintf("CHANGE MASTER TO MASTER_HOST='%s', MASTER_PORT=%s, MASTER_USER='root', MASTER_USE_GTID=slave_pos", host, port),
		"START SLAVE")
	db := master.m.DBName(1)
	master.host.Exec(t, "SET SESSION skip_replication = 1",
		"INSERT INTO "+db+`.pins (local_id, doc, version, created_at, updated_at) VALUES (1, '{"board_id":"1","owner_id":"1","active":true}', 1, NOW(6), NOW(6))`)
	master.tx(t, `INSERT INTO {1}.pins (local_id, doc, version, created_at, updated_at) VALUES (2, '{"board_id":"1","owner_id":"1","active":true}', 1, NOW(6), NOW(6))`)
	rdb, err := sql.Open("mysql", replica.DSN())
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	deadline := time.Now().Add(30 * time.Second)
	for n := 0; n != 2; _ = rdb.QueryRow("SELECT COUNT(*) FROM " + db + ".pins").Scan(&n) {
		if time.Now().After(deadline) {
			t.Fatal("the replica did not apply both pins within 30s")
		}
		time.Sleep(50 * time.Millisecond)
	}

	m, err := shardmap.SingleHost(replica.DSN(), 2, prefix)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	all := changes.Token{Hosts: map[string]changes.HostPos{"default": {}}} // the replica's whole binlog
	var got []changes.Event
	err = changes.Follow(ctx, changes.Config{Map: func() *shardmap.Map { return m }, Progress: 50 * time.Millisecond}, all, func(e changes.Event) error {
		if e.Kind != changes.Progress {
			got = append(got, e)
			if e.Kind == changes.Created && e.ID == id(1, idcodec.TypePin, 2) {
				cancel()
			}
		}
		return nil
	})
	if ctx.Err() != context.Canceled {
		t.Fatalf("the client's pin was not told within 30s: %v (told %v)", err, got)
	}
	for _, e := range got {
		if e.Type == "pin" && e.ID == id(1, idcodec.TypePin, 1) {
			t.Errorf("the move's pin was told from the replica: %+v", e)
		}
	}
}

// TestSpareHostDownDoesNotStopTheStream follows a map that names, beside
// the host with the shards, a host with none that does not answer: the
// stream starts and tells the shards' changes all the same.
func TestSpareHostDownDoesNotStopTheStream(t *testing.T) {
	f := newFleet(t)
	m := *f.m
	m.Hosts = maps.Clone(f.m.Hosts)
	m.Hosts["spare"] = shardmap.HostSpec{Master: fmt.Sprintf("root@tcp(127.0.0.1:%d)/?timeout=1s", testenv.FreePort(t))}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	started := make(chan struct{})
	var told changes.Event
	err := changes.Follow(ctx, changes.Config{Map: func() *shardmap.Map { return &m }, Progress: 50 * time.Millisecond}, changes.Token{}, func(e changes.Event) error {
		if e.Kind == changes.Progress {
			select {
			case <-started:
			default:
				close(started)
				go func() {
					if _, err := f.db.Exec("INSERT INTO " + f.m.DBName(0) + `.pins (local_id, doc, version, created_at, updated_at) VALUES (1, '{"board_id":"1","owner_id":"1","active":true}', 1, NOW(6), NOW(6))`); err != nil {
						t.Error(err)
					}
				}()
			}
			return nil
		}
		told = e
		cancel()
		return nil
	})
	if ctx.Err() != context.Canceled || told.ID != id(0, idcodec.TypePin, 1) {
		t.Fatalf("Follow returned %v having told %+v; want the pin told", err, told)
	}
}
