package engine

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/sagacity-go/sagacity/wire"
)

// Refusal details journaled when a resume fails closed (SPEC §4).
const (
	RefusedNoApproval = "no human approval recorded"
	// RefusedNoRule refuses, at the gate, a request no rule of the
	// approval policy applies to: nobody could approve it.
	RefusedNoRule = "no rule of the approval policy applies to this request"
	RefusedStale  = "stale-approval: payload changed since approval was granted"
)

// Decision is a recorded approve or reject.
type Decision struct {
	SagaID     string
	JournalSeq int64
	Approved   bool
	Approver   string
	Reason     string
	DecidedAt  time.Time
	Status     Status // the saga's status afterwards
}

// gateRef is the input of decision and refusal entries: the gated entry's seq.
func gateRef(seq int64) string { return "seq=" + strconv.FormatInt(seq, 10) }

// personalPayload is the payload of an entry that records a person's
// decision on entry g, made at at: who (key=<identity>), why, how they
// signed in, the signed receipt, and the result they report last, when
// they report one (it may hold line breaks).
func (e *Engine) personalPayload(p Principal, g Entry, decision Decided, key Key, reason string, result *string, at time.Time) (string, error) {
	receipt, err := e.signed(p, g, decision, reason, result, at)
	ls := Lines{{key, p.ID}}.With(KeyReason, reason).With(KeyAuth, string(p.Auth)).With(KeyReceipt, receipt)
	if result != nil {
		ls = append(ls, Line{KeyResult, *result})
	}
	return ls.String(), err
}

func noPending(sagaID string, seq int64) *Error {
	return &Error{Kind: NotFound, Msg: fmt.Sprintf("No pending approval found for saga=%s seq=%d", sagaID, seq),
		SagaID: sagaID, Seq: seq}
}

// bound is a pending request as its verified journal has it.
type bound struct {
	entries []Entry
	gated   Entry // the AWAITING_APPROVAL entry the request row stands for
	life    *Life // what the journal says became of it: open, so far
}

// bind reads a locked saga's journal, verifies it against the saga's head
// and the pending request r (see VerifySaga: the journal must say r is
// still open), and returns it with the AWAITING_APPROVAL entry r stands
// for. Decisions and resumes act on that verified entry, never on the
// request row, which is only the index of what is pending. Conflict when
// the journal or r does not verify (see intact).
func (e *Engine) bind(tx Tx, s *Saga, r ApprovalRequest) (bound, error) {
	entries, err := tx.Entries(s.ID)
	if err != nil {
		return bound{}, err
	}
	if err := e.intact(entries, *s, []ApprovalRequest{r}); err != nil {
		return bound{}, err
	}
	lc, _ := ReadLifecycle(entries)
	return bound{entries: entries, gated: entries[r.JournalSeq-1], life: lc.Requests[r.JournalSeq]}, nil
}

// superseded is the Conflict of acting on a request the saga re-planned.
func superseded(l *Life) *Error {
	return &Error{Kind: Conflict, Code: wire.CodeSuperseded, Msg: fmt.Sprintf("the request at seq=%d was superseded by the saga's request at seq=%d: "+
		"it can no longer be approved or executed", l.Seq, l.SupersededBy)}
}

// decide opens a decision on a pending request: it locks the saga, finds
// the request and its verified journal entry, and checks that p may take
// action a on it.
func (e *Engine) decide(ctx context.Context, p Principal, a Action, sagaID string, seq int64, reason string,
	fn func(tx Tx, s *Saga, b bound) error) (Saga, error) {
	if err := e.Can(p, a, Subject{}); err != nil {
		return Saga{}, err
	}
	if err := validName("saga id", sagaID); err != nil {
		return Saga{}, err
	}
	if err := validReason(reason); err != nil {
		return Saga{}, err
	}
	if err := e.signing(ctx); err != nil {
		return Saga{}, at(err, sagaID, seq)
	}
	s, err := e.update(ctx, sagaID, noPending(sagaID, seq), func(tx Tx, s *Saga) error {
		r, err := tx.Approval(sagaID, seq)
		if IsKind(err, NotFound) {
			return noPending(sagaID, seq)
		}
		if err != nil {
			return err
		}
		b, err := e.bind(tx, s, r)
		if err != nil {
			return err
		}
		rule, err := e.ruleOf(b.gated)
		if err != nil {
			return err
		}
		if err := e.Can(p, a, Subject{Saga: s, Requester: b.gated.Field(KeyRequester), Rule: &rule}); err != nil {
			return err
		}
		return fn(tx, s, b)
	})
	return s, at(err, sagaID, seq)
}

