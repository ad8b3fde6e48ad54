package engine

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/sagacity-go/sagacity/evidence"
)

// This file checks the names, reasons, keys and inputs callers hand the
// engine, before anything is read: each is Invalid when it could not be
// journaled as given.

// ReservedPrefix starts the names of the MCP gateway's own tools
// (sagacity_status, sagacity_resume): no configured tool may take one, or
// an agent could not tell the gateway's answer from a tool's.
const ReservedPrefix = "sagacity_"

// validInput checks a tool input: it must fit, and be text that both
// stores keep byte for byte (UTF-8 without NUL), since its exact bytes are
// what gets hashed, approved and executed.
func (e *Engine) validInput(what, s string) error {
	switch {
	case len(s) > e.maxInput:
		return Errorf(Invalid, "%s is larger than %d bytes", what, e.maxInput)
	case !utf8.ValidString(s):
		return Errorf(Invalid, "%s is not valid UTF-8", what)
	case strings.IndexByte(s, 0) >= 0:
		return Errorf(Invalid, "%s contains a NUL character, which cannot be journaled faithfully", what)
	}
	return nil
}

func validReason(s string) error {
	switch {
	case len(s) > MaxReasonLen:
		return Errorf(Invalid, "reason is longer than %d bytes", MaxReasonLen)
	case !utf8.ValidString(s):
		return Errorf(Invalid, "reason is not valid UTF-8")
	case strings.ContainsFunc(s, unicode.IsControl):
		// A newline would let a reason forge the auth= line of a decision.
		return Errorf(Invalid, "reason contains control characters")
	}
	return nil
}

// MaxKeyLen is the longest idempotency key, in bytes.
const MaxKeyLen = 255

// validKey checks an agent's idempotency key: printable ASCII, since it
// travels in a header and a journal line.
func validKey(key string) error {
	if len(key) > MaxKeyLen {
		return Errorf(Invalid, "Idempotency-Key is longer than %d bytes", MaxKeyLen)
	}
	for _, c := range []byte(key) {
		if c < 0x20 || c > 0x7e {
			return Errorf(Invalid, "Idempotency-Key must be printable ASCII")
		}
	}
	return nil
}

// validName checks a saga id, tool name or principal id
// (evidence.CheckName). Invalid when it is none.
func validName(what, s string) error { return invalid(evidence.CheckName(what, s)) }

// notReserved refuses an agent's saga id that names one of the server's own
// sagas, or that a person would read as one (see readAs): a journal of
// "Sagacity：passkeys" beside the server's "sagacity:passkeys" would pass
// for the server's word.
func notReserved(sagaID string) error {
	if strings.HasPrefix(readAs(sagaID), readAs(ReservedSagaPrefix)) {
		return Errorf(Invalid, "saga ids that read as %q… are the server's own: choose another id", ReservedSagaPrefix)
	}
	return nil
}
