package engine

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/sagacity-go/sagacity/evidence"
)

// verify checks a snapshot (see check), then that its entries are in the
// global log as the newest checkpoint signed them, and hold what the log
// held of the saga (logged, read before the snapshot) (included), or
// reports a journal whose saga row is gone. A journal found broken is
// told.
func (e *Engine) verify(ctx context.Context, snap Snapshot, logged Logged) (Verification, error) {
	var v Verification
	switch {
	case snap.Saga == nil && len(snap.Entries) == 0:
		v = evidence.Verify(nil)
	case snap.Saga == nil:
		v = evidence.Broken(len(snap.Entries), 0, fmt.Sprintf("saga record missing for a journal of %d entries", len(snap.Entries)))
	default:
		var rulings []Ruling
		v, rulings = e.check(snap.Entries, *snap.Saga, snap.Requests, func(hash string) (*Approvals, error) {
			return e.policyOf(ctx, hash)
		}, func(id string) ([]Entry, error) { return e.store.Entries(ctx, id) })
		if v.Valid {
			v = evidence.Named(v, rulings, e.now())
		}
	}
	v, err := e.included(ctx, snap.Entries, v, logged)
	if err == nil && !v.Valid {
		e.obs.VerifyFailed(CheckedJournal)
	}
	return v, err
}

// snapshot is Store.Snapshot with what the global log held of the saga
// just before it was read: the journal read must hold it.
func (e *Engine) snapshot(ctx context.Context, id string, calls bool) (Snapshot, Logged, error) {
	logged := e.logged(id)
	snap, err := e.store.Snapshot(ctx, id, calls)
	return snap, logged, err
}

// intact is check before acting on a locked saga's journal: Conflict,
// told, when it does not verify, for nothing may be decided or executed on
// evidence that does not hold; an *unloaded error when a policy its
// requests record must be read first. It returns what check found.
func (e *Engine) intact(tx Tx, entries []Entry, s Saga, reqs []ApprovalRequest) (Verification, error) {
	var miss *unloaded
	v, _ := e.check(entries, s, reqs, func(hash string) (*Approvals, error) {
		a, ok := e.policies.get(hash)
		if !ok {
			miss = &unloaded{hash}
			return nil, miss
		}
		return a, nil
	}, tx.Entries)
	if miss != nil {
		return v, miss
	}
	if !v.Valid {
		return v, e.unverified(s.ID, v)
	}
	return v, nil
}

// unverified is the Conflict of acting on saga sagaID, whose journal or
// pending request v found broken; it is told.
func (e *Engine) unverified(sagaID string, v Verification) *Error {
	e.obs.VerifyFailed(CheckedJournal)
	return &Error{Kind: Conflict, Msg: fmt.Sprintf("journal of saga %s does not verify (%s): refusing to act on it", sagaID, v.Message)}
}

// check verifies a saga's journal against its row and pending requests
// (VerifySaga), then every person's decision against its receipt
// (VerifyReceipts) with the engine's key, then every request's votes
// against the rule its policy gives it (VerifyVotes), and each pending
// request's row against those: who stands behind it, the quorum and
// when it is due. It returns the rulings of the requests too. Passkey
// votes are checked against PasskeySaga's journal, and delegated votes
// against DelegationSaga's, which own reads.
func (e *Engine) check(entries []Entry, s Saga, reqs []ApprovalRequest, policies Policies, own func(sagaID string) ([]Entry, error)) (Verification, []Ruling) {
	if v := VerifySaga(entries, s, reqs); !v.Valid {
		return v, nil
	}
	if v := VerifyReceipts(entries, e.keys.Verifier()); !v.Valid {
		return v, nil
	}
	lc, _ := evidence.ReadLifecycle(entries)
	v, rulings := evidence.VerifyVotes(entries, lc, func(hash string) (*Approvals, error) {
		a, err := policies(hash)
		return a, evidential(err)
	}, e.keys.Verifier(), e.keyring(own))
	if !v.Valid {
		return v, rulings
	}
	for _, r := range reqs {
		g, l := entries[r.JournalSeq-1], lc.Requests[r.JournalSeq]
		rule := evidence.LegacyRule()
		if h := g.Field(KeyPolicy); h != "" {
			a, err := policies(h)
			if err != nil {
				return evidence.Broken(len(entries), int(g.Seq-1), msgOf(err)), rulings
			}
			if rule, err = matchRecorded(a, g); err != nil {
				return evidence.Broken(len(entries), int(g.Seq-1), msgOf(err)), rulings
			}
		}
		if v := indexed(entries, r, l, rule); !v.Valid {
			return v, rulings
		}
	}
	return v, rulings
}

// indexed checks what pending request row r keeps as an index of its
// journal (entries, in which l is its request, decided by rule): who
// stands behind it, its rule's quorum and when it is due. The journal
// governs them; a row that disagrees was edited behind the engine's back.
// indexed is pure.
func indexed(entries []Entry, r ApprovalRequest, l *Life, rule Rule) Verification {
	g := entries[r.JournalSeq-1]
	t := tally(g, l, rule)
	switch {
	case !slices.Equal(r.Voters, t.Voters()):
		return evidence.Broken(len(entries), int(g.Seq-1), fmt.Sprintf("approval request at seq=%d names other voters (%s) than the journal (%s)",
			r.JournalSeq, strings.Join(r.Voters, ", "), strings.Join(t.Voters(), ", ")))
	// A superseded request is never due: the sweep may have said so
	// already, or not yet.
	case r.Quorum != t.Quorum() || !(r.Due.Equal(t.Due()) || (l.SupersededBy != 0 && r.Due.IsZero())):
		return evidence.Broken(len(entries), int(g.Seq-1), fmt.Sprintf("approval request at seq=%d does not match its rule %s "+
			"(it records a quorum of %d, due %s)", r.JournalSeq, rule.Name, r.Quorum, r.Due.UTC().Format(time.RFC3339)))
	}
	return Verification{Valid: true, EntryCount: len(entries), BreakAtIndex: -1}
}

