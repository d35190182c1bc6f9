package changes

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
)

// Needs says what the MariaDB server behind db lacks to feed the change
// stream and a point-in-time restore, which both read its binary log: ""
// when nothing. A replica (replica true) also needs log_slave_updates, so
// that once promoted its binary log holds what it applied, and must apply
// the events a move flags (replicate_events_marked_for_skip=REPLICATE, the
// default), which are its copies. migrate and
// replica add print it, so a host is set up right before a consumer is
// refused by it (ErrNotRow).
func Needs(ctx context.Context, db *sql.DB, replica bool) (string, error) {
	var logBin, slaveUpdates int
	var format, image, marked string
	err := db.QueryRowContext(ctx, "SELECT @@log_bin, @@log_slave_updates, @@binlog_format, @@binlog_row_image, @@replicate_events_marked_for_skip").Scan(&logBin, &slaveUpdates, &format, &image, &marked)
	if err != nil {
		return "", err
	}
	var lacks []string
	if logBin != 1 {
		lacks = append(lacks, "log_bin=ON")
	}
	if !strings.EqualFold(format, "ROW") {
		lacks = append(lacks, "binlog_format=ROW (it has "+format+")")
	}
	if !strings.EqualFold(image, "FULL") {
		lacks = append(lacks, "binlog_row_image=FULL (it has "+image+")")
	}
	if replica && slaveUpdates != 1 {
		lacks = append(lacks, "log_slave_updates=ON")
	}
	if replica && !strings.EqualFold(marked, "REPLICATE") {
		// A move flags its copies (skip_replication) so the stream tells
		// none of them; a replica filtering flagged events would miss them.
		lacks = append(lacks, "replicate_events_marked_for_skip=REPLICATE (it has "+marked+")")
	}
	if len(lacks) == 0 {
		return "", nil
	}
	return fmt.Sprintf("the change stream and point-in-time restore need %s in its configuration (docs/changes.md)", strings.Join(lacks, ", ")), nil
}
