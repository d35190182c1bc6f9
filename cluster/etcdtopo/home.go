package etcdtopo

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/pinstore/pinstore/model"
	"github.com/pinstore/pinstore/store/shardmap"
)

// moveLockTTL is the lease of a running move-shards' lock: a mover that is
// killed leaves the lock for at most this long.
const moveLockTTL = 10 * time.Second

// Home is the topology as a shard move sees it (it satisfies
// reshard.Home): the map with its revision, written by compare-and-swap,
// and the lock and state of moves.
type Home struct{ c *Client }

// Home returns the topology as a shard move sees it.
func (c *Client) Home() Home { return Home{c} }

func (h Home) String() string { return h.c.url.String() + " " + h.c.MapKey() }

// ReadMap reads and validates the map; the revision is etcd's, in decimal.
func (h Home) ReadMap(ctx context.Context, shards int, prefix string) (*shardmap.Map, string, error) {
	m, rev, err := h.c.Map(ctx, shards, prefix)
	if err != nil {
		return nil, "", err
	}
	return m, strconv.FormatInt(rev, 10), nil
}

// WriteMap writes m if the map is still at revision rev (CAS).
func (h Home) WriteMap(ctx context.Context, m *shardmap.Map, rev, note string) (string, error) {
	r, err := strconv.ParseInt(rev, 10, 64)
	if err != nil {
		return "", fmt.Errorf("etcdtopo.WriteMap: revision %q: %w", rev, err)
	}
	n, err := h.c.PutMap(ctx, m, r, note)
	return strconv.FormatInt(n, 10), err
}

// LockMoves takes the lock of moves: an etcd mutex under a lease of
// moveLockTTL kept alive while the process runs, so a killed move-shards
// frees it within that time. The state lives at P/move and is written only
// while the lock is held.
func (h Home) LockMoves(ctx context.Context) (reshardLock, error) {
	sess, err := concurrency.NewSession(h.c.cli, concurrency.WithTTL(int(moveLockTTL/time.Second)), concurrency.WithContext(context.WithoutCancel(ctx)))
	if err != nil {
		return nil, h.c.unavailable("etcdtopo.LockMoves", err)
	}
	mu := concurrency.NewMutex(sess, h.c.key("locks/move"))
	c, cancel := call(ctx)
	defer cancel()
	if err := mu.TryLock(c); err != nil {
		sess.Close()
		if errors.Is(err, concurrency.ErrLocked) {
			return nil, model.Errorf(model.EConflict, "another pinstore move-shards is running (it holds the lock %s in etcd; a killed one lets go within %v)", h.c.key("locks/move"), moveLockTTL)
		}
		return nil, h.c.unavailable("etcdtopo.LockMoves", err)
	}
	l := &etcdLock{c: h.c, sess: sess, mu: mu, key: h.c.key("move")}
	data, rev, err := h.c.Get(ctx, l.key)
	if err != nil {
		l.Unlock()
		return nil, err
	}
	l.state, l.rev = data, rev
	return l, nil
}

// reshardLock is reshard.MoveLock, spelled out so that this package does
// not import reshard (a caller adapts LockMoves' result type).
type reshardLock interface {
	State() []byte
	Save(ctx context.Context, state []byte) error
	Remove(ctx context.Context) error
	Unlock()
	String() string
}

type etcdLock struct {
	c     *Client
	sess  *concurrency.Session
	mu    *concurrency.Mutex
	key   string
	state []byte
	rev   int64
}

func (l *etcdLock) String() string { return l.c.url.String() + " " + l.key }
func (l *etcdLock) State() []byte  { return l.state }

// Save writes the state if this process still holds the lock and nobody
// else changed the state since (CAS on its revision).
func (l *etcdLock) Save(ctx context.Context, b []byte) error {
	rev, err := l.c.CAS(ctx, l.key, l.rev, string(b), l.mu.IsOwner())
	if err != nil {
		return err
	}
	l.state, l.rev = b, rev
	return nil
}

// Remove deletes the state while the lock is held.
func (l *etcdLock) Remove(ctx context.Context) error {
	if l.rev == 0 {
		return nil
	}
	if err := l.c.CASDelete(ctx, l.key, l.rev, l.mu.IsOwner()); err != nil {
		return err
	}
	l.state, l.rev = nil, 0
	return nil
}

// Unlock releases the lock and ends its lease.
func (l *etcdLock) Unlock() {
	c, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	_ = l.mu.Unlock(c)
	_ = l.sess.Close()
}
