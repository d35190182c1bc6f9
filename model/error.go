// Package model holds pinstore's domain types, their validation and the
// closed set of error codes. It does no I/O: no driver, no Redis, no HTTP.
package model

import (
	"errors"
	"fmt"
)

// Error codes. They are stable and travel to clients as the problem
// document's "code"; the api package maps each to exactly one HTTP status.
const (
	EInvalid       = "invalid_argument" // malformed input
	ENotFound      = "not_found"        // unknown, deleted, or of the wrong type
	EConflict      = "conflict"         // the request conflicts with current state
	EVersion       = "version_mismatch" // If-Match / expected version differs
	ETooLarge      = "too_large"        // a document or body over the limit
	EUnavailable   = "unavailable"      // a shard's host or a needed service is down
	EShardFull     = "shard_full"       // a shard's local ids are exhausted
	EUnauthorized  = "unauthorized"     // no or bad credentials
	EForbidden     = "forbidden"        // credentials lack the right
	ERateLimited   = "rate_limited"     // too many requests for this token
	EMoving        = "shard_moving"     // the shard is being moved; retry shortly
	EUsernameTaken = "username_taken"   // another user holds the username (in any case)
	EInternal      = "internal"         // a bug or an unexpected fault
)

// Error is pinstore's one error type. Code is one of the constants above;
// Message is safe to show a client (never SQL, a DSN or a stack); Op names
// the operation that failed; Err is the underlying cause, for logs only.
type Error struct {
	Code    string
	Message string
	Op      string
	Err     error
}

func (e *Error) Error() string {
	s := e.Code
	if e.Op != "" {
		s = e.Op + ": " + s
	}
	if e.Message != "" {
		s += ": " + e.Message
	}
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

func (e *Error) Unwrap() error { return e.Err }

// Errorf returns an *Error with the given code and a client-safe message.
func Errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Wrap returns an *Error that records op and cause under code; message is
// what a client may see.
func Wrap(op, code, message string, cause error) *Error {
	return &Error{Code: code, Message: message, Op: op, Err: cause}
}

// ErrorCode returns the code of the first *Error in err's chain, EInternal
// for any other non-nil error, and "" for nil.
func ErrorCode(err error) string {
	code, _ := ErrorCodeAndMessage(err)
	return code
}

// ErrorMessage returns the client-safe message of the first *Error in err's
// chain, or a generic text for errors that are not *Error.
func ErrorMessage(err error) string {
	_, message := ErrorCodeAndMessage(err)
	return message
}

// ErrorCodeAndMessage returns ErrorCode(err) and ErrorMessage(err),
// looking down err's chain once.
func ErrorCodeAndMessage(err error) (code, message string) {
	if err == nil {
		return "", ""
	}
	var e *Error
	if !errors.As(err, &e) {
		return EInternal, "internal error"
	}
	if e.Message == "" {
		return e.Code, "internal error"
	}
	return e.Code, e.Message
}

// IsCode reports whether err carries the given code.
func IsCode(err error, code string) bool { return ErrorCode(err) == code }

func errorsAs(err error, target **Error) bool { return errors.As(err, target) }
