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
// saga's status after compensation. IN_DOUBT: the tool ran, or may have,
// but its outcome could not be journaled; a person must find out.
const (
	OutcomeExecuted           Outcome = "EXECUTED"
	OutcomeAwaitingApproval   Outcome = "AWAITING_APPROVAL"
	OutcomeCompensating       Outcome = "COMPENSATING"
	OutcomeCompensated        Outcome = "COMPENSATED"
	OutcomeCompensationFailed Outcome = "COMPENSATION_FAILED"
	OutcomeInDoubt            Outcome = "IN_DOUBT"
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
	Status    Status // the saga's status afterwards; "" when in doubt
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
// or ended; Forbidden without the agent role or on another principal's saga
// (see Can); Unavailable when the store is. A tool that ran but whose
// outcome could not be journaled is not an error: its outcome is IN_DOUBT.
func (e *Engine) Call(ctx context.Context, p Principal, sagaID, toolName, input string) (CallResult, error) {
	res, err := e.call(ctx, p, sagaID, toolName, input)
	if _, ok := e.tools[toolName]; !ok {
		toolName = "" // not a label for whatever an agent names
	}
	e.obs.Called(toolName, ended(res.Outcome, false, err))
	return res, err
}

// call does what Call says; Call tells the observer how it ended.
func (e *Engine) call(ctx context.Context, p Principal, sagaID, toolName, input string) (CallResult, error) {
	if err := e.Can(p, ActCall, Subject{}); err != nil {
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
	var res CallResult
	var call Call
	_, err := e.transact(ctx, sagaID, 0, "", func(tx Tx) (Saga, bool, error) {
		s, err := e.open(tx, p, sagaID)
		return s, err == nil, err
	}, func(tx Tx, s *Saga) error {
		res, call = CallResult{}, Call{}
		if err := e.admit(p, ActCall, *s); err != nil {
			return err
		}
		if s.Ended {
			return Errorf(Conflict, "saga %s has ended; start a new saga", sagaID)
		}
		if tool.Reversibility == Irreversible {
			en, err := e.append(tx, s, toolName, PhaseAwaitingApproval, input, requested(p))
			if err != nil {
				return err
			}
			r := ApprovalRequest{SagaID: sagaID, JournalSeq: en.Seq, ToolName: toolName,
				Input: input, InputHash: PayloadHash(input), Requester: p.ID, CreatedAt: en.Timestamp}
			if err := tx.PutApproval(r); err != nil {
				return err
			}
			s.Status = AwaitingApproval
			res = CallResult{SagaID: sagaID, Seq: en.Seq, ToolName: toolName, Outcome: OutcomeAwaitingApproval,
				Message: AwaitingMessage(toolName), InputHash: r.InputHash, Status: s.Status}
			return nil
		}
		en, err := e.append(tx, s, toolName, PhaseIntent, input, requested(p))
		if err != nil {
			return err
		}
		call = Call{SagaID: sagaID, Seq: en.Seq, ToolName: toolName, Input: input, Requester: p.ID,
			State: CallRunning, StartedAt: en.Timestamp, UpdatedAt: en.Timestamp}
		return tx.PutCall(call)
	})
	if err != nil {
		return CallResult{}, at(err, sagaID, 0)
	}
	if call.Seq == 0 {
		return res, nil
	}
	return e.execute(ctx, tool, call)
}

// requested is the payload of the entry that opens a call: who asked for
// it, and how they signed in.
func requested(p Principal) string {
	s := "requester=" + p.ID
	if p.Auth != "" {
		s += "\nauth=" + p.Auth
	}
	if p.Client != "" {
		s += "\nclient=" + cleanLine(p.Client)
	}
	return s
}

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

// execute runs a call whose INTENT is committed, journals its outcome and,
// when it failed, compensates the saga. The journal is written even when
// the caller has gone away, and retried while the store is unavailable:
// an effect that happened must be recorded. When it still cannot be, the
// call is left in doubt and the outcome says so.
func (e *Engine) execute(ctx context.Context, tool Tool, c Call) (CallResult, error) {
	ctx = context.WithoutCancel(ctx)
	inv := Invocation{SagaID: c.SagaID, Seq: c.Seq, Tool: c.ToolName, Input: c.Input}
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
		res.Outcome = OutcomeInDoubt
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
	if s.Status == Compensating {
		// Also reached by a call that executed while another failed: its
		// effect is undone with the rest.
		s = e.compensateNow(ctx, s)
	}
	res.Status = s.Status
	if runErr != nil {
		res.Outcome, res.Error = Outcome(s.Status), EncodeText(runErr.Error())
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
	c.OutcomeSeq, c.UpdatedAt = en.Seq, en.Timestamp
	if phase == PhaseFailed {
		c.State = CallFailed
		if err := tx.PutCall(c); err != nil {
			return err
		}
		if accepting(*s) != nil {
			return nil
		}
		return e.fail(tx, s, fmt.Sprintf("tool %s failed: %s", c.ToolName, en.Payload))
	}
	c.State, c.Result = CallExecuted, EncodeText(result)
	if err := tx.PutCall(c); err != nil {
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
// the store is unavailable, for up to the engine's retry bound. The
// backoff runs on real time, not the injected clock, which only stamps
// entries.
func (e *Engine) record(ctx context.Context, sagaID string, seq int64, want CallState, fn func(tx Tx, s *Saga) error) (Saga, error) {
	start := time.Now()
	wait := 50 * time.Millisecond
	for {
		s, err := e.updateCall(ctx, sagaID, seq, want, nil, fn)
		if err == nil || !(IsKind(err, Unavailable) || IsKind(err, Conflict)) || time.Since(start)+wait > e.retryFor {
			return s, err
		}
		e.log.Warn("store unavailable while journaling what a tool did; retrying", "saga", sagaID, "err", err, "in", wait)
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return s, err
		}
		wait = min(2*wait, 2*time.Second)
	}
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
		if _, err := e.append(tx, s, l.Tool, PhaseRejected, gateRef(l.Seq), keyDropped+"="+cleanLine(reason)); err != nil {
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
	return History{Snapshot: snap, Verification: v, Decisions: Decisions(snap.Entries, e.keys.Verifier())}, err
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

// InDoubt lists calls whose outcome the journal does not know and that
// have not moved for at least olderThan: a crash or lost connection left
// them between INTENT and EXECUTED/FAILED, or mid-compensation. Nothing
// re-executes them; a person must find out what happened.
func (e *Engine) InDoubt(ctx context.Context, p Principal, olderThan time.Duration) ([]Call, error) {
	if err := e.Can(p, ActInDoubt, Subject{}); err != nil {
		return nil, err
	}
	return e.store.InDoubt(ctx, e.now().Add(-olderThan))
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
