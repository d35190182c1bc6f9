package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"strings"
	"time"

	"github.com/pinstore/pinstore/api"
	"github.com/pinstore/pinstore/cluster/failover"
	"github.com/pinstore/pinstore/cluster/fleet"
	"github.com/pinstore/pinstore/cluster/reshard"
)

// fleetHome reads, for the fleet route, the move in progress, the last
// failover and the map's last rewrite from where the map lives: the map
// file and the files beside it, or etcd (topo).
type fleetHome struct {
	mapFile string
	topo    *etcdTopo
}

var _ api.FleetHome = fleetHome{}

func (h fleetHome) Move(ctx context.Context) (*fleet.MoveStatus, error) {
	var data []byte
	var err error
	switch {
	case h.topo != nil:
		data, _, err = h.topo.c.Get(ctx, h.topo.c.Key("move"))
	case h.mapFile != "":
		data, err = os.ReadFile(reshard.LockPath(h.mapFile))
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
	default:
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return reshard.MoveStatus(data)
}

func (h fleetHome) Failover(ctx context.Context) (*fleet.FailoverStatus, error) {
	var data []byte
	var err error
	switch {
	case h.topo != nil:
		data, _, err = h.topo.c.Get(ctx, h.topo.c.Key(failover.RecordKey))
	case h.mapFile != "":
		data, err = os.ReadFile(failover.RecordPath(h.mapFile))
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
	}
	if err != nil || len(data) == 0 {
		return nil, err
	}
	return failover.Status(data, time.Now())
}

func (h fleetHome) LastRewrite(ctx context.Context) string {
	var data []byte
	var err error
	switch {
	case h.topo != nil:
		data, _, err = h.topo.c.RawMap(ctx)
	case h.mapFile != "":
		data, err = os.ReadFile(h.mapFile)
	}
	if err != nil || len(data) == 0 {
		return ""
	}
	line, _, _ := bufio.NewReader(bytes.NewReader(data)).ReadLine()
	if s, ok := strings.CutPrefix(string(line), "#"); ok {
		return strings.TrimPrefix(strings.TrimSpace(s), "Shard map. ")
	}
	return ""
}
