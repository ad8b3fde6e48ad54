package engine

import (
	"context"
	"fmt"
	"strconv"
	"time"
)

// Refusal details journaled when a resume fails closed (SPEC §4).
const (
	RefusedNoApproval = "no human approval recorded"
	RefusedNoHash     = "no recorded payload hash"
	RefusedStale      = "stale-approval: payload changed since approval was granted"
)

// Decision is a recorded approve or reject.
type Decision struct {
	SagaID     string
	JournalSeq int64
	Approved   bool
	Approver   string
	DecidedAt  time.Time
	Status     Status // the saga's status afterwards
}

// gateRef is the input of decision and refusal entries: the gated entry's seq.
func gateRef(seq int64) string { return "seq=" + strconv.FormatInt(seq, 10) }

// decisionPayload is the payload of APPROVED and person-made REJECTED entries.
func decisionPayload(p Principal, reason string) string {
	s := "approver=" + p.ID
	if reason != "" {
		s += "\nreason=" + reason
	}
	if p.Auth != "" {
		s += "\nauth=" + p.Auth
	}
	return s
}

func noPending(sagaID string, seq int64) *Error {
	return &Error{Kind: NotFound, Msg: fmt.Sprintf("No pending approval found for saga=%s seq=%d", sagaID, seq),
		SagaID: sagaID, Seq: seq}
}

// decide opens a decision on a pending request: it checks the caller,
// locks the saga and finds the request.
func (e *Engine) decide(ctx context.Context, p Principal, what, sagaID string, seq int64, reason string,
	fn func(tx Tx, s *Saga, r ApprovalRequest) error) (Saga, error) {
	if err := authorize(p, what, RoleApprover); err != nil {
		return Saga{}, err
	}
	if err := validName("saga id", sagaID); err != nil {
		return Saga{}, err
	}
	if err := validReason(reason); err != nil {
		return Saga{}, err
	}
	s, err := e.update(ctx, sagaID, noPending(sagaID, seq), func(tx Tx, s *Saga) error {
		r, err := tx.Approval(sagaID, seq)
		if IsKind(err, NotFound) {
			return noPending(sagaID, seq)
		}
		if err != nil {
			return err
		}
		if s.Initiator == p.ID {
			return &Error{Kind: Forbidden, Msg: fmt.Sprintf("%s started saga %s and cannot decide its own requests", p.ID, sagaID)}
		}
		return fn(tx, s, r)
	})
	return s, at(err, sagaID, seq)
}

// Approve records p's approval of the request at seq: an APPROVED entry.
// It executes nothing and leaves the request pending for Resume.
//
// Errors: NotFound when no request is pending at seq; Conflict when it is
// already approved; Forbidden without the approver role or when p started
// the saga (four-eyes); Invalid for a bad reason.
func (e *Engine) Approve(ctx context.Context, p Principal, sagaID string, seq int64, reason string) (Decision, error) {
	var d Decision
	s, err := e.decide(ctx, p, "approving", sagaID, seq, reason, func(tx Tx, s *Saga, r ApprovalRequest) error {
		_, err := tx.FindEntry(sagaID, PhaseApproved, gateRef(seq))
		switch {
		case err == nil:
			return &Error{Kind: Conflict, Msg: fmt.Sprintf("saga=%s seq=%d is already approved", sagaID, seq)}
		case !IsKind(err, NotFound):
			return err
		}
		en, err := e.append(tx, s, GateTool, PhaseApproved, gateRef(seq), decisionPayload(p, reason))
		d = Decision{SagaID: sagaID, JournalSeq: seq, Approved: true, Approver: p.ID, DecidedAt: en.Timestamp}
		return err
	})
	d.Status = s.Status
	return d, err
}

