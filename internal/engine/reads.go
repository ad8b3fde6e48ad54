package engine

// What a principal may read of sagas: one saga, listings, a saga's
// history and journal, and pending requests.

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/sagacity-go/sagacity/evidence"
)

// Lookup returns one saga; NotFound when absent, Forbidden as Can says
// for ActRead.
func (e *Engine) Lookup(ctx context.Context, p Principal, id string) (Saga, error) {
	if err := e.guard(p, ActRead, id); err != nil {
		return Saga{}, err
	}
	s, err := e.store.Saga(ctx, id)
	if err != nil {
		return Saga{}, at(err, id, 0)
	}
	return s, e.Can(p, ActRead, Subject{Saga: &s})
}

// MaxList caps how many sagas one listing returns.
const MaxList = 500

// Sagas lists sagas, newest first; Limit is clamped to 1..MaxList (0 means 50).
// An agent that may not read every saga lists only those it started.
func (e *Engine) Sagas(ctx context.Context, p Principal, f SagaFilter) ([]Saga, error) {
	if err := e.Can(p, ActRead, Subject{}); err != nil {
		return nil, err
	}
	if !e.own(p, &f) {
		return []Saga{}, nil
	}
	switch {
	case f.Limit <= 0:
		f.Limit = 50
	case f.Limit > MaxList:
		f.Limit = MaxList
	}
	if f.Status != "" && !slices.Contains(Statuses, f.Status) {
		return nil, Errorf(Invalid, "unknown status %q", f.Status)
	}
	return e.store.Sagas(ctx, e.doubting(f))
}

// CountSagas counts the sagas f selects, ignoring its paging. Errors as
// Sagas.
func (e *Engine) CountSagas(ctx context.Context, p Principal, f SagaFilter) (int, error) {
	if err := e.Can(p, ActRead, Subject{}); err != nil {
		return 0, err
	}
	if !e.own(p, &f) {
		return 0, nil
	}
	if f.Status != "" && !slices.Contains(Statuses, f.Status) {
		return 0, Errorf(Invalid, "unknown status %q", f.Status)
	}
	return e.store.CountSagas(ctx, e.doubting(f))
}

// doubting is f with InDoubtBefore the engine's own: the in-doubt window
// when f asks for the sagas with a call in doubt (InDoubt), unset
// otherwise, whatever the caller put there.
func (e *Engine) doubting(f SagaFilter) SagaFilter {
	f.InDoubtBefore = time.Time{}
	if f.InDoubt {
		f.InDoubtBefore = e.window()
	}
	return f
}

// own narrows a listing to the sagas p started when p may not read every
// saga; false when f asks for another initiator's, which p may not see.
func (e *Engine) own(p Principal, f *SagaFilter) bool {
	if e.readsAll(p) {
		return true
	}
	if f.Initiator != "" && f.Initiator != p.ID {
		return false
	}
	f.Initiator = p.ID
	return true
}

// History is a saga as an auditor reads it, from one snapshot: its row,
// whole journal, pending requests and calls, and what verifying them says.
type History struct {
	Snapshot
	Verification Verification
	// Decisions are the decisions people made in the saga, each with
	// whether its receipt holds.
	Decisions []DecisionReceipt
	// InDoubt are the saga's calls in doubt (see InDoubt): INTENTs, or
	// undos, whose outcome no entry records.
	InDoubt []Call
}

