package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/sagacity-go/sagacity/evidence"
	"github.com/sagacity-go/sagacity/wire"
)

// What a reviewer reads of one request: everything needed to decide it,
// and what happened to it since (pending.go lists the requests).

// RequestState is what became of a gated call.
type RequestState string

// Request states.
const (
	StateUndecided RequestState = "undecided" // pending, without the approvals its rule asks for
	StateApproved  RequestState = "approved"  // pending, approved by its quorum, awaiting execution
	StateExecuting RequestState = "executing" // resumed; its outcome is not journaled yet
	StateExecuted  RequestState = "executed"  // resumed and executed
	StateFailed    RequestState = "failed"    // resumed, and the tool failed
	StateRejected  RequestState = "rejected"  // a person rejected it
	StateRefused   RequestState = "refused"   // a resume was refused
	StateDropped   RequestState = "dropped"   // the saga failed before it was decided or resumed
	// StateSuperseded: pending, but the saga's later request of the same
	// tool was approved or executed; it can be neither.
	StateSuperseded RequestState = "superseded"
	StateDismissed  RequestState = "dismissed" // superseded, and a person dropped it
	// StateChangesRequested: a reviewer sent it back to the agent, the
	// saga going on.
	StateChangesRequested RequestState = "changes-requested"
	StateExpired          RequestState = "expired" // no quorum in time: the server rejected it
	// StateCancelled: its requester took it back, the saga going on.
	StateCancelled RequestState = "cancelled"
)

// Ballot is an approval of a request, and its withdrawal if it was
// withdrawn.
type Ballot struct {
	Decision
	Withdrawal *Decision
}

// Review is everything a person needs to decide one request, read from
// one snapshot of its saga.
type Review struct {
	Saga    Saga
	Gated   Entry // the AWAITING_APPROVAL entry: the bytes, their tool, who asked
	State   RequestState
	Pending bool
	// Rule is the approval rule the request is decided by, nil when it
	// cannot be found (RuleProblem says why); Tally is where its votes
	// stand under it.
	Rule        *Rule
	RuleProblem string
	Tally       Tally
	// Votes are its approvals, in order, each with its withdrawal.
	Votes []Ballot
	// Rejection, Dismissal, Changes (a request for changes), Expiry and
	// Cancellation (by its requester) are the decisions that closed it,
	// if one did.
	Rejection, Dismissal, Changes, Expiry, Cancellation *Decision
	// Refusal is the refused resume's entry, if any (State refused); its
	// payload holds what was attempted. Dropped is the entry that
	// dropped it when the saga failed, if any.
	Refusal, Dropped *Entry
	// SupersededBy is the later request that superseded it, 0 when none.
	SupersededBy int64
	// BreakGlass is the decision that had it executed without its
	// quorum, if one did; Ratifications are the approvals of that
	// execution afterwards, in order, Ratification where they stand under
	// its rule, and RatifyBy the end of their window.
	BreakGlass    *Decision
	Ratifications []Decision
	Ratification  Tally
	RatifyBy      time.Time
	// Resumed is the INTENT by which it was executed, if it was: who
	// executed it (KeyRequester) and when. Outcome is the EXECUTED or
	// FAILED entry of that execution, once journaled.
	Resumed, Outcome *Entry
	// InDoubt is set when that execution is in doubt: it ran, or may
	// have, and its outcome is not journaled (Review fills it in).
	InDoubt bool
	Journal []Entry // the whole journal, by seq
	// WouldUndo is what rejecting it compensates: the saga's executed
	// steps that have an undo, newest first; StaysDone the executed
	// steps of IRREVERSIBLE tools, which nothing undoes. Siblings are the
	// saga's other pending requests, which a rejection drops.
	WouldUndo, StaysDone []Call
	Siblings             []ApprovalRequest
	// Previous is the saga's earlier proposal of the same tool (it
	// re-planned, perhaps sent back for changes), and LastExecuted the
	// newest executed call of the tool before this request, in any saga.
	Previous, LastExecuted *Entry
	// Verification is what verifying the journal found: as Verify does,
	// or, in the review Decide returns, what the decision's own check
	// found before it acted (chain, receipts, votes and rows).
	Verification Verification
	// Executors is who may execute it once it is approved, as Can allows
	// ActResume on its saga (Review fills it in; Requests does not).
	Executors Executors
	// Unmeetable says why the people the server knows cannot meet what
	// the pending request still needs under its rule, its requester and
	// initiator left out: it would wait until it expires. "" when they
	// can, or it is not pending (Review fills it in; Requests does not).
	Unmeetable string
}

