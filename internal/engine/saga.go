package engine

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// begin creates saga id with p as its initiator, or locks the existing
// one, and checks that p may take action a on it and that it accepts work.
func (e *Engine) begin(tx Tx, p Principal, a Action, id string) (Saga, error) {
	s, err := e.open(tx, p, id)
	if err != nil {
		return Saga{}, err
	}
	return s, e.admit(p, a, s)
}

// open creates saga id with p as its initiator, or locks the existing one.
func (e *Engine) open(tx Tx, p Principal, id string) (Saga, error) {
	now := Truncate(e.now())
	return tx.CreateSaga(Saga{ID: id, Status: Running, Initiator: p.ID, HeadHash: ZeroHash, CreatedAt: now, UpdatedAt: now})
}

// admit checks that p may take action a on saga s and that s accepts work.
func (e *Engine) admit(p Principal, a Action, s Saga) error {
	if err := e.Can(p, a, Subject{Saga: &s}); err != nil {
		return err
	}
	return accepting(s)
}

// accepting returns Conflict unless the saga can still take calls and decisions.
func accepting(s Saga) error {
	switch {
	case s.Status.Final():
		return &Error{Kind: Conflict, Msg: fmt.Sprintf("saga %s is already %s", s.ID, s.Status), SagaID: s.ID}
	case s.Status == Compensating:
		return &Error{Kind: Conflict, Msg: fmt.Sprintf("saga %s is being compensated", s.ID), SagaID: s.ID}
	}
	return nil
}

// settle derives a live saga's status: AWAITING_APPROVAL while requests
// are pending, COMPLETED once the agent has ended and nothing runs,
// RUNNING otherwise.
func (e *Engine) settle(tx Tx, s *Saga) error {
	if accepting(*s) != nil {
		return nil
	}
	pending, err := tx.CountApprovals(s.ID)
	if err != nil {
		return err
	}
	switch {
	case pending > 0:
		s.Status = AwaitingApproval
	case !s.Ended:
		s.Status = Running
	default:
		// Only an ended saga asks whether anything still runs.
		running, err := tx.Calls(s.ID, CallRunning)
		if err != nil {
			return err
		}
		s.Status = Running
		if len(running) == 0 {
			s.Status = Completed
		}
	}
	return nil
}

// fail starts compensating a live saga: its pending requests are dropped
// so that nothing irreversible runs after compensation, each with a
// REJECTED entry that says so, for the journal alone says what is
// pending.
func (e *Engine) fail(tx Tx, s *Saga, reason string) error {
	entries, err := tx.Entries(s.ID)
	if err != nil {
		return err
	}
	lc, _ := ReadLifecycle(entries)
	for _, l := range lc.Open() {
		if _, err := e.append(tx, s, l.Tool, PhaseRejected, gateRef(l.Seq), Lines{{KeyDropped, reason}}.String()); err != nil {
			return err
		}
	}
	if _, err := tx.DeleteApprovals(s.ID, 0); err != nil {
		return err
	}
	s.Status, s.Reason = Compensating, reason
	return nil
}

// End records that the agent's run is over. The saga is COMPLETED, or
// AWAITING_APPROVAL until its pending requests are resolved. NotFound for
// an unknown saga, Conflict when it is final or compensating, Forbidden
// as Can says.
func (e *Engine) End(ctx context.Context, p Principal, sagaID string) (Saga, error) {
	if err := e.Can(p, ActEnd, Subject{}); err != nil {
		return Saga{}, err
	}
	if err := validName("saga id", sagaID); err != nil {
		return Saga{}, err
	}
	return e.update(ctx, sagaID, nil, func(tx Tx, s *Saga) error {
		if err := e.Can(p, ActEnd, Subject{Saga: s}); err != nil {
			return err
		}
		if err := accepting(*s); err != nil {
			return err
		}
		s.Ended, s.UpdatedAt = true, e.stamp(s)
		return e.settle(tx, s)
	})
}

