package pointread

import (
	"bytes"
	"context"
	"errors"
	"os"
	"testing"

	"github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"

	"github.com/pinstore/pinstore/idcodec"
	"github.com/pinstore/pinstore/internal/testenv"
	"github.com/pinstore/pinstore/model"
	"github.com/pinstore/pinstore/store/shardsql"
	"github.com/pinstore/pinstore/store/shardsql/shardtest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testenv.Cleanup()
	os.Exit(code)
}

var ctx = context.Background()

// shards provisions shard databases n… of a private prefix on the shared
// MariaDB and returns a pool and the databases.
func shards(t *testing.T, ns ...int) (*sqlx.DB, []shardsql.DB) {
	t.Helper()
	return shardtest.Shards(t, "pr", ns...)
}

func insertUser(t *testing.T, db *sqlx.DB, d shardsql.DB, name string) uint64 {
	t.Helper()
	o, err := shardsql.InsertObject(ctx, db, d, idcodec.TypeUser, []byte(`{"username":"`+name+`","active":true}`), model.FlagActive, shardsql.Now())
	if err != nil {
		t.Fatal(err)
	}
	return idcodec.LocalOf(o.ID)
}

// A batch whose statement MySQL refuses (here a shard's table is gone) is
// read again row by row: only the reads on that shard fail.
func TestBatchIsolatesABrokenShard(t *testing.T) {
	db, dbs := shards(t, 2, 5)
	bad, good := insertUser(t, db, dbs[0], "x"), insertUser(t, db, dbs[1], "x")
	if _, err := db.Exec("DROP TABLE " + dbs[0].Name + ".users"); err != nil {
		t.Fatal(err)
	}
	q := NewQueue(db, Config{})
	g := &Read{DB: dbs[1], Type: idcodec.TypeUser, Local: good}
	b := &Read{DB: dbs[0], Type: idcodec.TypeUser, Local: bad}
	q.lanes.Run([]*Read{g, b})
	var myErr *mysql.MySQLError
	if g.err != nil || g.Row.Version != 1 || !bytes.Contains(g.Row.Doc, []byte(`"username":"x"`)) {
		t.Fatalf("read on the healthy shard: %+v, %v", g.Row, g.err)
	}
	if !errors.As(b.err, &myErr) || myErr.Number != 1146 {
		t.Fatalf("read on the broken shard: %v", b.err)
	}
	// Alone, through Do, the broken shard's read fails the same way.
	if err := q.Do(ctx, &Read{DB: dbs[0], Type: idcodec.TypeUser, Local: bad}); !errors.As(err, &myErr) || myErr.Number != 1146 {
		t.Fatalf("Do on the broken shard: %v", err)
	}
}
