// Package wire is the JSON that Sagacity's API under /sagacity speaks,
// declared once: one request and one response type per operation. The
// server encodes them, the Go client (github.com/sagacity-go/sagacity/client)
// decodes them, the MCP gateway hands them to agents as structured
// content, and a test holds the OpenAPI document to them field by field.
// It imports nothing of the server.
//
// Names mean one thing everywhere: journalSeq is the seq of the journal
// entry an answer is about (a request's AWAITING_APPROVAL, a call's
// INTENT); seq is only an exported entry's own; status is always a
// saga's status, and outcome what became of a call or a resume. Every
// answer that is not 2xx says error (in words), kind (in one word) and,
// where the caller can act on it, code.
package wire

import "time"

// Status is where a saga stands.
type Status string

// A saga's statuses. COMPLETED, COMPENSATED and COMPENSATION_FAILED are
// final; COMPENSATING accepts nothing new.
const (
	Running            Status = "RUNNING"
	AwaitingApproval   Status = "AWAITING_APPROVAL"
	Compensating       Status = "COMPENSATING"
	Completed          Status = "COMPLETED"
	Compensated        Status = "COMPENSATED"
	CompensationFailed Status = "COMPENSATION_FAILED"
)

// Final reports whether a saga in status s accepts no further call,
// approval or resume.
func (s Status) Final() bool {
	return s == Completed || s == Compensated || s == CompensationFailed
}

// Outcome is what became of a call or a resume.
type Outcome string

// The outcomes.
const (
	// Executed: the tool ran and its result is journaled.
	Executed Outcome = "EXECUTED"
	// Gated: an IRREVERSIBLE tool's call waits for a person's approval.
	Gated Outcome = "AWAITING_APPROVAL"
	// Failed: the tool failed; FAILED is journaled and the saga
	// compensated (its status says how far).
	Failed Outcome = "FAILED"
	// Refused: a resume was refused (no approval, or other bytes), or the
	// gate refused a call no rule of the approval policy applies to, or
	// for which a rule's condition cannot be evaluated; the refusal is
	// journaled and the saga compensated.
	Refused Outcome = "REFUSED"
	// InDoubt: the tool ran, or may have, but its outcome could not be
	// journaled. Do not call it again: a person resolves it.
	InDoubt Outcome = "IN_DOUBT"
)

// Kind says in one word what kind of refusal an answer that is not 2xx
// is; each has its status.
type Kind string

// The kinds, with their statuses.
const (
	KindInvalid          Kind = "invalid"                // 400
	KindUnauthenticated  Kind = "unauthenticated"        // 401
	KindForbidden        Kind = "forbidden"              // 403
	KindNotFound         Kind = "not_found"              // 404
	KindMethodNotAllowed Kind = "method_not_allowed"     // 405
	KindConflict         Kind = "conflict"               // 409
	KindTooLarge         Kind = "too_large"              // 413
	KindMediaType        Kind = "unsupported_media_type" // 415
	KindMisdirected      Kind = "misdirected"            // 421
	KindUnprocessable    Kind = "unprocessable"          // 422
	KindTooManyRequests  Kind = "too_many_requests"      // 429
	KindInternal         Kind = "internal"               // 500
	KindUnavailable      Kind = "unavailable"            // 503
)

// Code says what the caller can do about some answers.
type Code string

