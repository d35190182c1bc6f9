package changes

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"time"

	"github.com/pinstore/pinstore/idcodec"
	"github.com/pinstore/pinstore/model"
	"github.com/pinstore/pinstore/store/shardmap"
)

// Config is what Follow needs.
type Config struct {
	// Map is the shard map in force, read at the start and again each time
	// a host's connection is made anew (a failover's new master). Required.
	Map func() *shardmap.Map
	// Types and Lists filter the stream: with either set, only objects of
	// the Types and entries of the Lists are told (the others' progress
	// still moves the token). Both empty: everything.
	Types []idcodec.Type
	Lists []model.Mapping
	// Progress is the longest the stream reads past changes it does not
	// tell (filtered out, or internal) before it tells a Progress event
	// with the token. Default: one second.
	Progress time.Duration
	// Logger receives reconnections. Default: slog.Default().
	Logger *slog.Logger
	// Retry is the pause before a lost binlog connection is made again.
	// Default: one second.
	Retry time.Duration
}

// filter says whether an event is told.
type filter struct {
	all   bool
	types map[string]bool
	lists map[string]bool
}

func newFilter(c Config) filter {
	f := filter{all: len(c.Types) == 0 && len(c.Lists) == 0, types: map[string]bool{}, lists: map[string]bool{}}
	for _, t := range c.Types {
		f.types[t.String()] = true
	}
	for _, m := range c.Lists {
		f.lists[m.String()] = true
	}
	return f
}

func (f filter) keep(e *Event) bool {
	if f.all {
		return true
	}
	if e.IsObject() {
		return f.types[e.Type]
	}
	return f.lists[e.List]
}

