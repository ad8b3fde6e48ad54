package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/sagacity-go/sagacity/evidence"
	"github.com/sagacity-go/sagacity/wire"
)

// Refusal details journaled when a resume fails closed (SPEC §4).
const (
	RefusedNoApproval = "no human approval recorded"
	RefusedStale      = "stale-approval: payload changed since approval was granted"
	// RefusedQuorum starts the refusal of a request approved by fewer
	// people than its rule asks for.
	RefusedQuorum = "quorum not reached"
	// RefusedGrant starts the refusal of a request whose approval's
	// grant ended before it was executed.
	RefusedGrant = "grant-expired: the approval's grant ended before execution"
)

// Decision is a recorded decision on a request: an approval (a vote), a
// rejection, a dismissal, a withdrawal or a request for changes.
type Decision struct {
	SagaID     string
	JournalSeq int64
	Decided    Decided
	Approved   bool // Decided is DecidedApproved
	Approver   string
	Reason     string
	DecidedAt  time.Time
	Status     Status // the saga's status afterwards
	// Votes and Quorum say where the approvals stand afterwards, and
	// Progress in words ("1 of 2 approvals (alice); waiting for 1 more
	// from finance-leads"), for an approval or a withdrawal.
	Votes, Quorum int
	Progress      string
	// Receipt is the entry that records it (its receipt's seq).
	Receipt int64
}

// ChangesMessage is what the model is told of a request a reviewer sent
// back.
func ChangesMessage(tool, reason string) string {
	return fmt.Sprintf("[CHANGES_REQUESTED] Tool '%s': %s", tool, reason)
}

// gateRef is the input of decision and refusal entries: the gated entry's seq.
func gateRef(seq int64) string { return evidence.Ref(seq) }

// personalPayload is the payload of an entry that records a person's
// decision r on entry g, made at at: who (key=<identity>), why, how they
// signed in, the signed receipt, and the result they report last, when
// they report one (it may hold line breaks).
func (e *Engine) personalPayload(p Principal, g Entry, r Receipt, key Key, result *string, at time.Time) (string, error) {
	receipt, err := e.signed(p, g, r, result, at)
	ls := Lines{{key, p.ID}}.With(KeyReason, r.Reason).With(KeyAuth, string(p.Auth)).With(KeyReceipt, receipt)
	if result != nil {
		ls = append(ls, Line{KeyResult, *result})
	}
	return ls.String(), err
}

func noPending(sagaID string, seq int64) *Error {
	return &Error{Kind: NotFound, Msg: fmt.Sprintf("No pending approval found for saga=%s seq=%d", sagaID, seq),
		SagaID: sagaID, Seq: seq}
}

// bound is a pending request as its verified journal has it, with the
// rule it is decided by and where its votes stand.
type bound struct {
	entries []Entry
	gated   Entry // the AWAITING_APPROVAL entry the request row stands for
	life    *Life // what the journal says became of it: open, so far
	rule    Rule
	tally   Tally
	row     ApprovalRequest
	// drift, when the row says otherwise than its journal (a column
	// edited behind the engine's back), is the Conflict of acting on it:
	// nothing is decided on it but what the journal's own clock decides.
	drift *Error
	// passkey is the voter's passkey's proof of the vote being cast, when
	// it was cast with one.
	passkey *PasskeyProof
	// verified is what verifying the journal found (intact).
	verified Verification
}

// bind reads a locked saga's journal, verifies it against the saga's head
// (see intact), checks that it holds the pending request r open, and
// returns it with the AWAITING_APPROVAL entry r stands for and the rule
// that entry records. Decisions and resumes act on that verified entry,
// never on the request row, which is only the index of what is pending:
// a row whose columns disagree with its entry, or whose index (voters,
// quorum, due) disagrees with the journal, is bound with its drift.
// Conflict when the journal does not verify, r stands for no request it
// holds open, or the rule cannot be found; an *unloaded error when the
// request's policy must be read first.
func (e *Engine) bind(tx Tx, s *Saga, r ApprovalRequest) (bound, error) {
	entries, err := tx.Entries(s.ID)
	if err != nil {
		return bound{}, err
	}
	verified, err := e.intact(tx, entries, *s, nil)
	if err != nil {
		return bound{}, err
	}
	lc, _ := evidence.ReadLifecycle(entries)
	v, columns := verifyRow(entries, lc, *s, r)
	if !v.Valid && !columns {
		return bound{}, e.unverified(s.ID, v)
	}
	b := bound{entries: entries, gated: entries[r.JournalSeq-1], life: lc.Requests[r.JournalSeq], row: r, verified: verified}
	if b.rule, err = e.ruleIn(b.gated); err != nil {
		return bound{}, err
	}
	b.tally = tally(b.gated, b.life, b.rule)
	if v.Valid {
		v = indexed(entries, r, b.life, b.rule)
	}
	if !v.Valid {
		b.drift = e.unverified(s.ID, v)
	}
	return b, nil
}

