package wire

import "time"

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
