package ownercache_test

import (
	"context"
	"testing"
	"time"

	"github.com/pinstore/pinstore/store/ownercache"
)

// BenchmarkGet1000 reads 1,000 cached pins (all hits, ~900 buckets) from the
// primary Redis: one pipeline of one HMGET per bucket.
func BenchmarkGet1000(b *testing.B) {
	client := sharedClient(b)
	prefix := uniquePrefix(b, client)
	c := ownercache.New(client, ownercache.Options{Prefix: prefix, Timeout: time.Second})
	ctx := context.Background()
	pins, truth := realisticPairs(7, 1000)
	if err := c.Set(ctx, truth); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		owners, err := c.Get(ctx, pins)
		if err != nil {
			b.Fatal(err)
		}
		if owners[0] != truth[pins[0]] {
			b.Fatal("wrong owner")
		}
	}
}

// BenchmarkLookup1000Misses runs the read-through path for 1,000 uncached
// pins: a Get (all misses), load from a map, and the fill (HSET per bucket).
// The pins are deleted again between iterations, outside the timer.
func BenchmarkLookup1000Misses(b *testing.B) {
	client := sharedClient(b)
	prefix := uniquePrefix(b, client)
	c := ownercache.New(client, ownercache.Options{Prefix: prefix, Timeout: time.Second})
	ctx := context.Background()
	pins, truth := realisticPairs(8, 1000)
	l := &mapLoader{truth: truth}
	b.ReportAllocs()
	for b.Loop() {
		got, err := c.Lookup(ctx, pins, l.load)
		if err != nil || len(got) != len(pins) {
			b.Fatal(len(got), err)
		}
		b.StopTimer()
		l.reset()
		if err := c.Delete(ctx, pins...); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
}
