package evidence

import "time"

// Phase is the kind of a journal entry.
type Phase string

// Journal phases (SPEC §2).
const (
	PhaseIntent             Phase = "INTENT"
	PhaseExecuted           Phase = "EXECUTED"
	PhaseFailed             Phase = "FAILED"
	PhaseCompensated        Phase = "COMPENSATED"
	PhaseCompensationFailed Phase = "COMPENSATION_FAILED"
	PhaseAwaitingApproval   Phase = "AWAITING_APPROVAL"
	PhaseApproved           Phase = "APPROVED"
	PhaseRejected           Phase = "REJECTED"
)

// Phases lists every journal phase.
var Phases = []Phase{PhaseIntent, PhaseExecuted, PhaseFailed, PhaseCompensated,
	PhaseCompensationFailed, PhaseAwaitingApproval, PhaseApproved, PhaseRejected}

// GateTool is the tool name of approval decisions in the journal.
const GateTool = "approval-gate"

// Entry is one row of a saga's journal. Its Hash chains it to the entry
// before it (see Hash).
type Entry struct {
	SagaID    string
	Seq       int64
	ToolName  string
	Phase     Phase
	Input     string
	Payload   string
	Timestamp time.Time
	Hash      string
	// Leaf is the entry's index in the global log, -1 until the sequencer
	// appends it. It is not part of the hash: the log's proofs check it.
	Leaf int64
	// Unreadable is set by a store when a column of the row could not be
	// read as its type, which only tampering does; it says which. Verify
	// reports such an entry as a break.
	Unreadable string
}

// Role is what a principal may do.
type Role string

// The roles of SPEC §8.
const (
	RoleAgent    Role = "agent"
	RoleApprover Role = "approver"
	RoleAuditor  Role = "auditor"
)

// Roles lists every role.
var Roles = []Role{RoleAgent, RoleApprover, RoleAuditor}

// AuthMethod is how a principal signed in; decisions and receipts record
// it.
type AuthMethod string

// How principals sign in.
const (
	AuthOIDC  AuthMethod = "oidc"  // an OpenID Connect session or bearer token
	AuthToken AuthMethod = "token" // an API token declared in the configuration
	AuthDev   AuthMethod = "dev"   // dev mode: whoever says so, on loopback
)
