package store

import (
	"context"
	"slices"
	"time"

	"github.com/pinstore/pinstore/idcodec"
	"github.com/pinstore/pinstore/model"
	"github.com/pinstore/pinstore/store/shardsql"
	"github.com/pinstore/pinstore/store/topology"
)

// An object's place in lists follows from its type's declaration
// (model.ObjectType.Members): insertMember puts a new object on every
// list it is a member of, and a delete's unlink (delete.go) takes it off
// the same lists, so the two cannot disagree.

// memberships are the lists an object of type t with document d is on,
// as t declares them, and those of them whose owner counts d among its
// secret entries (d is secret, and the list is one of its owner type's
// SecretCounted).
func memberships(t *model.ObjectType, d model.Doc) (lists, secret []shardsql.ListRef) {
	isSecret := model.FlagsOf(d).Secret()
	for _, mb := range t.Members {
		from := uint64(mb.Of(d))
		if from == 0 {
			continue // on no such list (a pin in no section)
		}
		l := shardsql.ListRef{M: mb.List, From: from}
		lists = append(lists, l)
		if isSecret && slices.Contains(model.SecretCounted(mb.List.From()), mb.List) {
			secret = append(secret, l)
		}
	}
	return lists, secret
}

// newObject is what a create inserts: its type, its document (d, raw its
// stored JSON), when (at), and its sequence in the lists it joins
// (shardsql.Sequence(at), or a place in a list ordered by hand).
type newObject struct {
	typ idcodec.Type
	d   model.Doc
	raw []byte
	at  time.Time
	seq int64
}

// insertMember inserts o on sh and adds it to every list its type
// declares it a member of, with their counts and secret counts, in tx.
// None of it costs a round trip of its own: the insert and the lists'
// statements go with the transaction's next statement or its COMMIT, and
// name the new object as shardsql.NewObject. The object returned has no ID
// yet: the commit learns it (shardsql.Tx.Inserted), or InsertedID does at
// once for a caller that must name it in a value.
func insertMember(ctx context.Context, tx *shardsql.Tx, op string, sh topology.Shard, o newObject) (model.Object, error) {
	t, ok := model.TypeOf(o.typ)
	if !ok {
		return model.Object{}, model.Wrap(op, model.EInternal, "undeclared type "+o.typ.String(), nil)
	}
	obj, err := shardsql.InsertNew(ctx, tx, sh.DB, o.typ, o.raw, model.FlagsOf(o.d), o.at)
	if err != nil {
		return obj, err
	}
	lists, secret := memberships(t, o.d)
	return obj, shardsql.AddEdges(ctx, tx, sh.DB, shardsql.NewObject, o.seq, lists, secret)
}
