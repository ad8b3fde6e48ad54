package engine

import (
	"context"
	"fmt"

	"github.com/sagacity-go/sagacity/evidence"
	"github.com/sagacity-go/sagacity/wire"
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
	return tx.CreateSaga(Saga{ID: id, Status: wire.Running, Initiator: p.ID, HeadHash: ZeroHash, CreatedAt: now, UpdatedAt: now})
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
	case s.Status == wire.Compensating:
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
		s.Status = wire.AwaitingApproval
	case !s.Ended:
		s.Status = wire.Running
	default:
		// Only an ended saga asks whether anything still runs.
		running, err := tx.Calls(s.ID, CallRunning)
		if err != nil {
			return err
		}
		s.Status = wire.Running
		if len(running) == 0 {
			s.Status = wire.Completed
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
	lc, _ := evidence.ReadLifecycle(entries)
	for _, l := range lc.Open() {
		en, err := e.append(tx, s, l.Tool, PhaseRejected, gateRef(l.Seq), Lines{{KeyDropped, reason}}.String())
		if err != nil {
			return err
		}
		g := entries[l.Seq-1]
		r := e.ruleOrName(g)
		ev := requestEvent(wire.EventDropped, g, r, tally(g, l, r), en.Seq, en.Timestamp)
		if err := e.tell(tx, ev.said("%s was dropped before it was decided or executed: the saga failed (%s)", ev.what(), reason)); err != nil {
			return err
		}
	}
	if _, err := tx.DeleteApprovals(s.ID, 0); err != nil {
		return err
	}
	s.Status, s.Reason = wire.Compensating, reason
	return nil
}

// End records that the agent's run is over. The saga is COMPLETED, or
// AWAITING_APPROVAL until its pending requests are resolved. NotFound for
// an unknown saga, Conflict when it is final or compensating, Forbidden
// as Can says.
func (e *Engine) End(ctx context.Context, p Principal, sagaID string) (Saga, error) {
	if err := e.guard(p, ActEnd, sagaID); err != nil {
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
	if err := e.guard(p, ActAbort, sagaID); err != nil {
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
	if err := e.guard(p, ActCall, id); err != nil {
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