// Approve records p's approval of the request at seq: an APPROVED entry.
// It executes nothing and leaves the request pending for Resume.
//
// Errors: NotFound when no request is pending at seq; Conflict when it is
// already approved, or when the saga's journal or the request does not
// verify; Forbidden without the approver role, or when p started the saga
// or made the request (four-eyes); Invalid for a bad reason.
func (e *Engine) Approve(ctx context.Context, p Principal, sagaID string, seq int64, reason string) (Decision, error) {
	var d Decision
	s, err := e.decide(ctx, p, ActApprove, sagaID, seq, reason, func(tx Tx, s *Saga, b bound) error {
		switch {
		case len(b.life.Approvals) > 0:
			return &Error{Kind: Conflict, Msg: fmt.Sprintf("saga=%s seq=%d is already approved", sagaID, seq)}
		case b.life.SupersededBy != 0:
			return superseded(b.life)
		}
		at := e.stamp(s)
		payload, err := e.personalPayload(p, b.gated, DecidedApproved, KeyApprover, reason, nil, at)
		if err != nil {
			return err
		}
		en, err := e.appendAt(tx, s, GateTool, PhaseApproved, gateRef(seq), payload, at)
		d = Decision{SagaID: sagaID, JournalSeq: seq, Approved: true, Approver: p.ID, Reason: reason, DecidedAt: en.Timestamp}
		return err
	})
	if err == nil {
		e.obs.Decided(DecidedApproved)
	}
	d.Status = s.Status
	return d, err
}

// Reject records p's rejection of the request at seq: a REJECTED entry.
// Every pending request of the saga is dropped and every executed step is
// compensated once, newest first.
//
// Errors: as Approve, without the Conflict for an approved request.
func (e *Engine) Reject(ctx context.Context, p Principal, sagaID string, seq int64, reason string) (Decision, error) {
	var d Decision
	s, err := e.decide(ctx, p, ActReject, sagaID, seq, reason, func(tx Tx, s *Saga, b bound) error {
		gated := b.gated
		at := e.stamp(s)
		payload, err := e.personalPayload(p, gated, DecidedRejected, KeyApprover, reason, nil, at)
		if err != nil {
			return err
		}
		en, err := e.appendAt(tx, s, GateTool, PhaseRejected, gateRef(seq), payload, at)
		if err != nil {
			return err
		}
		d = Decision{SagaID: sagaID, JournalSeq: seq, Approved: false, Approver: p.ID, Reason: reason, DecidedAt: en.Timestamp}
		return e.fail(tx, s, fmt.Sprintf("%s at seq=%d rejected by %s", gated.ToolName, seq, p.ID))
	})
	if err != nil {
		e.unknown(sagaID, err)
		return Decision{}, err
	}
	e.obs.Decided(DecidedRejected)
	d.Status = e.compensateNow(ctx, s).Status
	return d, nil
}

