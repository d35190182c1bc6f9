// Package progress writes what a long operation (migrate, a move's copy,
// a replica's copy) has done so far as a line a person reads: counts with
// thousands separators, bytes in KB/MB/GB, the rate so far, and the time
// left at that rate. It measures nothing itself: callers count.
package progress

import (
	"fmt"
	"io"
	"strconv"
	"sync"
	"time"
)

// Count is n with thousands separators: 1234567 → "1,234,567".
func Count(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := n < 0
	if neg {
		s = s[1:]
	}
	var b []byte
	for i := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b = append(b, ',')
		}
		b = append(b, s[i])
	}
	if neg {
		return "-" + string(b)
	}
	return string(b)
}

// Bytes is n bytes in the largest unit that keeps it at least 1, with
// one decimal from KB on: "512 B", "3.1 MB".
func Bytes(n int64) string {
	const unit = 1000
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	v, u := float64(n), 0
	for v >= unit && u < 4 {
		v /= unit
		u++
	}
	return fmt.Sprintf("%.1f %s", v, [...]string{"B", "KB", "MB", "GB", "TB"}[u])
}

// PerSecond is done over elapsed as a rate, formatted by format (Count
// or Bytes) with "/s"; "" before anything is measured.
func PerSecond(done int64, elapsed time.Duration, format func(int64) string) string {
	if elapsed <= 0 {
		return ""
	}
	return format(int64(float64(done)/elapsed.Seconds())) + "/s"
}

// Left is the time left to reach total at the rate done took elapsed:
// "about 1m20s left"; "time left unknown" while nothing is done or the
// total is not known, "almost done" once done reaches an estimated total.
func Left(done, total int64, elapsed time.Duration) string {
	switch {
	case total <= 0 || done <= 0 || elapsed <= 0:
		return "time left unknown"
	case done >= total:
		return "almost done"
	}
	left := time.Duration(float64(elapsed) * float64(total-done) / float64(done))
	switch {
	case left < 10*time.Second:
		left = left.Round(100 * time.Millisecond)
	default:
		left = left.Round(time.Second)
	}
	return "about " + left.String() + " left"
}

// Locked is w made safe for the goroutines of one operation that all
// print to it (a migration's hosts, its progress ticker and its
// throttle): one Write at a time, so lines never interleave.
func Locked(w io.Writer) io.Writer { return &locked{w: w} }

type locked struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *locked) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
