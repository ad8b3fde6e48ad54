package engine

import (
	"slices"
	"strings"
	"time"

	"github.com/sagacity-go/sagacity/wire"
)

// Reversibility says how a tool's effect can be undone.
type Reversibility string

// The three reversibility levels. REVERSIBLE and COMPENSATABLE behave the
// same at run time; IRREVERSIBLE tools are gated for human approval.
const (
	Reversible    Reversibility = "REVERSIBLE"
	Compensatable Reversibility = "COMPENSATABLE"
	Irreversible  Reversibility = "IRREVERSIBLE"
)

// ParseReversibility reads a reversibility name; "" means COMPENSATABLE.
// It returns an Invalid error for anything else.
func ParseReversibility(s string) (Reversibility, error) {
	switch r := Reversibility(s); r {
	case "":
		return Compensatable, nil
	case Reversible, Compensatable, Irreversible:
		return r, nil
	}
	return "", Errorf(Invalid, "reversibility %q is not one of REVERSIBLE, COMPENSATABLE, IRREVERSIBLE", s)
}

// Status is where a saga stands and Outcome what a tool call came to, as
// the wire declares them: the statuses are wire's constants (wire.Running,
// …), used as they are; the outcomes keep the engine's names below.
type (
	Status  = wire.Status
	Outcome = wire.Outcome
)

// Call outcomes (see wire.Outcome). A failed call compensates the saga:
// the result's Status says how far.
const (
	OutcomeExecuted         = wire.Executed
	OutcomeAwaitingApproval = wire.Gated
	OutcomeFailed           = wire.Failed
	OutcomeInDoubt          = wire.InDoubt
	OutcomeRefused          = wire.Refused
)

// Statuses lists every status, in the order a saga moves through them.
var Statuses = []Status{wire.Running, wire.AwaitingApproval, wire.Compensating, wire.Completed, wire.Compensated, wire.CompensationFailed}

// Saga is the working state of one saga. The journal is the evidence; this
// row is what the engine locks and updates alongside it.
type Saga struct {
	ID        string
	Status    Status
	Initiator string // principal ID of whoever made the first call
	Ended     bool   // the agent said its run is over
	Reason    string // why the saga failed, when it did
	HeadSeq   int64  // seq of the newest journal entry
	HeadHash  string // hash of the newest journal entry
	// Running counts the saga's calls that run or are being undone: a
	// saga with none has no call in doubt.
	Running   int64
	CreatedAt time.Time
	UpdatedAt time.Time
	// Unreadable is set by a store when a column of the row could not be
	// read as its type; it says which.
	Unreadable string
}

// ApprovalRequest is a gated call waiting for a decision. InputHash is
// sha256(Input), recorded when the gate fired; Requester is the principal
// that made the call. The request's AWAITING_APPROVAL journal entry holds
// the same facts and is what decisions and resumes rely on.
type ApprovalRequest struct {
	SagaID     string
	JournalSeq int64
	ToolName   string
	Input      string
	InputHash  string
	Requester  string
	CreatedAt  time.Time
	// Rule and Policy are the approval rule and policy the request's
	// entry records ("" for a request from before policies); Quorum is
	// how many approvals the rule asks for.
	Rule, Policy string
	Quorum       int
	// Reason is why the requester said it asks, "" when it did not.
	Reason string
	// Voters are the people whose approvals stand, in order; Due is when
	// the server next acts on the request by itself (expires it, closes
	// its lapsed grant, or executes it when its wait timer ends under a
	// rule that executes on approval), zero for never. The engine keeps
	// both in step with the journal, in the transactions that change it.
	Voters []string
	Due    time.Time
	// Escalated counts the steps of its rule's escalation taken so far;
	// EscalateAt is when the next is due, zero for none.
	Escalated  int
	EscalateAt time.Time
	// Wait, for an approved request whose rule has a wait timer, is its
	// tally as its journal has it (when it may run from, until when):
	// Engine.Approvals reads it; no store keeps it. Due is then the
	// wait's end under a rule that executes on approval.
	Wait *Tally
}

// CallState tracks one tool execution between its INTENT and its outcome,
// and later its compensation.
type CallState string

// Call states. A call that stays CallRunning or CallCompensating past a
// crash is in doubt: its effect may or may not have happened.
const (
	CallRunning            CallState = "RUNNING"
	CallExecuted           CallState = "EXECUTED"
	CallFailed             CallState = "FAILED"
	CallCompensating       CallState = "COMPENSATING"
	CallCompensated        CallState = "COMPENSATED"
	CallCompensationFailed CallState = "COMPENSATION_FAILED"
)

// Call is one execution of a tool: the INTENT entry that opened it, and the
// EXECUTED or FAILED entry that closed it.
type Call struct {
	SagaID     string
	Seq        int64 // the INTENT entry
	ToolName   string
	Input      string
	Requester  string // who asked for it, as its INTENT entry records
	State      CallState
	OutcomeSeq int64 // the EXECUTED or FAILED entry, 0 while running
	Result     string
	StartedAt  time.Time
	UpdatedAt  time.Time
	// Request is the request a resumed call executes (its
	// AWAITING_APPROVAL entry); 0 for an agent's call.
	Request int64
	// Runner is the server process that runs it or its undo, "" when
	// none registered (see Heartbeat).
	Runner string
}