// The codes.
const (
	// CodeInDoubt (409, or on a 202 IN_DOUBT answer): a call of the saga
	// is in doubt, at journalSeq; the saga takes no other call until a
	// person resolves it.
	CodeInDoubt Code = "IN_DOUBT"
	// CodeInProgress (409): the call the idempotency key names, or the
	// execution of the request a resume names, still runs; ask again for
	// its outcome.
	CodeInProgress Code = "IN_PROGRESS"
	// CodeKeyReused (422): the idempotency key names the saga's call at
	// journalSeq, made with another tool or input; a new call needs a new
	// key.
	CodeKeyReused Code = "KEY_REUSED"
	// CodeSuperseded (409): a later request of the same tool replaced
	// the request; it can only be dismissed or rejected.
	CodeSuperseded Code = "SUPERSEDED"
	// CodeToolFailed (422): the tool failed and the saga was compensated.
	CodeToolFailed Code = "TOOL_FAILED"
	// CodeRefused (409): the resume was refused, or the gate refused the
	// call (no rule of the approval policy applies to it, or a rule's
	// condition cannot be evaluated for it); journaled, and the saga
	// compensated.
	CodeRefused Code = "REFUSED"
	// CodeUndecided (409): the request has not the approvals its rule
	// asks for yet; nothing was changed. Wait, then execute it once it
	// is approved.
	CodeUndecided Code = "UNDECIDED"
	// CodeChangesRequested (409): a reviewer sent the request back; the
	// error says what to change, as the model reads it
	// ("[CHANGES_REQUESTED] Tool '<tool>': <reason>"). The saga goes on:
	// call the tool again with what was asked for.
	CodeChangesRequested Code = "CHANGES_REQUESTED"
	// CodeExpired (409): the request's rule gave it a deadline and no
	// quorum was reached by it, or its approval's grant ended before it
	// was executed; the server closed it and compensated the saga.
	CodeExpired Code = "EXPIRED"
	// CodeStepUp (403): the request's rule counts a vote only from a
	// sign-in more recent than the caller's: sign in again, then vote.
	// A static token never can.
	CodeStepUp Code = "STEP_UP"
	// CodePasskey (403): the request's rule counts a vote only signed by
	// the voter's own passkey, which is done in the console; or the
	// passkey's assertion did not hold.
	CodePasskey Code = "PASSKEY"
)

// Problem is what an answer that is not 2xx says besides its outcome:
// what went wrong in words, its kind, and a code when the caller can act
// on it. An answer that carries an outcome (a tool that failed, a
// refused resume, a call in doubt) has it too.
type Problem struct {
	Error string `json:"error,omitempty"`
	Kind  Kind   `json:"kind,omitempty"`
	Code  Code   `json:"code,omitempty"`
}

// Error is the body of every refusal that carries no outcome. An
// internal error says only "internal error (request <id>)"; the id finds
// the cause in the server's log.
type Error struct {
	Problem
	SagaID     string `json:"sagaId,omitempty"`
	JournalSeq int64  `json:"journalSeq,omitempty"`
}

// Approval is a pending request (GET /sagacity/approvals).
type Approval struct {
	SagaID     string `json:"sagaId"`
	JournalSeq int64  `json:"journalSeq"`
	ToolName   string `json:"toolName"`
	// Input is the exact bytes the tool will receive, once approved.
	Input string `json:"input"`
	// InputHash is the hex SHA-256 of Input.
	InputHash string `json:"inputHash"`
	Requester string `json:"requester"`
	// Reason is why the requester says it asks, when it said.
	Reason string `json:"reason,omitempty"`
	Ruling
}

// Ruling is where a request stands under the approval rule that decides
// it: the rule and the SHA-256 of the policy its request pinned (absent
// for requests from before policies), how many distinct people must
// approve it, who has, and the clock that runs: until ExpiresAt for the
// quorum, then until ExecuteBy for its execution.
type Ruling struct {
	Rule       string     `json:"rule,omitempty"`
	Policy     string     `json:"policy,omitempty"`
	Quorum     int        `json:"quorum"`
	ApprovedBy []string   `json:"approvedBy"`
	ExpiresAt  *time.Time `json:"expiresAt,omitempty"`
	ExecuteBy  *time.Time `json:"executeBy,omitempty"`
}

// DecisionRequest is the body of approve, reject, dismiss, withdraw and
// request-changes. Approver is taken only from a dev-mode caller without
// a token; everyone else is journaled as who they signed in as. Reason is
// required where the request's rule says so, and always for
// request-changes (it is what the agent is told).
type DecisionRequest struct {
	Approver string `json:"approver,omitempty"`
	Reason   string `json:"reason,omitempty"`
}

