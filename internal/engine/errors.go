package engine

import (
	"errors"
	"fmt"

	"github.com/sagacity-go/sagacity/wire"
)

// Kind classifies an Error. The set is closed; the HTTP layer maps each kind
// to one status code.
type Kind int

// Error kinds.
const (
	Internal Kind = iota
	NotFound
	Invalid
	Conflict
	Forbidden
	Unauthenticated
	Unavailable
	// Unprocessable: well formed, but not what the request it repeats
	// was (an idempotency key sent again with other bytes).
	Unprocessable
)

var kindNames = [...]string{"internal", "not found", "invalid", "conflict", "forbidden", "unauthenticated", "unavailable", "unprocessable"}

func (k Kind) String() string { return kindNames[k] }

// Error is the engine's one error type. Msg is safe to show to the caller;
// Err is the cause, for logs only. Code, when set, says in one word what
// a caller can act on (wire.CodeInDoubt, …): the codes are the wire's.
type Error struct {
	Kind   Kind
	Msg    string
	SagaID string
	Seq    int64
	Code   wire.Code
	Err    error
}

func (e *Error) Error() string {
	if e.Err != nil {
		return e.Msg + ": " + e.Err.Error()
	}
	return e.Msg
}

func (e *Error) Unwrap() error { return e.Err }

// Errorf returns an Error of kind k with a formatted message.
func Errorf(k Kind, format string, args ...any) *Error {
	return &Error{Kind: k, Msg: fmt.Sprintf(format, args...)}
}

// KindOf returns the kind of err: the kind of the first *Error in its chain,
// or Internal.
func KindOf(err error) Kind {
	if e, ok := errors.AsType[*Error](err); ok {
		return e.Kind
	}
	return Internal
}

// CodeOf returns the code of the first *Error in err's chain, "" when it
// has none.
func CodeOf(err error) wire.Code {
	if e, ok := errors.AsType[*Error](err); ok {
		return e.Code
	}
	return ""
}

// IsKind reports whether err is an *Error of kind k.
func IsKind(err error, k Kind) bool { return err != nil && KindOf(err) == k }

// at attaches a saga and seq to err when it is an *Error that has none.
func at(err error, sagaID string, seq int64) error {
	if e, ok := errors.AsType[*Error](err); ok && e.SagaID == "" {
		c := *e
		c.SagaID, c.Seq = sagaID, seq
		return &c
	}
	return err
}
