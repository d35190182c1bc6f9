package main

import (
	"testing"
	"time"

	"github.com/pinstore/pinstore/store/topology"
)

func TestMapPoll(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want time.Duration
		err  bool
	}{{"", topology.DefaultMapPoll, false}, {"500ms", 500 * time.Millisecond, false}, {"0s", 0, true}, {"soon", 0, true}} {
		got, err := mapPoll(func(string) string { return tt.in })
		if got != tt.want || (err != nil) != tt.err {
			t.Errorf("%q: %v, %v", tt.in, got, err)
		}
	}
}

func TestFeedSweep(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want time.Duration
		err  bool
	}{{"", defaultFeedSweep, false}, {"30s", 30 * time.Second, false}, {"0", 0, false}, {"-1s", 0, true}, {"often", 0, true}} {
		got, err := feedSweep(func(string) string { return tt.in })
		if got != tt.want || (err != nil) != tt.err {
			t.Errorf("%q: %v, %v", tt.in, got, err)
		}
	}
}
