package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sagacity-go/sagacity/wire"
)

// AwaitingMessage is what the model is told about a gated call.
func AwaitingMessage(tool string) string {
	return fmt.Sprintf("[AWAITING_APPROVAL] Tool '%s' requires human approval before execution.", tool)
}

// CallResult reports one tool call. Seq is the call's first entry: the
// INTENT of an executed call, or the AWAITING_APPROVAL entry to approve and
// resume.
type CallResult struct {
	SagaID    string
	Seq       int64
	ToolName  string
	Outcome   Outcome
	Result    string // EXECUTED: the tool's result
	Message   string // AWAITING_APPROVAL: the model-facing message
	InputHash string // AWAITING_APPROVAL: sha256 of the input
	Error     string // failed or in doubt: what went wrong
	// Status is the saga's status afterwards: in doubt, as the call's
	// INTENT left it, since nothing was journaled after it.
	Status Status
}

// Call runs a tool inside a saga, creating the saga (with p as its
// initiator) on its first call. A REVERSIBLE or COMPENSATABLE tool executes
// between an INTENT and an EXECUTED entry; when it fails, FAILED is
// journaled and the saga is compensated. An IRREVERSIBLE tool does not run:
// the call is parked as a pending approval request. Either way the first
// entry records p as the call's requester.
//
// Errors: Invalid for a bad id, tool name or input; NotFound for an unknown
// tool (nothing is journaled); Conflict when the saga is final, compensating
// or ended, or (Code wire.CodeInDoubt) has a call in doubt; Forbidden without
// the agent role or on another principal's saga (see Can); Unavailable
// when the store is. A tool that ran but whose outcome could not be
// journaled is not an error: its outcome is IN_DOUBT.
func (e *Engine) Call(ctx context.Context, p Principal, sagaID, toolName, input string) (CallResult, error) {
	return e.CallOnce(ctx, p, sagaID, Ask{Tool: toolName, Input: input})
}

// Ask is an agent's call: the tool and its exact input, and optionally
// the agent's idempotency key for it and the reason it gives, which is
// journaled with the call and shown to the people who decide it.
type Ask struct {
	Tool, Input string
	Key, Reason string
}

// CallOnce is Call with a's key and reason. Under the agent's
// idempotency key (none when ""), the key is journaled with the call,
// and the call made again with the same key and the same bytes returns
// the first one's outcome, or its in-doubt state, and runs nothing; keys
// are kept for the saga's life. Errors also: Unprocessable
// (wire.CodeKeyReused) for the key sent with other bytes, naming the
// first call; Conflict (wire.CodeInProgress) while the first call still
// runs; Invalid for a key that is not 1 to MaxKeyLen printable ASCII
// characters, or a reason that is not one line of at most MaxReasonLen
// bytes.
func (e *Engine) CallOnce(ctx context.Context, p Principal, sagaID string, a Ask) (CallResult, error) {
	res, err := e.call(ctx, p, sagaID, a)
	if a.Key != "" && err != nil && (errors.Is(err, ErrKeyTaken) || IsKind(err, Conflict)) {
		// Made before under this key: its outcome, whatever the saga
		// became since.
		if first, ferr := e.replay(ctx, p, sagaID, a.Tool, a.Input, a.Key); !IsKind(ferr, NotFound) {
			res, err = first, ferr
		}
	}
	toolName := a.Tool
	if _, ok := e.tools[toolName]; !ok {
		toolName = "" // not a label for whatever an agent names
	}
	e.obs.Called(toolName, ended(res.Outcome, false, err))
	return res, err
}

// ErrKeyTaken is wrapped by the error of a call whose idempotency key the
// saga has given another call already; nothing of it is kept.
var ErrKeyTaken = errors.New("the idempotency key is the saga's already")