// Review reads one request, pending or not, with its saga. NotFound when
// the saga has no AWAITING_APPROVAL entry at seq. Errors: Forbidden as
// Can says for ActRead, Unavailable when the store is.
func (e *Engine) Review(ctx context.Context, p Principal, sagaID string, seq int64) (Review, error) {
	return e.review(ctx, p, sagaID, seq, nil)
}

// decisions are the engine's decisions on a request that Decide takes,
// by their action.
var decisions = map[Action]func(*Engine, context.Context, Principal, string, int64, string, cast) (Decision, error){
	ActApprove: (*Engine).approve, ActReject: (*Engine).reject, ActDismiss: (*Engine).dismiss,
	ActWithdraw: (*Engine).withdraw, ActRequestChanges: (*Engine).requestChanges,
	ActBreakGlass: func(e *Engine, ctx context.Context, p Principal, sagaID string, seq int64, reason string, _ cast) (Decision, error) {
		return e.BreakGlass(ctx, p, sagaID, seq, reason)
	},
	ActRatify: func(e *Engine, ctx context.Context, p Principal, sagaID string, seq int64, reason string, _ cast) (Decision, error) {
		return e.Ratify(ctx, p, sagaID, seq, reason)
	},
}

// Decide takes action a on the request at seq for p, as a shell that
// shows the request offers it: ActApprove, ActReject, ActDismiss,
// ActWithdraw, ActRequestChanges, ActBreakGlass and ActRatify as Approve,
// Reject, Dismiss, Withdraw, RequestChanges, BreakGlass and Ratify do
// with reason, ActResume as Execute does.
// It returns the request as it stands afterwards, as Review reads it,
// with the verification the decision made before it acted, so that the
// shell shows it again without reading and verifying the journal once
// more. Errors: those of the action; Invalid for an action that is none
// of these.
func (e *Engine) Decide(ctx context.Context, p Principal, a Action, sagaID string, seq int64, reason string) (Review, error) {
	decide, ok := decisions[a]
	if !ok && a != ActResume {
		return Review{}, Errorf(Invalid, "%s is no decision on a request", a)
	}
	kept := &verified{}
	var err error
	if a == ActResume {
		_, err = e.resume(ctx, p, sagaID, seq, nil, kept, false)
	} else {
		_, err = decide(e, ctx, p, sagaID, seq, reason, cast{kept: kept})
	}
	if err != nil {
		return Review{}, err
	}
	return e.review(ctx, p, sagaID, seq, kept.found)
}

