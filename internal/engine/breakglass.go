package engine

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/sagacity-go/sagacity/evidence"
	"github.com/sagacity-go/sagacity/wire"
)

// Break-glass: a person the policy's breakGlass names (who also holds the
// approver role, and neither started the saga nor made the request) has
// a pending request executed without its quorum, with a reason: a
// deliberate bypass, with loud evidence. The use is journaled as a
// decision of its own (an APPROVED entry of the approval gate naming
// them as break-glass-by, with its receipt), told to every endpoint
// whatever it listens for, and indexed (Store.Unratified) for the banner
// every console page shows and the metrics. The server then executes
// the request for its requester, as it does a rule that executes on
// approval (executed-by=server): the call is the agent's, and the
// journal names who broke the glass on the entry before it. Afterwards
// the request's rule's quorum ratifies the execution (Ratify) within
// the policy's ratifyWithin of the use; unratified past that, the
// execution is flagged by verification (evidence.Named), the metrics
// and the console. A use is held to its rule's step-up; a rule whose
// votes only a passkey signs is not broken (nothing weaker than its
// votes executes it).

// GlassUse is a break-glass execution, as the store indexes it until its
// rule's quorum ratified it.
type GlassUse struct {
	SagaID     string
	JournalSeq int64 // the request
	ToolName   string
	By, Reason string
	// At is the break-glass decision's time; RatifyBy the end of its
	// ratification window; RatifiedAt when its quorum stood, zero while
	// it does not.
	At, RatifyBy, RatifiedAt time.Time
}

// Overdue reports whether u's window ended unratified at now.
func (u GlassUse) Overdue(now time.Time) bool { return u.RatifiedAt.IsZero() && now.After(u.RatifyBy) }

// BreakGlass has the pending request at seq executed without its quorum,
// by p, who says why (required): journaled as a break-glass decision with
// its receipt, told to every endpoint, then executed by the server for
// its requester, once (however many race, as any resume). It returns the
// decision, and what the execution came to in the saga's status; an
// execution that cannot run now (halted) is the Recoverer's to run.
//
// Errors: Invalid without a reason; Forbidden without the approver role,
// outside the policy's breakGlass approvers, with a policy that has
// none, when p started the saga or made the request, from a sign-in
// older than the rule's step-up (code STEP_UP), or under a rule whose
// votes only a passkey signs (code PASSKEY); Conflict when the request
// is approved already (resume it) or superseded; as Approve otherwise.
func (e *Engine) BreakGlass(ctx context.Context, p Principal, sagaID string, seq int64, reason string) (Decision, error) {
	if strings.TrimSpace(reason) == "" {
		return Decision{}, Errorf(Invalid, "breaking the glass takes a reason: say why the request cannot wait for its quorum")
	}
	d, err := e.decideOn(ctx, p, ActBreakGlass, DecidedBreakGlass, sagaID, seq, reason, cast{},
		func(tx Tx, s *Saga, b bound, at time.Time) (Decision, error) {
			switch {
			case b.life.SupersededBy != 0:
				return Decision{}, superseded(b.life)
			case b.tally.Met() && !b.tally.Early(at):
				return Decision{}, &Error{Kind: Conflict, Msg: fmt.Sprintf("saga=%s seq=%d is approved already (%s): execute it, "+
					"no glass to break", sagaID, seq, b.tally.Progress())}
			case b.rule.PasskeyRequired:
				return Decision{}, &Error{Kind: Forbidden, Code: wire.CodePasskey, Msg: fmt.Sprintf("approval rule %s counts a vote only "+
					"signed by the voter's own passkey: its requests are not executed by break-glass", b.rule.Name)}
			}
			if err := voteAllowed(p, b.rule, reason, at); err != nil {
				return Decision{}, err
			}
			r := ballot(b, DecidedBreakGlass, p, reason)
			r.EligibleAs = b.rule.BreakGlass.EligibleAs(p.Roles, p.Groups)
			d, err := e.journalVote(tx, s, b, p, r, PhaseApproved, KeyBrokenBy, at)
			if err != nil {
				return d, err
			}
			use := GlassUse{SagaID: s.ID, JournalSeq: seq, ToolName: b.gated.ToolName, By: p.ID, Reason: reason, At: d.DecidedAt,
				RatifyBy: d.DecidedAt.Add(b.rule.BreakGlass.RatifyWithin)}
			if err := tx.PutGlassUse(use); err != nil {
				return d, err
			}
			d.Progress = b.tally.Progress()
			ev := requestEvent(wire.EventBreakGlass, b.gated, b.rule, b.tally, d.Receipt, d.DecidedAt).decided(DecidedBreakGlass, p.ID, reason, d.Receipt)
			ev = ev.said("%s broke the glass on %s (%s): the server executes it without its quorum; rule %s's quorum must ratify it by %s",
				p.ID, ev.what(), reason, b.rule.Name, evidence.Moment(use.RatifyBy))
			return d, e.tell(tx, ev)
		})
	if err != nil {
		return d, err
	}
	// The decision stands, whatever becomes of the execution: one that
	// cannot run now is the Recoverer's to run (ExecuteApproved).
	if rr, xerr := e.executeApproved(ctx, sagaID, seq); xerr != nil {
		e.log.Warn("executing a request after break-glass failed; trying again later", "saga", sagaID, "seq", seq, "err", xerr)
	} else {
		d.Status = rr.Status
	}
	return d, nil
}

