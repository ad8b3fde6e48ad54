package evidence

import (
	"errors"
	"fmt"
	"testing"
)

// isEvidence reports whether err is evidence that does not hold: an
// *Error in its chain.
func isEvidence(err error) bool {
	_, ok := errors.AsType[*Error](err)
	return ok
}

// TestMessage: the message of evidence that does not hold is found
// however it is wrapped; any other error says its text.
func TestMessage(t *testing.T) {
	e := &Error{Msg: "seq=3 of sagacity:passkeys is no passkey entry the key signed", Err: errors.New("cause")}
	for _, tt := range []struct {
		err  error
		want string
	}{
		{e, e.Msg},
		{fmt.Errorf("reading the export: %w", e), e.Msg},
		{errors.New("plain"), "plain"},
	} {
		if got := Message(tt.err); got != tt.want {
			t.Errorf("Message(%v) = %q, want %q", tt.err, got, tt.want)
		}
	}
}