// superseded is the Conflict of acting on a request the saga re-planned.
func superseded(l *Life) *Error {
	return &Error{Kind: Conflict, Code: wire.CodeSuperseded, Msg: fmt.Sprintf("the request at seq=%d was superseded by the saga's request at seq=%d: "+
		"it can no longer be approved or executed", l.Seq, l.SupersededBy)}
}

// timedOut is the Conflict (code EXPIRED) of acting on the request at
// seq of saga sagaID whose time ran out, which entry closing closed (the
// server's REJECTED of an expired request, or the refusal of a lapsed
// grant): the same answer whoever noticed first, the sweep, a vote or a
// resume.
func timedOut(sagaID string, seq int64, closing Entry) *Error {
	why := fmt.Sprintf("the request at seq=%d expired at %s without its quorum: the server rejected it at seq=%d, and the saga is compensated",
		seq, closing.Field(KeyExpired), closing.Seq)
	if closing.Field(KeyExpired) == "" {
		detail, _, _ := closing.Refusal()
		why = fmt.Sprintf("the request at seq=%d was not executed within its grant: the server closed it at seq=%d (%s), and the saga is compensated",
			seq, closing.Seq, detail)
	}
	return &Error{Kind: Conflict, Code: wire.CodeExpired, SagaID: sagaID, Seq: seq, Msg: why}
}

// runOut closes bound request b if its time ran out at at, as whoever
// notices first does (the sweep, a vote, a resume): expired without its
// quorum, by the server's REJECTED; approved and not executed within its
// grant, by a refusal (RefusedGrant). Either fails the saga, which the
// caller compensates once committed. It returns the entry that closed
// it, and whether it did; a superseded request's time never runs out,
// for the saga went on with the one that replaced it.
func (e *Engine) runOut(tx Tx, s *Saga, b bound, at time.Time) (Entry, bool, error) {
	switch {
	case b.life.SupersededBy != 0:
		return Entry{}, false, nil
	case b.tally.Expired(at):
		en, err := e.expire(tx, s, b, at)
		return en, true, err
	case b.tally.Lapsed(at):
		detail := fmt.Sprintf("%s (quorum reached at %s, grant of %s)", RefusedGrant, b.tally.Reached.UTC().Format(time.RFC3339), b.rule.Grant)
		en, err := e.refused(tx, s, b, Lines{{Value: detail}}, fmt.Sprintf("%s at seq=%d was not executed within its grant",
			b.gated.ToolName, b.gated.Seq), at)
		return en, true, err
	}
	return Entry{}, false, nil
}