// Decision is a person's decision, as journaled.
type Decision struct {
	SagaID     string `json:"sagaId"`
	JournalSeq int64  `json:"journalSeq"`
	// Approved is true for an approval alone (Decision says which).
	Approved bool `json:"approved"`
	// ApproverIdentity is the authenticated principal the decision is
	// journaled under.
	ApproverIdentity string    `json:"approverIdentity"`
	DecidedAt        time.Time `json:"decidedAt"`
	Status           Status    `json:"status"`
	// Decision is approved, rejected, dismissed, withdrawn or
	// changes-requested.
	Decision string `json:"decision"`
	// Votes is how many approvals stand after it, of the Quorum the
	// request's rule asks for; Progress says it in words, after an
	// approval or a withdrawal ("1 of 2 approvals (alice); waiting for 1
	// more from finance-leads").
	Votes    int    `json:"votes"`
	Quorum   int    `json:"quorum"`
	Progress string `json:"progress,omitempty"`
}

// ResumeRequest is the body of a resume: the exact bytes approved.
type ResumeRequest struct {
	Payload *string `json:"payload"`
}

// ResumeResult is what became of a resume: 200 executed, 409 refused
// (Code REFUSED), 422 the tool failed (Code TOOL_FAILED), 202 in doubt.
// Status is the saga's afterwards; Reason says why it was refused, or
// what the tool's failure was.
type ResumeResult struct {
	SagaID     string  `json:"sagaId"`
	Status     Status  `json:"status"`
	Result     *string `json:"result,omitempty"`
	Reason     string  `json:"reason,omitempty"`
	JournalSeq int64   `json:"journalSeq"`
	Outcome    Outcome `json:"outcome"`
	Problem
}

// CallRequest is the body of a call: the tool and its exact input, and
// optionally why the agent asks, which is journaled with the call and
// shown to the people who decide it.
type CallRequest struct {
	Tool   string  `json:"tool"`
	Input  *string `json:"input"`
	Reason string  `json:"reason,omitempty"`
}

// CallResult is what became of a call: 200 executed, 202 gated (approve
// and resume JournalSeq) or in doubt, 422 the tool failed (Code
// TOOL_FAILED) and the saga was compensated. Status is the saga's
// afterwards; in doubt, as the call's INTENT left it.
type CallResult struct {
	SagaID string `json:"sagaId"`
	// JournalSeq is the call's first entry: its INTENT, or the
	// AWAITING_APPROVAL entry to approve and resume.
	JournalSeq int64   `json:"journalSeq"`
	ToolName   string  `json:"toolName"`
	Outcome    Outcome `json:"outcome"`
	Status     Status  `json:"status"`
	// Result is the tool's answer, when executed.
	Result *string `json:"result,omitempty"`
	// Message and InputHash (hex SHA-256 of the input) describe a gated
	// call.
	Message   string `json:"message,omitempty"`
	InputHash string `json:"inputHash,omitempty"`
	Problem
}

// AbortRequest is the body of an abort.
type AbortRequest struct {
	Reason string `json:"reason,omitempty"`
}

// Saga is the state of one saga.
type Saga struct {
	SagaID    string `json:"sagaId"`
	Status    Status `json:"status"`
	Initiator string `json:"initiator"` // the principal that made the first call
	Ended     bool   `json:"ended"`     // the agent said its run is over
	Reason    string `json:"reason,omitempty"`
	// HeadSeq and HeadHash are the newest journal entry's.
	HeadSeq   int64     `json:"headSeq"`
	HeadHash  string    `json:"headHash"`
	CreatedAt time.Time `json:"createdAt"`
	UpdatedAt time.Time `json:"updatedAt"`
}

