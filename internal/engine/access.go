package engine

import (
	"fmt"
	"strings"
)

// This file is the one place that says who may do what. Every command of
// the engine asks guard and Can before it changes anything, and views ask
// Can, so the console never offers what the engine would refuse.

// Action is something a principal asks of the engine.
type Action string

// Actions.
const (
	ActCall     Action = "call"     // call a tool in a saga, creating it on the first call
	ActEnd      Action = "end"      // say the agent's run is over
	ActAbort    Action = "abort"    // fail the saga and compensate it
	ActApprove  Action = "approve"  // approve a pending request
	ActReject   Action = "reject"   // reject a pending request
	ActDismiss  Action = "dismiss"  // drop a superseded request, the saga going on
	ActWithdraw Action = "withdraw" // take back one's own approval of a request
	ActEnrol    Action = "enrol"    // enrol or remove one's own passkeys
	// ActDelegate hands one's eligibility to another for a while, or
	// revokes a delegation one made or holds.
	ActDelegate Action = "delegate"
	// ActRequestChanges sends a request back to the agent with what to
	// change, the saga going on.
	ActRequestChanges Action = "request-changes"
	ActResume         Action = "resume"   // execute an approved request
	ActCancel         Action = "cancel"   // take back one's own request, the saga going on
	ActRead           Action = "read"     // read sagas and their journals
	ActVerify         Action = "verify"   // verify a journal
	ActReview         Action = "review"   // list pending requests
	ActInDoubt        Action = "in-doubt" // list calls in doubt
	ActResolve        Action = "resolve"  // record what a call in doubt came to, or a failed undo undone by hand
	ActMetrics        Action = "metrics"  // read the metrics: counts, no saga's content
	// ActOutbox reads the notifications' deliveries and how each
	// endpoint stands.
	ActOutbox Action = "outbox"
	// ActResend sends notifications again: retries a delivery now, or
	// enables an endpoint that was disabled (a 410). Each is journaled
	// under the principal (NotificationSaga).
	ActResend Action = "resend"
	// ActBreakGlass executes a pending request without its quorum, with a
	// reason (the policy's breakGlass approvers).
	ActBreakGlass Action = "break-glass"
	// ActPropose proposes another approval policy, which takes effect
	// only once approved under the policyChange rules of the one in force.
	ActPropose Action = "propose"
	// ActRatify approves a break-glass execution afterwards, under the
	// request's rule.
	ActRatify Action = "ratify"
)

// Access is the configurable part of who may do what: the engine's sense
// of access, never the approval policy (see Approvals).
type Access struct {
	// ShareSagas lets every agent act as an agent on every saga (call
	// tools, end, abort, resume). By default only a saga's initiator may.
	ShareSagas bool
}

// String names the access rules in force, as receipts record them (under
// the name they have always had there, sagacity-policy/1).
func (a Access) String() string {
	return fmt.Sprintf("sagacity-policy/1 four-eyes=initiator,requester share-sagas=%t", a.ShareSagas)
}

// Subject is what an action is about: nothing, a saga, or a pending
// request of a saga (for decisions).
type Subject struct {
	Saga *Saga
	// Requester is the principal that made the request being decided, as
	// its journal entry records it.
	Requester string
	// Rule is the approval rule the request is decided by: only its
	// approvers may approve or reject it (or ratify its break-glass
	// execution), only its policy's breakGlass approvers break the glass.
	Rule *Rule
	// BrokenBy is who broke the glass on the request, who may not
	// ratify it.
	BrokenBy string
}

// roles lists who may ask for each action at all.
var roles = map[Action][]Role{
	ActCall:           {RoleAgent},
	ActEnd:            {RoleAgent},
	ActAbort:          {RoleAgent, RoleApprover},
	ActApprove:        {RoleApprover},
	ActReject:         {RoleApprover},
	ActDismiss:        {RoleApprover},
	ActWithdraw:       {RoleApprover},
	ActEnrol:          {RoleApprover},
	ActDelegate:       {RoleApprover},
	ActRequestChanges: {RoleApprover},
	ActResume:         {RoleAgent, RoleApprover},
	ActCancel:         {RoleAgent},
	ActRead:           Roles,
	ActVerify:         {RoleAuditor, RoleApprover},
	ActReview:         {RoleApprover, RoleAuditor},
	ActInDoubt:        {RoleApprover, RoleAuditor},
	ActResolve:        {RoleApprover},
	// The backlog the metrics count is what review and in-doubt list.
	ActMetrics: {RoleAuditor, RoleApprover},
	ActOutbox:  {RoleApprover, RoleAuditor},
	// Auditors read; sending again changes what the endpoints are told.
	ActResend: {RoleApprover},
	// Breaking the glass and ratifying it are a person's decisions.
	ActBreakGlass: {RoleApprover},
	ActRatify:     {RoleApprover},
	// Proposing changes nothing until others approve it.
	ActPropose: {RoleApprover},
}

var doing = map[Action]string{
	ActCall: "calling a tool", ActEnd: "ending a saga", ActAbort: "aborting a saga", ActApprove: "approving",
	ActReject: "rejecting", ActDismiss: "dismissing", ActWithdraw: "withdrawing a vote", ActEnrol: "enrolling passkeys", ActDelegate: "delegating", ActRequestChanges: "requesting changes", ActResume: "resuming", ActCancel: "cancelling a request", ActRead: "reading sagas", ActVerify: "verifying a journal",
	ActReview: "listing approvals", ActInDoubt: "listing calls in doubt", ActResolve: "resolving a call in doubt",
	ActMetrics: "reading metrics", ActOutbox: "reading notifications", ActResend: "sending notifications again",
	ActBreakGlass: "breaking the glass", ActRatify: "ratifying a break-glass execution", ActPropose: "proposing an approval policy",
}

