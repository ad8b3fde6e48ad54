package engine

import (
	"context"
	"fmt"
)

// verify checks a snapshot (see check), then that its entries are in the
// global log as the newest checkpoint signed them (included), or reports
// a journal whose saga row is gone. A journal found broken is told.
func (e *Engine) verify(ctx context.Context, snap Snapshot) (Verification, error) {
	var v Verification
	var err error
	switch {
	case snap.Saga == nil && len(snap.Entries) == 0:
		v = Verify(nil)
	case snap.Saga == nil:
		v = broken(len(snap.Entries), 0, fmt.Sprintf("saga record missing for a journal of %d entries", len(snap.Entries)))
	default:
		v, err = e.included(ctx, snap.Entries, e.check(snap.Entries, *snap.Saga, snap.Requests))
	}
	if err == nil && !v.Valid {
		e.obs.VerifyFailed(CheckedJournal)
	}
	return v, err
}

// intact is check before acting on a locked saga's journal: Conflict,
// told, when it does not verify, for nothing may be decided or executed on
// evidence that does not hold.
func (e *Engine) intact(entries []Entry, s Saga, reqs []ApprovalRequest) error {
	if v := e.check(entries, s, reqs); !v.Valid {
		e.obs.VerifyFailed(CheckedJournal)
		return &Error{Kind: Conflict, Msg: fmt.Sprintf("journal of saga %s does not verify (%s): refusing to act on it", s.ID, v.Message)}
	}
	return nil
}

// check verifies a saga's journal against its row and pending requests
// (VerifySaga), then every person's decision against its receipt
// (VerifyReceipts) with the engine's key.
func (e *Engine) check(entries []Entry, s Saga, reqs []ApprovalRequest) Verification {
	if v := VerifySaga(entries, s, reqs); !v.Valid {
		return v
	}
	return VerifyReceipts(entries, e.keys.Verifier())
}

// Verify checks a saga's journal (see VerifySaga): its hash chain, the
// head its row records, so rows deleted from the tail are caught too, and
// its pending requests. Row, journal and requests are read as of one
// moment, so a saga being written verifies. Errors: Forbidden as Can
// says, Invalid for a bad id, Unavailable when the store is.
func (e *Engine) Verify(ctx context.Context, p Principal, id string) (Verification, error) {
	if err := e.Can(p, ActVerify, Subject{}); err != nil {
		return Verification{}, err
	}
	if err := validName("saga id", id); err != nil {
		return Verification{}, err
	}
	snap, err := e.store.Snapshot(ctx, id, false)
	if err != nil {
		return Verification{}, err
	}
	return e.verify(ctx, snap)
}
