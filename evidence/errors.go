package evidence

import (
	"errors"
	"fmt"
)

// Error is evidence that does not hold or cannot be read. Msg says why,
// in words fit to show whoever presented it (the evidence is theirs);
// Err is the cause, when there is one.
type Error struct {
	Msg string
	Err error
}

func (e *Error) Error() string {
	if e.Err != nil {
		return e.Msg + ": " + e.Err.Error()
	}
	return e.Msg
}

func (e *Error) Unwrap() error { return e.Err }

// errorf returns an *Error with a formatted message.
func errorf(format string, args ...any) *Error { return &Error{Msg: fmt.Sprintf(format, args...)} }

// Message is what err says of the evidence: the Msg of the first *Error
// in its chain, or, for any other error, its text. Callers show it
// without asserting err's type, which a wrapped error would not have.
func Message(err error) string {
	if e, ok := errors.AsType[*Error](err); ok {
		return e.Msg
	}
	return err.Error()
}
