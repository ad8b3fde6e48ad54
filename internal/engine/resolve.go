package engine

import (
	"context"
	"fmt"
	"time"

	"github.com/sagacity-go/sagacity/wire"
)

// DefaultInDoubtAfter is how long a call must have stood still before a
// person may resolve it as in doubt: longer than any tool may take (tool
// timeouts are at most five minutes).
const DefaultInDoubtAfter = 10 * time.Minute

// Resolve records what a person found out about a call in doubt, from the
// tool's owner or its own records: whether its effect happened, the
// result the owner reports when it did, and why the person is sure.
// Nothing re-executes the tool. A call that was running is closed as
// EXECUTED (its undo will be handed result) or as FAILED, which
// compensates the saga; an undo that was in flight is closed as
// COMPENSATED or COMPENSATION_FAILED. A step whose undo failed is
// recorded undone by hand (happened: a person undid its effect) as
// COMPENSATED, like an undo in doubt that took effect; once no step of
// a COMPENSATION_FAILED saga is left failed, the saga is COMPENSATED. The
// entry is the approval gate's, with input seq=<the call's INTENT> and a
// payload naming the person (resolved-by=, reason=, auth=, and result=
// last), so no tool can write one.
//
// Errors: Invalid without a reason (how the person knows: it is the
// evidence); NotFound for no such call; Conflict when it is neither in
// doubt (settled, touched within the in-doubt window by a runner not
// gone, or run by this process: see inDoubt) nor a step whose
// undo failed, or is one and happened is false (its failure is journaled
// already); Forbidden as Can says for ActResolve (four-eyes: not the
// saga's initiator, not whoever asked for the call); Invalid for a bad
// result or reason; Unavailable when the store is.
func (e *Engine) Resolve(ctx context.Context, p Principal, sagaID string, seq int64, happened bool, result, reason string) (Saga, error) {
	if err := e.guard(p, ActResolve, sagaID); err != nil {
		return Saga{}, err
	}
	if err := validReason(reason); err != nil {
		return Saga{}, err
	}
	if reason == "" {
		// The reason is the evidence of what the person found out.
		return Saga{}, Errorf(Invalid, "say how you know what happened: the reason is journaled with the resolution")
	}
	if err := e.validInput("result", result); err != nil {
		return Saga{}, err
	}
	if err := e.signing(ctx); err != nil {
		return Saga{}, at(err, sagaID, seq)
	}
	if err := e.recordSignIn(ctx, p); err != nil {
		return Saga{}, at(err, sagaID, seq)
	}
	if err := e.watch(ctx); err != nil {
		return Saga{}, at(err, sagaID, seq)
	}
	missing := &Error{Kind: NotFound, Msg: fmt.Sprintf("saga %s has no call at seq=%d", sagaID, seq), SagaID: sagaID, Seq: seq}
	var decision Decided
	s, err := e.update(ctx, sagaID, missing, func(tx Tx, s *Saga) error {
		c, err := tx.Call(sagaID, seq)
		if IsKind(err, NotFound) {
			return missing
		}
		if err != nil {
			return err
		}
		byHand := c.State == CallCompensationFailed
		if byHand && !happened {
			return &Error{Kind: Conflict, Msg: fmt.Sprintf("the undo of the call at seq=%d failed, as the journal says already: "+
				"record it once its effect is undone by hand", seq)}
		}
		if !byHand {
			if err := e.doubted(tx, c); err != nil {
				return err
			}
		}
		entries, err := tx.Entries(sagaID)
		if err != nil {
			return err
		}
		if _, err := e.intact(tx, entries, *s, nil); err != nil {
			return err
		}
		if seq > int64(len(entries)) {
			return &Error{Kind: Conflict, Msg: fmt.Sprintf("journal of saga %s ends before seq=%d: refusing to act on it", sagaID, seq)}
		}
		if err := e.Can(p, ActResolve, Subject{Saga: s, Requester: entries[seq-1].Field(KeyRequester)}); err != nil {
			return err
		}
		var reported *string
		decision = DecidedNotUndone
		switch {
		case c.State == CallRunning && happened:
			decision, reported = DecidedHappened, &result
		case c.State == CallRunning:
			decision = DecidedNotHappened
		case happened:
			decision = DecidedUndone
		}
		at := e.stamp(s)
		payload, err := e.personalPayload(p, entries[seq-1], Receipt{Decision: decision, Reason: reason}, KeyResolvedBy, reported, at)
		if err != nil {
			return err
		}
		ref := gateRef(seq)
		switch decision {
		case DecidedHappened:
			return e.close(tx, s, c, GateTool, PhaseExecuted, ref, payload, result, at)
		case DecidedNotHappened:
			return e.close(tx, s, c, GateTool, PhaseFailed, ref, payload, "", at)
		case DecidedUndone:
			if err := e.undoneAs(tx, s, c, GateTool, PhaseCompensated, ref, payload, CallCompensated, at); err != nil || !byHand {
				return err
			}
			return e.accounted(tx, s)
		}
		return e.undoneAs(tx, s, c, GateTool, PhaseCompensationFailed, ref, payload, CallCompensationFailed, at)
	})
	if err != nil {
		e.unknown(sagaID, err)
		return Saga{}, at(err, sagaID, seq)
	}
	e.obs.Decided(decision)
	if s.Status == wire.Compensating {
		s = e.compensateNow(ctx, s)
	}
	return s, nil
}

