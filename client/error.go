package client

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
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
	// Message is what the server said: its "error", or the "reason" of a
	// refused resume; the body itself when it is not JSON (cut at 512
	// bytes). For an internal error (500) it names the request id that
	// finds the cause in the server's log.
	Message string
	// SagaID and JournalSeq locate the refusal, when the server says.
	SagaID     string
	JournalSeq int64
	// Code says in one word what to do about some refusals: CodeInDoubt,
	// CodeInProgress, CodeKeyReused, CodeSuperseded; "" for the others.
	Code string
}

// Codes of refusals a caller acts on (Error.Code).
const (
	// CodeInDoubt (409): a call of the saga is in doubt, at JournalSeq;
	// the saga takes no other call until a person resolves it.
	CodeInDoubt = "IN_DOUBT"
	// CodeInProgress (409): the call the idempotency key names still
	// runs; ask again (CallWithKey does) for its outcome.
	CodeInProgress = "IN_PROGRESS"
	// CodeKeyReused (422): the idempotency key names the saga's call at
	// JournalSeq, whose tool or input differ; a new call needs a new key.
	CodeKeyReused = "KEY_REUSED"
	// CodeSuperseded (409): the request was replaced by the saga's later
	// request of the same tool; it can only be dismissed.
	CodeSuperseded = "SUPERSEDED"
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
	var body struct {
		Error      string `json:"error"`
		Reason     string `json:"reason"`
		SagaID     string `json:"sagaId"`
		JournalSeq int64  `json:"journalSeq"`
		Code       string `json:"code"`
	}
	if err := json.Unmarshal(a.body, &body); err == nil {
		e.Message, e.SagaID, e.JournalSeq, e.Code = cmp.Or(body.Error, body.Reason), body.SagaID, body.JournalSeq, body.Code
		return e
	}
	msg := strings.TrimSpace(string(a.body))
	if len(msg) > maxMessage {
		msg = strings.ToValidUTF8(msg[:maxMessage], "") + "…"
	}
	e.Message = msg
	return e
}
