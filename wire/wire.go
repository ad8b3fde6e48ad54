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
	// CodeNotYet (409): the request is approved, but its rule has it
	// wait after its quorum (notBefore), and the wait has not ended;
	// nothing was changed. Execute it from the time the error names.
	CodeNotYet Code = "NOT_YET"
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
