package shardsql

import (
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/pinstore/pinstore/idcodec"
	"github.com/pinstore/pinstore/model"
)

// Every statement of this package is declared once, at package
// initialisation, as a template in which {db} stands for the shard
// database's name (and base(typ) for the ID of local id 0 of a type on
// it): declare for one text; where a table, a lock or a count varies, one
// text per variant, from the tables that list them: perType (objectTables),
// perMapping (model.Mappings), perListTable (the mappings' tables and the
// feed's), perLock (the Lock clauses), perTypeLock and perTypeExtra. A
// shard database's text of a statement is made the first time that
// database sends it, and kept (DB.sql): a call costs a look-up, not a
// concatenation. A statement of variable length (an IN list, rows of
// VALUES) is a declared head and its placeholders (placeholders). So a
// new object type or mapping is a row of model's object types (ObjectType) or
// mappings, and its statements follow (TestEveryTypeAndMappingIsDeclared).

// stmt names a declared statement.
type stmt uint16

// templates are the texts of the declared statements, by stmt.
var templates []string

// declare declares the statement text, naming tables as {db}.table.
func declare(text string) stmt {
	templates = append(templates, text)
	return stmt(len(templates) - 1)
}

// typeStmt is a statement declared once per object type.
type typeStmt [len(objectTables)]stmt

// perType declares text for every object type, with {table} its table
// and {base} its base.
func perType(text string) typeStmt { return eachType(text, declare) }

// eachType is decl of text for every object type, with {table} its table
// and {base} its base, by type.
func eachType[S any](text string, decl func(string) S) (s [len(objectTables)]S) {
	for typ, table := range objectTables {
		if table != "" {
			s[typ] = decl(strings.NewReplacer("{table}", table, "{base}", base(idcodec.Type(typ))).Replace(text))
		}
	}
	return s
}

// mappingStmt is a statement declared once per mapping, by model.Mapping.
type mappingStmt []stmt

// perMapping declares text for every mapping, with {table} its table.
func perMapping(text string) mappingStmt {
	var s mappingStmt
	for _, m := range model.Mappings() {
		for int(m) >= len(s) {
			s = append(s, 0)
		}
		s[m] = declare(strings.ReplaceAll(text, "{table}", m.Table()))
	}
	return s
}

// lockStmt is a read declared once per Lock, the clause at its end.
type lockStmt [numLocks]stmt

// perLock declares the read text for every Lock.
func perLock(text string) lockStmt {
	var s lockStmt
	for l, clause := range lockClauses {
		s[l] = declare(text + clause)
	}
	return s
}

// typeLockStmt is a read declared once per object type and Lock.
type typeLockStmt [len(objectTables)]lockStmt

// perTypeLock declares the read text for every object type, with {table}
// its table, and every Lock.
func perTypeLock(text string) typeLockStmt { return eachType(text, perLock) }

// perTypeExtra declares, with decl, a statement for every object type and
// every list whose length it may carry besides its own counts (extra: a
// mapping, or 0 for none), by type and extra.
func perTypeExtra[S any](decl func(typ idcodec.Type, extra model.Mapping) S) (s [len(objectTables)][]S) {
	ms := model.Mappings()
	top := model.Mapping(0)
	for _, m := range ms {
		top = max(top, m)
	}
	for typ, table := range objectTables {
		if table == "" {
			continue
		}
		s[typ] = make([]S, top+1)
		s[typ][0] = decl(idcodec.Type(typ), 0)
		for _, m := range ms {
			s[typ][m] = decl(idcodec.Type(typ), m)
		}
	}
	return s
}

// listTableStmt is a statement declared once per list table: every
// mapping's table and the feed's.
type listTableStmt map[string]stmt

// perListTable declares text for every list table, with {table} its name.
func perListTable(text string) listTableStmt {
	s := listTableStmt{FeedTable: declare(strings.ReplaceAll(text, "{table}", FeedTable))}
	for _, m := range model.Mappings() {
		s[m.Table()] = declare(strings.ReplaceAll(text, "{table}", m.Table()))
	}
	return s
}

// of is the statement of list table table.
func (s listTableStmt) of(table string) (stmt, error) {
	st, ok := s[table]
	if !ok {
		return 0, fmt.Errorf("shardsql: %q is no list table", table)
	}
	return st, nil
}

// base stands, in a template, for the ID of local id 0 of type typ on
// the database the text is made for (DB.ID(typ, 0)): an id is a local id
// plus it.
func base(typ idcodec.Type) string { return "{base" + strconv.Itoa(int(typ)) + "}" }

// of is the statement of type typ.
func (s *typeStmt) of(typ idcodec.Type) stmt { return s[typ] }

// of is the statement of mapping m.
func (s mappingStmt) of(m model.Mapping) stmt { return s[m] }

// dbTexts are one database's texts of the declared statements, made on
// first use, in chunks allocated on first use: a database holds only the
// texts it sends.
type dbTexts []atomic.Pointer[textChunk]

// textChunk holds the texts of textChunkLen consecutive statements.
type textChunk [textChunkLen]atomic.Pointer[string]

const textChunkLen = 32

// texts holds the dbTexts of every database sent a statement, by name.
var texts sync.Map

// sql is db's text of statement s.
func (db DB) sql(s stmt) string {
	v, ok := texts.Load(db.Name)
	if !ok {
		v, _ = texts.LoadOrStore(db.Name, make(dbTexts, (len(templates)+textChunkLen-1)/textChunkLen))
	}
	chunk := &v.(dbTexts)[s/textChunkLen]
	c := chunk.Load()
	if c == nil {
		chunk.CompareAndSwap(nil, new(textChunk))
		c = chunk.Load()
	}
	slot := &c[s%textChunkLen]
	if t := slot.Load(); t != nil {
		return *t
	}
	t := strings.ReplaceAll(templates[s], "{db}", db.Name)
	for typ := range objectTables {
		if b := base(idcodec.Type(typ)); strings.Contains(t, b) {
			t = strings.ReplaceAll(t, b, strconv.FormatUint(db.ID(idcodec.Type(typ), 0), 10))
		}
	}
	slot.Store(&t)
	return t
}

// placeholders returns prefix followed by n copies of group (such as
// "?" or "(?, ?, ?)") separated by ", ", then suffix: the text of a
// statement of variable length, in one allocation.
func placeholders(prefix string, n int, group, suffix string) string {
	var b strings.Builder
	b.Grow(len(prefix) + n*(len(group)+2) + len(suffix))
	b.WriteString(prefix)
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(group)
	}
	b.WriteString(suffix)
	return b.String()
}
