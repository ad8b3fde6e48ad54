package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/sagacity-go/sagacity/evidence"
)

// People delegate their eligibility and revoke it here, each delegation
// and revocation journaled, signed, in DelegationSaga; a delegate's vote
// is checked against that journal when it is cast and whenever the saga
// is verified, on the server and offline (evidence.Delegations).

// Delegate hands p's eligibility under the named approval rules of the
// policy in force to the identity to, from from (now when zero or past)
// until until, with an optional reason: journaled, signed, in
// DelegationSaga. While it stands, to may vote on a request under one of
// those rules on p's behalf (VoteFor), eligible by p's roles and groups
// as they are now. It returns the delegation as journaled.
//
// Errors: Forbidden without the approver role; Invalid for a bad
// delegate, a delegation to oneself, no rules or a rule the policy in
// force does not have, a window that ends before it starts, in the past
// or longer than MaxDelegation, or a bad reason; Conflict when
// DelegationSaga's journal does not read.
func (e *Engine) Delegate(ctx context.Context, p Principal, to string, rules []string, from, until time.Time, reason string) (Delegation, error) {
	if err := e.Can(p, ActDelegate, Subject{}); err != nil {
		return Delegation{}, err
	}
	if err := validName("delegate", to); err != nil {
		return Delegation{}, err
	}
	if err := validReason(reason); err != nil {
		return Delegation{}, err
	}
	known := map[string]bool{}
	for _, r := range e.policy().All() {
		known[r.Name] = true
	}
	for _, name := range rules {
		if !known[name] {
			return Delegation{}, Errorf(Invalid, "the approval policy in force has no rule %q to delegate", name)
		}
	}
	now := Truncate(e.now())
	d := Delegation{From: p.ID, To: to, Rules: rules, Roles: p.Roles, Groups: p.Groups, Start: Truncate(maxTime(from, now)),
		Until: Truncate(until), Reason: reason}
	if err := invalid(evidence.CheckDelegation(d, now)); err != nil {
		return Delegation{}, err
	}
	err := e.journalDelegation(ctx, Delegated, p, func(Delegations) (evidence.DelegationRecord, error) { return d.Record(), nil },
		func(en Entry) { d.Seq, d.Made = en.Seq, en.Timestamp })
	return d, err
}

// Revoke ends p's delegation at seq of DelegationSaga, as its delegator
// or its delegate, from now on: journaled, signed. A vote cast under it
// before stands.
//
// Errors: NotFound for no delegation at seq; Forbidden for anyone but its
// delegator and delegate, or without the approver role; Conflict when it
// was revoked already, or the journal does not read.
func (e *Engine) Revoke(ctx context.Context, p Principal, seq int64) (Delegation, error) {
	if err := e.Can(p, ActDelegate, Subject{}); err != nil {
		return Delegation{}, err
	}
	var d Delegation
	err := e.journalDelegation(ctx, DelegationRevoked, p, func(ds Delegations) (evidence.DelegationRecord, error) {
		var ok bool
		d, ok = ds[seq]
		switch {
		case !ok:
			return evidence.DelegationRecord{}, Errorf(NotFound, "there is no delegation at seq=%d", seq)
		case p.ID != d.From && p.ID != d.To:
			return evidence.DelegationRecord{}, Errorf(Forbidden, "delegation seq=%d is from %s to %s: only they may revoke it", seq, d.From, d.To)
		case !d.Revoked.IsZero():
			return evidence.DelegationRecord{}, Errorf(Conflict, "delegation seq=%d was revoked already, by %s", seq, d.RevokedBy)
		}
		return evidence.DelegationRecord{From: d.From, To: d.To, Seq: seq, By: p.ID}, nil
	}, func(en Entry) { d.Revoked, d.RevokedSeq, d.RevokedBy = en.Timestamp, en.Seq, p.ID })
	return d, err
}

// Delegations lists every delegation, newest first, revoked and ended
// ones too. Errors: Forbidden without the approver or auditor role;
// Conflict when DelegationSaga's journal does not read; Unavailable when
// the store is.
func (e *Engine) Delegations(ctx context.Context, p Principal) ([]Delegation, error) {
	if err := e.Can(p, ActReview, Subject{}); err != nil {
		return nil, err
	}
	entries, err := e.store.Entries(ctx, DelegationSaga)
	if err != nil {
		return nil, err
	}
	ds, err := ReadDelegations(entries, e.keys.Verifier())
	if err != nil {
		return nil, &Error{Kind: Conflict, Msg: msgOf(err), Err: err}
	}
	out := make([]Delegation, 0, len(ds))
	for _, d := range ds {
		out = append(out, d)
	}
	slices.SortFunc(out, func(a, b Delegation) int { return int(b.Seq - a.Seq) })
	return out, nil
}