// decide opens a decision on a pending request: it locks the saga, finds
// the request, its verified journal entry and its rule, checks that p may
// take action a on it, closes it when its time ran out (see runOut:
// Conflict, code EXPIRED, after the saga is compensated), and for a vote
// checks the rule's reason and step-up. fn then journals the decision.
func (e *Engine) decide(ctx context.Context, p Principal, a Action, sagaID string, seq int64, reason string, c cast,
	fn func(tx Tx, s *Saga, b bound, at time.Time) error) (Saga, error) {
	if err := e.guard(p, a, sagaID); err != nil {
		return Saga{}, err
	}
	if err := validReason(reason); err != nil {
		return Saga{}, err
	}
	if err := e.signing(ctx); err != nil {
		return Saga{}, at(err, sagaID, seq)
	}
	if err := e.recordSignIn(ctx, p); err != nil {
		return Saga{}, at(err, sagaID, seq)
	}
	var closing Entry
	var ranOut bool
	s, err := e.onPending(ctx, sagaID, seq, c.kept, e.closedError, func(tx Tx, s *Saga, b bound) (err error) {
		if err := e.Can(p, a, Subject{Saga: s, Requester: b.gated.Field(KeyRequester), Rule: &b.rule}); err != nil {
			return err
		}
		now := e.stamp(s)
		if closing, ranOut, err = e.runOut(tx, s, b, now); ranOut || err != nil {
			return err
		}
		if b.drift != nil {
			return b.drift
		}
		if d, voting := votes[a]; voting {
			if err := voteAllowed(p, b.rule, reason, now); err != nil {
				return err
			}
			switch {
			case c.passkey != nil:
				proof, err := e.checkPasskey(tx, p, b, d, reason, c.passkey, now)
				if err != nil {
					return err
				}
				b.passkey = &proof
			case b.rule.PasskeyRequired:
				return &Error{Kind: Forbidden, Code: wire.CodePasskey, Msg: fmt.Sprintf("approval rule %s counts a vote only signed "+
					"by the voter's own passkey: vote in the console", b.rule.Name)}
			}
		}
		return fn(tx, s, b, now)
	})
	if ranOut && err == nil {
		e.compensateNow(ctx, s)
		return Saga{}, timedOut(sagaID, seq, closing)
	}
	return s, at(err, sagaID, seq)
}

// votes are the actions that are votes, and what each decides.
var votes = map[Action]Decided{ActApprove: DecidedApproved, ActReject: DecidedRejected, ActRequestChanges: DecidedChanges}

// Vote reports whether a is a vote on a request (approve, reject,
// request changes): what a rule's step-up and passkey hold.
func (a Action) Vote() bool {
	_, ok := votes[a]
	return ok
}

// decideOn is decide for the decisions that leave the saga going (all but
// a rejection): fn journals the decision and returns it; the observer is
// told, and the saga's status filled in.
func (e *Engine) decideOn(ctx context.Context, p Principal, a Action, decided Decided, sagaID string, seq int64, reason string,
	c cast, fn func(tx Tx, s *Saga, b bound, at time.Time) (Decision, error)) (Decision, error) {
	var d Decision
	s, err := e.decide(ctx, p, a, sagaID, seq, reason, c, func(tx Tx, s *Saga, b bound, at time.Time) (err error) {
		d, err = fn(tx, s, b, at)
		return err
	})
	if err == nil {
		e.obs.Decided(decided)
	}
	d.Status = s.Status
	return d, err
}

// voteAllowed checks a vote by p at at against rule r: a reason where
// the rule requires one (Invalid), a sign-in recent enough for its
// step-up (Forbidden, code STEP_UP).
func voteAllowed(p Principal, r Rule, reason string, at time.Time) error {
	if r.ReasonRequired && reason == "" {
		return Errorf(Invalid, "approval rule %s requires a reason with every vote: say why", r.Name)
	}
	if r.StepUp <= 0 {
		return nil
	}
	if p.AuthTime.IsZero() {
		return &Error{Kind: Forbidden, Code: wire.CodeStepUp, Msg: fmt.Sprintf("approval rule %s counts a vote only from a sign-in "+
			"within the last %s, and %s has no sign-in time (a static token never has): vote from the console", r.Name, r.StepUp, p.ID)}
	}
	if signedIn := p.AuthTime.Truncate(time.Second); signedIn.Before(at.Add(-r.StepUp).Truncate(time.Second)) {
		return &Error{Kind: Forbidden, Code: wire.CodeStepUp, Msg: fmt.Sprintf("approval rule %s counts a vote only from a sign-in "+
			"within the last %s; you signed in %s ago: sign in again, then vote", r.Name, r.StepUp, at.Sub(signedIn).Round(time.Second))}
	}
	return nil
}

// ballot is the part of a decision's receipt that says what it counts
// for under the request's rule.
func ballot(b bound, decision Decided, p Principal, reason string) Receipt {
	r := Receipt{Decision: decision, Reason: reason, ApprovalPolicy: b.gated.Field(KeyPolicy)}
	if r.ApprovalPolicy != "" {
		r.Rule = b.rule.Name
	}
	if decision != DecidedWithdrawn && decision != DecidedDismissed {
		r.EligibleAs = b.rule.EligibleAs(p.Roles, p.Groups)
		r.Passkey = b.passkey
	}
	return r
}