// review is Review, with the verification a decision just made of the
// journal (Decide), or nil to verify it now.
func (e *Engine) review(ctx context.Context, p Principal, sagaID string, seq int64, verified *Verification) (Review, error) {
	if err := e.guard(p, ActRead, sagaID); err != nil {
		return Review{}, err
	}
	snap, logged, err := e.snapshot(ctx, sagaID, true)
	if err != nil {
		return Review{}, err
	}
	if err := e.readSnapshot(p, snap); err != nil {
		return Review{}, err
	}
	es := snap.Entries
	if snap.Saga == nil || seq < 1 || seq > int64(len(es)) || es[seq-1].Seq != seq || es[seq-1].Phase != PhaseAwaitingApproval {
		return Review{}, &Error{Kind: NotFound, Msg: fmt.Sprintf("saga %s has no request at seq=%d", sagaID, seq), SagaID: sagaID, Seq: seq}
	}
	v := verified
	if v == nil {
		now, err := e.verify(ctx, snap, logged)
		if err != nil {
			return Review{}, err
		}
		v = &now
	}
	r := Review{Saga: *snap.Saga, Gated: es[seq-1], Journal: es, Verification: *v, Executors: e.executors(*snap.Saga)}
	for _, q := range snap.Requests {
		if q.JournalSeq == seq {
			r.Pending = true
		} else {
			r.Siblings = append(r.Siblings, q)
		}
	}
	lc, _ := evidence.ReadLifecycle(es)
	if err := e.ruled(ctx, &r, lc.Requests[seq]); err != nil {
		return Review{}, err
	}
	r.settle(lc.Requests[seq], snap.Calls)
	if err := e.doubt(ctx, &r); err != nil {
		return Review{}, err
	}
	if r.Pending {
		r.WouldUndo, r.StaysDone = e.undoPlan(snap.Calls)
	}
	if r.State == StateUndecided && r.Rule != nil {
		if r.Unmeetable, err = e.unmeetable(ctx, *r.Rule, r.Tally, r.Gated.Field(KeyRequester), r.Saga.Initiator); err != nil {
			return Review{}, err
		}
	}
	for i := seq - 2; i >= 0; i-- {
		if es[i].Phase == PhaseAwaitingApproval && es[i].ToolName == r.Gated.ToolName {
			r.Previous = &es[i]
			break
		}
	}
	last, err := e.store.LastExecuted(ctx, r.Gated.ToolName, r.Gated.Timestamp)
	switch {
	case err == nil:
		r.LastExecuted = &last
	case !IsKind(err, NotFound):
		return Review{}, err
	}
	return r, nil
}

// Requests reads what became of every request of a saga, pending or not,
// as of one moment: each as Review reports its state, decisions and
// outcome, without the diffs, the undo list or a verification (acting on
// a request verifies the journal). NotFound for a saga without a row.
// Errors: Forbidden as Can says for ActRead, Invalid for a bad id,
// Unavailable when the store is.
func (e *Engine) Requests(ctx context.Context, p Principal, sagaID string) (Saga, []Review, error) {
	if err := e.guard(p, ActRead, sagaID); err != nil {
		return Saga{}, nil, err
	}
	snap, err := e.store.Snapshot(ctx, sagaID, true)
	if err != nil {
		return Saga{}, nil, err
	}
	if snap.Saga == nil {
		return Saga{}, nil, &Error{Kind: NotFound, Msg: fmt.Sprintf("no such saga: %s", sagaID), SagaID: sagaID}
	}
	if err := e.readSnapshot(p, snap); err != nil {
		return Saga{}, nil, err
	}
	var out []Review
	lc, _ := evidence.ReadLifecycle(snap.Entries)
	for _, seq := range lc.Order {
		r := Review{Saga: *snap.Saga, Gated: snap.Entries[seq-1], Journal: snap.Entries}
		r.Pending = slices.ContainsFunc(snap.Requests, func(q ApprovalRequest) bool { return q.JournalSeq == seq })
		if err := e.ruled(ctx, &r, lc.Requests[seq]); err != nil {
			return Saga{}, nil, err
		}
		r.settle(lc.Requests[seq], snap.Calls)
		if err := e.doubt(ctx, &r); err != nil {
			return Saga{}, nil, err
		}
		out = append(out, r)
	}
	return *snap.Saga, out, nil
}

// ruled finds the rule the request is decided by and counts its votes
// under it; when the rule cannot be found it says why, and the request
// counts as undecided.
func (e *Engine) ruled(ctx context.Context, r *Review, l *Life) error {
	rule, err := e.ruleOf(ctx, r.Gated)
	switch {
	case err == nil:
		r.Rule, r.Tally = &rule, tally(r.Gated, l, rule)
	case IsKind(err, Conflict):
		r.RuleProblem = msgOf(err)
	default:
		return err
	}
	return nil
}

