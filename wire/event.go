package wire

// EventType names what an Event says happened.
type EventType string

// The events. A request's events come in the order they happened;
// request.waiting is its first, and one of rejected, changes_requested,
// expired, dismissed, executed, failed, refused and dropped its last.
const (
	// EventWaiting: a request waits for approval (rule, quorum, expiry).
	EventWaiting EventType = "request.waiting"
	// EventVoted: a person approved a request, or withdrew an approval,
	// and its quorum is not reached.
	EventVoted EventType = "request.voted"
	// EventApproved: the request's quorum is reached; it may be executed.
	EventApproved EventType = "request.approved"
	// EventRejected: a person rejected the request; the saga compensates.
	EventRejected EventType = "request.rejected"
	// EventChangesRequested: a person sent the request back to its
	// agent; the saga goes on.
	EventChangesRequested EventType = "request.changes_requested"
	// EventExpired: no quorum by the rule's deadline, or its grant ended
	// before execution; the server closed it and the saga compensates.
	EventExpired EventType = "request.expired"
	// EventDismissed: a superseded request was dropped; the saga goes on.
	EventDismissed EventType = "request.dismissed"
	// EventCancelled: its requester took the request back (an MCP task
	// cancelled); the saga goes on.
	EventCancelled EventType = "request.cancelled"
	// EventExecuted: the approved request ran with its approved bytes.
	EventExecuted EventType = "request.executed"
	// EventFailed: the approved request ran, and its tool failed.
	EventFailed EventType = "request.failed"
	// EventRefused: a resume of the request was refused (other bytes, no
	// quorum, a broken journal); the saga compensates.
	EventRefused EventType = "request.refused"
	// EventDropped: the saga failed before the request was decided.
	EventDropped EventType = "request.dropped"
	// EventEscalated: a step of the rule's escalation was taken: more
	// people are told. Who may vote does not change.
	EventEscalated EventType = "request.escalated"
	// EventInDoubt: a call started and has no outcome; its saga waits
	// for a person to say what it came to.
	EventInDoubt EventType = "call.in_doubt"
	// EventCompensationFailed: undoing a saga's steps failed; a person
	// must finish it.
	EventCompensationFailed EventType = "saga.compensation_failed"
	// EventHalted: the database does not match the log's checkpoints;
	// no IRREVERSIBLE tool runs until it does.
	EventHalted EventType = "log.halted"
	// EventUnmeetable: the people the server knows cannot meet an
	// approval rule of the policy in force (Rule): its requests would
	// wait until they expire. Told once per rule and what it says.
	EventUnmeetable EventType = "policy.unmeetable"
	// EventBreakGlass: a person executed the request without its quorum
	// (break-glass), with a reason; the server executes it. Told to
	// every endpoint, whatever events it listens for.
	EventBreakGlass EventType = "request.break_glass"
	// EventRatified: the request's rule's quorum ratified its
	// break-glass execution afterwards; ApprovedBy are those who did.
	EventRatified EventType = "request.ratified"
)

// EventTypes are every event type, in the order the documentation lists
// them.
var EventTypes = []EventType{EventWaiting, EventVoted, EventApproved, EventRejected, EventChangesRequested, EventExpired, EventDismissed,
	EventCancelled, EventExecuted, EventFailed, EventRefused, EventDropped, EventEscalated, EventInDoubt, EventCompensationFailed, EventHalted,
	EventUnmeetable, EventBreakGlass, EventRatified}

// Event is a notification's body (the Standard Webhooks payload a
// webhook receives, and what every channel renders): something happened
// to a request, a call, a saga or the log. It is thin: the payload is
// named by its SHA-256 and fingerprint, never sent. Every delivery of
// one event, retries included, has the same ID, for receivers to
// de-duplicate on. A request's fields are set on each of its events.
type Event struct {
	ID   string    `json:"id"`
	Type EventType `json:"type"`
	// Time is when it happened: RFC 3339, UTC.
	Time string `json:"time"`
	// Message says it in words, for people.
	Message string `json:"message"`
	// SagaID and JournalSeq name the request (its AWAITING_APPROVAL
	// entry) or the call (its INTENT) the event is about; neither for
	// log.halted and policy.unmeetable.
	SagaID     string `json:"sagaId,omitempty"`
	JournalSeq int64  `json:"journalSeq,omitempty"`
	Tool       string `json:"tool,omitempty"`
	// PayloadSHA256 is the SHA-256 of the exact bytes; Fingerprint its
	// first 16 hex digits in four groups ("79c2 a241 5f1c 9e0d"), which
	// the console shows beside the bytes, to compare by eye.
	PayloadSHA256 string `json:"payloadSha256,omitempty"`
	Fingerprint   string `json:"fingerprint,omitempty"`
	Requester     string `json:"requester,omitempty"`
	// Rule and Quorum are the approval rule the request pinned and how
	// many approvals it asks for; ApprovedBy who approved so far, and
	// ExpiresAt the deadline of its quorum (RFC 3339), when it has one.
	Rule       string   `json:"rule,omitempty"`
	Quorum     int      `json:"quorum,omitempty"`
	ApprovedBy []string `json:"approvedBy,omitempty"`
	ExpiresAt  string   `json:"expiresAt,omitempty"`
	// Decision, DecidedBy and Reason are the decision a request event
	// follows: approved, withdrawn, rejected, changes-requested,
	// expired (by server) or dismissed; Receipt links its receipt.
	Decision  string `json:"decision,omitempty"`
	DecidedBy string `json:"decidedBy,omitempty"`
	Reason    string `json:"reason,omitempty"`
	Receipt   string `json:"receipt,omitempty"`
	// Escalation is the step of request.escalated (1, 2, …).
	Escalation int `json:"escalation,omitempty"`
	// Votes are the approvals request.executed and request.failed ran
	// on, in order, each with its reason and receipt.
	Votes []EventVote `json:"votes,omitempty"`
	// Link opens what the event is about in the console.
	Link string `json:"link"`
}

// EventVote is one approval an event names: who, why, and its receipt.
type EventVote struct {
	By     string `json:"by"`
	Reason string `json:"reason,omitempty"`
	// JournalSeq is its APPROVED entry; Receipt links its receipt in the
	// console.
	JournalSeq int64  `json:"journalSeq"`
	Receipt    string `json:"receipt"`
}