// Unsettled reports whether the call's outcome, or its undo's, is not
// journaled yet: it runs, or its runner went away mid-way (in doubt).
func (c Call) Unsettled() bool { return c.State == CallRunning || c.State == CallCompensating }

// Invocation is how the call is run: its tool is handed its key.
func (c Call) Invocation() Invocation {
	return Invocation{SagaID: c.SagaID, Seq: c.Seq, Request: c.Request, Tool: c.ToolName, Input: c.Input}
}

// Key is the idempotency key of what the call does now, or last did: its
// undo's once it is being undone, else its execution's.
func (c Call) Key() string {
	switch c.State {
	case CallCompensating, CallCompensated, CallCompensationFailed:
		return c.Invocation().Key(ToolCompensate)
	}
	return c.Invocation().Key(ToolExecute)
}

// ParseRoles reads role names, as a configuration file or a sign-in form
// gives them. Invalid when there are none or one is not a role.
func ParseRoles(names []string) ([]Role, error) {
	all := make([]string, len(Roles))
	for i, r := range Roles {
		all[i] = string(r)
	}
	if len(names) == 0 {
		return nil, Errorf(Invalid, "roles is missing; give at least one of %s", strings.Join(all, ", "))
	}
	roles := make([]Role, 0, len(names))
	for _, n := range names {
		if !slices.Contains(Roles, Role(n)) {
			return nil, Errorf(Invalid, "role %q is not one of %s", n, strings.Join(all, ", "))
		}
		if !slices.Contains(roles, Role(n)) {
			roles = append(roles, Role(n))
		}
	}
	return roles, nil
}

// Principal is an authenticated caller. ID is the stable identity that is
// journaled and compared for four-eyes; Auth says how it was established.
type Principal struct {
	ID    string
	Name  string // for display: an email or user name; ID is what counts
	Auth  AuthMethod
	Roles []Role
	// Groups are what the identity provider's roles claim lists for the
	// person (whatever of it maps to roles or not): approval rules name
	// groups as well as roles.
	Groups []string
	// Claims are the claims of its token that the approval policy lists
	// (Approvals.Claims), as the token has them: what its conditions see
	// of it (who.claims). Nil for a static token.
	Claims map[string]any
	// Issuer and Subject are an OIDC identity's parts (ID is made of
	// them), and AuthTime when the person last signed in at the provider,
	// when it says: receipts record them.
	Issuer, Subject string
	AuthTime        time.Time
	// Anonymous marks a dev-mode caller who did not sign in: as in the
	// reference library, the approver it names is recorded as given.
	Anonymous bool
	// Client says what the principal called through, when it is more than
	// the JSON API (an MCP client and session): the journal records it
	// with the requests it makes, for the people who decide them.
	Client string
	// SignIn is the identity provider's own word on the console sign-in
	// the principal acts under; nil for a token, dev mode, or an API call.
	SignIn *SignIn
}

// SignIn is the identity provider's own word that a person signed in to
// this server: the ID token it signed for this server's sign-in (whose
// nonce the server sent), the client it was issued to, and the provider's
// public key that verified it. The first vote or passkey enrolment of a
// session journals it, so that who voted is provable offline from the
// provider's signature, not only from the server's receipt.
type SignIn struct {
	Token    string // the ID token as the provider sent it (a compact JWS)
	ClientID string // the audience it was issued to: this server
	Key      string // the provider's public key that verifies it, a JWK as JSON
	KeyID    string // that key's RFC 7638 thumbprint (base64url)
	// Reauth says the sign-in asked the provider to authenticate the
	// person again (max_age=0), as enrolling a passkey takes.
	Reauth bool
}

// Unknown is the approver recorded for an anonymous dev-mode decision that
// names nobody.
const Unknown = "unknown"

// Claiming returns the principal a decision is recorded under when the
// request also names an approver. An anonymous dev-mode caller becomes
// the named approver (Unknown when none is named). Anyone else must be the
// approver they name: Forbidden otherwise, so a caller can never journal
// somebody else's name. Invalid for a name that could not be journaled.
func (p Principal) Claiming(approver string) (Principal, error) {
	if p.Anonymous {
		if approver == "" {
			approver = Unknown
		}
		if err := validName("approver", approver); err != nil {
			return Principal{}, err
		}
		p.ID = approver
		return p, nil
	}
	if approver != "" && approver != p.ID {
		return Principal{}, Errorf(Forbidden, "approver %q is not the authenticated principal %q", approver, p.ID)
	}
	return p, nil
}

// Has reports whether p holds any of the roles.
func (p Principal) Has(roles ...Role) bool {
	for _, r := range roles {
		if slices.Contains(p.Roles, r) {
			return true
		}
	}
	return false
}

// who is p as an approval rule's condition sees it (Who), its
// claims aside (Approvals.See keeps those the policy lists).
func (p Principal) who() Who {
	roles := make([]string, len(p.Roles))
	for i, r := range p.Roles {
		roles[i] = string(r)
	}
	return Who{ID: p.ID, Name: p.Name, Roles: roles, Groups: p.Groups}
}