// settle says what became of the request from what its journal says (l,
// nil when a break stopped the journal's reading before it) and its
// rule's tally, and from the calls table which entry closed its
// execution.
func (r *Review) settle(l *Life, calls []Call) {
	r.State = StateDropped // a request with no row and nothing that closed it: an older journal's drop
	if l == nil {
		return
	}
	at := func(seq int64) *Entry { return &r.Journal[seq-1] }
	r.Votes = nil
	for _, v := range l.Votes {
		b := Ballot{Decision: decisionOf(r.Saga, l.Seq, *at(v.Seq))}
		if v.Withdrawn != 0 {
			w := decisionOf(r.Saga, l.Seq, *at(v.Withdrawn))
			b.Withdrawal = &w
		}
		r.Votes = append(r.Votes, b)
	}
	r.SupersededBy = l.SupersededBy
	if l.BrokenAt != 0 {
		d := decisionOf(r.Saga, l.Seq, *at(l.BrokenAt))
		r.BreakGlass = &d
		for _, v := range l.Ratifications {
			r.Ratifications = append(r.Ratifications, decisionOf(r.Saga, l.Seq, *at(v.Seq)))
		}
		if r.Rule != nil && r.Rule.BreakGlass != nil {
			r.Ratification = tally(r.Gated, &Life{Votes: l.Ratifications}, *r.Rule)
			r.RatifyBy = d.DecidedAt.Add(r.Rule.BreakGlass.RatifyWithin)
		}
	}
	closing := func() *Decision {
		d := decisionOf(r.Saga, l.Seq, *at(l.Closed))
		return &d
	}
	switch {
	case l.Open() && !r.Pending:
	case l.Open() && l.SupersededBy != 0:
		r.State = StateSuperseded
	case l.Open() && r.Rule != nil && r.Tally.Met():
		r.State = StateApproved
	case l.Open():
		r.State = StateUndecided
	case l.Closing == ClosedRejected:
		r.Rejection, r.State = closing(), StateRejected
	case l.Closing == ClosedDismissed:
		r.Dismissal, r.State = closing(), StateDismissed
	case l.Closing == ClosedChanges:
		r.Changes, r.State = closing(), StateChangesRequested
	case l.Closing == ClosedExpired:
		r.Expiry, r.State = closing(), StateExpired
	case l.Closing == ClosedCancelled:
		r.Cancellation, r.State = closing(), StateCancelled
	case l.Closing == ClosedRefused:
		r.Refusal, r.State = at(l.Closed), StateRefused
	case l.Closing == ClosedDropped:
		r.Dropped = at(l.Closed)
	case l.Closing == ClosedResumed:
		r.Resumed, r.State = at(l.Closed), StateExecuting
		for _, c := range calls {
			if c.Seq == l.Closed && c.OutcomeSeq > 0 && c.OutcomeSeq <= int64(len(r.Journal)) {
				out := *at(c.OutcomeSeq)
				r.Outcome, r.State = &out, StateExecuted
				if out.Phase == PhaseFailed {
					r.State = StateFailed
				}
			}
		}
	}
}

// decisionOf reads a decision entry.
func decisionOf(s Saga, seq int64, en Entry) Decision {
	decided, who, _ := en.Decision()
	return Decision{SagaID: s.ID, JournalSeq: seq, Decided: decided, Approved: decided == DecidedApproved, Approver: who,
		OnBehalfOf: en.Field(KeyOnBehalfOf), Reason: en.Field(KeyReason), DecidedAt: en.Timestamp, Status: s.Status, Receipt: en.Seq}
}

// Actions is what a principal may do with a request now, as the policy,
// the request's rule and its state allow: vote on it (approve, reject,
// request changes) while its quorum is short; reject it, request changes
// or execute it once approved; withdraw their own standing approval
// until it is executed; dismiss or reject it superseded.
type Actions struct {
	Approve, Reject, Dismiss, Execute, Withdraw, RequestChanges bool
	// BreakGlass: they may have it executed without its quorum, with a
	// reason (the policy's breakGlass), its rule's quorum to ratify that
	// within RatifyWithin; Ratify: they may ratify its break-glass
	// execution, afterwards.
	BreakGlass, Ratify bool
	RatifyWithin       time.Duration
	// StepUp says, when the rule counts votes only from a recent sign-in
	// and the person's is older, how recent it must be (a vote first
	// takes them to sign in again); 0 otherwise.
	StepUp time.Duration
	// ReasonRequired: the rule asks every vote for a reason.
	ReasonRequired bool
	// Passkey: the rule counts a vote (approve, reject, request changes)
	// only signed with the voter's own passkey, in the console.
	Passkey bool
	// Why says, for people, why they may do none of them.
	Why string
}

