package model

import (
	"errors"
	"fmt"
	"testing"
)

// ErrorCodeAndMessage is ErrorCode and ErrorMessage in one look down the
// chain, for every kind of error.
func TestErrorCodeAndMessage(t *testing.T) {
	for _, err := range []error{
		nil,
		errors.New("dial tcp: refused"),
		Errorf(ENotFound, "pin %d not found", 7),
		Wrap("store.Get", EUnavailable, "", errors.New("driver: bad connection")),
		fmt.Errorf("reading: %w", Errorf(EInvalid, "limit must be 1..250")),
	} {
		code, msg := ErrorCodeAndMessage(err)
		if code != ErrorCode(err) || msg != ErrorMessage(err) {
			t.Errorf("%v: got %q, %q; want %q, %q", err, code, msg, ErrorCode(err), ErrorMessage(err))
		}
	}
}
