package engine

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/sagacity-go/sagacity/evidence"
	"github.com/sagacity-go/sagacity/internal/service"
	"github.com/sagacity-go/sagacity/wire"
)

// compensate undoes a COMPENSATING saga's executed steps, newest first, and
// then makes the saga COMPENSATED, or COMPENSATION_FAILED when any undo
// failed. Each step is claimed in a transaction before its undo runs, so no
// step is compensated twice even when two compensations of one saga race
// (a call that executed while another failed joins in to undo its own
// effect). A failed undo is journaled and the earlier steps are still
// undone. While a call is still running or an undo in flight elsewhere,
// the saga stays COMPENSATING; whoever finishes last settles it.
func (e *Engine) compensate(ctx context.Context, sagaID string) (Saga, error) {
	st := starts{e: e}
	defer st.release()
	for {
		var claimed Call
		var tool Tool
		var again, settled bool
		// Retried like an outcome: a saga must not stay half compensated
		// because the database blinked between two steps.
		s, err := e.record(ctx, sagaID, 0, "", func(tx Tx, s *Saga) error {
			if claimed.Seq != 0 {
				st.lose(claimed) // the claim's try failed, perhaps only its answer
			}
			claimed, again, settled = Call{}, false, false
			if s.Status != wire.Compensating {
				return nil
			}
			if c, ok, err := st.find(sagaID, tx.Call); err != nil || ok {
				claimed, tool = c, e.tools[c.ToolName] // claimed by a try whose answer was lost
				return err
			}
			executed, err := tx.Calls(sagaID, CallExecuted)
			if err != nil {
				return err
			}
			for i := len(executed) - 1; i >= 0; i-- {
				c := executed[i]
				t, ok := e.tools[c.ToolName]
				if ok && t.Reversibility == Irreversible {
					continue // no undo exists
				}
				if !ok {
					// The tool left the configuration: say so rather than skip.
					again = true
					return e.undone(tx, s, c, fmt.Errorf("tool %q is not configured, so it cannot be compensated", c.ToolName))
				}
				c.State, c.UpdatedAt, c.Runner = CallCompensating, e.stamp(s), e.runnerID()
				claimed, tool = c, t
				st.hold(c)
				return e.putCall(tx, s, CallExecuted, c)
			}
			busy, err := tx.Calls(sagaID, CallRunning, CallCompensating)
			if err != nil || len(busy) > 0 {
				return err
			}
			failed, err := tx.Calls(sagaID, CallCompensationFailed)
			if err != nil {
				return err
			}
			s.Status, s.UpdatedAt, settled = wire.Compensated, e.stamp(s), true
			if len(failed) == 0 {
				return nil
			}
			s.Status = wire.CompensationFailed
			ev := OutboxEvent{Key: sagaID + "/compensation", At: s.UpdatedAt, Thread: sagaID,
				Event: wire.Event{Type: wire.EventCompensationFailed, SagaID: sagaID}}
			return e.tell(tx, ev.said("undoing saga %s failed (%d step(s) could not be compensated): a person must finish it", sagaID, len(failed)))
		})
		if err == nil && settled {
			e.obs.Compensated(s.Status)
		}
		if err != nil || s.Status != wire.Compensating {
			return s, err
		}
		if again {
			continue
		}
		if claimed.Seq == 0 {
			return s, nil // a call or undo in flight elsewhere will settle the saga
		}
		done := e.run(claimed)
		inv := claimed.Invocation()
		result, undoErr := DecodeText(claimed.Result)
		if undoErr == nil {
			_, undoErr = e.safely(inv, ToolCompensate, func() (string, error) {
				return "", tool.Executor.Compensate(ctx, inv, result)
			})
		}
		_, err = e.record(ctx, sagaID, claimed.Seq, CallCompensating, func(tx Tx, s *Saga) error {
			return e.undone(tx, s, claimed, undoErr)
		})
		done()
		if err != nil {
			return Saga{}, err
		}
	}
}

// compensateNow compensates s, which a committed transaction has just
// made COMPENSATING, and returns it as compensation left it. When the store
// fails part way, s stays COMPENSATING for recoverAll to finish: what was
// decided is committed, so the caller is told the saga's state, not an error.
func (e *Engine) compensateNow(ctx context.Context, s Saga) Saga {
	out, err := e.compensate(context.WithoutCancel(ctx), s.ID)
	if err != nil {
		e.log.Error("compensation interrupted; it continues when the store is back", "saga", s.ID, "err", err)
		return s
	}
	return out
}

// unknown follows a transaction that would have made the saga
// COMPENSATING and failed with err. When the store went away as it
// committed, it may have committed: then the compensation it started goes
// on in the background as soon as the store answers, instead of at the
// next recoverAll. compensate does nothing to a saga that is not
// COMPENSATING, so this is safe when nothing was committed.
func (e *Engine) unknown(sagaID string, err error) {
	if IsKind(err, Unavailable) {
		go e.compensateNow(context.Background(), Saga{ID: sagaID})
	}
}

// undone journals the end of a step's compensation.
func (e *Engine) undone(tx Tx, s *Saga, c Call, undoErr error) error {
	phase, payload, state := PhaseCompensated, evidence.CompensatedEffect+gateRef(c.OutcomeSeq), CallCompensated
	if undoErr != nil {
		phase, payload, state = PhaseCompensationFailed, undoErr.Error(), CallCompensationFailed
	}
	return e.undoneAs(tx, s, c, c.ToolName, phase, c.Input, payload, state, e.stamp(s))
}

// undoneAs journals the end of c's compensation, at at, as an entry of
// tool with phase, input and payload, and leaves c in state.
func (e *Engine) undoneAs(tx Tx, s *Saga, c Call, tool string, phase Phase, input, payload string, state CallState, at time.Time) error {
	en, err := e.appendAt(tx, s, tool, phase, input, payload, at)
	if err != nil {
		return err
	}
	from := c.State
	c.State, c.UpdatedAt = state, en.Timestamp
	return e.putCall(tx, s, from, c)
}

// recoverAll continues the compensation of every saga left COMPENSATING, as
// a crash or an outage in the middle of one leaves it: steps that are
// undone, or whose undo is in doubt, are not undone again. The server runs
// it at start and then periodically. Errors: Unavailable when the store is.
func (e *Engine) recoverAll(ctx context.Context) error {
	f := SagaFilter{Status: wire.Compensating, Limit: MaxList}
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

// recoverEvery is how often the Recoverer looks for compensations a dead
// process left: rare, since a live process finishes its own.
const recoverEvery = time.Minute

// Recoverer continues interrupted compensations (recoverAll), and executes
// the approved requests a stopped process left unexecuted whose rule
// executes on approval (ExecuteApproved), at start and then every Every
// (default recoverEvery): a service the server runs.
type Recoverer struct {
	Engine *Engine
	Every  time.Duration
	Logger *slog.Logger
	service.Base
}

// Start runs recoverAll now and then every Every until Stop or until ctx
// ends.
func (r *Recoverer) Start(ctx context.Context) error {
	return r.Run(ctx, service.Work{Loops: []service.Loop{
		r.Engine.tries(r.Logger, cmp.Or(r.Every, recoverEvery), "continuing interrupted compensations failed; trying again later", r.Engine.recoverAll),
		r.Engine.tries(r.Logger, cmp.Or(r.Every, recoverEvery), "executing approved requests on approval failed; trying again later",
			func(ctx context.Context) error {
				_, err := r.Engine.ExecuteApproved(ctx)
				return err
			}),
	}})
}