// SagaPage is a page of sagas, newest first.
type SagaPage struct {
	Sagas []Saga `json:"sagas"`
	// NextCursor continues the listing; absent on the last page.
	NextCursor string `json:"nextCursor,omitempty"`
}

// CallInDoubt is a call whose outcome the journal does not know.
type CallInDoubt struct {
	SagaID     string `json:"sagaId"`
	JournalSeq int64  `json:"journalSeq"` // the call's INTENT
	ToolName   string `json:"toolName"`
	Input      string `json:"input"`
	Requester  string `json:"requester"`
	// State is RUNNING (its execution) or COMPENSATING (its undo).
	State     string    `json:"state"`
	StartedAt time.Time `json:"startedAt"`
	UpdatedAt time.Time `json:"updatedAt"`
	// IdempotencyKey is the key the tool was handed for what is in doubt,
	// to ask its owner about: "<saga>/<seq>" for the execution (the
	// request's seq for a resumed call), with "/compensate" for the undo,
	// the saga id percent-encoded unless visible ASCII without '%'.
	IdempotencyKey string `json:"idempotencyKey"`
}

// Resolution is what a person found out about a call in doubt.
type Resolution struct {
	// Happened says whether the call's effect (or its undo's) took
	// place; required.
	Happened *bool `json:"happened"`
	// Result is the tool's answer as its owner reports it, when it
	// happened.
	Result string `json:"result,omitempty"`
	// Reason says how the person knows; required, and journaled.
	Reason string `json:"reason"`
}

// Entry is one line of a journal export: an entry and, in an export with
// proofs, its index in the global log, the checkpoint's size and its
// inclusion proof (RFC 6962 hashes). Timestamp is written as the hash
// chain covers it: UTC, with six fractional digits.
type Entry struct {
	SagaID    string    `json:"sagaId"`
	Seq       int64     `json:"seq"`
	ToolName  string    `json:"toolName"`
	Phase     string    `json:"phase"`
	Input     string    `json:"input"`
	Payload   string    `json:"payload"`
	Timestamp string    `json:"timestamp"`
	Hash      string    `json:"hash"`
	Leaf      *int64    `json:"leaf,omitempty"`
	TreeSize  *int64    `json:"treeSize,omitempty"`
	Proof     *[][]byte `json:"proof,omitempty"`
}

// ExportHead is the last line of an export with proofs: the server's
// signed note naming the saga's last entry.
type ExportHead struct {
	Head string `json:"head"`
}

// Export is a journal export with its proofs as its lines read (GET
// /sagacity/audit/{sagaId}?proofs=N): its entries, oldest first, each
// with its proof when the checkpoint covers it; its ExportPolicy,
// ExportPasskey and ExportSignIn lines' entries; and its ExportHead.
type Export struct {
	Entries  []Entry
	Policies []Entry
	Passkeys []Entry
	SignIns  []Entry
	Head     string
}

// ExportPolicy is a line of an export with proofs, after the entries and
// before the head, one for each approval policy the saga's requests pin:
// the entry of the server's own saga "sagacity:policies" that holds the
// policy's whole document, with its proof against the same checkpoint.
type ExportPolicy struct {
	Policy Entry `json:"policy"`
}

// ExportPasskey is a line of an export with proofs, after the entries and
// before the head, one for each enrolment and removal of a passkey the
// saga's votes were signed with: the entry of the server's own saga
// "sagacity:passkeys" that binds the credential's public key to a person
// (issuer and subject), or removes it, with its proof against the same
// checkpoint.
type ExportPasskey struct {
	Passkey Entry `json:"passkey"`
}

// ExportSignIn is a line of an export with proofs, after the entries and
// before the head, for each sign-in its decisions and its passkeys'
// enrolments name, and each provider key those sign-ins name: the entry
// of the server's own saga "sagacity:sign-ins" that holds the identity
// provider's signed ID token of the sign-in, or its public key, with its
// proof against the same checkpoint, so that `sagacity verify` checks that
// the provider signed each decider's sign-in.
type ExportSignIn struct {
	SignIn Entry `json:"signIn"`
}