// Reject records p's rejection of the request at seq: a REJECTED entry.
// Every pending request of the saga is dropped and every executed step is
// compensated once, newest first.
//
// Errors: as Approve, without the Conflict.
func (e *Engine) Reject(ctx context.Context, p Principal, sagaID string, seq int64, reason string) (Decision, error) {
	var d Decision
	_, err := e.decide(ctx, p, "rejecting", sagaID, seq, reason, func(tx Tx, s *Saga, r ApprovalRequest) error {
		en, err := e.append(tx, s, GateTool, PhaseRejected, gateRef(seq), decisionPayload(p, reason))
		if err != nil {
			return err
		}
		d = Decision{SagaID: sagaID, JournalSeq: seq, Approved: false, Approver: p.ID, DecidedAt: en.Timestamp}
		return e.fail(tx, s, fmt.Sprintf("%s at seq=%d rejected by %s", r.ToolName, seq, p.ID))
	})
	if err != nil {
		return Decision{}, err
	}
	s, err := e.compensate(context.WithoutCancel(ctx), sagaID)
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
// nothing journaled; a journal that does not verify → Conflict, nothing
// journaled; no APPROVED entry for exactly this seq, no recorded payload
// hash, or sha256(payload) ≠ the recorded hash (byte-exact) → refused:
// REJECTED is journaled, the saga's pending requests are dropped and its
// executed steps compensated. Otherwise the request is claimed and dropped
// in the transaction that journals INTENT, so however many resumes race,
// across processes, the tool runs at most once; the others get NotFound.
//
// Other errors: NotFound when the request's tool is not registered;
// Forbidden without the agent or approver role; Invalid for a payload that
// is not UTF-8 or too large.
func (e *Engine) Resume(ctx context.Context, p Principal, sagaID string, seq int64, payload string) (ResumeResult, error) {
	if err := authorize(p, "resuming", RoleAgent, RoleApprover); err != nil {
		return ResumeResult{}, err
	}
	if err := validName("saga id", sagaID); err != nil {
		return ResumeResult{}, err
	}
	if err := e.validInput("payload", payload); err != nil {
		return ResumeResult{}, err
	}
	var refusal string
	var tool Tool
	var call Call
	_, err := e.update(ctx, sagaID, noPending(sagaID, seq), func(tx Tx, s *Saga) error {
		refusal, call = "", Call{}
		r, err := tx.Approval(sagaID, seq)
		if IsKind(err, NotFound) {
			return noPending(sagaID, seq)
		}
		if err != nil {
			return err
		}
		var ok bool
		if tool, ok = e.tools[r.ToolName]; !ok {
			return &Error{Kind: NotFound, Msg: fmt.Sprintf("tool %q is not registered", r.ToolName)}
		}
		entries, err := tx.Entries(sagaID)
		if err != nil {
			return err
		}
		if v := VerifyHead(entries, s.HeadSeq, s.HeadHash); !v.Valid {
			return &Error{Kind: Conflict, Msg: fmt.Sprintf("journal of saga %s does not verify (%s): refusing to execute", sagaID, v.Message)}
		}
		refusal = refuse(entries, r, payload)
		if refusal != "" {
			detail := refusal
			if refusal == RefusedStale {
				detail += "\nattempted=" + payload
			}
			if _, err := e.append(tx, s, r.ToolName, PhaseRejected, gateRef(seq), detail); err != nil {
				return err
			}
			return e.fail(tx, s, fmt.Sprintf("resume of %s at seq=%d refused: %s", r.ToolName, seq, refusal))
		}
		if _, err := tx.DeleteApprovals(sagaID, seq); err != nil {
			return err
		}
		en, err := e.append(tx, s, r.ToolName, PhaseIntent, payload, "")
		if err != nil {
			return err
		}
		call = Call{SagaID: sagaID, Seq: en.Seq, ToolName: r.ToolName, Input: payload,
			State: CallRunning, StartedAt: en.Timestamp, UpdatedAt: en.Timestamp}
		if err := tx.PutCall(call); err != nil {
			return err
		}
		return e.settle(tx, s)
	})
	if err != nil {
		return ResumeResult{}, at(err, sagaID, seq)
	}
	if refusal != "" {
		s, err := e.compensate(context.WithoutCancel(ctx), sagaID)
		return ResumeResult{SagaID: sagaID, Seq: seq, Status: s.Status, Refused: true, Reason: refusal}, err
	}
	cr, err := e.execute(ctx, tool, call)
	if err != nil {
		return ResumeResult{}, err
	}
	return ResumeResult{SagaID: sagaID, Seq: seq, Status: cr.Status, Result: cr.Result, Reason: cr.Error, Call: cr}, nil
}

// refuse returns why payload may not run under request r, or "".
func refuse(entries []Entry, r ApprovalRequest, payload string) string {
	ref := gateRef(r.JournalSeq)
	approved := false
	for _, en := range entries {
		if en.Phase == PhaseApproved && en.ToolName == GateTool && en.Input == ref {
			approved = true
			break
		}
	}
	switch {
	case !approved:
		return RefusedNoApproval
	case r.InputHash == "":
		return RefusedNoHash
	case PayloadHash(payload) != r.InputHash:
		return RefusedStale
	}
	return ""
}