// call does what CallOnce says; CallOnce tells the observer how it ended.
func (e *Engine) call(ctx context.Context, p Principal, sagaID string, a Ask) (CallResult, error) {
	toolName, input, key := a.Tool, a.Input, a.Key
	if err := e.guard(p, ActCall, sagaID); err != nil {
		return CallResult{}, err
	}
	if err := notReserved(sagaID); err != nil {
		return CallResult{}, err
	}
	if err := validReason(a.Reason); err != nil {
		return CallResult{}, at(err, sagaID, 0)
	}
	if err := validName("tool name", toolName); err != nil {
		return CallResult{}, err
	}
	if err := validKey(key); err != nil {
		return CallResult{}, at(err, sagaID, 0)
	}
	if err := e.validInput("input", input); err != nil {
		return CallResult{}, err
	}
	if err := ambiguous(input); err != nil {
		return CallResult{}, at(err, sagaID, 0)
	}
	tool, ok := e.tools[toolName]
	if !ok {
		return CallResult{}, &Error{Kind: NotFound, Msg: fmt.Sprintf("unknown tool %q", toolName), SagaID: sagaID}
	}
	if s := e.schemas[toolName]; s != nil {
		if err := s.check(toolName, input); err != nil {
			return CallResult{}, at(err, sagaID, 0)
		}
	}
	// The request is decided by the rule that applies now, and records it
	// with the policy's hash, and what its conditions saw of who asked and
	// when, if they read that: frozen at request time. The rule depends on
	// the request alone, so it is found before the saga is locked.
	phase, lines, m := PhaseIntent, requested(p, key), Matched{OK: true}
	if tool.Reversibility == Irreversible {
		policy := e.policy()
		var seen *Context
		if policy.UsesContext() {
			c := policy.See(p.who(), p.Claims, Truncate(e.now()))
			seen = &c
		}
		m = policy.Match(toolName, sagaID, p.ID, input, seen)
		phase = PhaseAwaitingApproval
		if m.OK {
			lines = lines.With(KeyRule, m.Rule.Name)
		}
		lines = lines.With(KeyPolicy, policy.Hash)
		if seen != nil {
			lines = lines.With(KeyContext, seen.String())
		}
	}
	rule := m.Rule
	lines = lines.With(KeyReason, a.Reason)
	var res CallResult
	var call Call
	st := starts{e: e}
	defer st.release()
	s, err := st.again(ctx, sagaID, &call, func(ctx context.Context) (Saga, error) {
		return e.transact(ctx, sagaID, 0, "", func(tx Tx) (Saga, bool, error) {
			s, err := e.open(tx, p, sagaID)
			return s, err == nil, err
		}, func(tx Tx, s *Saga) error {
			res, call = CallResult{}, Call{}
			if c, ok, err := st.find(sagaID, tx.Call); err != nil || ok {
				call = c // its INTENT committed: it runs now
				return err
			}
			if err := e.admit(p, ActCall, *s); err != nil {
				return err
			}
			if s.Ended {
				return Errorf(Conflict, "saga %s has ended; start a new saga", sagaID)
			}
			if err := e.clear(tx, s); err != nil {
				return err
			}
			en, err := e.append(tx, s, toolName, phase, input, lines.String())
			if err != nil {
				return err
			}
			if key != "" {
				if err := tx.PutCallKey(sagaID, key, en.Seq); err != nil {
					return err
				}
			}
			if !m.OK {
				// Fail closed: journaled as a refused request, and the saga
				// compensated, as a refused resume is.
				if _, err := e.append(tx, s, toolName, PhaseRejected, gateRef(en.Seq), m.Refusal().String()); err != nil {
					return err
				}
				res = CallResult{SagaID: sagaID, Seq: en.Seq, ToolName: toolName, Outcome: OutcomeRefused, InputHash: PayloadHash(input),
					Error: gateRefused(m, en.Seq)}
				return e.fail(tx, s, fmt.Sprintf("the request of %s at seq=%d was refused at the gate: %s", toolName, en.Seq, m.Because()))
			}
			if phase == PhaseAwaitingApproval {
				r := ApprovalRequest{SagaID: sagaID, JournalSeq: en.Seq, ToolName: toolName,
					Input: input, InputHash: PayloadHash(input), Requester: p.ID, CreatedAt: en.Timestamp,
					Rule: rule.Name, Policy: lines.Value(KeyPolicy), Quorum: tally(en, nil, rule).Quorum(), Reason: a.Reason, Due: tally(en, nil, rule).Due(),
					EscalateAt: firstStep(en.Timestamp, rule)}
				if err := tx.PutApproval(r); err != nil {
					return err
				}
				ev := requestEvent(wire.EventWaiting, en, rule, tally(en, nil, rule), en.Seq, en.Timestamp)
				if err := e.tell(tx, ev.said("%s waits for approval: %s under rule %s", ev.what(), ev.votes(), rule.Name)); err != nil {
					return err
				}
				s.Status = wire.AwaitingApproval
				res = CallResult{SagaID: sagaID, Seq: en.Seq, ToolName: toolName, Outcome: OutcomeAwaitingApproval,
					Message: AwaitingMessage(toolName), InputHash: r.InputHash, Status: s.Status}
				return nil
			}
			call = Call{SagaID: sagaID, Seq: en.Seq, ToolName: toolName, Input: input, Requester: p.ID,
				State: CallRunning, StartedAt: en.Timestamp, UpdatedAt: en.Timestamp, Runner: e.runnerID()}
			st.hold(call)
			return e.putCall(tx, s, "", call)
		})
	})
	if err != nil {
		return CallResult{}, at(err, sagaID, 0)
	}
	if res.Outcome == OutcomeRefused {
		res.Status = e.compensateNow(ctx, s).Status
		return res, nil
	}
	if call.Seq == 0 {
		return res, nil
	}
	return e.execute(ctx, tool, call, s.Status)
}