// journalVote journals p's decision on bound request b at at, as an
// entry of the approval gate of phase with the identity under key, and
// returns it.
func (e *Engine) journalVote(tx Tx, s *Saga, b bound, p Principal, r Receipt, phase Phase, key Key, at time.Time) (Decision, error) {
	payload, err := e.personalPayload(p, b.gated, r, key, nil, at)
	if err != nil {
		return Decision{}, err
	}
	en, err := e.appendAt(tx, s, GateTool, phase, gateRef(b.gated.Seq), payload, at)
	return Decision{SagaID: s.ID, JournalSeq: b.gated.Seq, Decided: r.Decision, Approved: r.Decision == DecidedApproved,
		Approver: p.ID, Reason: r.Reason, DecidedAt: en.Timestamp, Receipt: en.Seq, Quorum: b.rule.Quorum}, err
}

// count records in the request's row, and in d, where its votes stand
// after d, a vote or a withdrawal, with standing the votes that do, and
// tells of it.
func (e *Engine) count(tx Tx, b bound, d *Decision, standing []Vote) error {
	t := tally(b.gated, &Life{Votes: standing}, b.rule)
	d.Votes, d.Progress = len(standing), t.Progress()
	if err := tx.PutVotes(b.row.SagaID, b.row.JournalSeq, t.Voters(), t.Due()); err != nil {
		return err
	}
	return e.tellVote(tx, b, *d, t)
}

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

// cast is how a decision reaches the gate besides its words: the
// passkey's assertion over a vote cast with one, and where Decide keeps
// what verifying the journal found before the decision acted. Either is
// nil when there is none.
type cast struct {
	passkey *passkeyVote
	kept    *verified
}

// verified is where Decide has onPending keep what verifying the journal
// found before its decision on the request acted (found stays nil when
// none was made: the request was executed before), so that it returns
// the request without verifying the journal again.
type verified struct{ found *Verification }

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
	return e.decideOn(ctx, p, ActApprove, DecidedApproved, sagaID, seq, reason, c, func(tx Tx, s *Saga, b bound, at time.Time) (Decision, error) {
		if mine, ok := b.life.VoteOf(p.ID); ok {
			return Decision{}, &Error{Kind: Conflict, Msg: fmt.Sprintf("%s approved the request at seq=%d already (seq=%d): one person counts once",
				p.ID, seq, mine.Seq)}
		}
		switch {
		case b.tally.Met():
			return Decision{}, &Error{Kind: Conflict, Msg: fmt.Sprintf("saga=%s seq=%d is already approved: %s", sagaID, seq, b.tally.Progress())}
		case b.life.SupersededBy != 0:
			return Decision{}, superseded(b.life)
		}
		r := ballot(b, DecidedApproved, p, reason)
		r.Vote, r.Quorum = len(b.tally.Votes)+1, b.rule.Quorum
		d, err := e.journalVote(tx, s, b, p, r, PhaseApproved, KeyApprover, at)
		if err != nil {
			return d, err
		}
		return d, e.count(tx, b, &d, append(b.tally.Votes, Vote{Seq: d.Receipt, Voter: p.ID, At: d.DecidedAt}))
	})
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