// Follow tells emit every change after the token after (the zero Token:
// from the hosts' current positions), one call at a time, until ctx ends
// or emit fails; it returns emit's error, or ctx's. The first call tells
// a Progress event with the token of the start. A slow emit slows only
// this stream: the hosts' binlog connections wait for it (the server's
// dump thread waits on the socket); writes never do.
//
// Errors: a host without a full row binlog (ErrNotRow, model.EUnavailable);
// a token a host's binlogs no longer hold (ErrExpired, model.EConflict);
// a token naming a host the map does not have (model.EInvalid).
func Follow(ctx context.Context, c Config, after Token, emit func(Event) error) error {
	const op = "changes.Follow"
	if c.Map == nil {
		return errors.New(op + ": no map")
	}
	if c.Progress <= 0 {
		c.Progress = time.Second
	}
	if c.Retry <= 0 {
		c.Retry = time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	m := c.Map()
	for host := range after.Hosts {
		if spec, ok := m.Hosts[host]; !ok || spec.Master == "" {
			return model.Errorf(model.EInvalid, "the token names host %s, which the map does not have", host)
		}
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	tbls := tables()
	state := map[string]HostPos{}
	read := newProgress()
	txs := make(chan txn, 16)
	errc := make(chan error, 1)
	var layout map[string]columns // the shards' column layout, for hosts that hold none
	reading := map[string]bool{}
	// open starts reading host name, from the position start picks given
	// what the host says of its binlog.
	open := func(name string, start func(r *hostReader, st hostState) (pos, error)) error {
		r := &hostReader{
			name: name, prefix: m.DBPrefix, shards: m.Shards, tables: tbls, logger: c.Logger, retry: c.Retry, read: read,
			dsn: func() (string, error) {
				spec, ok := c.Map().Hosts[name]
				if !ok {
					return "", fmt.Errorf("host %s is no longer in the map", name)
				}
				return spec.Master, nil
			},
		}
		now := c.Map()
		probe := ""
		if sh, ok := firstShard(now, name); ok {
			probe = now.DBName(sh)
		}
		st, err := r.inspect(ctx, now.Hosts[name].Master, probe)
		if err != nil {
			return fmt.Errorf("%s: %w", op, err)
		}
		if r.cols == nil {
			r.cols = layout
		} else if layout == nil {
			layout = r.cols
		}
		p, err := start(r, st)
		if err != nil {
			return err
		}
		if _, ok := state[name]; !ok {
			state[name] = HostPos{Pos: p.String()}
		}
		read.set(name, p)
		reading[name] = true
		go func() {
			err := r.run(ctx, p, txs)
			select {
			case errc <- err:
			case <-ctx.Done():
			}
		}()
		return nil
	}
	// Every host of the map is read, those that hold no shards too (a
	// move's target): hosts with shards first, for the column layout.
	names := hostsOf(m)
	for _, name := range slices.Sorted(maps.Keys(m.Hosts)) {
		if !slices.Contains(names, name) && m.Hosts[name].Master != "" {
			names = append(names, name)
		}
	}
	// from is where host name is read from: the token's position; without
	// a token, the host's current one; for a host the token did not know,
	// all it holds.
	from := func(name string) func(r *hostReader, st hostState) (pos, error) {
		return func(r *hostReader, st hostState) (pos, error) {
			if after.Hosts == nil {
				return st.current, nil
			}
			start := pos{}
			if hp, ok := after.Hosts[name]; ok {
				start, _ = parsePos(hp.Pos) // ParseToken checked it
			}
			return start, r.expired(start, st)
		}
	}
	for name, hp := range after.Hosts {
		p, _ := parsePos(hp.Pos)
		state[name] = hp // kept in the token while the host is not read yet
		read.set(name, p)
	}
	for _, name := range names {
		err := open(name, from(name))
		if _, holds := firstShard(m, name); err != nil && !holds && !errors.Is(err, ErrExpired) {
			// A host without shards that does not answer yet is read once
			// it does (added); until then nothing can move to it.
			c.Logger.Warn("change stream: a host of the map without shards does not answer; reading it once it does", "host", name, "error", err.Error())
			continue
		}
		if err != nil {
			return err
		}
	}
	// A host added to the map while the stream runs (or one that did not
	// answer at the start) is read from the token's position if the token
	// names it, or else from its position when first reached, or, if it
	// already holds shards then, from all it holds. One that does not
	// answer is tried again at the next tick.
	added := func() error {
		now := c.Map()
		for _, name := range slices.Sorted(maps.Keys(now.Hosts)) {
			if reading[name] || now.Hosts[name].Master == "" {
				continue
			}
			start := from(name)
			if _, known := after.Hosts[name]; !known {
				start = func(r *hostReader, st hostState) (pos, error) {
					if _, holds := firstShard(now, name); !holds {
						return st.current, nil
					}
					return pos{}, r.expired(pos{}, st)
				}
			}
			if err := open(name, start); err != nil {
				if errors.Is(err, ErrExpired) {
					return err
				}
				c.Logger.Warn("change stream: a host added to the map does not answer yet", "host", name, "error", err.Error())
				continue
			}
			c.Logger.Info("change stream: reading a host added to the map", "host", name)
		}
		return nil
	}

	f := newFilter(c)
	token := func() string { return Token{Hosts: maps.Clone(state)}.Encode() }
	if err := emit(Event{Kind: Progress, Token: token()}); err != nil {
		return err
	}
	tick := time.NewTicker(c.Progress)
	defer tick.Stop()
	untold := false
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case err := <-errc:
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("%s: %w", op, err)
		case <-tick.C:
			if err := added(); err != nil {
				return err
			}
			if untold {
				untold = false
				if err := emit(Event{Kind: Progress, Token: token()}); err != nil {
					return err
				}
			}
		case t := <-txs:
			prev := state[t.host]
			gtid := t.gtid.String()
			skip := -1
			if prev.GTID == gtid {
				skip = prev.Index // told before the last restart
			}
			told := false
			for i := range t.events {
				e := &t.events[i]
				e.Host, e.GTID, e.Index, e.Time = t.host, gtid, i, t.time
				e.Key = t.host + "/" + gtid + "/" + fmt.Sprint(i)
				if i <= skip || !f.keep(e) {
					continue
				}
				if i == len(t.events)-1 {
					state[t.host] = HostPos{Pos: t.after.String()}
				} else {
					state[t.host] = HostPos{Pos: prev.Pos, GTID: gtid, Index: i}
				}
				e.Token = token()
				if err := emit(*e); err != nil {
					return err
				}
				told = i == len(t.events)-1
			}
			state[t.host] = HostPos{Pos: t.after.String()}
			if !told {
				untold = true
			}
		}
	}
}

// hostsOf lists the hosts that hold shards in m, in name order.
func hostsOf(m *shardmap.Map) []string {
	var out []string
	for _, r := range m.Ranges {
		if !slices.Contains(out, r.Host) {
			out = append(out, r.Host)
		}
	}
	slices.Sort(out)
	return out
}

// firstShard is the first shard of host's first range in m; false when
// the host holds none.
func firstShard(m *shardmap.Map, host string) (int, bool) {
	for _, r := range m.Ranges {
		if r.Host == host {
			return r.First, true
		}
	}
	return 0, false
}
