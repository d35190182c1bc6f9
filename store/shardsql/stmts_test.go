package shardsql

import (
	"strings"
	"sync"
	"testing"

	"github.com/pinstore/pinstore/idcodec"
	"github.com/pinstore/pinstore/model"
)

// Every declared statement names its tables after {db} and leaves no
// template mark behind once made for a database.
func TestStatementsAreMadeForTheirDatabase(t *testing.T) {
	db := DB{N: 7, Name: "db00007"}
	for s, tmpl := range templates {
		text := db.sql(stmt(s))
		if !strings.Contains(tmpl, "{db}.") {
			t.Errorf("statement %d names no table of the shard: %q", s, tmpl)
		}
		if strings.ContainsAny(text, "{}") {
			t.Errorf("statement %d keeps a template mark: %q", s, text)
		}
		if again := db.sql(stmt(s)); again != text {
			t.Errorf("statement %d made twice differs: %q, %q", s, text, again)
		}
	}
	if got, want := db.sql(readObject[idcodec.TypePin][ShareLock]), "SELECT doc, flags, version, created_at, updated_at FROM db00007.pins WHERE local_id = ? LOCK IN SHARE MODE"; got != want {
		t.Errorf("pin read:\n%s\nwant\n%s", got, want)
	}
	if got := db.sql(insertEdge.of(model.BoardPins)); got != "INSERT IGNORE INTO db00007.board_pins (from_id, to_id, sequence) VALUES (?, ?, ?)" {
		t.Errorf("board_pins insert: %s", got)
	}
	// An id is a local id plus the shard's base for its type.
	if got := db.sql(pageObjects.of(model.BoardPins)); !strings.Contains(got, "e.to_id ^ "+itoa(int64(db.ID(idcodec.TypePin, 0)))) {
		t.Errorf("page of pins joins on another base: %s", got)
	}
	// Another database gets its own text.
	if got := (DB{N: 8, Name: "db00008"}).sql(insertEdge.of(model.BoardPins)); !strings.Contains(got, "db00008.board_pins") {
		t.Errorf("another shard's text: %s", got)
	}
}

// Every object type and every mapping has its statements: a new type or
// mapping declared in its table gets them with no other change.
func TestEveryTypeAndMappingIsDeclared(t *testing.T) {
	db := DB{N: 1, Name: "db00001"}
	for typ, table := range objectTables {
		if table == "" {
			continue
		}
		if got := db.sql(insertObject.of(idcodec.Type(typ))); !strings.Contains(got, "db00001."+table+" ") {
			t.Errorf("%s: insert %q", table, got)
		}
	}
	for _, m := range model.Mappings() {
		if got := db.sql(insertEdge.of(m)); !strings.Contains(got, "db00001."+m.Table()+" ") {
			t.Errorf("%s: insert %q", m, got)
		}
		if s, err := page.of(m.Table()); err != nil || !strings.Contains(db.sql(s), m.Table()) {
			t.Errorf("%s: page %v", m, err)
		}
	}
	if _, err := page.of("no_such_table"); err == nil {
		t.Error("a page of a table that is no list")
	}
}

// Many goroutines making the same database's texts at once get one text.
func TestStatementsConcurrently(t *testing.T) {
	db := DB{N: 9, Name: "db00009_concurrent"}
	var wg sync.WaitGroup
	texts := make([]string, 16)
	for i := range texts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			texts[i] = db.sql(raiseCount)
		}()
	}
	wg.Wait()
	for _, s := range texts {
		if s != texts[0] || !strings.Contains(s, "db00009_concurrent.mapping_counts") {
			t.Fatalf("texts differ: %q, %q", s, texts[0])
		}
	}
}

// The statement texts of a pin's create transaction and of a read by
// id with counts, as each call makes them:
//
//	go test -run '^$' -bench Statement -benchmem ./store/shardsql
func BenchmarkStatementText(b *testing.B) {
	db := DB{N: 12, Name: "db00012"}
	b.Run("create-pin", func(b *testing.B) {
		for range b.N {
			_ = db.sql(readBoardOwner[ShareLock])
			_ = db.sql(insertNew.of(idcodec.TypePin))
			_ = db.sql(insertNewVar.of(model.BoardPins))
			_ = db.sql(insertNewVar.of(model.UserPins))
			_ = placeholders(db.sql(addCounts), 2, "(?, ?, ?)", addCountsEnd)
			_ = db.sql(insertOutbox)
			_ = db.sql(insertCacheMarks)
		}
	})
	b.Run("read-counted", func(b *testing.B) {
		for range b.N {
			_ = db.sql(readCounted[idcodec.TypeBoard][0][NoLock])
		}
	})
}
