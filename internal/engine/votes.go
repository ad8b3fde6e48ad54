package engine

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"
)

// Approve records p's approval of the request at seq: a vote, journaled
// as an APPROVED entry with its receipt. It executes nothing; the request
// may be executed once its rule's quorum of distinct people stand behind
// it.
//
// Errors: NotFound when no request is pending at seq; Conflict when its
// quorum is reached already, p approved it already (one identity counts
// once, whatever its groups, sessions or access tokens; a static token is
// an identity of its own), it expired (code
// EXPIRED: closed now, and the saga compensated), it was superseded, or
// the saga's journal or the request does not verify; Forbidden without
// the approver role, outside the rule's approvers, when p started the
// saga or made the request (four-eyes), or from a sign-in older than the
// rule's step-up (code STEP_UP); Invalid for a bad reason, or none where
// the rule requires one.
func (e *Engine) Approve(ctx context.Context, p Principal, sagaID string, seq int64, reason string) (Decision, error) {
	return e.approve(ctx, p, sagaID, seq, reason, cast{})
}

// vote casts p's vote d, with reason, as c says it was cast.
func (e *Engine) vote(ctx context.Context, p Principal, sagaID string, seq int64, d Decided, reason string, c cast) (Decision, error) {
	switch d {
	case DecidedRejected:
		return e.reject(ctx, p, sagaID, seq, reason, c)
	case DecidedChanges:
		return e.requestChanges(ctx, p, sagaID, seq, reason, c)
	}
	return e.approve(ctx, p, sagaID, seq, reason, c)
}

// approve is Approve, cast as c says.
func (e *Engine) approve(ctx context.Context, p Principal, sagaID string, seq int64, reason string, c cast) (Decision, error) {
	var execute bool // the vote completes the quorum of a rule that executes on approval
	d, err := e.decideOn(ctx, p, ActApprove, DecidedApproved, sagaID, seq, reason, c, func(tx Tx, s *Saga, b bound, at time.Time) (Decision, error) {
		mine := Vote{Voter: p.ID, OnBehalfOf: b.behalf()}
		if v, ok := b.life.Clash(p.ID, mine.OnBehalfOf); ok {
			return Decision{}, &Error{Kind: Conflict, Msg: fmt.Sprintf("%s approved the request at seq=%d already (seq=%d): one person counts once",
				v.Name(), seq, v.Seq)}
		}
		switch {
		case b.tally.Met():
			return Decision{}, &Error{Kind: Conflict, Msg: fmt.Sprintf("saga=%s seq=%d is already approved: %s", sagaID, seq, b.tally.Progress())}
		case b.life.SupersededBy != 0:
			return Decision{}, superseded(b.life)
		}
		as := b.voter(p)
		meets, ok := b.tally.Place(as.Roles, as.Groups)
		if !ok {
			return Decision{}, &Error{Kind: Conflict, Msg: fmt.Sprintf("%s meets no requirement of rule %s that is still short: %s",
				p.ID, b.rule.Name, b.tally.Progress())}
		}
		r := ballot(b, DecidedApproved, p, reason)
		r.Meets = meets
		mine.Meets = meets
		after := Tally{Rule: b.rule, Votes: append(slices.Clone(b.tally.Votes), mine)}
		r.Vote, r.Quorum = len(after.Votes), after.Quorum()
		d, err := e.journalVote(tx, s, b, p, r, PhaseApproved, KeyApprover, at)
		if err != nil {
			return d, err
		}
		mine.Seq, mine.At = d.Receipt, d.DecidedAt
		standing := append(slices.Clone(b.tally.Votes), mine)
		// Under a wait timer the vote completing the quorum executes
		// nothing: the server does once the wait ends (Lapse).
		t := tally(b.gated, &Life{Votes: standing}, b.rule)
		execute = b.rule.OnApproval && t.Met() && !t.Early(d.DecidedAt)
		return d, e.count(tx, b, &d, standing)
	})
	if err != nil || !execute {
		return d, err
	}
	// The vote stands, whatever becomes of the execution: an execution
	// that cannot run now is the Recoverer's to try again.
	if rr, xerr := e.executeApproved(ctx, sagaID, seq); xerr != nil {
		e.log.Warn("executing a request on approval failed; trying again later", "saga", sagaID, "seq", seq, "err", xerr)
	} else {
		d.Status = rr.Status
		e.enacted(ctx, sagaID)
	}
	return d, nil
}