// Abort ends the saga as failed: pending requests are dropped and every
// executed step is compensated, newest first. NotFound for an unknown
// saga, Conflict when it is final or compensating, Forbidden as Can says.
func (e *Engine) Abort(ctx context.Context, p Principal, sagaID, reason string) (Saga, error) {
	if err := e.Can(p, ActAbort, Subject{}); err != nil {
		return Saga{}, err
	}
	if err := validName("saga id", sagaID); err != nil {
		return Saga{}, err
	}
	if err := validReason(reason); err != nil {
		return Saga{}, err
	}
	s, err := e.update(ctx, sagaID, nil, func(tx Tx, s *Saga) error {
		if err := e.Can(p, ActAbort, Subject{Saga: s}); err != nil {
			return err
		}
		if err := accepting(*s); err != nil {
			return err
		}
		s.UpdatedAt = e.stamp(s)
		msg := "aborted by " + p.ID
		if reason != "" {
			msg += ": " + reason
		}
		return e.fail(tx, s, msg)
	})
	if err != nil {
		e.unknown(sagaID, err)
		return Saga{}, err
	}
	return e.compensateNow(ctx, s), nil
}

// Run is a saga in progress, handed to the function given to Engine.Saga.
type Run struct {
	e   *Engine
	ctx context.Context
	p   Principal
	id  string
}

// Call calls a tool in the saga. It returns the tool's result, or for a
// gated tool the model-facing AWAITING_APPROVAL message. A tool that fails
// returns an error after the saga has been compensated.
func (r *Run) Call(tool, input string) (string, error) {
	res, err := r.e.Call(r.ctx, r.p, r.id, tool, input)
	switch {
	case err != nil:
		return "", err
	case res.Outcome == OutcomeAwaitingApproval:
		return res.Message, nil
	case res.Outcome != OutcomeExecuted:
		return "", fmt.Errorf("tool %s failed: %s", tool, res.Error)
	}
	return res.Result, nil
}

// Saga runs fn as saga id: it begins the saga, runs fn, and ends the saga
// when fn returns nil or aborts it (compensating every executed step) when
// fn returns an error. It returns the saga as fn left it: COMPLETED,
// AWAITING_APPROVAL, COMPENSATED or COMPENSATION_FAILED. The error is the
// engine's, not fn's; fn's error is the saga's Reason.
func (e *Engine) Saga(ctx context.Context, p Principal, id string, fn func(*Run) error) (Saga, error) {
	if err := e.Can(p, ActCall, Subject{}); err != nil {
		return Saga{}, err
	}
	if err := validName("saga id", id); err != nil {
		return Saga{}, err
	}
	if err := e.store.Update(ctx, func(tx Tx) error {
		_, err := e.begin(tx, p, ActCall, id)
		return err
	}); err != nil {
		return Saga{}, at(err, id, 0)
	}
	fnErr := fn(&Run{e: e, ctx: ctx, p: p, id: id})
	s, err := e.store.Saga(ctx, id)
	if err != nil {
		return Saga{}, err
	}
	if accepting(s) != nil {
		return s, nil // a failed call already compensated the saga
	}
	if fnErr != nil {
		return e.Abort(ctx, p, id, cleanLine(fnErr.Error()))
	}
	return e.End(ctx, p, id)
}