// Ratify records p's ratification, with reason, of the break-glass
// execution of the request at seq: an approval under the request's rule
// after the fact (an APPROVED entry of the approval gate naming p as
// ratified-by, with its receipt, placed as a vote of the rule's quorum
// or thresholds), until the quorum stands, within the window of the use.
// The ratification completing the quorum drops the use from the
// unratified (Unratified).
//
// Errors: NotFound when no break-glass executed the request; Conflict
// when it is not executed yet, ratified already (by p, or by its
// quorum), past its window, or p meets no requirement still short;
// Forbidden as Approve's (the rule's approvers, four-eyes), and for
// whoever broke the glass on it; Invalid for a bad reason, or none
// where the rule requires one.
func (e *Engine) Ratify(ctx context.Context, p Principal, sagaID string, seq int64, reason string) (Decision, error) {
	if err := e.deciding(ctx, p, ActRatify, sagaID, seq, reason); err != nil {
		return Decision{}, err
	}
	none := &Error{Kind: NotFound, SagaID: sagaID, Seq: seq, Msg: fmt.Sprintf("no break-glass execution of a request at saga=%s seq=%d", sagaID, seq)}
	var d Decision
	s, err := e.withPolicies(ctx, func() (Saga, error) {
		return e.update(ctx, sagaID, none, func(tx Tx, s *Saga) error {
			entries, err := tx.Entries(s.ID)
			if err != nil {
				return err
			}
			if _, err := e.intact(tx, entries, *s, nil); err != nil {
				return err
			}
			lc, _ := evidence.ReadLifecycle(entries)
			l := lc.Requests[seq]
			if l == nil || l.BrokenAt == 0 {
				return none
			}
			b := bound{entries: entries, gated: entries[seq-1], life: l}
			if b.rule, err = e.ruleIn(b.gated); err != nil {
				return err
			}
			if err := e.Can(p, ActRatify, Subject{Saga: s, Requester: l.Requester, Rule: &b.rule, BrokenBy: l.BrokenBy}); err != nil {
				return err
			}
			b.tally = tally(b.gated, &Life{Votes: l.Ratifications}, b.rule)
			now := e.stamp(s)
			until := entries[l.BrokenAt-1].Timestamp.Add(b.rule.BreakGlass.RatifyWithin)
			switch {
			case l.Closing != ClosedResumed:
				return &Error{Kind: Conflict, Msg: fmt.Sprintf("the request at seq=%d is not executed yet: ratify it once it is", seq)}
			case slices.ContainsFunc(l.Ratifications, func(v Vote) bool { return v.Voter == p.ID }):
				return &Error{Kind: Conflict, Msg: fmt.Sprintf("%s ratified the execution of the request at seq=%d already: one person counts once", p.ID, seq)}
			case b.tally.Met():
				return &Error{Kind: Conflict, Msg: fmt.Sprintf("the execution of the request at seq=%d is ratified already: %s", seq, b.tally.Progress())}
			case now.After(until):
				return &Error{Kind: Conflict, Msg: fmt.Sprintf("the window to ratify the execution of the request at seq=%d ended at %s: "+
					"it stays flagged as unratified", seq, evidence.Moment(until))}
			}
			if err := voteAllowed(p, b.rule, reason, now); err != nil {
				return err
			}
			meets, ok := b.tally.Place(p.Roles, p.Groups)
			if !ok {
				return &Error{Kind: Conflict, Msg: fmt.Sprintf("%s meets no requirement of rule %s that is still short: %s", p.ID, b.rule.Name, b.tally.Progress())}
			}
			r := ballot(b, DecidedRatified, p, reason)
			after := Tally{Rule: b.rule, Votes: append(slices.Clone(b.tally.Votes), Vote{Voter: p.ID, Meets: meets})}
			r.Meets, r.Vote, r.Quorum = meets, len(after.Votes), after.Quorum()
			if d, err = e.journalVote(tx, s, b, p, r, PhaseApproved, KeyRatifiedBy, now); err != nil {
				return err
			}
			t := tally(b.gated, &Life{Votes: append(slices.Clone(b.tally.Votes), Vote{Seq: d.Receipt, Voter: p.ID, At: d.DecidedAt, Meets: meets})}, b.rule)
			d.Votes, d.Quorum, d.Progress = len(t.Votes), t.Quorum(), t.Progress()
			if !t.Met() {
				return nil // journaled, with its receipt; told once the quorum ratifies it
			}
			if err := tx.RatifyGlass(s.ID, seq, d.DecidedAt); err != nil {
				return err
			}
			ev := requestEvent(wire.EventRatified, b.gated, b.rule, t, d.Receipt, d.DecidedAt).decided(DecidedRatified, p.ID, reason, d.Receipt)
			return e.tell(tx, ev.said("the break-glass execution of %s is ratified by %s", ev.what(), strings.Join(t.Voters(), ", ")))
		})
	})
	if err != nil {
		return Decision{}, at(err, sagaID, seq)
	}
	e.obs.Decided(DecidedRatified)
	d.Status = s.Status
	return d, nil
}