// Reject records p's rejection of the request at seq: a REJECTED entry.
// One eligible rejection rejects, whatever the votes. Every pending
// request of the saga is dropped and every executed step is compensated
// once, newest first.
//
// Errors: as Approve, without the Conflicts of an approved request.
func (e *Engine) Reject(ctx context.Context, p Principal, sagaID string, seq int64, reason string) (Decision, error) {
	return e.reject(ctx, p, sagaID, seq, reason, cast{})
}

// reject is Reject, cast as c says. A proposed policy change is not a
// saga to end: rejecting it sends it back, the policy in force staying.
func (e *Engine) reject(ctx context.Context, p Principal, sagaID string, seq int64, reason string, c cast) (Decision, error) {
	if sagaID == PolicySaga {
		return e.requestChanges(ctx, p, sagaID, seq, cmp.Or(reason, "rejected: the policy in force stays"), c)
	}
	var d Decision
	s, err := e.decide(ctx, p, ActReject, sagaID, seq, reason, c, func(tx Tx, s *Saga, b bound, at time.Time) error {
		var err error
		if d, err = e.journalVote(tx, s, b, p, ballot(b, DecidedRejected, p, reason), PhaseRejected, KeyApprover, at); err != nil {
			return err
		}
		if err := e.tellClosed(tx, b, d); err != nil {
			return err
		}
		return e.fail(tx, s, fmt.Sprintf("%s at seq=%d rejected by %s", b.gated.ToolName, seq, p.ID))
	})
	if err != nil {
		e.unknown(sagaID, err)
		return Decision{}, err
	}
	e.obs.Decided(DecidedRejected)
	d.Status = e.compensateNow(ctx, s).Status
	return d, nil
}

// Dismiss records p's dismissal of a superseded request at seq: a
// REJECTED entry of the approval gate naming p as dismissed-by, with its
// receipt. It drops that request alone; the saga goes on, nothing is
// compensated. Reject, not Dismiss, ends a saga.
//
// Errors: Conflict when the request is not superseded (reject it
// instead), and as Reject.
func (e *Engine) Dismiss(ctx context.Context, p Principal, sagaID string, seq int64, reason string) (Decision, error) {
	return e.dismiss(ctx, p, sagaID, seq, reason, cast{})
}

// dismiss is Dismiss, cast as c says.
func (e *Engine) dismiss(ctx context.Context, p Principal, sagaID string, seq int64, reason string, c cast) (Decision, error) {
	return e.decideOn(ctx, p, ActDismiss, DecidedDismissed, sagaID, seq, reason, c, func(tx Tx, s *Saga, b bound, at time.Time) (Decision, error) {
		if b.life.SupersededBy == 0 {
			return Decision{}, &Error{Kind: Conflict, Msg: fmt.Sprintf("the request at seq=%d is not superseded: only a request the saga "+
				"replaced can be dismissed; reject it to end the saga", seq)}
		}
		return e.drop(tx, s, b, p, ballot(b, DecidedDismissed, p, reason), KeyDismissedBy, at)
	})
}

// drop journals p's decision r that drops bound request b alone, the
// saga going on, as the approval gate's REJECTED naming p under key.
func (e *Engine) drop(tx Tx, s *Saga, b bound, p Principal, r Receipt, key Key, at time.Time) (Decision, error) {
	d, err := e.journalVote(tx, s, b, p, r, PhaseRejected, key, at)
	if err != nil {
		return d, err
	}
	if _, err := tx.DeleteApprovals(s.ID, b.gated.Seq); err != nil {
		return d, err
	}
	if err := e.tellClosed(tx, b, d); err != nil {
		return d, err
	}
	return d, e.settle(tx, s)
}