// journalDelegation appends an entry of tool to DelegationSaga, signed,
// with p as its requester, its record what made makes of the
// delegations before it (or made's refusal), and tells done of it, in
// one transaction. The server never signs an entry its journal would not
// read with (Invalid). Conflict when the journal before it does not
// read.
func (e *Engine) journalDelegation(ctx context.Context, tool string, p Principal,
	made func(ds Delegations) (evidence.DelegationRecord, error), done func(en Entry)) error {
	return e.journalOwn(ctx, DelegationSaga, Delegated, func(tx Tx, s *Saga) error {
		entries, err := tx.Entries(DelegationSaga)
		if err != nil {
			return err
		}
		ds, err := ReadDelegations(entries, e.keys.Verifier())
		if err != nil {
			return &Error{Kind: Conflict, Msg: msgOf(err) + ": no delegation is made or revoked on it", Err: err}
		}
		rec, err := made(ds)
		if err != nil {
			return err
		}
		b, err := json.Marshal(rec)
		if err != nil {
			return err
		}
		en, err := e.signedEntry(tx, s, evidence.DelegationNotes, tool, string(b), Lines{{KeyRequester, p.ID}})
		if err != nil {
			return err
		}
		if _, err := ReadDelegations(append(entries, en), e.keys.Verifier()); err != nil {
			return invalid(err)
		}
		done(en)
		return nil
	})
}

// delegation finds the delegation from behalf to p that lets p vote on a
// request under rule at at, locking DelegationSaga: it must stand then,
// never revoked. Forbidden when none does; Conflict when the journal
// does not verify.
func (e *Engine) delegation(tx Tx, p Principal, behalf string, rule Rule, at time.Time) (Delegation, error) {
	none := &Error{Kind: Forbidden, Msg: fmt.Sprintf("%s holds no delegation from %s for approval rule %s standing now", p.ID, behalf, rule.Name)}
	s, err := tx.LockSaga(DelegationSaga)
	if IsKind(err, NotFound) {
		return Delegation{}, none
	}
	if err != nil {
		return Delegation{}, err
	}
	entries, err := tx.Entries(DelegationSaga)
	if err != nil {
		return Delegation{}, err
	}
	if v := VerifySaga(entries, s, nil); !v.Valid {
		e.obs.VerifyFailed(CheckedJournal)
		return Delegation{}, Errorf(Conflict, "journal of saga %s does not verify (%s): no delegated vote counts on it", DelegationSaga, v.Message)
	}
	ds, err := ReadDelegations(entries, e.keys.Verifier())
	if err != nil {
		return Delegation{}, &Error{Kind: Conflict, Msg: msgOf(err) + ": no delegated vote counts on it", Err: err}
	}
	for _, en := range entries {
		if d, ok := ds[en.Seq]; ok && d.From == behalf && d.To == p.ID && d.Revoked.IsZero() && d.Covers(rule.Name, at) {
			return d, nil
		}
	}
	return Delegation{}, none
}

// lent is the principal a delegate votes as under delegation d: the
// delegator, with the roles and groups d records.
func lent(d Delegation) Principal {
	return Principal{ID: d.From, Roles: d.Roles, Groups: d.Groups}
}

// VoteFor casts p's vote d (approve, reject or request changes) on the
// request at seq on behalf of delegator, under a delegation from them
// standing now for the request's rule: it counts as the delegator's,
// eligible by the roles and groups the delegation records, and its
// receipt names the delegator and the delegation. Neither p nor the
// delegator may be the request's requester or the saga's initiator, and
// each person takes part in one standing vote on a request (see
// evidence.Life.Clash).
//
// Errors: Invalid for another action; Forbidden when no delegation from
// the delegator to p covers the rule now, and as Approve, Reject and
// RequestChanges otherwise.
func (e *Engine) VoteFor(ctx context.Context, p Principal, delegator string, a Action, sagaID string, seq int64, reason string) (Decision, error) {
	d, ok := votes[a]
	if !ok {
		return Decision{}, Errorf(Invalid, "%s is no vote: only approvals, rejections and requests for changes are cast for a delegator", a)
	}
	if err := validName("delegator", delegator); err != nil {
		return Decision{}, err
	}
	if delegator == p.ID {
		return Decision{}, Errorf(Invalid, "%s votes for themselves without a delegation", p.ID)
	}
	return e.vote(ctx, p, sagaID, seq, d, reason, cast{behalf: delegator})
}

// delegatedCan is Can for a vote p casts as cast c says, on request b of
// saga s at at: p must be allowed the action themselves, four-eyes
// included; with a delegator, the delegation must stand, and the
// delegator, as it records them, must be eligible and not the requester
// or initiator. It sets b's delegation.
func (e *Engine) delegatedCan(tx Tx, p Principal, a Action, s *Saga, b *bound, c cast, at time.Time) error {
	sub := Subject{Saga: s, Requester: b.gated.Field(KeyRequester), Rule: &b.rule}
	if c.behalf == "" {
		return e.Can(p, a, sub)
	}
	if err := e.Can(p, a, Subject{Saga: s, Requester: sub.Requester}); err != nil {
		return err
	}
	d, err := e.delegation(tx, p, c.behalf, b.rule, at)
	if err != nil {
		return err
	}
	if err := e.Can(lent(d), a, sub); err != nil {
		return &Error{Kind: Forbidden, SagaID: s.ID, Msg: fmt.Sprintf("voting for %s: %s", d.From, strings.TrimSuffix(msgOf(err), "."))}
	}
	b.delegation = &d
	return nil
}

// voter is who a vote on b by p counts as, with the roles and groups it
// is eligible by: the delegator lent by b's delegation, or p.
func (b bound) voter(p Principal) Principal {
	if b.delegation != nil {
		return lent(*b.delegation)
	}
	return p
}

// behalf is the delegator a vote on b is cast for, "" for none.
func (b bound) behalf() string {
	if b.delegation != nil {
		return b.delegation.From
	}
	return ""
}