// Lookup returns one saga; NotFound when absent, Forbidden as Can says
// for ActRead.
func (e *Engine) Lookup(ctx context.Context, p Principal, id string) (Saga, error) {
	if err := e.reader(p, id); err != nil {
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
	return e.store.Sagas(ctx, f)
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
	return e.store.CountSagas(ctx, f)
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
	if err := e.reader(p, id); err != nil {
		return History{}, err
	}
	snap, err := e.store.Snapshot(ctx, id, false)
	if err != nil {
		return History{}, err
	}
	if snap.Saga == nil && len(snap.Entries) == 0 {
		return History{}, &Error{Kind: NotFound, Msg: fmt.Sprintf("no such saga: %s", id), SagaID: id}
	}
	if err := e.readSnapshot(p, snap); err != nil {
		return History{}, err
	}
	v, err := e.verify(ctx, snap)
	if err != nil {
		return History{}, err
	}
	h := History{Snapshot: snap, Verification: v, Decisions: Decisions(snap.Entries, e.keys.Verifier())}
	if snap.Saga != nil && snap.Saga.Running > 0 {
		before, alive := e.doubtful()
		if h.InDoubt, err = e.store.InDoubt(ctx, id, before, alive); err != nil {
			return History{}, err
		}
	}
	return h, nil
}

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

// Journal returns a saga's entries ordered by seq; empty for an unknown
// saga. Forbidden as Can says for ActRead.
func (e *Engine) Journal(ctx context.Context, p Principal, id string) ([]Entry, error) {
	if err := e.reader(p, id); err != nil {
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

// reader checks that p may read sagas at all, and the id.
func (e *Engine) reader(p Principal, id string) error {
	if err := e.Can(p, ActRead, Subject{}); err != nil {
		return err
	}
	return validName("saga id", id)
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

// Approvals lists pending approval requests: all of them when sagaID is "",
// else one saga's (empty for an unknown saga).
func (e *Engine) Approvals(ctx context.Context, p Principal, sagaID string) ([]ApprovalRequest, error) {
	if err := e.Can(p, ActReview, Subject{}); err != nil {
		return nil, err
	}
	if sagaID != "" {
		if err := validName("saga id", sagaID); err != nil {
			return nil, err
		}
	}
	return e.store.Approvals(ctx, sagaID)
}

// InDoubt lists calls whose outcome the journal does not know, left
// between INTENT and EXECUTED/FAILED, or mid-compensation, by a process
// that is gone (a crash: at once) or for at least olderThan (a lost
// connection, a tool that hangs; a negative olderThan means the in-doubt
// window, InDoubtAfter). Nothing re-executes them; a person must find out
// what happened.
func (e *Engine) InDoubt(ctx context.Context, p Principal, olderThan time.Duration) ([]Call, error) {
	if err := e.Can(p, ActInDoubt, Subject{}); err != nil {
		return nil, err
	}
	before, alive := e.doubtful()
	if olderThan >= 0 {
		before = e.now().Add(-olderThan)
	}
	return e.store.InDoubt(ctx, "", before, alive)
}

// Recover continues the compensation of every saga left COMPENSATING, as
// a crash or an outage in the middle of one leaves it: steps that are
// undone, or whose undo is in doubt, are not undone again. The server runs
// it at start and then periodically. Errors: Unavailable when the store is.
func (e *Engine) Recover(ctx context.Context) error {
	f := SagaFilter{Status: Compensating, Limit: MaxList}
	for {
		sagas, err := e.store.Sagas(ctx, f)
		if err != nil {
			return err
		}
		for _, s := range sagas {
			if _, err := e.compensate(ctx, s.ID); err != nil {
				return err
			}
		}
		if len(sagas) < f.Limit {
			return nil
		}
		last := sagas[len(sagas)-1]
		f.After = &SagaCursor{CreatedAt: last.CreatedAt, ID: last.ID}
	}
}

// InDoubtAfter is how long a call must have stood still before Resolve
// takes it (see WithInDoubtAfter).
func (e *Engine) InDoubtAfter() time.Duration { return e.inDoubtAfter }

// cleanLine makes any text one line fit for a reason or a payload line:
// control characters (line breaks among them) become spaces, invalid
// UTF-8 is replaced and the length is capped.
func cleanLine(s string) string {
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, strings.ToValidUTF8(s, "\uFFFD"))
	for len(s) > MaxReasonLen {
		_, size := utf8.DecodeLastRuneInString(s)
		s = s[:len(s)-size]
	}
	return s
}
