package store

import (
	"sync"

	"github.com/jmoiron/sqlx"

	"github.com/pinstore/pinstore/store/edgeread"
)

// edgeQueues are the edge-check queues (edgeread) of the pools reads use,
// masters and replicas alike, made on first use: HasMany's statements of
// edge rows on one pool share statements when they arrive together.
type edgeQueues struct {
	cfg    edgeread.Config
	queues sync.Map // *sqlx.DB → *edgeread.Queue
}

// on is db's queue.
func (e *edgeQueues) on(db *sqlx.DB) *edgeread.Queue {
	if q, ok := e.queues.Load(db); ok {
		return q.(*edgeread.Queue)
	}
	q, _ := e.queues.LoadOrStore(db, edgeread.NewQueue(db, e.cfg))
	return q.(*edgeread.Queue)
}
