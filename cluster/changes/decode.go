package changes

import (
	"encoding/json"
	"fmt"

	"github.com/go-mysql-org/go-mysql/replication"

	"github.com/pinstore/pinstore/idcodec"
	"github.com/pinstore/pinstore/model"
)

// objectRow is what the stream reads of an object's row image.
type objectRow struct {
	local   uint64
	version int64
	doc     []byte
	active  bool
}

func readObject(row []any, cols columns) (objectRow, error) {
	var o objectRow
	l, ok1 := integer(at(row, cols["local_id"]))
	v, ok2 := integer(at(row, cols["version"]))
	doc, ok3 := text(at(row, cols["doc"]))
	if !ok1 || !ok2 || !ok3 {
		return o, fmt.Errorf("an object row of unexpected shape: %d columns", len(row))
	}
	var flags struct {
		Active bool `json:"active"`
	}
	if err := json.Unmarshal(doc, &flags); err != nil {
		return o, fmt.Errorf("an object's document is not JSON: %w", err)
	}
	return objectRow{local: uint64(l), version: v, doc: doc, active: flags.Active}, nil
}

// listRow is what the stream reads of a list entry's row image.
type listRow struct {
	from, to uint64
	sequence int64
}

func readEntry(row []any, cols columns) (listRow, error) {
	f, ok1 := integer(at(row, cols["from_id"]))
	t, ok2 := integer(at(row, cols["to_id"]))
	s, ok3 := integer(at(row, cols["sequence"]))
	if !ok1 || !ok2 || !ok3 {
		return listRow{}, fmt.Errorf("a list row of unexpected shape: %d columns", len(row))
	}
	return listRow{uint64(f), uint64(t), s}, nil
}

func at(row []any, i int) any {
	if i < 0 || i >= len(row) {
		return nil
	}
	return row[i]
}

// decodeRows turns one rows event of table t on shard into events, in row
// order. What an object's row change is in product terms follows from
// its "active" member, as the store writes it: an object is visible while
// active (a user row is inserted inactive and made active, at version 1,
// once its name is claimed, or deleted outright if it lost the name);
// becoming active is its creation, becoming inactive its delete, and any
// other change of an active object an update. Rows of objects that never
// were visible are no events. An update of a list entry changes its
// sequence: it moved in its list.
func decodeRows(shard int, t table, cols columns, op replication.EnumRowsEventType, rows [][]any) ([]Event, error) {
	var out []Event
	step := 1
	if op == replication.EnumRowsEventTypeUpdate {
		step = 2 // before and after images alternate
	}
	if len(rows)%step != 0 {
		return nil, fmt.Errorf("an update with %d row images", len(rows))
	}
	for i := 0; i < len(rows); i += step {
		var before, after []any
		switch op {
		case replication.EnumRowsEventTypeInsert:
			after = rows[i]
		case replication.EnumRowsEventTypeDelete:
			before = rows[i]
		case replication.EnumRowsEventTypeUpdate:
			before, after = rows[i], rows[i+1]
		default:
			return nil, fmt.Errorf("a rows event of unknown kind %v", op)
		}
		var e Event
		var ok bool
		var err error
		if t.list != 0 {
			e, ok, err = entryEvent(shard, t.list, cols, before, after)
		} else {
			e, ok, err = objectEvent(shard, t.typ, cols, before, after)
		}
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, e)
		}
	}
	return out, nil
}

func objectEvent(shard int, typ idcodec.Type, cols columns, before, after []any) (Event, bool, error) {
	var b, a objectRow
	var err error
	if before != nil {
		if b, err = readObject(before, cols); err != nil {
			return Event{}, false, err
		}
	}
	if after != nil {
		if a, err = readObject(after, cols); err != nil {
			return Event{}, false, err
		}
	}
	e := Event{Shard: shard, Type: typ.String()}
	var row objectRow
	switch {
	case after != nil && a.active && (before == nil || !b.active):
		e.Kind, row = Created, a
	case after != nil && a.active:
		e.Kind, row = Updated, a
	case before != nil && b.active && after != nil:
		e.Kind, row = Deleted, a
	case before != nil && b.active:
		e.Kind, row = Deleted, b // a row removed outright: gone at its last version
	default:
		return Event{}, false, nil // never visible
	}
	id, err := idcodec.Encode(uint32(shard), typ, row.local)
	if err != nil {
		return Event{}, false, fmt.Errorf("an object's id: %w", err)
	}
	e.ID, e.Version, e.Doc = model.ID(id), row.version, json.RawMessage(row.doc)
	return e, true, nil
}

func entryEvent(shard int, m model.Mapping, cols columns, before, after []any) (Event, bool, error) {
	e := Event{Shard: shard, List: m.String()}
	var row listRow
	var err error
	switch {
	case before == nil:
		e.Kind = Added
		row, err = readEntry(after, cols)
	case after == nil:
		e.Kind = Removed
		row, err = readEntry(before, cols)
	default:
		e.Kind = Moved
		row, err = readEntry(after, cols)
	}
	if err != nil {
		return Event{}, false, err
	}
	seq := row.sequence
	e.From, e.To, e.Sequence = model.ID(row.from), model.ID(row.to), &seq
	return e, true, nil
}
