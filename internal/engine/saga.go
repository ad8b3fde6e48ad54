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

// Outcome is what a tool call came to.
type Outcome string

// Call outcomes. A failed call compensates the saga, so its outcome is the
// saga's status after compensation.
const (
	OutcomeExecuted           Outcome = "EXECUTED"
	OutcomeAwaitingApproval   Outcome = "AWAITING_APPROVAL"
	OutcomeCompensating       Outcome = "COMPENSATING"
	OutcomeCompensated        Outcome = "COMPENSATED"
	OutcomeCompensationFailed Outcome = "COMPENSATION_FAILED"
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
	Error     string // failed: the tool's error text
	Status    Status // the saga's status afterwards
}

// Call runs a tool inside a saga, creating the saga (with p as its
// initiator) on its first call. A REVERSIBLE or COMPENSATABLE tool executes
// between an INTENT and an EXECUTED entry; when it fails, FAILED is
// journaled and the saga is compensated. An IRREVERSIBLE tool does not run:
// the call is parked as a pending approval request.
//
// Errors: Invalid for a bad id, tool name or input; NotFound for an unknown
// tool (nothing is journaled); Conflict when the saga is final, compensating
// or ended; Forbidden without the agent role; Unavailable when the store is.
func (e *Engine) Call(ctx context.Context, p Principal, sagaID, toolName, input string) (CallResult, error) {
	if err := authorize(p, "calling a tool", RoleAgent); err != nil {
		return CallResult{}, err
	}
	if err := validName("saga id", sagaID); err != nil {
		return CallResult{}, err
	}
	if err := validName("tool name", toolName); err != nil {
		return CallResult{}, err
	}
	if err := e.validInput("input", input); err != nil {
		return CallResult{}, err
	}
	tool, ok := e.tools[toolName]
	if !ok {
		return CallResult{}, &Error{Kind: NotFound, Msg: fmt.Sprintf("unknown tool %q", toolName), SagaID: sagaID}
	}
	var res CallResult
	var call Call
	err := e.store.Update(ctx, func(tx Tx) error {
		res, call = CallResult{}, Call{}
		s, err := e.begin(tx, p, sagaID)
		if err != nil {
			return err
		}
		if s.Ended {
			return Errorf(Conflict, "saga %s has ended; start a new saga", sagaID)
		}
		if tool.Reversibility == Irreversible {
			en, err := e.append(tx, &s, toolName, PhaseAwaitingApproval, input, "")
			if err != nil {
				return err
			}
			r := ApprovalRequest{SagaID: sagaID, JournalSeq: en.Seq, ToolName: toolName,
				Input: input, InputHash: PayloadHash(input), CreatedAt: en.Timestamp}
			if err := tx.PutApproval(r); err != nil {
				return err
			}
			s.Status = AwaitingApproval
			res = CallResult{SagaID: sagaID, Seq: en.Seq, ToolName: toolName, Outcome: OutcomeAwaitingApproval,
				Message: AwaitingMessage(toolName), InputHash: r.InputHash, Status: s.Status}
			return tx.PutSaga(s)
		}
		en, err := e.append(tx, &s, toolName, PhaseIntent, input, "")
		if err != nil {
			return err
		}
		call = Call{SagaID: sagaID, Seq: en.Seq, ToolName: toolName, Input: input,
			State: CallRunning, StartedAt: en.Timestamp, UpdatedAt: en.Timestamp}
		if err := tx.PutCall(call); err != nil {
			return err
		}
		return tx.PutSaga(s)
	})
	if err != nil {
		return CallResult{}, at(err, sagaID, 0)
	}
	if call.Seq == 0 {
		return res, nil
	}
	return e.execute(ctx, tool, call)
}

