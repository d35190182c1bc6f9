package backup

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/pinstore/pinstore/internal/tracing"
)

// Verify restores the backup in dir into a scratch data directory under
// scratchDir (default the system's), replays its own binary logs to its
// checksums' position, compares every table with the manifest, and
// records the result in the manifest. It returns the result; an error is
// a verification that could not run (or a failed one, with the result
// recorded).
func Verify(ctx context.Context, dir, scratchDir string, tools Tools, p io.Writer) (*Verification, error) {
	p = orDiscard(p)
	start := time.Now()
	man, err := ReadManifest(dir)
	if err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp(scratchDir, "pinstore-verify-")
	if err != nil {
		return nil, fmt.Errorf("scratch directory: %w", err)
	}
	defer os.RemoveAll(tmp)
	opt := RestoreOptions{Backup: dir, DataDir: filepath.Join(tmp, "data"), Tools: tools, Progress: p}
	if man.Check.GTID != man.GTID {
		opt.Binlogs, opt.ToGTID = filepath.Join(dir, BinlogDir), man.Check.GTID
	}
	pl, err := checkStep(ctx, "verify", opt)
	if err != nil {
		return nil, err
	}
	fail := func(problem string) (*Verification, error) {
		v := &Verification{OK: false, At: time.Now().UTC(), Took: time.Since(start).Round(time.Millisecond).String(), Problem: problem}
		man.Verified = v
		if err := man.write(dir); err != nil {
			return v, err
		}
		return v, fmt.Errorf("backup %s FAILED verification: %s", dir, problem)
	}
	srv, err := restoreInto(ctx, pl, dir, opt.DataDir, p)
	if err != nil {
		return fail(err.Error())
	}
	defer srv.stop()
	if _, err := replay(ctx, pl, srv, p); err != nil {
		return fail(err.Error())
	}
	fmt.Fprintf(p, "verify: summing %d shard databases\n", len(man.Check.Databases))
	var diffs []string
	var tables int
	var rows int64
	err = tracing.Phase(ctx, "verify checksums", func(ctx context.Context) error {
		got, err := checksums(ctx, srv.db, man.DBPrefix, man.Databases(), nil)
		if err != nil {
			return err
		}
		diffs, tables, rows = compareSums(man.Check.Databases, got)
		if len(diffs) > 0 {
			return fmt.Errorf("%d tables differ from the manifest", len(diffs))
		}
		return nil
	})
	if err != nil && len(diffs) == 0 {
		return fail(err.Error())
	}
	if len(diffs) > 0 {
		more := ""
		if len(diffs) > 10 {
			more = fmt.Sprintf(" (and %d more)", len(diffs)-10)
			diffs = diffs[:10]
		}
		return fail(strings.Join(diffs, "; ") + more)
	}
	v := &Verification{OK: true, At: time.Now().UTC(), Took: time.Since(start).Round(time.Millisecond).String(), Tables: tables, Rows: rows}
	man.Verified = v
	if err := man.write(dir); err != nil {
		return v, err
	}
	fmt.Fprintf(p, "verify: backup %s is good: restored, replayed to %s, %d tables and %d rows match the source, in %s\n", dir, man.Check.GTID, tables, rows, v.Took)
	return v, nil
}