// notHappened is why a saga fails when a person resolved its call c as
// not having happened, in the FAILED entry en: who found it and their
// reason, not the entry's payload, whose receipt is evidence, not a
// reason (and a saga's reason is on every answer about it).
func notHappened(c Call, en Entry) string {
	return fmt.Sprintf("tool %s did not happen, as %s found out: %s", c.ToolName, en.Actor(), en.Field(KeyReason))
}

// accounted makes a COMPENSATION_FAILED saga COMPENSATED once none of its
// steps' undos is left failed: a person undid each by hand.
func (e *Engine) accounted(tx Tx, s *Saga) error {
	if s.Status != wire.CompensationFailed {
		return nil // still compensating: compensate settles it
	}
	failed, err := tx.Calls(s.ID, CallCompensationFailed)
	if err != nil || len(failed) > 0 {
		return err
	}
	s.Status = wire.Compensated
	return nil
}

// doubted refuses to resolve call c unless it is in doubt (see inDoubt).
func (e *Engine) doubted(tx Tx, c Call) error {
	not := &Error{Kind: Conflict, Msg: fmt.Sprintf("the call at seq=%d is %s, not in doubt", c.Seq, c.State)}
	if !c.Unsettled() {
		return not
	}
	doubt, err := e.inDoubt(c.SagaID, e.window(), tx.InDoubt)
	if err != nil {
		return err
	}
	for _, d := range doubt {
		if d.Seq == c.Seq {
			return nil
		}
	}
	return not
}

// Doubt is a call in doubt with what a person needs to find out what
// became of it.
type Doubt struct {
	Call
	Saga Saga
	// Key is the idempotency key the tool was handed for what is in
	// doubt: the call's execution, or its undo.
	Key string
	// Later are the calls the saga opened after it (INTENT and
	// AWAITING_APPROVAL entries), oldest first: a retry of the same call
	// among them may have done its effect again.
	Later []Entry
}

// Doubts lists the calls in doubt by the in-doubt window, as InDoubt
// does, each with its saga, key and later calls, read from one snapshot
// of each saga; and the window, for people. Errors as InDoubt's.
func (e *Engine) Doubts(ctx context.Context, p Principal) ([]Doubt, time.Duration, error) {
	calls, err := e.InDoubt(ctx, p, -1)
	if err != nil {
		return nil, 0, err
	}
	snaps := map[string]Snapshot{}
	out := make([]Doubt, 0, len(calls))
	for _, c := range calls {
		snap, ok := snaps[c.SagaID]
		if !ok {
			if snap, err = e.store.Snapshot(ctx, c.SagaID, false); err != nil {
				return nil, 0, err
			}
			if snap.Saga == nil {
				continue // gone since it was listed
			}
			snaps[c.SagaID] = snap
		}
		d := Doubt{Call: c, Saga: *snap.Saga, Key: c.Key()}
		for _, en := range snap.Entries {
			if en.Seq > c.Seq && (en.Phase == PhaseIntent || en.Phase == PhaseAwaitingApproval) {
				d.Later = append(d.Later, en)
			}
		}
		out = append(out, d)
	}
	return out, e.inDoubtAfter, nil
}

// InDoubt lists calls whose outcome the journal does not know, left
// between INTENT and EXECUTED/FAILED, or mid-compensation, by a process
// that is gone (see inDoubt) or for at least olderThan (a lost
// connection, a tool that hangs; a negative olderThan means the in-doubt
// window, WithInDoubtAfter), and that this process does not run. Nothing
// re-executes them; a person must find out what happened.
func (e *Engine) InDoubt(ctx context.Context, p Principal, olderThan time.Duration) ([]Call, error) {
	if err := e.Can(p, ActInDoubt, Subject{}); err != nil {
		return nil, err
	}
	if err := e.watch(ctx); err != nil {
		return nil, err
	}
	before := e.window()
	if olderThan >= 0 {
		before = e.now().Add(-olderThan)
	}
	return e.inDoubt("", before, e.stored(ctx))
}

// inDoubt lists, as read reads them, the calls of saga sagaID (every
// saga's for "") that are in doubt to this process: unsettled, not run
// or being started by this process (it knows they are not in doubt,
// whatever the database says), and still since before, or run by a
// runner it takes for gone (see gone), or by its own. A call of no
// runner is in doubt only by time.
func (e *Engine) inDoubt(sagaID string, before time.Time, read func(string, time.Time, []string) ([]Call, error)) ([]Call, error) {
	gone := e.gone()
	if self := e.runnerID(); self != "" {
		gone = append(gone, self) // what it runs, ours keeps out
	}
	was := e.holds()
	calls, err := read(sagaID, before, gone)
	return e.ours(calls, was), err
}

// stored is the store's InDoubt, for inDoubt.
func (e *Engine) stored(ctx context.Context) func(string, time.Time, []string) ([]Call, error) {
	return func(sagaID string, before time.Time, gone []string) ([]Call, error) {
		return e.store.InDoubt(ctx, sagaID, before, gone)
	}
}

// window is when an unsettled call must have stood still since to be in
// doubt whatever its runner: the in-doubt window ago.
func (e *Engine) window() time.Time { return e.now().Add(-e.inDoubtAfter) }
