package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sagacity-go/sagacity/evidence"
	"github.com/sagacity-go/sagacity/wire"
)

// Decision is a recorded decision on a request: an approval (a vote), a
// rejection, a dismissal, a withdrawal or a request for changes.
type Decision struct {
	SagaID     string
	JournalSeq int64
	Decided    Decided
	Approved   bool // Decided is DecidedApproved
	Approver   string
	// OnBehalfOf is the delegator a delegate's vote was cast for, "" for
	// the approver's own.
	OnBehalfOf string
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
	ls := Lines{{key, p.ID}}.With(KeyOnBehalfOf, r.OnBehalfOf).With(KeyMeets, MeetsText(r.Meets)).With(KeyReason, r.Reason).
		With(KeyAuth, string(p.Auth)).With(KeyReceipt, receipt)
	if result != nil {
		ls = append(ls, Line{KeyResult, *result})
	}
	return ls.String(), err
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
	// delegation is the delegation a vote is cast under, when it is cast
	// for a delegator.
	delegation *Delegation
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

// runOut closes bound request b if its time ran out at at, as whoever
// notices first does (the sweep, a vote, a resume): expired without its
// quorum, by the server's REJECTED; approved and not executed within its
// grant, by a refusal (RefusedGrant). Either fails the saga, which the
// caller compensates once committed. It returns the entry that closed
// it, and whether it did; a superseded request's time never runs out,
// for the saga went on with the one that replaced it, nor a request
// executed by break-glass.
func (e *Engine) runOut(tx Tx, s *Saga, b bound, at time.Time) (Entry, bool, error) {
	switch {
	case b.life.SupersededBy != 0, b.life.BrokenAt != 0:
		// A broken glass's request is the server's to execute, whatever
		// its clocks say.
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
	if err := e.deciding(ctx, p, a, sagaID, seq, reason); err != nil {
		return Saga{}, err
	}
	var closing Entry
	var ranOut bool
	s, err := e.onPending(ctx, sagaID, seq, c.kept, e.closedError, func(tx Tx, s *Saga, b bound) (err error) {
		now := e.stamp(s)
		if err := e.delegatedCan(tx, p, a, s, &b, c, now); err != nil {
			return err
		}
		if closing, ranOut, err = e.runOut(tx, s, b, now); ranOut || err != nil {
			return err
		}
		if b.drift != nil {
			return b.drift
		}
		if b.life.BrokenAt != 0 {
			// Nothing more is decided on it: the server executes it.
			return &Error{Kind: Conflict, Msg: fmt.Sprintf("%s broke the glass on the request at seq=%d (seq=%d): the server executes it",
				b.life.BrokenBy, seq, b.life.BrokenAt)}
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

// deciding is the prelude of p's decision a, with reason, on the request
// at seq of saga sagaID: that p may take a on a saga at all (guard), a
// reason that may be journaled, a key that signs its receipt, and p's
// sign-in recorded.
func (e *Engine) deciding(ctx context.Context, p Principal, a Action, sagaID string, seq int64, reason string) error {
	if err := e.guard(p, a, sagaID); err != nil {
		return err
	}
	if err := validReason(reason); err != nil {
		return err
	}
	if err := e.signing(ctx); err != nil {
		return at(err, sagaID, seq)
	}
	return at(e.recordSignIn(ctx, p), sagaID, seq)
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
	if decision != DecidedWithdrawn && decision != DecidedDismissed && decision != DecidedCancelled {
		v := b.voter(p)
		r.EligibleAs = b.rule.EligibleAs(v.Roles, v.Groups)
		r.Passkey = b.passkey
		if d := b.delegation; d != nil {
			r.OnBehalfOf, r.Delegation = d.From, d.Seq
		}
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
		Approver: p.ID, OnBehalfOf: r.OnBehalfOf, Reason: r.Reason, DecidedAt: en.Timestamp, Receipt: en.Seq, Quorum: b.tally.Quorum()}, err
}

// count records in the request's row, and in d, where its votes stand
// after d, a vote or a withdrawal, with standing the votes that do, and
// tells of it.
func (e *Engine) count(tx Tx, b bound, d *Decision, standing []Vote) error {
	t := tally(b.gated, &Life{Votes: standing}, b.rule)
	d.Votes, d.Progress = len(standing), t.Progress()
	d.Quorum = t.Quorum()
	if err := tx.PutVotes(b.row.SagaID, b.row.JournalSeq, t.Voters(), d.Quorum, t.Due()); err != nil {
		return err
	}
	return e.tellVote(tx, b, *d, t)
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
		if _, lerr := e.policyOf(ctx, u.hash); lerr != nil {
			if IsKind(lerr, NotFound) {
				return s, &Error{Kind: Conflict, Msg: fmt.Sprintf("a request of this saga was made under approval policy %s, which never "+
					"took effect here (this server runs %s): nothing is decided on it", short12(u.hash), short12(e.policy().Hash))}
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

// cast is how a decision reaches the gate besides its words: the
// passkey's assertion over a vote cast with one, where Decide keeps
// what verifying the journal found before the decision acted (either nil
// when there is none), and the delegator it is cast for.
type cast struct {
	passkey *passkeyVote
	kept    *verified
	// behalf is the delegator a vote is cast for (VoteFor), "" for the
	// voter's own.
	behalf string
}

// verified is where Decide has onPending keep what verifying the journal
// found before its decision on the request acted (found stays nil when
// none was made: the request was executed before), so that it returns
// the request without verifying the journal again.
type verified struct{ found *Verification }