// gateRefused is what a call the gate refused, at seq, as m says, is
// told.
func gateRefused(m Matched, seq int64) string {
	return fmt.Sprintf("%s: the request at seq=%d cannot be approved, and the saga is compensated", m.Because(), seq)
}

// clear refuses to start a call in a saga with a call in doubt: its
// effect may or may not have happened, and the saga goes on only once a
// person has found out (Conflict, wire.CodeInDoubt, naming the call). A saga
// with nothing running needs no look.
func (e *Engine) clear(tx Tx, s *Saga) error {
	if s.Running <= 0 {
		return nil
	}
	doubt, err := e.inDoubt(s.ID, e.window(), tx.InDoubt)
	if err != nil || len(doubt) == 0 {
		return err
	}
	c := doubt[0]
	return &Error{Kind: Conflict, Code: wire.CodeInDoubt, SagaID: s.ID, Seq: c.Seq, Msg: fmt.Sprintf(
		"saga %s has a call in doubt at seq=%d (%s, started %s): its outcome is not journaled, so it may have taken effect; "+
			"a person must find out from the tool's owner and resolve it (%s) before the saga takes another call",
		s.ID, c.Seq, c.ToolName, c.StartedAt.UTC().Format(time.RFC3339), resolving(s.ID, c.Seq))}
}

// putCall stores call c, which was in state from ("" for a new one), and
// keeps the saga's count of unsettled calls.
func (e *Engine) putCall(tx Tx, s *Saga, from CallState, c Call) error {
	was, is := Call{State: from}.Unsettled(), c.Unsettled()
	switch {
	case is && !was:
		s.Running++
	case was && !is:
		s.Running--
	}
	return tx.PutCall(c)
}

// requested is the payload of the entry that opens a call: who asked for
// it, how they signed in, through what, and the agent's key for it.
func requested(p Principal, key string) Lines {
	return Lines{{KeyRequester, p.ID}}.With(KeyAuth, string(p.Auth)).With(KeyClient, cleanLine(p.Client)).With(KeyIdempotency, key)
}

// execute runs a call whose INTENT is committed, leaving its saga in
// status, journals its outcome and, when it failed, compensates the saga.
// The journal is written even when the caller has gone away, and retried
// while the store is unavailable: an effect that happened must be
// recorded. When it still cannot be, the call is left in doubt, the saga
// as the INTENT left it, and the outcome says so.
func (e *Engine) execute(ctx context.Context, tool Tool, c Call, status Status) (CallResult, error) {
	ctx = context.WithoutCancel(ctx)
	defer e.run(c)()
	inv := c.Invocation()
	result, runErr := e.safely(inv, ToolExecute, func() (string, error) { return tool.Executor.Execute(ctx, inv) })
	if runErr == nil && len(result) > e.maxInput {
		runErr, result = fmt.Errorf("result is larger than %d bytes", e.maxInput), ""
	}
	res := CallResult{SagaID: c.SagaID, Seq: c.Seq, ToolName: c.ToolName}
	// ours is the head the outcome's entry made in the try that ran: the
	// saga committed has it unless no try of ours committed (a try on a
	// stale promise, or a person who resolved the call meanwhile).
	var ours string
	s, err := e.record(ctx, c.SagaID, c.Seq, CallRunning, func(tx Tx, s *Saga) error {
		var err error
		if runErr != nil {
			err = e.close(tx, s, c, c.ToolName, PhaseFailed, c.Input, runErr.Error(), "", e.stamp(s))
		} else {
			err = e.close(tx, s, c, c.ToolName, PhaseExecuted, c.Input, result, result, e.stamp(s))
		}
		ours = s.HeadHash
		return err
	})
	if err != nil {
		e.log.Error("a tool ran but its outcome could not be journaled; the call is in doubt",
			"saga", c.SagaID, "seq", c.Seq, "tool", c.ToolName, "err", err)
		res.Outcome, res.Status = OutcomeInDoubt, status
		res.Error = fmt.Sprintf("tool %s was called but its outcome could not be journaled, so it may have taken effect; "+
			"the call is in doubt until a person resolves it: do not retry it", c.ToolName)
		return res, nil
	}
	if s.HeadHash != ours {
		// The tool stood still past the in-doubt window and a person
		// resolved the call: the journal holds their word, not this late
		// answer, so the caller gets neither as the call's outcome.
		e.log.Warn("a tool answered after a person had resolved its call; its answer is not journaled",
			"saga", c.SagaID, "seq", c.Seq, "tool", c.ToolName, "failed", runErr != nil)
		res.Status, res.Outcome = s.Status, OutcomeInDoubt
		res.Error = fmt.Sprintf("tool %s answered after a person had resolved the call; the journal holds their resolution: "+
			"read it before going on, and do not retry the call", c.ToolName)
		return res, nil
	}
	if s.Status == wire.Compensating {
		// Also reached by a call that executed while another failed: its
		// effect is undone with the rest.
		s = e.compensateNow(ctx, s)
	}
	res.Status = s.Status
	if runErr != nil {
		res.Outcome, res.Error = OutcomeFailed, EncodeText(runErr.Error())
		return res, nil
	}
	res.Outcome, res.Result = OutcomeExecuted, EncodeText(result)
	return res, nil
}

