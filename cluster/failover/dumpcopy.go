package failover

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/pinstore/pinstore/internal/progress"
)

// copyDump streams a dump from src into dst and, every `every` until it
// ends, calls report with a line a person reads: the bytes streamed so
// far, the rate, and (when total, the databases' size, is known) the time
// left at that rate. The dump's text is not the databases' size, so the
// time left is an estimate and says so. It returns the bytes copied.
func copyDump(dst io.Writer, src io.Reader, total func() int64, every time.Duration, report func(string)) (int64, error) {
	var n atomic.Int64
	start := time.Now()
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		tk := time.NewTicker(every)
		defer tk.Stop()
		for {
			select {
			case <-done:
				return
			case <-tk.C:
				report(dumpLine(n.Load(), total(), time.Since(start)))
			}
		}
	}()
	copied, err := io.Copy(dst, readerFunc(func(p []byte) (int, error) {
		k, err := src.Read(p)
		n.Add(int64(k))
		return k, err
	}))
	close(done)
	<-stopped
	return copied, err
}

// dumpLine is "copy: 120.0 MB of the dump, 12.0 MB/s; the databases
// hold about 400.0 MB: about 23s left".
func dumpLine(n, total int64, el time.Duration) string {
	var b strings.Builder
	fmt.Fprintf(&b, "copy: %s of the dump", progress.Bytes(n))
	if r := progress.PerSecond(n, el, progress.Bytes); r != "" {
		b.WriteString(", " + r)
	}
	if total > 0 {
		fmt.Fprintf(&b, "; the databases hold about %s: %s", progress.Bytes(total), progress.Left(n, total, el))
	}
	return b.String()
}

type readerFunc func([]byte) (int, error)

func (f readerFunc) Read(p []byte) (int, error) { return f(p) }

// dataSize is about how many bytes the databases hold
// (information_schema's DATA_LENGTH, which InnoDB keeps without
// counting); 0 when the master does not say.
func dataSize(ctx context.Context, db *sqlx.DB, dbs []string) int64 {
	if len(dbs) == 0 {
		return 0
	}
	args := make([]any, len(dbs))
	for i, d := range dbs {
		args[i] = d
	}
	var n int64
	q := "SELECT COALESCE(SUM(DATA_LENGTH), 0) FROM information_schema.TABLES WHERE TABLE_SCHEMA IN (?" + strings.Repeat(",?", len(dbs)-1) + ")"
	if err := sqlx.GetContext(ctx, db, &n, q, args...); err != nil {
		return 0
	}
	return n
}
