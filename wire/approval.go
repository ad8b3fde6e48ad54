package wire

import (
	"encoding/json"
	"time"
)

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
// quorum, then from RunsFrom (under a wait timer) until ExecuteBy for
// its execution.
type Ruling struct {
	Rule       string     `json:"rule,omitempty"`
	Policy     string     `json:"policy,omitempty"`
	Quorum     int        `json:"quorum"`
	ApprovedBy []string   `json:"approvedBy"`
	ExpiresAt  *time.Time `json:"expiresAt,omitempty"`
	RunsFrom   *time.Time `json:"runsFrom,omitempty"`
	ExecuteBy  *time.Time `json:"executeBy,omitempty"`
}

// DecisionRequest is the body of approve, reject, dismiss, withdraw and
// request-changes. Approver is taken only from a dev-mode caller without
// a token; everyone else is journaled as who they signed in as. Reason is
// required where the request's rule says so, and always for
// request-changes (it is what the agent is told).
//
// OnBehalfOf casts an approval, rejection or request for changes for a
// delegator, under their delegation to the caller standing now.
type DecisionRequest struct {
	Approver   string `json:"approver,omitempty"`
	Reason     string `json:"reason,omitempty"`
	OnBehalfOf string `json:"onBehalfOf,omitempty"`
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
	// OnBehalfOf is the delegator a delegate's vote was cast for.
	OnBehalfOf string `json:"onBehalfOf,omitempty"`
}

// DelegationRequest is the body of POST /sagacity/delegations: hand the
// caller's eligibility under Rules (names of the policy in force's rules)
// to To, from From (now when absent) until Until, at most 90 days.
type DelegationRequest struct {
	To     string     `json:"to"`
	Rules  []string   `json:"rules"`
	From   *time.Time `json:"from,omitempty"`
	Until  time.Time  `json:"until"`
	Reason string     `json:"reason,omitempty"`
}

// Delegation is a delegation as the server's saga "sagacity:delegations"
// journals it: Seq is its entry there, which a delegated vote's receipt
// names. Roles and Groups are the delegator's when they delegated, what
// the delegate votes by; Revoked and RevokedBy are set once it is
// revoked.
type Delegation struct {
	Seq       int64      `json:"seq"`
	From      string     `json:"from"`
	To        string     `json:"to"`
	Rules     []string   `json:"rules"`
	Roles     []string   `json:"roles"`
	Groups    []string   `json:"groups"`
	Start     time.Time  `json:"start"`
	Until     time.Time  `json:"until"`
	Reason    string     `json:"reason,omitempty"`
	Made      time.Time  `json:"made"`
	Revoked   *time.Time `json:"revoked,omitempty"`
	RevokedBy string     `json:"revokedBy,omitempty"`
}

// ResumeRequest is the body of a resume: the exact bytes approved.
type ResumeRequest struct {
	Payload *string `json:"payload"`
}

// ResumeResult is what became of a resume: 200 executed, 409 refused
// (Code REFUSED), not decided yet (Code UNDECIDED, nothing changed) or
// approved but its wait timer running (Code NOT_YET, nothing changed),
// 422 the tool failed (Code TOOL_FAILED), 202 in doubt.
// Status is the saga's afterwards; Reason says why it was refused, or
// what the tool's failure was.
type ResumeResult struct {
	SagaID     string  `json:"sagaId"`
	Status     Status  `json:"status"`
	Result     *string `json:"result,omitempty"`
	Reason     string  `json:"reason,omitempty"`
	JournalSeq int64   `json:"journalSeq"`
	Outcome    Outcome `json:"outcome"`
	// Request is where the request stands, on a resume asked before its
	// quorum (Code UNDECIDED) or its wait timer's end (Code NOT_YET).
	Request *RequestState `json:"request,omitempty"`
	Problem
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
	// Proposals wait for approval to take effect, oldest first.
	Proposals []PolicyProposal `json:"proposals"`
}

// ProposalRequest proposes an approval policy: Document is its
// canonical document (PolicyDocument.Text's JSON, or any spelling of the
// same rules), the policy's JSON form.
type ProposalRequest struct {
	Document json.RawMessage `json:"document"`
}

// PolicyProposal is an approval policy waiting for approval under the
// policyChange rules of the one in force: Request, in PolicySaga
// ("sagacity:policies"), is approved as any request.
type PolicyProposal struct {
	SHA256  string    `json:"sha256"`
	Since   time.Time `json:"since"`
	Request int64     `json:"request"`
	Text    string    `json:"text"`
}

// RequestState is what became of one request, as the MCP gateway's
// sagacity_status tells an agent.
type RequestState struct {
	JournalSeq int64  `json:"journalSeq"`
	ToolName   string `json:"toolName"`
	InputHash  string `json:"inputHash"`
	// State is undecided, approved, executing, executed, failed,
	// rejected, refused, dropped, superseded, dismissed,
	// changes-requested, expired or cancelled.
	State string `json:"state"`
	// DecidedBy names who decided it.
	DecidedBy []string `json:"decidedBy,omitempty"`
	Result    string   `json:"result,omitempty"`
	// Message is what the model is told of a request sent back:
	// "[CHANGES_REQUESTED] Tool '<tool>': <what to change>".
	Message string `json:"message,omitempty"`
	// Progress says where the votes of a pending request stand, and who
	// may still vote: "1 of 2 approvals (alice); waiting for 1 more from
	// finance-leads".
	Progress string `json:"progress,omitempty"`
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