// begin creates saga id with p as its initiator, or locks the existing
// one, and checks that it accepts work.
func (e *Engine) begin(tx Tx, p Principal, id string) (Saga, error) {
	now := Truncate(e.now())
	s, err := tx.CreateSaga(Saga{ID: id, Status: Running, Initiator: p.ID,
		HeadHash: ZeroHash, CreatedAt: now, UpdatedAt: now})
	if err != nil {
		return Saga{}, err
	}
	return s, accepting(s)
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

// execute runs a call whose INTENT is committed, journals its outcome and,
// when it failed, compensates the saga. The journal is written even when
// the caller has gone away: an effect that happened must be recorded.
func (e *Engine) execute(ctx context.Context, tool Tool, c Call) (CallResult, error) {
	ctx = context.WithoutCancel(ctx)
	inv := Invocation{SagaID: c.SagaID, Seq: c.Seq, Tool: c.ToolName, Input: c.Input}
	result, runErr := e.safely(inv, func() (string, error) { return tool.Executor.Execute(ctx, inv) })
	if runErr == nil {
		if err := e.validInput("result", result); err != nil {
			runErr, result = err, ""
		}
	}
	res := CallResult{SagaID: c.SagaID, Seq: c.Seq, ToolName: c.ToolName}
	s, err := e.update(ctx, c.SagaID, nil, func(tx Tx, s *Saga) error {
		phase, payload := PhaseExecuted, result
		if runErr != nil {
			phase, payload = PhaseFailed, runErr.Error()
		}
		en, err := e.append(tx, s, c.ToolName, phase, c.Input, payload)
		if err != nil {
			return err
		}
		c.OutcomeSeq, c.UpdatedAt = en.Seq, en.Timestamp
		if runErr != nil {
			c.State = CallFailed
			if err := tx.PutCall(c); err != nil {
				return err
			}
			if accepting(*s) != nil {
				return nil // already compensating: the compensation in progress settles the saga
			}
			return e.fail(tx, s, fmt.Sprintf("tool %s failed: %s", c.ToolName, payload))
		}
		c.State, c.Result = CallExecuted, result
		if err := tx.PutCall(c); err != nil {
			return err
		}
		return e.settle(tx, s)
	})
	if err != nil {
		return CallResult{}, err
	}
	if s.Status == Compensating {
		// Also reached by a call that executed while another failed: its
		// effect is undone with the rest.
		if s, err = e.compensate(ctx, c.SagaID); err != nil {
			return CallResult{}, err
		}
	}
	res.Status = s.Status
	if runErr != nil {
		res.Outcome, res.Error = Outcome(s.Status), runErr.Error()
		return res, nil
	}
	res.Outcome, res.Result = OutcomeExecuted, result
	return res, nil
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
	running, err := tx.Calls(s.ID, CallRunning)
	if err != nil {
		return err
	}
	switch {
	case pending > 0:
		s.Status = AwaitingApproval
	case s.Ended && len(running) == 0:
		s.Status = Completed
	default:
		s.Status = Running
	}
	return nil
}

// fail starts compensating a live saga: pending requests are dropped so
// that nothing irreversible runs after compensation.
func (e *Engine) fail(tx Tx, s *Saga, reason string) error {
	if _, err := tx.DeleteApprovals(s.ID, 0); err != nil {
		return err
	}
	s.Status, s.Reason = Compensating, reason
	return nil
}

// End records that the agent's run is over. The saga is COMPLETED, or
// AWAITING_APPROVAL until its pending requests are resolved. NotFound for
// an unknown saga, Conflict when it is final or compensating.
func (e *Engine) End(ctx context.Context, p Principal, sagaID string) (Saga, error) {
	if err := authorize(p, "ending a saga", RoleAgent); err != nil {
		return Saga{}, err
	}
	if err := validName("saga id", sagaID); err != nil {
		return Saga{}, err
	}
	return e.update(ctx, sagaID, nil, func(tx Tx, s *Saga) error {
		if err := accepting(*s); err != nil {
			return err
		}
		s.Ended, s.UpdatedAt = true, Truncate(e.now())
		return e.settle(tx, s)
	})
}

// Abort ends the saga as failed: pending requests are dropped and every
// executed step is compensated, newest first. NotFound for an unknown
// saga, Conflict when it is final or compensating.
func (e *Engine) Abort(ctx context.Context, p Principal, sagaID, reason string) (Saga, error) {
	if err := authorize(p, "aborting a saga", RoleAgent, RoleApprover); err != nil {
		return Saga{}, err
	}
	if err := validName("saga id", sagaID); err != nil {
		return Saga{}, err
	}
	if err := validReason(reason); err != nil {
		return Saga{}, err
	}
	_, err := e.update(ctx, sagaID, nil, func(tx Tx, s *Saga) error {
		if err := accepting(*s); err != nil {
			return err
		}
		s.UpdatedAt = Truncate(e.now())
		msg := "aborted by " + p.ID
		if reason != "" {
			msg += ": " + reason
		}
		return e.fail(tx, s, msg)
	})
	if err != nil {
		return Saga{}, err
	}
	return e.compensate(context.WithoutCancel(ctx), sagaID)
}

// Run is a saga in progress, handed to the function given to Engine.Saga.
type Run struct {
	e   *Engine
	ctx context.Context
	p   Principal
	id  string
}

// ID returns the saga's id.
func (r *Run) ID() string { return r.id }

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
	if err := authorize(p, "running a saga", RoleAgent); err != nil {
		return Saga{}, err
	}
	if err := validName("saga id", id); err != nil {
		return Saga{}, err
	}
	if err := e.store.Update(ctx, func(tx Tx) error {
		_, err := e.begin(tx, p, id)
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
		return e.Abort(ctx, p, id, cleanReason(fnErr.Error()))
	}
	return e.End(ctx, p, id)
}

// Lookup returns one saga; NotFound when absent.
func (e *Engine) Lookup(ctx context.Context, p Principal, id string) (Saga, error) {
	if err := e.reader(p, id); err != nil {
		return Saga{}, err
	}
	s, err := e.store.Saga(ctx, id)
	return s, at(err, id, 0)
}

// MaxList caps how many sagas one listing returns.
const MaxList = 500

// Sagas lists sagas, newest first; Limit is clamped to 1..MaxList (0 means 50).
func (e *Engine) Sagas(ctx context.Context, p Principal, f SagaFilter) ([]Saga, error) {
	if err := authorize(p, "listing sagas", Roles...); err != nil {
		return nil, err
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

// Journal returns a saga's entries ordered by seq; empty for an unknown saga.
func (e *Engine) Journal(ctx context.Context, p Principal, id string) ([]Entry, error) {
	if err := e.reader(p, id); err != nil {
		return nil, err
	}
	return e.store.Entries(ctx, id)
}

// reader checks that p may read saga id.
func (e *Engine) reader(p Principal, id string) error {
	if err := authorize(p, "reading sagas", Roles...); err != nil {
		return err
	}
	return validName("saga id", id)
}

// Verify checks a saga's hash chain and that the journal reaches the head
// the saga row records, so rows deleted from the tail are caught too.
func (e *Engine) Verify(ctx context.Context, p Principal, id string) (Verification, error) {
	if err := authorize(p, "verifying a journal", RoleAuditor, RoleApprover); err != nil {
		return Verification{}, err
	}
	if err := validName("saga id", id); err != nil {
		return Verification{}, err
	}
	entries, err := e.store.Entries(ctx, id)
	if err != nil {
		return Verification{}, err
	}
	s, err := e.store.Saga(ctx, id)
	switch {
	case IsKind(err, NotFound) && len(entries) == 0:
		return Verify(nil), nil
	case IsKind(err, NotFound):
		return broken(len(entries), 0, fmt.Sprintf("saga record missing for a journal of %d entries", len(entries))), nil
	case err != nil:
		return Verification{}, err
	}
	return VerifyHead(entries, s.HeadSeq, s.HeadHash), nil
}

// Approvals lists pending approval requests: all of them when sagaID is "",
// else one saga's (empty for an unknown saga).
func (e *Engine) Approvals(ctx context.Context, p Principal, sagaID string) ([]ApprovalRequest, error) {
	if err := authorize(p, "listing approvals", RoleApprover, RoleAuditor); err != nil {
		return nil, err
	}
	if sagaID != "" {
		if err := validName("saga id", sagaID); err != nil {
			return nil, err
		}
	}
	return e.store.Approvals(ctx, sagaID)
}

// InDoubt lists calls whose outcome the journal does not know and that
// have not moved for at least olderThan: a crash or lost connection left
// them between INTENT and EXECUTED/FAILED, or mid-compensation. Nothing
// re-executes them; a person must find out what happened.
func (e *Engine) InDoubt(ctx context.Context, p Principal, olderThan time.Duration) ([]Call, error) {
	if err := authorize(p, "listing calls in doubt", RoleApprover, RoleAuditor); err != nil {
		return nil, err
	}
	return e.store.InDoubt(ctx, e.now().Add(-olderThan))
}

// cleanReason makes any text a valid reason: control characters become
// spaces, invalid UTF-8 is replaced and the length is capped.
func cleanReason(s string) string {
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
