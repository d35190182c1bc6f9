package shardsql

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/go-sql-driver/mysql"

	"github.com/pinstore/pinstore/model"
)

func TestClassify(t *testing.T) {
	tests := []struct {
		name    string
		err     error
		code    string
		mention string // in the client-safe message
		down    bool   // a failure a failover can end: HostDown names the host
	}{
		{"nil", nil, "", "", false},
		{"duplicate", &mysql.MySQLError{Number: 1062}, model.EConflict, "already exists", false},
		{"missing table", &mysql.MySQLError{Number: 1146}, model.EUnavailable, `host "h1" is not provisioned`, false},
		{"missing database", fmt.Errorf("x: %w", &mysql.MySQLError{Number: 1049}), model.EUnavailable, "not provisioned", false},
		{"bad JSON", &mysql.MySQLError{Number: 4025}, model.EInvalid, "refused the document", false},
		{"deadlock", &mysql.MySQLError{Number: 1213}, model.EUnavailable, "conflicted", false},
		{"read-only", &mysql.MySQLError{Number: 1290}, model.EUnavailable, `host "h1" is unavailable`, true},
		{"too many connections", &mysql.MySQLError{Number: 1040}, model.EUnavailable, `host "h1" is unavailable`, false},
		{"other server error", &mysql.MySQLError{Number: 1064}, model.EInternal, "", false},
		{"deadline", context.DeadlineExceeded, model.EUnavailable, "did not answer in time", false},
		{"cancelled", context.Canceled, model.EUnavailable, "cancelled", false},
		{"connection", errors.New("dial tcp: connection refused"), model.EUnavailable, `host "h1" is unavailable`, true},
		{"model error passes", model.Errorf(model.ENotFound, "pin not found"), model.ENotFound, "pin not found", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Classify("op", "h1", tt.err)
			if got := model.ErrorCode(err); got != tt.code {
				t.Fatalf("code %q, want %q (%v)", got, tt.code, err)
			}
			if msg := model.ErrorMessage(err); !strings.Contains(msg, tt.mention) {
				t.Fatalf("message %q does not mention %q", msg, tt.mention)
			}
			var hd *HostDown
			if down := errors.As(err, &hd) && hd.Host == "h1"; down != tt.down {
				t.Fatalf("HostDown %v, want %v (%v)", down, tt.down, err)
			}
			var me *model.Error
			if err != nil && (!errors.As(err, &me) || me.Op != "op") {
				t.Fatalf("op not recorded: %#v", err)
			}
		})
	}
}

func TestRetryDeadlock(t *testing.T) {
	calls := 0
	err := RetryDeadlock(func() error {
		calls++
		if calls < 3 {
			return model.Wrap("op", model.EUnavailable, "", &mysql.MySQLError{Number: 1213})
		}
		return nil
	})
	if err != nil || calls != 3 {
		t.Fatalf("after two deadlocks: %v, %d calls", err, calls)
	}
	calls = 0
	err = RetryDeadlock(func() error { calls++; return &mysql.MySQLError{Number: 1062} })
	if calls != 1 || err == nil {
		t.Fatalf("another error is not retried: %v, %d calls", err, calls)
	}
}
