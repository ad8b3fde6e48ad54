package evidence

import (
	"encoding/base64"

	"golang.org/x/mod/sumdb/note"
)

// The server journals facts of its own — the approval policies in force,
// the passkeys enrolled, the sign-ins that decided, the notifications
// sent again by hand, the runners it retired — in sagas of its own, so in
// the global log. Those that come from a person, or decide anything,
// carry the server's signature of what they hold: a note of the saga's
// Form naming the entry's tool and the SHA-256 of its input
// (Form.EntryNote), or, for PolicySaga and runners' retirements, a note
// of their own (PolicyNote, RetiredNote).

// EntryNote is the text the server signs for an entry of one of its own
// sagas whose notes are of form f: the form's header, then the entry's
// tool and the SHA-256 of its input.
func (f Form) EntryNote(tool, input string) string { return f.Encode(Field{tool, PayloadHash(input)}) }

// Unsigned says why entry en of a saga whose notes are of form f does not
// carry v's signature of its note (EntryNote), or "".
func (f Form) Unsigned(en Entry, v note.Verifier) string {
	signed, err := base64.StdEncoding.DecodeString(en.Field(KeyReceipt))
	if err != nil {
		return "its signature is not base64"
	}
	if n, err := note.Open(signed, note.VerifierList(v)); err != nil || n.Text != f.EntryNote(en.ToolName, en.Input) {
		return "its signature does not verify with " + v.Name()
	}
	return ""
}

// NotificationSaga is the server's own saga that journals every
// notification sent again by hand: a delivery retried, an endpoint
// enabled, and who did it, each entry signed (NotificationNotes).
const NotificationSaga = "sagacity:notifications"

// The tools of NotificationSaga's entries.
const (
	DeliveryRetried = "delivery-retried"
	EndpointEnabled = "endpoint-enabled"
)

// NotificationNotes are what the server signs of NotificationSaga's
// entries.
var NotificationNotes = Form{Header: "sagacity notification v1", Keys: []string{DeliveryRetried, EndpointEnabled}}

// retiredForm is the grammar of a runner's retirement.
var retiredForm = Form{Header: "sagacity runner retired v1", Keys: []string{"runner", string(KeyRetiredBy)},
	Required: []string{"runner", string(KeyRetiredBy)}}

// RetiredNote is the text the server signs for the retirement of runner
// id by runner by.
func RetiredNote(id, by string) string {
	return retiredForm.Encode(Field{"runner", id}, Field{string(KeyRetiredBy), by})
}
