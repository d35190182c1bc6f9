package store

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/pinstore/pinstore/idcodec"
	"github.com/pinstore/pinstore/model"
)

// BenchmarkGetConcurrent: 32 goroutines Get random pins over the test
// shards, with reads by id batched (2 lanes, the default) and with every
// read its own statement (64 lanes, never all busy). It reports the reads
// per statement and the CPU MariaDB spent per read (the first mariadbd in
// /proc: the shared test server, when no other runs).
//
//	go test -run '^$' -bench GetConcurrent -benchtime 20000x ./store
func BenchmarkGetConcurrent(b *testing.B) {
	s0, m := openTestB(b)
	var pins []uint64
	for range 200 { // boards of users on every shard, a pin on each
		o, err := s0.CreateUser(ctx, model.UserDoc{Username: fmt.Sprintf("owner%d", len(pins))})
		if err != nil {
			b.Fatal(err)
		}
		bo, err := s0.Create(ctx, idcodec.TypeBoard, &model.BoardDoc{OwnerID: model.ID(o.ID), Name: "b"}, 0)
		if err != nil {
			b.Fatal(err)
		}
		p, err := s0.CreatePin(ctx, model.PinDoc{BoardID: model.ID(bo.ID), Link: "https://example.com/x"}, 0)
		if err != nil {
			b.Fatal(err)
		}
		pins = append(pins, p.ID)
	}
	for _, lanes := range []int{64, 2} {
		b.Run(fmt.Sprintf("lanes=%d", lanes), func(b *testing.B) {
			// A store of its own on the same shards, with that many lanes.
			s, err := Open(ctx, Config{Map: m, CursorSecret: []byte("test"), PointReadLanes: lanes, Redis: RedisConfig{Disabled: true}})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			reads0, stmts0 := testutil.ToFloat64(s.readStats.Jobs), testutil.ToFloat64(s.readStats.Statements)
			cpu0 := mariadbCPU()
			b.SetParallelism(16) // 32 goroutines on 2 CPUs
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := s.Get(ctx, pins[rand.IntN(len(pins))], idcodec.TypePin); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.StopTimer()
			reads, stmts := testutil.ToFloat64(s.readStats.Jobs)-reads0, testutil.ToFloat64(s.readStats.Statements)-stmts0
			b.ReportMetric(reads/stmts, "reads/stmt")
			if cpu := mariadbCPU(); cpu0 >= 0 && cpu >= 0 {
				b.ReportMetric((cpu-cpu0)/reads*1e6, "mariadb-µs/read")
			}
		})
	}
}

// mariadbCPU is the user+system CPU seconds of the local mariadbd, or -1.
func mariadbCPU() float64 {
	dirs, _ := os.ReadDir("/proc")
	for _, d := range dirs {
		if _, err := strconv.Atoi(d.Name()); err != nil {
			continue
		}
		comm, err := os.ReadFile("/proc/" + d.Name() + "/comm")
		if err != nil || strings.TrimSpace(string(comm)) != "mariadbd" {
			continue
		}
		stat, err := os.ReadFile("/proc/" + d.Name() + "/stat")
		if err != nil {
			return -1
		}
		f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+2:]))
		utime, _ := strconv.ParseFloat(f[11], 64)
		stime, _ := strconv.ParseFloat(f[12], 64)
		return (utime + stime) / 100
	}
	return -1
}
