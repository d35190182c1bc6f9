package etcdtopo

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/pinstore/pinstore/model"
	"github.com/pinstore/pinstore/store/shardmap"
)

// Timeouts of one call to etcd. A call to a cluster that lost its quorum
// or is unreachable fails within them rather than hanging the caller.
const (
	dialTimeout = 2 * time.Second
	callTimeout = 3 * time.Second
)

// Client is a connection to the etcd cluster of a topology URL. It is safe
// for concurrent use.
type Client struct {
	cli *clientv3.Client
	url URL
}

// Dial connects to the cluster u names and checks that it answers (a read
// of the map key within callTimeout). An etcd that is down is an
// EUnavailable error naming the endpoints.
func Dial(ctx context.Context, u URL) (*Client, error) {
	const op = "etcdtopo.Dial"
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:            u.Endpoints,
		Username:             u.Username,
		Password:             u.Password,
		DialTimeout:          dialTimeout,
		DialKeepAliveTime:    2 * time.Second,
		DialKeepAliveTimeout: 2 * time.Second,
		AutoSyncInterval:     0,
		Logger:               zap.NewNop(),
		Context:              context.WithoutCancel(ctx),
	})
	if err != nil {
		return nil, model.Wrap(op, model.EUnavailable, fmt.Sprintf("etcd at %s: %v", strings.Join(u.Endpoints, ","), err), err)
	}
	c := &Client{cli: cli, url: u}
	cctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	if _, err := cli.Get(cctx, c.key("map"), clientv3.WithCountOnly()); err != nil {
		cli.Close()
		return nil, c.unavailable(op, err)
	}
	return c, nil
}

// Close closes the connection.
func (c *Client) Close() error { return c.cli.Close() }

// URL is the topology URL this client follows (String() has no password).
func (c *Client) URL() URL { return c.url }

// Etcd is the underlying etcd client, for callers that need what this
// package does not wrap (an election, say).
func (c *Client) Etcd() *clientv3.Client { return c.cli }

// key is the full key of name under the prefix.
func (c *Client) key(name string) string { return c.url.Prefix + "/" + name }

// Key is the full key of name under the prefix, for what other packages
// keep there (failover/leader, the automatic failover's election).
func (c *Client) Key(name string) string { return c.key(name) }

// MapKey is the key of the shard map.
func (c *Client) MapKey() string { return c.key("map") }

// unavailable turns an etcd call's failure into EUnavailable, naming the
// endpoints and what the client saw.
func (c *Client) unavailable(op string, err error) error {
	why := err.Error()
	if errors.Is(err, context.DeadlineExceeded) {
		why = "no answer within " + callTimeout.String()
	}
	return model.Wrap(op, model.EUnavailable, fmt.Sprintf("etcd at %s is not answering (%s)", strings.Join(c.url.Endpoints, ","), why), err)
}

// call bounds ctx by callTimeout.
func call(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, callTimeout)
}

// Get reads key (a full key) and returns its value and modification
// revision; a missing key is revision 0 and no value.
func (c *Client) Get(ctx context.Context, key string) ([]byte, int64, error) {
	ctx, cancel := call(ctx)
	defer cancel()
	resp, err := c.cli.Get(ctx, key)
	if err != nil {
		return nil, 0, c.unavailable("etcdtopo.Get", err)
	}
	if len(resp.Kvs) == 0 {
		return nil, 0, nil
	}
	return resp.Kvs[0].Value, resp.Kvs[0].ModRevision, nil
}

// CAS writes value at key (a full key) if the key is still at revision rev
// (its modification revision as read; 0: the key must not exist), and
// returns the new revision. Extra conditions (a lock still held, say) must
// hold too. When the key changed since rev the error is EConflict saying
// so; nothing is written.
func (c *Client) CAS(ctx context.Context, key string, rev int64, value string, extra ...clientv3.Cmp) (int64, error) {
	return c.cas(ctx, key, rev, clientv3.OpPut(key, value), extra...)
}

// CASDelete deletes key if it is still at revision rev; EConflict otherwise.
func (c *Client) CASDelete(ctx context.Context, key string, rev int64, extra ...clientv3.Cmp) error {
	_, err := c.cas(ctx, key, rev, clientv3.OpDelete(key), extra...)
	return err
}