// Unratified lists the break-glass executions their rules' quorums have
// not ratified, the oldest first, at most MaxList: what every console
// page shows while any is, overdue ones (GlassUse.Overdue) flagged.
// Forbidden without a role that reviews requests.
func (e *Engine) Unratified(ctx context.Context, p Principal) ([]GlassUse, error) {
	if err := e.Can(p, ActReview, Subject{}); err != nil {
		return nil, err
	}
	return e.store.Unratified(ctx, MaxList)
}

// executeBroken executes the requests a break-glass decision left
// unexecuted (a process stopped in between), at most MaxList a pass, and
// returns how many it executed.
func (e *Engine) executeBroken(ctx context.Context) (int, error) {
	uses, err := e.store.Unratified(ctx, MaxList)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, u := range uses {
		reqs, err := e.store.Approvals(ctx, u.SagaID)
		if err != nil {
			return n, err
		}
		if !slices.ContainsFunc(reqs, func(r ApprovalRequest) bool { return r.JournalSeq == u.JournalSeq }) {
			continue // executed
		}
		if _, err := e.executeApproved(ctx, u.SagaID, u.JournalSeq); err != nil {
			e.log.Warn("executing a request after break-glass failed; trying again later", "saga", u.SagaID, "seq", u.JournalSeq, "err", err)
			continue
		}
		n++
	}
	return n, nil
}
