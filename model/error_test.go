package model

import (
	"errors"
	"fmt"
	"testing"
)

// ErrorCode and ErrorMessage (one look down the chain each, or both from
// ErrorCodeAndMessage) for every kind of error: nil, a foreign error, an
// *Error with and without a message, and one wrapped.
func TestErrorCodeAndMessage(t *testing.T) {
	for _, c := range []struct {
		err       error
		code, msg string
	}{
		{nil, "", ""},
		{errors.New("dial tcp: refused"), EInternal, "internal error"},
		{Errorf(ENotFound, "pin %d not found", 7), ENotFound, "pin 7 not found"},
		{Wrap("store.Get", EUnavailable, "", errors.New("driver: bad connection")), EUnavailable, "internal error"},
		{fmt.Errorf("reading: %w", Errorf(EInvalid, "limit must be 1..250")), EInvalid, "limit must be 1..250"},
	} {
		code, msg := ErrorCodeAndMessage(c.err)
		if code != c.code || msg != c.msg || ErrorCode(c.err) != c.code || ErrorMessage(c.err) != c.msg {
			t.Errorf("%v: got %q, %q (ErrorCode %q, ErrorMessage %q); want %q, %q",
				c.err, code, msg, ErrorCode(c.err), ErrorMessage(c.err), c.code, c.msg)
		}
	}
}