// Allowed says what p may do with the request r now. Each action is
// still checked when it is taken; this is what a shell offers.
func (e *Engine) Allowed(p Principal, r Review) Actions {
	switch {
	case !r.Verification.Valid:
		return Actions{Why: "The saga's journal does not verify, so nothing may be decided or executed on it."}
	case r.Rule == nil:
		return Actions{Why: r.RuleProblem + "."}
	}
	sub := Subject{Saga: &r.Saga, Requester: r.Gated.Field(KeyRequester), Rule: r.Rule}
	may := func(a Action) (bool, string) {
		err := e.Can(p, a, sub)
		return err == nil, msgOf(err)
	}
	now := e.now()
	a := Actions{ReasonRequired: r.Rule.ReasonRequired, Passkey: r.Rule.PasskeyRequired}
	_, voted := (&Life{Votes: r.Tally.Votes}).VoteOf(p.ID)
	a.Withdraw = voted && (r.State == StateUndecided || r.State == StateApproved) && e.Can(p, ActWithdraw, sub) == nil
	switch r.State {
	case StateUndecided, StateApproved:
		if r.Tally.Expired(now) {
			a.Withdraw = false
			a.Why = "Its time ran out without its quorum: the server rejects it."
			return a
		}
		var why string
		a.Approve, why = may(ActApprove)
		a.Approve = a.Approve && !voted && r.State == StateUndecided
		a.Reject, _ = may(ActReject)
		a.RequestChanges, _ = may(ActRequestChanges)
		a.BreakGlass, _ = may(ActBreakGlass)
		a.BreakGlass = a.BreakGlass && !r.Rule.PasskeyRequired && r.BreakGlass == nil &&
			(r.State == StateUndecided || r.Tally.Early(now))
		if a.BreakGlass {
			a.RatifyWithin = r.Rule.BreakGlass.RatifyWithin
		}
		if r.State == StateApproved {
			a.Execute, _ = may(ActResume)
			// Not while a wait timer runs: it would answer NOT_YET.
			a.Execute = a.Execute && !r.Tally.Lapsed(now) && !r.Tally.Early(now)
		}
		if err := voteAllowed(p, *r.Rule, "-", now); err != nil && (a.Approve || a.Reject || a.RequestChanges) {
			if e, ok := errors.AsType[*Error](err); ok && e.Code == wire.CodeStepUp {
				a.StepUp = r.Rule.StepUp
			}
		}
		if !a.Approve && !a.Reject && !a.RequestChanges && !a.Execute && !a.Withdraw && !a.BreakGlass {
			a.Why = "You cannot act on this request: " + why + "."
			if r.State == StateUndecided {
				a.Why = "You cannot decide this request: " + why + "."
			}
		}
	case StateSuperseded:
		var why string
		a.Dismiss, why = may(ActDismiss)
		a.Reject, _ = may(ActReject)
		if !a.Dismiss && !a.Reject {
			a.Why = "A later request of the saga replaced this one, and you cannot act on it: " + why + "."
		}
	default:
		a.Why = "This request is settled; nothing more can be done with it."
		if r.BreakGlass == nil || r.Resumed == nil || r.Ratification.Met() || now.After(r.RatifyBy) {
			return a
		}
		sub.BrokenBy = r.BreakGlass.Approver
		mine := slices.ContainsFunc(r.Ratifications, func(d Decision) bool { return d.Approver == p.ID })
		_, fits := r.Ratification.Place(p.Roles, p.Groups)
		if a.Ratify = e.Can(p, ActRatify, sub) == nil && !mine && fits; a.Ratify {
			a.Why = ""
		}
	}
	return a
}

// msgOf is an error's message for people: an engine error's Msg, or the
// Msg of evidence that does not hold, or "internal error"; "" for none.
func msgOf(err error) string {
	if err == nil {
		return ""
	}
	if e, ok := errors.AsType[*Error](err); ok {
		return e.Msg
	}
	if e, ok := errors.AsType[*evidence.Error](err); ok {
		return e.Msg
	}
	return "internal error"
}