// History reads saga id. NotFound ("no such saga") when it has neither a
// row nor a journal; a journal without a row is returned, and reported
// broken. Errors: Forbidden as Can says for ActRead, Invalid for a bad id,
// Unavailable when the store is.
func (e *Engine) History(ctx context.Context, p Principal, id string) (History, error) {
	if err := e.guard(p, ActRead, id); err != nil {
		return History{}, err
	}
	snap, logged, err := e.snapshot(ctx, id, true)
	if err != nil {
		return History{}, err
	}
	if snap.Saga == nil && len(snap.Entries) == 0 {
		return History{}, &Error{Kind: NotFound, Msg: fmt.Sprintf("no such saga: %s", id), SagaID: id}
	}
	if err := e.readSnapshot(p, snap); err != nil {
		return History{}, err
	}
	v, err := e.verify(ctx, snap, logged)
	if err != nil {
		return History{}, err
	}
	h := History{Snapshot: snap, Verification: v, Decisions: Decisions(snap.Entries, e.keys.Verifier())}
	if snap.Saga != nil && snap.Saga.Running > 0 {
		if h.InDoubt, err = e.inDoubt(id, e.window(), e.stored(ctx)); err != nil {
			return History{}, err
		}
	}
	return h, nil
}

// Journal returns a saga's entries ordered by seq; empty for an unknown
// saga. Forbidden as Can says for ActRead.
func (e *Engine) Journal(ctx context.Context, p Principal, id string) ([]Entry, error) {
	if err := e.guard(p, ActRead, id); err != nil {
		return nil, err
	}
	if !e.readsAll(p) {
		// Whose it is decides; one more read, for agents only.
		snap, err := e.store.Snapshot(ctx, id, false)
		if err != nil {
			return nil, err
		}
		return snap.Entries, e.readSnapshot(p, snap)
	}
	return e.store.Entries(ctx, id)
}

// readable reads saga sagaID, its calls included, as p may read it
// (readSnapshot).
func (e *Engine) readable(ctx context.Context, p Principal, sagaID string) (Snapshot, error) {
	snap, err := e.store.Snapshot(ctx, sagaID, true)
	if err != nil {
		return Snapshot{}, err
	}
	return snap, e.readSnapshot(p, snap)
}

// readSnapshot checks that p may read the saga snap holds: a journal
// without a row is for those who read every saga.
func (e *Engine) readSnapshot(p Principal, snap Snapshot) error {
	s := snap.Saga
	if s == nil {
		if e.readsAll(p) || len(snap.Entries) == 0 {
			return nil
		}
		s = &Saga{ID: snap.Entries[0].SagaID}
	}
	return e.Can(p, ActRead, Subject{Saga: s})
}

// Approvals lists pending approval requests: all of them when sagaID is "",
// else one saga's (empty for an unknown saga), each approved one under a
// wait timer with its Wait read from its journal.
func (e *Engine) Approvals(ctx context.Context, p Principal, sagaID string) ([]ApprovalRequest, error) {
	if err := e.Can(p, ActReview, Subject{}); err != nil {
		return nil, err
	}
	if sagaID != "" {
		if err := validName("saga id", sagaID); err != nil {
			return nil, err
		}
	}
	reqs, err := e.store.Approvals(ctx, sagaID)
	if err != nil {
		return nil, err
	}
	for i := range reqs {
		if err := e.waitOf(ctx, &reqs[i]); err != nil {
			return nil, err
		}
	}
	return reqs, nil
}

// waitOf sets q.Wait when q is approved (as its row says) under a rule
// with a wait timer (as its policy says), from its journal.
func (e *Engine) waitOf(ctx context.Context, q *ApprovalRequest) error {
	if q.Policy == "" || len(q.Voters) < max(q.Quorum, 1) {
		return nil
	}
	a, err := e.policyOf(ctx, q.Policy)
	if err != nil {
		return nil // the request's page says what is wrong with it
	}
	if r, ok := a.Rule(q.ToolName, q.Rule); !ok || r.NotBefore == 0 {
		return nil
	}
	es, err := e.store.Entries(ctx, q.SagaID)
	if err != nil || int64(len(es)) < q.JournalSeq {
		return err
	}
	gated := es[q.JournalSeq-1]
	rule, err := matchRecorded(a, gated)
	if err != nil {
		return nil
	}
	lc, _ := evidence.ReadLifecycle(es)
	t := tally(gated, lc.Requests[q.JournalSeq], rule)
	q.Wait = &t
	return nil
}