// reject is Reject, cast as c says.
func (e *Engine) reject(ctx context.Context, p Principal, sagaID string, seq int64, reason string, c cast) (Decision, error) {
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

// expire closes bound request b, whose deadline passed with its votes
// short, as the server's REJECTED with a receipt, and fails the saga (the
// caller compensates it once committed). It returns that entry.
func (e *Engine) expire(tx Tx, s *Saga, b bound, at time.Time) (Entry, error) {
	server := Principal{ID: ServerDecider, Auth: AuthServer}
	r := ballot(b, DecidedExpired, server, "")
	r.EligibleAs = ""
	receipt, err := e.signed(server, b.gated, r, nil, at)
	if err != nil {
		return Entry{}, err
	}
	deadline := b.tally.Deadline.UTC().Format(TimeLayout)
	payload := Lines{{KeyExpired, deadline}, {KeyAuth, string(AuthServer)}, {KeyReceipt, receipt}}.String()
	en, err := e.appendAt(tx, s, GateTool, PhaseRejected, gateRef(b.gated.Seq), payload, at)
	if err != nil {
		return Entry{}, err
	}
	if err := e.tellClosed(tx, b, Decision{Decided: DecidedExpired, Approver: ServerDecider, DecidedAt: en.Timestamp, Receipt: en.Seq}); err != nil {
		return Entry{}, err
	}
	return en, e.fail(tx, s, fmt.Sprintf("%s at seq=%d expired without its quorum (%s)", b.gated.ToolName, b.gated.Seq, b.tally.Progress()))
}

// closedError says what became of a request that is not pending, as its
// journal says (see closedIn).
func (e *Engine) closedError(tx Tx, sagaID string, seq int64) error {
	entries, err := tx.Entries(sagaID)
	if err != nil {
		return err
	}
	_, err = closedIn(entries, sagaID, seq)
	return err
}

// closedIn says what became of the request at seq of saga sagaID that is
// not pending, as its journal (entries) says: its reviewer's request for
// changes (Conflict, code CHANGES_REQUESTED, with what the agent is
// told), its expiry or its lapsed grant (Conflict, code EXPIRED, see
// timedOut); NotFound, saying how it was closed, for anything else. It
// returns the request's life too, nil when the journal has no such
// request.
func closedIn(entries []Entry, sagaID string, seq int64) (*closed, error) {
	lc, _ := evidence.ReadLifecycle(entries)
	if lc.Requests[seq] == nil {
		return nil, noPending(sagaID, seq)
	}
	l := &closed{lc.Requests[seq]}
	if l.Open() || l.Closed > int64(len(entries)) {
		return l, noPending(sagaID, seq)
	}
	closing := entries[l.Closed-1]
	switch detail, _, _ := closing.Refusal(); {
	case l.Closing == ClosedChanges:
		return l, &Error{Kind: Conflict, Code: wire.CodeChangesRequested, SagaID: sagaID, Seq: seq,
			Msg: ChangesMessage(l.Tool, closing.Field(KeyReason))}
	case l.Closing == ClosedExpired, l.Closing == ClosedRefused && strings.HasPrefix(detail, RefusedGrant):
		return l, timedOut(sagaID, seq, closing)
	}
	none := noPending(sagaID, seq)
	none.Msg += ": it was " + l.how()
	return l, none
}

// closed is a request as closedIn reads it from its journal, which
// fate (calls.go) words with how.
type closed struct{ *Life }

// how says how it was closed: "rejected at seq=5".
func (l *closed) how() string { return l.How() }

// errResumed is what a resume finds of a request the journal says was
// resumed already, by the INTENT at seq: what that execution came to is
// read, and answered, once the transaction is over.
type errResumed struct{ intent int64 }

func (x *errResumed) Error() string {
	return fmt.Sprintf("the request was resumed at seq=%d", x.intent)
}

// ResumeResult reports a resume. A refused resume is a completed action,
// not an error: Refused is set, Reason says why, the tool was not called
// and the saga has been compensated.
type ResumeResult struct {
	SagaID  string
	Seq     int64 // the gated entry
	Status  Status
	Result  string // the tool's result when it executed
	Refused bool
	Reason  string // the refusal detail, or the tool's error when it failed
	Call    CallResult
}

// Resume executes an approved request, bound to the payload that was
// approved. It fails closed, in this order: no pending request → NotFound,
// nothing journaled (Conflict with code CHANGES_REQUESTED or EXPIRED when
// a reviewer sent it back, or the server closed it); a journal that does
// not verify, a request that does not match its AWAITING_APPROVAL entry,
// or one whose rule cannot be found → Conflict, nothing journaled; a
// request whose time ran out (its deadline passed without its quorum, or
// its grant ended) → closed as the sweep closes it, the saga compensated,
// and Conflict with code EXPIRED, as a resume after the sweep gets;
// fewer standing approvals than its rule's quorum (RefusedNoApproval for
// none), or sha256(payload) ≠ the hash of the input that entry journaled
// (byte-exact, whatever the bytes) → refused:
// REJECTED is journaled (with the attempted bytes, see EncodeText), the
// saga's pending requests are dropped and its executed steps compensated.
// Otherwise the request is claimed and dropped in the transaction that
// journals INTENT, so however many resumes race, across processes, the
// tool runs at most once. A resume of a request the journal says was
// executed already runs nothing and answers what that execution came to,
// as a call sent again under its key does: its outcome, IN_DOUBT, or
// Conflict (code IN_PROGRESS) while it runs; Conflict for other bytes
// than the ones it ran with.
//
// Other errors: NotFound when the request's tool is not registered;
// Forbidden as Can says; Invalid for a payload larger than the input limit.
func (e *Engine) Resume(ctx context.Context, p Principal, sagaID string, seq int64, payload string) (ResumeResult, error) {
	if len(payload) > e.maxInput {
		return ResumeResult{}, Errorf(Invalid, "payload is larger than %d bytes", e.maxInput)
	}
	return e.resume(ctx, p, sagaID, seq, &payload, nil)
}

// Execute is Resume with the bytes the request's verified AWAITING_APPROVAL
// entry holds: what a person who approved it, or the agent that asked,
// runs from the console or MCP without presenting the bytes again. Every
// check of Resume holds; and a request whose quorum is not reached yet is
// Conflict (Code wire.CodeUndecided) with nothing changed, where Resume
// refuses it and compensates the saga.
func (e *Engine) Execute(ctx context.Context, p Principal, sagaID string, seq int64) (ResumeResult, error) {
	return e.resume(ctx, p, sagaID, seq, nil, nil)
}

// resume does Resume with payload, or Execute when it is nil, keeping
// what verifying the journal found in kept (Decide) unless it is nil.
func (e *Engine) resume(ctx context.Context, p Principal, sagaID string, seq int64, payload *string, kept *verified) (rr ResumeResult, err error) {
	var tool Tool // the request's, once found
	defer func() { e.obs.Called(tool.Name, ended(rr.Call.Outcome, rr.Refused, err)) }()
	if err := e.guard(p, ActResume, sagaID); err != nil {
		return ResumeResult{}, err
	}
	if why := e.Halted(); why != "" {
		// Nothing is journaled: the request stays pending until an
		// operator restores the log.
		return ResumeResult{}, &Error{Kind: Unavailable, Msg: "executions of IRREVERSIBLE tools are halted: " + why +
			"; the request stays pending until an operator restores the database or the checkpoints", Err: ErrHalted, SagaID: sagaID, Seq: seq}
	}
	var refusal string
	var call Call
	var closing Entry
	var ranOut bool
	st := starts{e: e}
	defer st.release()
	closed := func(tx Tx, sagaID string, seq int64) error {
		entries, err := tx.Entries(sagaID)
		if err != nil {
			return err
		}
		l, err := closedIn(entries, sagaID, seq)
		if l != nil && l.Closing == ClosedResumed {
			if c, ok, err := st.find(sagaID, tx.Call); err != nil || ok {
				// This resume's INTENT committed: it runs now.
				call, tool, refusal, ranOut = c, e.tools[c.ToolName], "", false
				return err
			}
			return &errResumed{intent: l.Closed}
		}
		return err
	}
	s, err := st.again(ctx, sagaID, &call, func(ctx context.Context) (Saga, error) {
		return e.onPending(ctx, sagaID, seq, kept, closed, func(tx Tx, s *Saga, b bound) (err error) {
			refusal, call = "", Call{}
			gated := b.gated
			if err := e.Can(p, ActResume, Subject{Saga: s}); err != nil {
				return err
			}
			var ok bool
			if tool, ok = e.tools[gated.ToolName]; !ok {
				return &Error{Kind: NotFound, Msg: fmt.Sprintf("tool %q is not registered", gated.ToolName)}
			}
			if b.life.SupersededBy != 0 {
				// Not a refusal: the saga goes on with the request that
				// replaced this one.
				return superseded(b.life)
			}
			now := e.stamp(s)
			if closing, ranOut, err = e.runOut(tx, s, b, now); ranOut || err != nil {
				return err
			}
			if b.drift != nil {
				return b.drift
			}
			if payload == nil && !b.tally.Met() {
				// Execute runs what people approved; asked before they
				// did, it changes nothing.
				return &Error{Kind: Conflict, Code: wire.CodeUndecided, Msg: fmt.Sprintf("the request at seq=%d is not decided yet (%s): "+
					"nothing was run or changed; wait until it is approved, then execute it", seq, b.tally.Progress())}
			}
			if err := e.clear(tx, s); err != nil {
				return err
			}
			presented := gated.Input
			if payload != nil {
				presented = *payload
			}
			if refusal = refuse(b.tally, gated, presented); refusal != "" {
				detail := Lines{{Value: refusal}}
				if refusal == RefusedStale {
					detail = detail.With(KeyAttempted, EncodeText(presented))
				}
				_, err := e.refused(tx, s, b, detail, fmt.Sprintf("resume of %s at seq=%d refused: %s", gated.ToolName, seq, refusal), now)
				return err
			}
			if _, err := tx.DeleteApprovals(sagaID, seq); err != nil {
				return err
			}
			en, err := e.appendAt(tx, s, gated.ToolName, PhaseIntent, gated.Input, requested(p, "").With(KeyResumes, gateRef(seq)).String(), now)
			if err != nil {
				return err
			}
			call = Call{SagaID: sagaID, Seq: en.Seq, ToolName: gated.ToolName, Input: gated.Input, Requester: p.ID,
				State: CallRunning, StartedAt: en.Timestamp, UpdatedAt: en.Timestamp, Request: seq, Runner: e.runnerID()}
			st.hold(call)
			if err := e.putCall(tx, s, "", call); err != nil {
				return err
			}
			return e.settle(tx, s)
		})
	})
	if again, ok := errors.AsType[*errResumed](err); ok {
		return e.resumed(ctx, p, sagaID, seq, again.intent, payload)
	}
	if err != nil {
		e.unknown(sagaID, err) // a refusal compensates
		return ResumeResult{}, at(err, sagaID, seq)
	}
	if ranOut {
		e.compensateNow(ctx, s)
		return ResumeResult{}, timedOut(sagaID, seq, closing)
	}
	if refusal != "" {
		return ResumeResult{SagaID: sagaID, Seq: seq, Status: e.compensateNow(ctx, s).Status, Refused: true, Reason: refusal}, nil
	}
	cr, err := e.execute(ctx, tool, call, s.Status)
	if err != nil {
		return ResumeResult{}, err
	}
	return ResumeResult{SagaID: sagaID, Seq: seq, Status: cr.Status, Result: cr.Result, Reason: cr.Error, Call: cr}, nil
}

// resumed answers p's resume, with payload (nil for Execute), of the
// request at seq of saga sagaID that the INTENT at intent executed
// already: nothing runs again, and the answer is what that execution came
// to (see outcome). Conflict when payload is other bytes than the ones it
// ran with; Forbidden as Can says.
func (e *Engine) resumed(ctx context.Context, p Principal, sagaID string, seq, intent int64, payload *string) (ResumeResult, error) {
	snap, err := e.store.Snapshot(ctx, sagaID, true)
	if err != nil {
		return ResumeResult{}, err
	}
	if snap.Saga == nil || intent > int64(len(snap.Entries)) {
		return ResumeResult{}, noPending(sagaID, seq) // the saga's rows went meanwhile
	}
	if err := e.Can(p, ActResume, Subject{Saga: snap.Saga}); err != nil {
		return ResumeResult{}, err
	}
	if ran := snap.Entries[intent-1]; payload != nil && *payload != ran.Input {
		return ResumeResult{}, &Error{Kind: Conflict, SagaID: sagaID, Seq: seq, Msg: fmt.Sprintf("the request at seq=%d was executed "+
			"at seq=%d with the bytes approved (sha256 %s), not these: nothing was run", seq, intent, PayloadHash(ran.Input))}
	}
	cr, err := e.outcome(ctx, snap, seq, intent, fmt.Sprintf("the execution of the request at seq=%d (seq=%d)", seq, intent))
	if err != nil {
		return ResumeResult{}, err
	}
	return ResumeResult{SagaID: sagaID, Seq: seq, Status: cr.Status, Result: cr.Result, Reason: cr.Error, Call: cr}, nil
}

// refused journals the refusal detail of executing bound request b (its
// first line says why), tells of it, and fails the saga for reason. It
// returns the refusal's entry.
func (e *Engine) refused(tx Tx, s *Saga, b bound, detail Lines, reason string, at time.Time) (Entry, error) {
	en, err := e.appendAt(tx, s, b.gated.ToolName, PhaseRejected, gateRef(b.gated.Seq), detail.String(), at)
	if err != nil {
		return Entry{}, err
	}
	ev := requestEvent(wire.EventRefused, b.gated, b.rule, b.tally, en.Seq, en.Timestamp)
	ev = ev.said("a resume of %s was refused (%s); the saga is compensated", ev.what(), detail[0].Value)
	if strings.HasPrefix(detail[0].Value, RefusedGrant) {
		ev.Type, ev.Key = wire.EventExpired, fmt.Sprintf("%s/%d/%s", ev.SagaID, en.Seq, wire.EventExpired)
		ev = ev.said("%s was not executed within its grant; the saga is compensated", ev.what())
	}
	if err := e.tell(tx, ev); err != nil {
		return Entry{}, err
	}
	return en, e.fail(tx, s, reason)
}

// refuse returns why payload may not run as the verified gated entry,
// whose votes stand as t, or "". Its time running out is runOut's.
func refuse(t Tally, gated Entry, payload string) string {
	switch {
	case len(t.Votes) == 0:
		return RefusedNoApproval
	case !t.Met():
		return RefusedQuorum + ": " + t.Progress()
	case PayloadHash(payload) != PayloadHash(gated.Input):
		return RefusedStale
	}
	return ""
}

// onRequest runs fn on the pending request at seq of saga sagaID, bound
// to its verified journal and rule (see bind), in one transaction on the
// locked saga; when the request is not pending, closed says what to do
// instead, and when its row disagrees with its journal, nothing is done
// (Conflict). A policy the request records is read first when need be.
func (e *Engine) onRequest(ctx context.Context, sagaID string, seq int64, closed func(tx Tx, sagaID string, seq int64) error,
	fn func(tx Tx, s *Saga, b bound) error) (Saga, error) {
	return e.onPending(ctx, sagaID, seq, nil, closed, func(tx Tx, s *Saga, b bound) error {
		if b.drift != nil {
			return b.drift
		}
		return fn(tx, s, b)
	})
}

// onPending is onRequest for what keeps a request's clocks (votes,
// resumes, the sweep): fn runs on a request whose row disagrees with its
// journal too, so that it closes it when its time ran out by the journal
// (runOut) — an edited row never keeps a request alive — and refuses to
// do anything else on it with b.drift. Unless kept is nil, it keeps what
// verifying the journal found there.
func (e *Engine) onPending(ctx context.Context, sagaID string, seq int64, kept *verified, closed func(tx Tx, sagaID string, seq int64) error,
	fn func(tx Tx, s *Saga, b bound) error) (Saga, error) {
	return e.withPolicies(ctx, func() (Saga, error) {
		return e.update(ctx, sagaID, noPending(sagaID, seq), func(tx Tx, s *Saga) error {
			r, err := tx.Approval(sagaID, seq)
			if IsKind(err, NotFound) {
				return closed(tx, sagaID, seq)
			}
			if err != nil {
				return err
			}
			b, err := e.bind(tx, s, r)
			if err != nil {
				return err
			}
			if kept != nil {
				kept.found = &b.verified
			}
			return fn(tx, s, b)
		})
	})
}

// unloaded is the error of a transaction that needs a policy this engine
// has not read yet: the caller reads it, outside the transaction, and
// tries again.
type unloaded struct{ hash string }

func (u *unloaded) Error() string { return "approval policy " + short12(u.hash) + " is not loaded" }

// withPolicies runs f, and once more when it needed a policy that had to
// be read first.
func (e *Engine) withPolicies(ctx context.Context, f func() (Saga, error)) (Saga, error) {
	s, err := f()
	if u, ok := errors.AsType[*unloaded](err); ok {
		if _, lerr := e.Policy(ctx, u.hash); lerr != nil {
			if IsKind(lerr, NotFound) {
				return s, &Error{Kind: Conflict, Msg: fmt.Sprintf("a request of this saga was made under approval policy %s, which never "+
					"took effect here (this server runs %s): nothing is decided on it", short12(u.hash), short12(e.approvals.Hash))}
			}
			return s, lerr
		}
		s, err = f()
	}
	return s, err
}

// ruleIn is ruleOf from what the engine has read: an *unloaded error
// when the request's policy is not among it.
func (e *Engine) ruleIn(gated Entry) (Rule, error) {
	hash := gated.Field(KeyPolicy)
	if hash == "" {
		return evidence.LegacyRule(), nil
	}
	a, ok := e.policies.get(hash)
	if !ok {
		return Rule{}, &unloaded{hash}
	}
	return matchRecorded(a, gated)
}