// Can reports whether p may take action a on subject: nil when it may, a
// Forbidden error saying why not (a missing role, four-eyes, another
// principal's saga) otherwise, or Unauthenticated without a principal.
// A subject without a saga asks about the roles alone.
func (e *Engine) Can(p Principal, a Action, sub Subject) error {
	if err := validName("principal", p.ID); err != nil {
		return &Error{Kind: Unauthenticated, Msg: "no authenticated principal", Err: err}
	}
	want, ok := roles[a]
	if !ok {
		return Errorf(Forbidden, "unknown action %q", a)
	}
	if !p.Has(want...) {
		return Errorf(Forbidden, "%s needs the %s role", doing[a], roleList(want))
	}
	s := sub.Saga
	if s == nil {
		return nil
	}
	switch a {
	case ActApprove, ActReject, ActDismiss, ActResolve, ActWithdraw, ActRequestChanges, ActBreakGlass, ActRatify:
		// Four-eyes: a request, or what a call in doubt came to, is
		// decided by somebody other than whoever started the saga and
		// whoever asked for the call.
		if p.ID == s.Initiator {
			return &Error{Kind: Forbidden, Msg: fmt.Sprintf("%s started saga %s and cannot decide its requests", p.ID, s.ID), SagaID: s.ID}
		}
		if sub.Requester != "" && p.ID == sub.Requester {
			return &Error{Kind: Forbidden, Msg: fmt.Sprintf("%s made this request and cannot decide it", p.ID), SagaID: s.ID}
		}
		if r := sub.Rule; r != nil && (a == ActApprove || a == ActReject || a == ActRequestChanges || a == ActRatify) && !r.Eligible(p.Roles, p.Groups) {
			return &Error{Kind: Forbidden, SagaID: s.ID, Msg: fmt.Sprintf("deciding this request takes one of %s (approval rule %s); %s is in none",
				strings.Join(r.Approvers, ", "), r.Name, p.ID)}
		}
		if a == ActRatify && p.ID == sub.BrokenBy {
			return &Error{Kind: Forbidden, SagaID: s.ID, Msg: fmt.Sprintf("%s broke the glass on this request and cannot ratify it", p.ID)}
		}
		if r := sub.Rule; r != nil && a == ActBreakGlass {
			switch g := r.BreakGlass; {
			case g == nil:
				return &Error{Kind: Forbidden, SagaID: s.ID, Msg: fmt.Sprintf("approval rule %s has no break-glass: the policy names no breakGlass approvers", r.Name)}
			case g.EligibleAs(p.Roles, p.Groups) == "":
				return &Error{Kind: Forbidden, SagaID: s.ID, Msg: fmt.Sprintf("breaking the glass takes one of %s (the policy's breakGlass); %s is in none",
					strings.Join(g.Approvers, ", "), p.ID)}
			}
		}
	case ActCancel:
		// A request is taken back by whoever made it, and nobody else.
		if p.ID != sub.Requester {
			return &Error{Kind: Forbidden, Msg: fmt.Sprintf("only %s, who made this request, may cancel it", sub.Requester), SagaID: s.ID}
		}
	case ActRead:
		// An agent reads its own sagas: another's journal names its
		// payees, approvers and sessions.
		if e.readsAll(p) || p.ID == s.Initiator {
			return nil
		}
		return &Error{Kind: Forbidden, Msg: fmt.Sprintf("saga %s is not yours to read: an agent reads only the sagas it started", s.ID), SagaID: s.ID}
	case ActCall, ActEnd, ActAbort, ActResume:
		// An agent acts on its own sagas; an approver may abort or
		// resume any, as a person deciding.
		if e.access.ShareSagas || p.ID == s.Initiator || (a != ActCall && a != ActEnd && p.Has(RoleApprover)) {
			return nil
		}
		return &Error{Kind: Forbidden, Msg: fmt.Sprintf("saga %s belongs to %s; only its initiator may act on it as an agent", s.ID, s.Initiator), SagaID: s.ID}
	}
	return nil
}

// guard is the prelude of every command on one saga: that p may take
// action a on a saga at all (as Can says of no subject), and that sagaID
// is a saga id (Invalid), before anything is read. Whether p may take a
// on this saga is Can's question again, once the saga is read.
func (e *Engine) guard(p Principal, a Action, sagaID string) error {
	if err := e.Can(p, a, Subject{}); err != nil {
		return err
	}
	return validName("saga id", sagaID)
}

// Executors is who may execute an approved request of saga s, as Can
// allows ActResume on it: its initiator, resuming the request as the
// agent that asked; every approver, from the console or the API; and,
// when sagas are shared, every agent.
type Executors struct {
	Initiator string
	Approvers bool
	Agents    bool
}

// executors says who may execute an approved request of saga s.
func (e *Engine) executors(s Saga) Executors {
	return Executors{Initiator: s.Initiator, Approvers: true, Agents: e.access.ShareSagas}
}

func roleList(roles []Role) string {
	s := string(roles[0])
	for _, r := range roles[1:] {
		s += " or " + string(r)
	}
	return s
}

// readsAll reports whether p may read every saga, not only those it
// started: approvers and auditors do, and every agent under ShareSagas.
func (e *Engine) readsAll(p Principal) bool {
	return e.access.ShareSagas || p.Has(RoleApprover, RoleAuditor)
}