// Cancel closes the request at seq as cancelled by its requester, p,
// with an optional reason (an agent's MCP task cancelled): a REJECTED
// entry of the approval gate naming p as cancelled-by, with its
// receipt. Like a request for changes it drops that request alone: the
// saga keeps running and nothing is compensated. Once it was executed,
// or is being executed, it is no longer pending: what a resume of it is
// told, and nothing changes.
//
// Errors: Forbidden for anyone but the request's requester (an agent);
// otherwise as Approve's for a request not pending.
func (e *Engine) Cancel(ctx context.Context, p Principal, sagaID string, seq int64, reason string) (Decision, error) {
	return e.decideOn(ctx, p, ActCancel, DecidedCancelled, sagaID, seq, reason, cast{}, func(tx Tx, s *Saga, b bound, at time.Time) (Decision, error) {
		return e.drop(tx, s, b, p, ballot(b, DecidedCancelled, p, reason), KeyCancelledBy, at)
	})
}

// Withdraw takes back p's approval of the request at seq, until it is
// executed: a REJECTED entry of the approval gate naming p as
// withdrawn-by, with its receipt. The request stays pending, one vote
// short.
//
// Errors: Conflict when p has no standing approval of it; otherwise as
// Approve.
func (e *Engine) Withdraw(ctx context.Context, p Principal, sagaID string, seq int64, reason string) (Decision, error) {
	return e.withdraw(ctx, p, sagaID, seq, reason, cast{})
}

// withdraw is Withdraw, cast as c says.
func (e *Engine) withdraw(ctx context.Context, p Principal, sagaID string, seq int64, reason string, c cast) (Decision, error) {
	return e.decideOn(ctx, p, ActWithdraw, DecidedWithdrawn, sagaID, seq, reason, c, func(tx Tx, s *Saga, b bound, at time.Time) (Decision, error) {
		mine, ok := b.life.VoteOf(p.ID)
		if !ok {
			return Decision{}, &Error{Kind: Conflict, Msg: fmt.Sprintf("%s has no approval of the request at seq=%d to withdraw", p.ID, seq)}
		}
		d, err := e.journalVote(tx, s, b, p, ballot(b, DecidedWithdrawn, p, reason), PhaseRejected, KeyWithdrawnBy, at)
		if err != nil {
			return d, err
		}
		rest := slices.DeleteFunc(slices.Clone(b.tally.Votes), func(v Vote) bool { return v.Seq == mine.Seq })
		return d, e.count(tx, b, &d, rest)
	})
}

// RequestChanges sends the request at seq back to the agent with p's
// reason, which the agent reads as ChangesMessage: a REJECTED entry of
// the approval gate naming p as changes-requested-by, with its receipt.
// It drops that request alone; the saga keeps running, nothing is
// compensated, and the agent may call the tool again with what was asked
// for.
//
// Errors: Invalid without a reason (it is what the agent is told); as
// Approve otherwise.
func (e *Engine) RequestChanges(ctx context.Context, p Principal, sagaID string, seq int64, reason string) (Decision, error) {
	return e.requestChanges(ctx, p, sagaID, seq, reason, cast{})
}

// requestChanges is RequestChanges, cast as c says.
func (e *Engine) requestChanges(ctx context.Context, p Principal, sagaID string, seq int64, reason string, c cast) (Decision, error) {
	if reason == "" {
		return Decision{}, Errorf(Invalid, "say what should change: the reason is what the agent is told")
	}
	return e.decideOn(ctx, p, ActRequestChanges, DecidedChanges, sagaID, seq, reason, c, func(tx Tx, s *Saga, b bound, at time.Time) (Decision, error) {
		return e.drop(tx, s, b, p, ballot(b, DecidedChanges, p, reason), KeyChangesBy, at)
	})
}
