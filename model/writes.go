package model

import (
	"context"
	"sync/atomic"
)

// Writes notes whether any write of a request has committed. The store
// marks it (Committed) after each commit; the API reads it to know
// whether a request that failed before its host could take a write may
// run again whole without doing anything twice.
type Writes struct{ committed atomic.Bool }

// Commit records a committed write.
func (w *Writes) Commit() {
	if w != nil && !w.committed.Load() {
		w.committed.Store(true)
	}
}

// Committed reports whether a write has committed.
func (w *Writes) Committed() bool { return w != nil && w.committed.Load() }

type writesKey struct{}

// WritesKey is the context key under which a request's *Writes is found:
// a request's context answers it (WritesOf).
var WritesKey any = writesKey{}

// WritesOf is ctx's *Writes, or nil (a Writes method on nil does nothing).
func WritesOf(ctx context.Context) *Writes {
	w, _ := ctx.Value(WritesKey).(*Writes)
	return w
}