// keyring checks passkey and delegated votes with the engine's check and
// key, reading PasskeySaga's and DelegationSaga's journals from own once
// each, when a vote needs it.
func (e *Engine) keyring(own func(sagaID string) ([]Entry, error)) Keyring {
	return Keyring{Check: e.checkAssertion,
		Passkeys: once(func() (Passkeys, error) {
			entries, err := own(PasskeySaga)
			if err != nil {
				return nil, err
			}
			return ReadPasskeys(entries, e.keys.Verifier())
		}),
		Delegations: once(func() (Delegations, error) {
			entries, err := own(DelegationSaga)
			if err != nil {
				return nil, err
			}
			return ReadDelegations(entries, e.keys.Verifier())
		})}
}

// once is read, called the first time only, its error evidential.
func once[T any](read func() (T, error)) func() (T, error) {
	var v T
	var err error
	done := false
	return func() (T, error) {
		if !done {
			v, err = read()
			done = true
		}
		return v, evidential(err)
	}
}

// Verify checks a saga's journal (see VerifySaga): its hash chain, the
// head its row records, so rows deleted from the tail are caught too, and
// its pending requests; then against the global log (see Log.Included). Row, journal and requests are read as of one
// moment, so a saga being written verifies. What it finds of a saga that
// exists is kept (see Verifications). Errors: Forbidden as Can says,
// Invalid for a bad id, Unavailable when the store is.
func (e *Engine) Verify(ctx context.Context, p Principal, id string) (Verification, error) {
	if err := e.guard(p, ActVerify, id); err != nil {
		return Verification{}, err
	}
	snap, logged, err := e.snapshot(ctx, id, false)
	if err != nil {
		return Verification{}, err
	}
	v, err := e.verify(ctx, snap, logged)
	if err == nil {
		e.keep(ctx, snap, v)
	}
	return v, err
}

// VerifySaga verifies a saga's journal like VerifyJournal, then against
// what the saga's row and its pending requests record: the journal must
// end at the head the row records, which catches rows deleted from the
// tail, and each pending request must stand for an AWAITING_APPROVAL
// entry of the same tool and input with that input's hash that the
// journal says is still open, which catches a request row rewritten, or
// put back after it was resumed, rejected or dropped, behind the
// journal's back. VerifySaga is pure.
func VerifySaga(entries []Entry, s Saga, reqs []ApprovalRequest) Verification {
	n := len(entries)
	if s.Unreadable != "" {
		return evidence.Broken(n, n, fmt.Sprintf("saga record unreadable: %s", s.Unreadable))
	}
	v := evidence.Verify(entries)
	if !v.Valid {
		return v
	}
	var lastSeq int64
	lastHash := ZeroHash
	if n > 0 {
		lastSeq, lastHash = entries[n-1].Seq, entries[n-1].Hash
	}
	switch {
	case lastSeq < s.HeadSeq:
		return evidence.Broken(n, n, fmt.Sprintf("journal truncated: it ends at seq=%d but the saga's head is seq=%d", lastSeq, s.HeadSeq))
	case lastSeq > s.HeadSeq || lastHash != s.HeadHash:
		return evidence.Broken(n, n-1, fmt.Sprintf("head mismatch at seq=%d (entry %d): the saga records head seq=%d hash=%s", lastSeq, n-1, s.HeadSeq, s.HeadHash))
	}
	lc, v := evidence.ReadLifecycle(entries)
	if !v.Valid {
		return v
	}
	for _, r := range reqs {
		if v, _ := verifyRow(entries, lc, s, r); !v.Valid {
			return v
		}
	}
	return v
}

// verifyRow checks pending request row r against its saga s's journal
// (entries, read as lc): the row must stand for an AWAITING_APPROVAL
// entry the journal holds open — a row for no request, or put back after
// its request was closed, is a break the journal's own clock cannot
// settle — and say what that entry says of its tool, input and its hash,
// rule, policy and reason, else the row's columns alone are broken
// (columns). verifyRow is pure.
func verifyRow(entries []Entry, lc Lifecycle, s Saga, r ApprovalRequest) (v Verification, columns bool) {
	n := len(entries)
	i := r.JournalSeq - 1
	if i < 0 || i >= int64(n) {
		return evidence.Broken(n, n, fmt.Sprintf("approval request at seq=%d has no journal entry", r.JournalSeq)), false
	}
	l := lc.Requests[r.JournalSeq]
	switch g := entries[i]; {
	case l == nil || r.SagaID != s.ID:
		return evidence.Broken(n, int(i), fmt.Sprintf("approval request at seq=%d does not match the journal (entry %d)", r.JournalSeq, i)), false
	case !l.Open():
		c := int(l.Closed - 1)
		return evidence.Broken(n, c, fmt.Sprintf("approval request at seq=%d is pending, but the journal closed it: %s at seq=%d (entry %d)",
			r.JournalSeq, l.Closing, l.Closed, c)), false
	case g.ToolName != r.ToolName || g.Input != r.Input || r.InputHash != PayloadHash(g.Input) || r.Rule != g.Field(KeyRule) ||
		r.Policy != g.Field(KeyPolicy) || r.Reason != g.Field(KeyReason):
		return evidence.Broken(n, int(i), fmt.Sprintf("approval request at seq=%d does not match the journal (entry %d)", r.JournalSeq, i)), true
	}
	return Verification{Valid: true, EntryCount: n, BreakAtIndex: -1}, false
}