// Dismiss records p's dismissal of a superseded request at seq: a
// REJECTED entry of the approval gate naming p as dismissed-by, with its
// receipt. It drops that request alone; the saga goes on, nothing is
// compensated. Reject, not Dismiss, ends a saga.
//
// Errors: Conflict when the request is not superseded (reject it
// instead), and as Reject.
func (e *Engine) Dismiss(ctx context.Context, p Principal, sagaID string, seq int64, reason string) (Decision, error) {
	var d Decision
	s, err := e.decide(ctx, p, ActDismiss, sagaID, seq, reason, func(tx Tx, s *Saga, b bound) error {
		if b.life.SupersededBy == 0 {
			return &Error{Kind: Conflict, Msg: fmt.Sprintf("the request at seq=%d is not superseded: only a request the saga "+
				"replaced can be dismissed; reject it to end the saga", seq)}
		}
		at := e.stamp(s)
		payload, err := e.personalPayload(p, b.gated, DecidedDismissed, KeyDismissedBy, reason, nil, at)
		if err != nil {
			return err
		}
		en, err := e.appendAt(tx, s, GateTool, PhaseRejected, gateRef(seq), payload, at)
		if err != nil {
			return err
		}
		if _, err := tx.DeleteApprovals(sagaID, seq); err != nil {
			return err
		}
		d = Decision{SagaID: sagaID, JournalSeq: seq, Approver: p.ID, Reason: reason, DecidedAt: en.Timestamp}
		return e.settle(tx, s)
	})
	if err == nil {
		e.obs.Decided(DecidedDismissed)
	}
	d.Status = s.Status
	return d, err
}

// ResumeResult reports a resume. A refused resume is a completed action,
// not an error: Refused is set, Reason says why, the tool was not called
// and the saga has been compensated.
type ResumeResult struct {
	SagaID  string
	Seq     int64 // the gated entry
	Status  Status
	Result  string // the tool's result when it executed
	Refused bool
	Reason  string // the refusal detail, or the tool's error when it failed
	Call    CallResult
}

// Resume executes an approved request, bound to the payload that was
// approved. It fails closed, in this order: no pending request → NotFound,
// nothing journaled; a journal that does not verify, or a request that
// does not match its AWAITING_APPROVAL entry → Conflict, nothing
// journaled; no APPROVED entry for exactly this seq, or sha256(payload) ≠
// the hash of the input that entry journaled (byte-exact, whatever the
// bytes) → refused: REJECTED is journaled (with the attempted bytes, see
// EncodeText), the saga's pending requests are dropped and its executed
// steps compensated. Otherwise the request is claimed and dropped in the
// transaction that journals INTENT, so however many resumes race, across
// processes, the tool runs at most once; the others get NotFound.
//
// Other errors: NotFound when the request's tool is not registered;
// Forbidden as Can says; Invalid for a payload larger than the input limit.
func (e *Engine) Resume(ctx context.Context, p Principal, sagaID string, seq int64, payload string) (ResumeResult, error) {
	if len(payload) > e.maxInput {
		return ResumeResult{}, Errorf(Invalid, "payload is larger than %d bytes", e.maxInput)
	}
	return e.resume(ctx, p, sagaID, seq, &payload)
}

// Execute is Resume with the bytes the request's verified AWAITING_APPROVAL
// entry holds: what a person who approved it, or the agent that asked,
// runs from the console or MCP without presenting the bytes again. Every
// check of Resume holds; and a request nobody has decided yet is Conflict
// (Code wire.CodeUndecided) with nothing changed, where Resume refuses it
// and compensates the saga.
func (e *Engine) Execute(ctx context.Context, p Principal, sagaID string, seq int64) (ResumeResult, error) {
	return e.resume(ctx, p, sagaID, seq, nil)
}