// close journals the outcome of running call c, at at, as an entry of tool
// with phase (EXECUTED or FAILED), input and payload, and settles the
// saga: a failure starts compensating it, unless it is compensating
// already (the compensation in progress settles it). result is what the
// call's undo is handed.
func (e *Engine) close(tx Tx, s *Saga, c Call, tool string, phase Phase, input, payload, result string, at time.Time) error {
	en, err := e.appendAt(tx, s, tool, phase, input, payload, at)
	if err != nil {
		return err
	}
	from := c.State
	c.OutcomeSeq, c.UpdatedAt = en.Seq, en.Timestamp
	if c.Request != 0 {
		if err := e.tellOutcome(tx, s, c.Request, en); err != nil {
			return err
		}
	}
	if phase == PhaseFailed {
		c.State = CallFailed
		if err := e.putCall(tx, s, from, c); err != nil {
			return err
		}
		if accepting(*s) != nil {
			return nil
		}
		why := fmt.Sprintf("tool %s failed: %s", c.ToolName, en.Payload)
		if tool == GateTool {
			why = notHappened(c, en)
		}
		return e.fail(tx, s, why)
	}
	c.State, c.Result = CallExecuted, EncodeText(result)
	if err := e.putCall(tx, s, from, c); err != nil {
		return err
	}
	if !s.Ended {
		// An outcome changes no request, so a live saga's status, which
		// says whether requests are pending, stands; only an ended one
		// may now be complete.
		return nil
	}
	return e.settle(tx, s)
}

// record journals what happened after a tool ran, its outcome or an
// undo's, in one transaction like updateCall (seq is the call's, or 0,
// and fn runs only while it is in state want: a commit whose answer was
// lost may have done the work already), and retries with backoff while
// the store is unavailable (see persist).
func (e *Engine) record(ctx context.Context, sagaID string, seq int64, want CallState, fn func(tx Tx, s *Saga) error) (s Saga, err error) {
	err = e.persist(ctx, "store unavailable while journaling what a tool did; retrying", sagaID, func() error {
		s, err = e.updateCall(ctx, sagaID, seq, want, nil, fn)
		return err
	}, func(err error) bool { return IsKind(err, Unavailable) || IsKind(err, Conflict) })
	return s, err
}

// persist runs try until it succeeds or fails with an error again does
// not take, waiting between tries (from 50ms, doubling, up to 2s) for up
// to the engine's retry bound, and saying why about saga sagaID. The
// waits run on real time, not the injected clock, which only stamps
// entries.
func (e *Engine) persist(ctx context.Context, why, sagaID string, try func() error, again func(error) bool) error {
	start := time.Now()
	wait := 50 * time.Millisecond
	for {
		err := try()
		if err == nil || !again(err) || time.Since(start)+wait > e.retryFor {
			return err
		}
		e.log.Warn(why, "saga", sagaID, "err", err, "in", wait)
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return err
		}
		wait = min(2*wait, 2*time.Second)
	}
}
