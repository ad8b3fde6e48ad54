package evidence

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
