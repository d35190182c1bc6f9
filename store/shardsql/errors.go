package shardsql

import (
	"context"
	"errors"
	"fmt"

	"github.com/go-sql-driver/mysql"

	"github.com/pinstore/pinstore/model"
)

// Classify turns an error of a statement sent to the MySQL host named host
// into a *model.Error, by MySQL error number or error type, never by
// message text; the message names the host, never its DSN. A *model.Error
// passes through (given op if it has none); nil stays nil.
func Classify(op, host string, err error) error {
	if err == nil {
		return nil
	}
	var me *model.Error
	if errors.As(err, &me) {
		if me.Op == "" {
			me.Op = op
		}
		return me
	}
	if host == "" {
		host = "?"
	}
	var myErr *mysql.MySQLError
	if errors.As(err, &myErr) {
		switch myErr.Number {
		case 1062: // ER_DUP_ENTRY
			return model.Wrap(op, model.EConflict, "already exists", err)
		case 1049, 1146: // ER_BAD_DB_ERROR, ER_NO_SUCH_TABLE
			return model.Wrap(op, model.EUnavailable, fmt.Sprintf("a shard on mysql host %q is not provisioned (run pinstore migrate)", host), err)
		case 1366, 3140, 4025: // incorrect string value, invalid JSON (MySQL 8), CHECK (JSON_VALID) failed
			// The api refuses such bodies first; this keeps anything it
			// misses a client error rather than a 500.
			return model.Wrap(op, model.EInvalid, "the database refused the document (invalid text or JSON it cannot store)", err)
		case errNoIDsLeft: // a queued insert's local id past an ID's 36 bits (InsertNew)
			return model.Wrap(op, model.EShardFull, myErr.Message, err)
		case 1205, 1213: // lock wait timeout, deadlock
			return model.Wrap(op, model.EUnavailable, "the write conflicted with another; retry", err)
		case 1317, 1927: // interrupted, connection killed: its context ended (socket.interrupt), or an operator's KILL
			return model.Wrap(op, model.EUnavailable, fmt.Sprintf("the statement on mysql host %q was stopped", host), err)
		case 1290, 2002, 2003, 2006, 2013: // read-only (a fenced master), can't connect, gone away, lost
			return model.Wrap(op, model.EUnavailable, fmt.Sprintf("mysql host %q is unavailable", host), &HostDown{Host: host, Err: err})
		case 1040, 1203, 1226, 1836: // too many connections, user limits, read-only replica
			return model.Wrap(op, model.EUnavailable, fmt.Sprintf("mysql host %q is unavailable", host), err)
		}
		return model.Wrap(op, model.EInternal, "", err)
	}
	if errors.Is(err, context.Canceled) {
		return model.Wrap(op, model.EUnavailable, "the request was cancelled", err)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return model.Wrap(op, model.EUnavailable, fmt.Sprintf("mysql host %q did not answer in time", host), err)
	}
	// Everything else from the driver is a connection failure: refused,
	// reset, timed out, bad connection.
	return model.Wrap(op, model.EUnavailable, fmt.Sprintf("mysql host %q is unavailable", host), &HostDown{Host: host, Err: err})
}

// HostDown is the cause Classify gives a statement that failed because its
// host's master could not be reached or refused writes as read-only (a
// failover fences a former master so): a failure a failover can end.
type HostDown struct {
	Host string // as the map names it
	Err  error  // the driver's
}

func (e *HostDown) Error() string { return e.Err.Error() }
func (e *HostDown) Unwrap() error { return e.Err }

// Refused reports whether err is the server refusing a statement (a MySQL
// error), as opposed to a connection or context failure.
func Refused(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me)
}

// RetryDeadlock runs fn again, up to three times in all, while InnoDB
// picks it as a deadlock victim (it then rolled back whole). Only for fn
// that is one idempotent transaction.
func RetryDeadlock(fn func() error) error {
	var err error
	for range 3 {
		var me *mysql.MySQLError
		if err = fn(); !errors.As(err, &me) || me.Number != 1213 {
			return err
		}
	}
	return err
}

// IsNoShard reports whether err says a shard database or table does not
// exist (not provisioned yet).
func IsNoShard(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && (me.Number == 1049 || me.Number == 1146)
}

// LockBusy reports whether err is a lock a NOWAIT read could not take
// (error 1205, which a wait past innodb_lock_wait_timeout also gives).
func LockBusy(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && me.Number == 1205
}

// IsDuplicate reports whether err is a duplicate key (error 1062).
func IsDuplicate(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && me.Number == 1062
}