func (c *Client) cas(ctx context.Context, key string, rev int64, op clientv3.Op, extra ...clientv3.Cmp) (int64, error) {
	const name = "etcdtopo.CAS"
	cmp := clientv3.Compare(clientv3.ModRevision(key), "=", rev)
	if rev == 0 {
		cmp = clientv3.Compare(clientv3.CreateRevision(key), "=", 0)
	}
	ctx, cancel := call(ctx)
	defer cancel()
	resp, err := c.cli.Txn(ctx).If(append([]clientv3.Cmp{cmp}, extra...)...).Then(op).Else(clientv3.OpGet(key)).Commit()
	if err != nil {
		return 0, c.unavailable(name, err)
	}
	if resp.Succeeded {
		return resp.Header.Revision, nil
	}
	now := int64(0)
	if rr := resp.Responses[0].GetResponseRange(); rr != nil && len(rr.Kvs) > 0 {
		now = rr.Kvs[0].ModRevision
	}
	if now == rev {
		return 0, model.Errorf(model.EConflict, "%s is still at revision %d, but a condition of the change no longer holds (the lock it needs was lost?): nothing written", key, rev)
	}
	if now == 0 {
		return 0, model.Errorf(model.EConflict, "%s was deleted since it was read at revision %d: nothing written; read it again", key, rev)
	}
	if rev == 0 {
		return 0, model.Errorf(model.EConflict, "%s was created by someone else (revision %d) meanwhile: nothing written; read it again", key, now)
	}
	return 0, model.Errorf(model.EConflict, "%s changed since it was read (revision %d, now %d): someone else changed it first; nothing written; read it again and retry", key, rev, now)
}

// RawMap reads the shard map key as stored: its bytes and revision (0 and
// nil when there is none).
func (c *Client) RawMap(ctx context.Context) ([]byte, int64, error) {
	return c.Get(ctx, c.MapKey())
}

// MapAt reads the shard map key as it was at revision rev (the map a
// server routes by, say, while a newer one was refused); etcd keeps old
// revisions until it compacts them, and a compacted one is an error.
func (c *Client) MapAt(ctx context.Context, rev int64) ([]byte, error) {
	ctx, cancel := call(ctx)
	defer cancel()
	resp, err := c.cli.Get(ctx, c.MapKey(), clientv3.WithRev(rev))
	if err != nil {
		if errors.Is(err, rpctypes.ErrCompacted) {
			return nil, model.Errorf(model.ENotFound, "the shard map at revision %d is no longer in etcd (compacted)", rev)
		}
		return nil, c.unavailable("etcdtopo.MapAt", err)
	}
	if len(resp.Kvs) == 0 || resp.Kvs[0].ModRevision != rev {
		return nil, model.Errorf(model.ENotFound, "no shard map written at revision %d of %s", rev, c.MapKey())
	}
	return resp.Kvs[0].Value, nil
}

// Map reads and validates the shard map in etcd, exactly as a map file is
// validated (shardmap.Parse with these defaults), and returns it with its
// revision. No map is ENotFound; a map that does not validate is
// EInvalid naming the problem and the revision.
func (c *Client) Map(ctx context.Context, defShards int, defPrefix string) (*shardmap.Map, int64, error) {
	const op = "etcdtopo.Map"
	data, rev, err := c.RawMap(ctx)
	if err != nil {
		return nil, 0, err
	}
	if rev == 0 {
		return nil, 0, model.Wrap(op, model.ENotFound, fmt.Sprintf("no shard map at %s in %s: push one with pinstore topology push FILE", c.MapKey(), c.url), nil)
	}
	m, err := shardmap.Parse(data, defShards, defPrefix)
	if err != nil {
		return nil, rev, model.Wrap(op, model.EInvalid, fmt.Sprintf("the shard map at %s (revision %d) does not validate: %v", c.MapKey(), rev, err), err)
	}
	return m, rev, nil
}

// PutMap writes m, which must validate, as the shard map if the map key is
// still at revision rev (0: there must be no map yet), and returns the new
// revision. note, if not empty, goes in a comment line at the top (who
// wrote the map and why). A lost race is EConflict; etcd down is
// EUnavailable.
func (c *Client) PutMap(ctx context.Context, m *shardmap.Map, rev int64, note string) (int64, error) {
	const op = "etcdtopo.PutMap"
	if err := m.Validate(); err != nil {
		return 0, model.Wrap(op, model.EInvalid, err.Error(), err)
	}
	body, err := m.Marshal()
	if err != nil {
		return 0, fmt.Errorf("%s: %w", op, err)
	}
	if note != "" {
		body = append([]byte("# "+strings.ReplaceAll(note, "\n", " ")+"\n"), body...)
	}
	// What a server will parse must validate to the same map.
	back, err := shardmap.Parse(body, m.Shards, m.DBPrefix)
	if err != nil || back.Version() != m.Version() {
		return 0, fmt.Errorf("%s: the map does not read back as written (nothing written): %v", op, err)
	}
	newRev, err := c.CAS(ctx, c.MapKey(), rev, string(body))
	if err != nil {
		var me *model.Error
		if errors.As(err, &me) && me.Code == model.EConflict {
			me.Message = "the shard map in etcd " + strings.TrimPrefix(me.Message, c.MapKey()+" ")
		}
		return 0, err
	}
	return newRev, nil
}
