package engine

// What a person may do with a saga as a whole, as a shell offers it:
// abort it, and record a step whose undo failed as undone by hand.

// SagaActions is what a principal may do with a saga now, and what it
// would do.
type SagaActions struct {
	// Abort: the principal may abort the saga, which fails it and
	// compensates it. WouldUndo are the executed steps that compensating
	// it undoes, newest first; StaysDone the executed steps of
	// IRREVERSIBLE tools, which nothing undoes; Dropped its pending
	// requests, which it drops, approved or not.
	Abort                bool
	WouldUndo, StaysDone []Call
	Dropped              []ApprovalRequest
	// Why says why the principal may not abort a saga that takes work;
	// "" when they may, or the saga takes none (final, compensating).
	Why string
	// Failed are the saga's steps whose undo failed, by seq, each with
	// whether the principal may record that they undid it by hand.
	Failed []FailedUndo
}

// FailedUndo is a step whose undo failed.
type FailedUndo struct {
	Call
	// Why says why the principal may not record it undone by hand; ""
	// when they may.
	Why string
}

// SagaAllowed says what p may do with the saga h holds (as History reads
// it) now. Each action is still checked when it is taken (Abort,
// Resolve); this is what a shell offers.
func (e *Engine) SagaAllowed(p Principal, h History) SagaActions {
	var a SagaActions
	s := h.Saga
	if s == nil {
		return a
	}
	if accepting(*s) == nil {
		if err := e.Can(p, ActAbort, Subject{Saga: s}); err != nil {
			a.Why = "You cannot abort this saga: " + msgOf(err) + "."
		} else {
			a.Abort, a.Dropped = true, h.Requests
			a.WouldUndo, a.StaysDone = e.undoPlan(h.Calls)
		}
	}
	for _, c := range h.Calls {
		if c.State != CallCompensationFailed {
			continue
		}
		f := FailedUndo{Call: c}
		if !h.Verification.Valid {
			f.Why = "the saga's journal does not verify, so nothing may be recorded on it"
		} else if err := e.Can(p, ActResolve, Subject{Saga: s, Requester: c.Requester}); err != nil {
			f.Why = msgOf(err)
		}
		a.Failed = append(a.Failed, f)
	}
	return a
}

// undoPlan splits a saga's executed calls (calls by seq) into what
// compensating it now undoes, the steps that have an undo, newest first,
// and what stays done, the steps of IRREVERSIBLE tools, newest first.
func (e *Engine) undoPlan(calls []Call) (undo, stays []Call) {
	for i := len(calls) - 1; i >= 0; i-- {
		c := calls[i]
		t, ok := e.tools[c.ToolName]
		switch {
		case c.State != CallExecuted:
		case ok && t.Reversibility == Irreversible:
			stays = append(stays, c)
		default:
			undo = append(undo, c)
		}
	}
	return undo, stays
}