// resume does Resume with payload, or Execute when it is nil.
func (e *Engine) resume(ctx context.Context, p Principal, sagaID string, seq int64, payload *string) (rr ResumeResult, err error) {
	var tool Tool // the request's, once found
	defer func() { e.obs.Called(tool.Name, ended(rr.Call.Outcome, rr.Refused, err)) }()
	if err := e.Can(p, ActResume, Subject{}); err != nil {
		return ResumeResult{}, err
	}
	if err := validName("saga id", sagaID); err != nil {
		return ResumeResult{}, err
	}
	if why := e.Halted(); why != "" {
		// Nothing is journaled: the request stays pending until an
		// operator restores the log.
		return ResumeResult{}, &Error{Kind: Unavailable, Msg: "executions of IRREVERSIBLE tools are halted: " + why +
			"; the request stays pending until an operator restores the database or the checkpoints", Err: ErrHalted, SagaID: sagaID, Seq: seq}
	}
	var refusal string
	var call Call
	s, err := e.update(ctx, sagaID, noPending(sagaID, seq), func(tx Tx, s *Saga) error {
		refusal, call = "", Call{}
		r, err := tx.Approval(sagaID, seq)
		if IsKind(err, NotFound) {
			return noPending(sagaID, seq)
		}
		if err != nil {
			return err
		}
		b, err := e.bind(tx, s, r)
		if err != nil {
			return err
		}
		gated := b.gated
		if err := e.Can(p, ActResume, Subject{Saga: s}); err != nil {
			return err
		}
		var ok bool
		if tool, ok = e.tools[gated.ToolName]; !ok {
			return &Error{Kind: NotFound, Msg: fmt.Sprintf("tool %q is not registered", gated.ToolName)}
		}
		if b.life.SupersededBy != 0 {
			// Not a refusal: the saga goes on with the request that
			// replaced this one.
			return superseded(b.life)
		}
		if payload == nil && len(b.life.Approvals) == 0 {
			// Execute runs what a person approved; asked before anyone
			// decided, it changes nothing.
			return &Error{Kind: Conflict, Code: wire.CodeUndecided, Msg: fmt.Sprintf("the request at seq=%d is not decided yet: "+
				"nothing was run or changed; wait until a person approves it, then execute it", seq)}
		}
		if err := e.clear(tx, s); err != nil {
			return err
		}
		presented := gated.Input
		if payload != nil {
			presented = *payload
		}
		refusal = refuse(b.life, gated, presented)
		if refusal != "" {
			detail := Lines{{Value: refusal}}
			if refusal == RefusedStale {
				detail = detail.With(KeyAttempted, EncodeText(presented))
			}
			if _, err := e.append(tx, s, gated.ToolName, PhaseRejected, gateRef(seq), detail.String()); err != nil {
				return err
			}
			return e.fail(tx, s, fmt.Sprintf("resume of %s at seq=%d refused: %s", gated.ToolName, seq, refusal))
		}
		if _, err := tx.DeleteApprovals(sagaID, seq); err != nil {
			return err
		}
		en, err := e.append(tx, s, gated.ToolName, PhaseIntent, gated.Input, requested(p, "").With(KeyResumes, gateRef(seq)).String())
		if err != nil {
			return err
		}
		call = Call{SagaID: sagaID, Seq: en.Seq, ToolName: gated.ToolName, Input: gated.Input, Requester: p.ID,
			State: CallRunning, StartedAt: en.Timestamp, UpdatedAt: en.Timestamp, Request: seq, Runner: e.runnerID()}
		if err := e.putCall(tx, s, "", call); err != nil {
			return err
		}
		return e.settle(tx, s)
	})
	if err != nil {
		e.unknown(sagaID, err) // a refusal compensates
		return ResumeResult{}, at(err, sagaID, seq)
	}
	if refusal != "" {
		return ResumeResult{SagaID: sagaID, Seq: seq, Status: e.compensateNow(ctx, s).Status, Refused: true, Reason: refusal}, nil
	}
	cr, err := e.execute(ctx, tool, call)
	if err != nil {
		return ResumeResult{}, err
	}
	return ResumeResult{SagaID: sagaID, Seq: seq, Status: cr.Status, Result: cr.Result, Reason: cr.Error, Call: cr}, nil
}

// refuse returns why payload may not run as the verified gated entry,
// whose lifecycle is l, or "".
func refuse(l *Life, gated Entry, payload string) string {
	if len(l.Approvals) == 0 {
		return RefusedNoApproval
	}
	if PayloadHash(payload) != PayloadHash(gated.Input) {
		return RefusedStale
	}
	return ""
}
