package store

import (
	"bytes"
	"context"
	"sync"
	"sync/atomic"

	"github.com/pinstore/pinstore/model"
	"github.com/pinstore/pinstore/store/shardsql"
	"github.com/pinstore/pinstore/store/topology"
)

// A create under a parent (a pin on its board) reads the parent, share
// locked, then inserts: two round trips before the commit's. A server
// that created under the same parent before remembers what it read
// (parentMemo), builds the new document from that, and sends the
// parent's read after the insert, in the same round trip
// (shardsql.InsertObjectUnder). It is the same locked read of the same
// row in the same transaction, and the document is checked against it
// before anything else is written: when the parent gives another
// document (it became secret, say), the insert is undone to a savepoint
// sent before it, and the create goes on as one without a guess (the
// undo also drops the parent's lock, which its first read takes again);
// when the parent is gone or refuses the actor, the transaction rolls
// back as it would have after the first read.

// maxParents bounds the parents a server remembers; past it, it forgets
// them all and starts again.
const maxParents = 1 << 14

// parentMemo is the last read of parents, by id, and how the creates
// that built their document from it went: kept, or undone.
type parentMemo struct {
	mu           sync.Mutex
	docs         map[uint64]model.Doc
	kept, undone atomic.Int64
}

func (m *parentMemo) get(id uint64) model.Doc {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.docs[id]
}

func (m *parentMemo) put(id uint64, d model.Doc) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.docs == nil || len(m.docs) >= maxParents {
		m.docs = make(map[uint64]model.Doc)
	}
	m.docs[id] = d
}

// insertGuessed is insertMember for o, whose document build made from a
// remembered parent (local id parent): the parent's read goes with the
// insert, and build makes the document again from the parent as read.
// It returns the object, count's length and the parent as read; the
// document inserted is o's. When build makes another document, the
// insert is undone (ok false) and the caller creates as without a guess.
// ENotFound when the parent is missing or deleted, and build's error
// when it refuses the parent as read.
func insertGuessed(ctx context.Context, tx *shardsql.Tx, op string, sh topology.Shard, o newObject, count shardsql.ListRef, parent uint64,
	build func(parent model.Doc) ([]byte, error)) (obj model.Object, n int64, pd model.Doc, ok bool, err error) {
	t, _ := model.TypeOf(o.typ)
	if err := shardsql.Savepoint(ctx, tx); err != nil {
		return obj, 0, nil, false, err
	}
	obj, n, row, err := shardsql.InsertObjectUnder(ctx, tx, sh.DB, o.typ, o.raw, model.FlagsOf(o.d), o.at, count, parent)
	if pd, err = liveDoc(op, t.Parent.From(), row, err); err != nil {
		return obj, 0, nil, false, err
	}
	raw, err := build(pd)
	if err != nil {
		return obj, 0, pd, false, err
	}
	if !bytes.Equal(raw, o.raw) {
		return obj, 0, pd, false, shardsql.RollbackToSavepoint(ctx, tx)
	}
	lists, secret := memberships(t, o.d)
	return obj, n, pd, true, shardsql.AddEdges(ctx, tx, sh.DB, obj.ID, o.seq, lists, secret)
}