// PolicyDocument is an approval policy as it took effect: its canonical
// document (JSON, kept as the exact bytes whose SHA-256 requests pin),
// its hash, when it took effect, and its entry in "sagacity:policies".
type PolicyDocument struct {
	SHA256 string    `json:"sha256"`
	Since  time.Time `json:"since"`
	Seq    int64     `json:"seq"`
	Text   string    `json:"text"`
}

// Policies are the approval policies that took effect on this database,
// oldest first, and the hash of the one this server runs.
type Policies struct {
	InForce   string           `json:"inForce"`
	Documents []PolicyDocument `json:"documents"`
}

// Verification is what verifying a saga's journal found.
type Verification struct {
	Valid      bool `json:"valid"`
	EntryCount int  `json:"entryCount"`
	// BreakAtIndex is the index of the first entry that does not verify,
	// -1 when all do.
	BreakAtIndex int    `json:"breakAtIndex"`
	Message      string `json:"message"`
}

// Keys are the public keys receipts and checkpoints verify with.
type Keys struct {
	Keys []string `json:"keys"`
}

// LogStatus is the state of the global log.
type LogStatus struct {
	Size int64 `json:"size"`
	// Checkpoint is the newest, a signed note; nil before the first.
	Checkpoint *string    `json:"checkpoint"`
	SignedAt   *time.Time `json:"signedAt"`
	// Halted names why executions of IRREVERSIBLE tools are halted; absent
	// when they are not.
	Halted string `json:"halted,omitempty"`
	// CheckedAt and FullCheckAt are when the database was last checked
	// against the checkpoint, its newest entries and whole.
	CheckedAt   *time.Time `json:"checkedAt"`
	FullCheckAt *time.Time `json:"fullCheckAt"`
}

// ConsistencyProof proves that the log at size From is a prefix of the
// log at size To.
type ConsistencyProof struct {
	From  int64    `json:"from"`
	To    int64    `json:"to"`
	Proof [][]byte `json:"proof"`
}

// ResourceMetadata is what an OAuth client learns of the API and /mcp as
// protected resources (RFC 9728): where to get a token for them.
type ResourceMetadata struct {
	// Resource is the resource's identifier: the server's URL, or its
	// /mcp endpoint's.
	Resource string `json:"resource"`
	// AuthorizationServers are the issuers whose access tokens the server
	// takes; absent when only static tokens (sagacity token) are.
	AuthorizationServers   []string `json:"authorization_servers,omitempty"`
	BearerMethodsSupported []string `json:"bearer_methods_supported"`
	ResourceName           string   `json:"resource_name"`
	ResourceDocumentation  string   `json:"resource_documentation"`
}

// RequestState is what became of one request, as the MCP gateway's
// sagacity_status tells an agent.
type RequestState struct {
	JournalSeq int64  `json:"journalSeq"`
	ToolName   string `json:"toolName"`
	InputHash  string `json:"inputHash"`
	// State is undecided, approved, executing, executed, failed,
	// rejected, refused, dropped, superseded, dismissed,
	// changes-requested or expired.
	State string `json:"state"`
	// DecidedBy names who decided it.
	DecidedBy []string `json:"decidedBy,omitempty"`
	Result    string   `json:"result,omitempty"`
	// Message is what the model is told of a request sent back:
	// "[CHANGES_REQUESTED] Tool '<tool>': <what to change>".
	Message string `json:"message,omitempty"`
	Ruling
}

// SagaRequests is a saga with what became of its requests (sagacity_status
// and the sagacity://saga/<id> resource).
type SagaRequests struct {
	SagaID   string         `json:"sagaId"`
	Status   Status         `json:"status"`
	Ended    bool           `json:"ended"`
	Reason   string         `json:"reason,omitempty"`
	Requests []RequestState `json:"requests"`
}

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
)

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
	// log.halted.
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
