package client

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/sagacity-go/sagacity/wire"
)

// The kinds of refusal, by status. errors.Is(err, ErrNotFound) reports
// whether err is an *Error with that status.
var (
	// ErrInvalid is 400: the request is malformed or a value is out of
	// bounds.
	ErrInvalid = errors.New("sagacity: invalid request")
	// ErrUnauthorized is 401: no token, or one the server does not accept.
	ErrUnauthorized = errors.New("sagacity: unauthorized")
	// ErrForbidden is 403: the principal may not do this, for want of a
	// role, by four-eyes, or because the saga is another agent's.
	ErrForbidden = errors.New("sagacity: forbidden")
	// ErrNotFound is 404: no such saga, pending request, receipt or
	// checkpoint.
	ErrNotFound = errors.New("sagacity: not found")
	// ErrConflict is 409: the saga or request is not in a state that
	// allows it (decided already, final, ended), or its journal does not
	// verify.
	ErrConflict = errors.New("sagacity: conflict")
)

var kinds = map[int]error{
	http.StatusBadRequest:   ErrInvalid,
	http.StatusUnauthorized: ErrUnauthorized,
	http.StatusForbidden:    ErrForbidden,
	http.StatusNotFound:     ErrNotFound,
	http.StatusConflict:     ErrConflict,
}

// Error is an answer whose status is not 2xx.
type Error struct {
	StatusCode int
	// Message is what the server said, its "error"; the body itself when
	// it is not JSON (cut at 512 bytes). For an internal error (500) it names the request id that
	// finds the cause in the server's log.
	Message string
	// SagaID and JournalSeq locate the refusal, when the server says.
	SagaID     string
	JournalSeq int64
	// Kind says what kind of refusal it is in one word, and Code what to
	// do about some (CodeInDoubt, CodeInProgress, CodeKeyReused, …; ""
	// for the others), as the server said.
	Kind wire.Kind
	Code wire.Code
}

// Codes of refusals a caller acts on (Error.Code); see package wire.
const (
	CodeInDoubt          = wire.CodeInDoubt
	CodeInProgress       = wire.CodeInProgress
	CodeKeyReused        = wire.CodeKeyReused
	CodeSuperseded       = wire.CodeSuperseded
	CodeToolFailed       = wire.CodeToolFailed
	CodeRefused          = wire.CodeRefused
	CodeUndecided        = wire.CodeUndecided
	CodeNotYet           = wire.CodeNotYet
	CodeChangesRequested = wire.CodeChangesRequested
	CodeExpired          = wire.CodeExpired
	CodeStepUp           = wire.CodeStepUp
)

// Error says the status and the server's message.
func (e *Error) Error() string {
	s := fmt.Sprintf("sagacity: %d %s", e.StatusCode, http.StatusText(e.StatusCode))
	if e.Message != "" {
		s += ": " + e.Message
	}
	return s
}

// Is reports whether target is the kind of e's status (ErrNotFound for
// 404, and so on).
func (e *Error) Is(target error) bool {
	k, ok := kinds[e.StatusCode]
	return ok && k == target
}

// maxMessage caps the Message taken from a body that is not JSON.
const maxMessage = 512

func newError(a answer) *Error {
	e := &Error{StatusCode: a.code}
	var body wire.Error
	if err := json.Unmarshal(a.body, &body); err == nil {
		e.Message, e.Kind, e.Code, e.SagaID, e.JournalSeq = body.Error, body.Kind, body.Code, body.SagaID, body.JournalSeq
		return e
	}
	msg := strings.TrimSpace(string(a.body))
	if len(msg) > maxMessage {
		msg = strings.ToValidUTF8(msg[:maxMessage], "") + "…"
	}
	e.Message = msg
	return e
}
