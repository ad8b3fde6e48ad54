package api

import (
	"net/http"
	"time"

	"github.com/sagacity-go/sagacity/internal/engine"
	"github.com/sagacity-go/sagacity/wire"
)

// The engine's values as the wire says them, and what status each
// outcome answers; edge.Classify says what each refusal answers.

// CallOf is a call's result on the wire, and the status it answers.
func CallOf(r engine.CallResult) (wire.CallResult, int) {
	out := wire.CallResult{SagaID: r.SagaID, JournalSeq: r.Seq, ToolName: r.ToolName, Outcome: wire.Outcome(r.Outcome),
		Status: wire.Status(r.Status)}
	switch r.Outcome {
	case engine.OutcomeExecuted:
		out.Result = &r.Result
		return out, http.StatusOK
	case engine.OutcomeAwaitingApproval:
		out.Message, out.InputHash = r.Message, r.InputHash
		return out, http.StatusAccepted
	case engine.OutcomeInDoubt:
		out.Problem = wire.Problem{Error: r.Error, Code: wire.CodeInDoubt}
		return out, http.StatusAccepted
	case engine.OutcomeRefused:
		out.InputHash = r.InputHash
		out.Problem = wire.Problem{Error: r.Error, Kind: wire.KindConflict, Code: wire.CodeRefused}
		return out, http.StatusConflict
	}
	out.Problem = wire.Problem{Error: r.Error, Kind: wire.KindUnprocessable, Code: wire.CodeToolFailed}
	return out, http.StatusUnprocessableEntity
}

// ResumeOf is a resume's result on the wire, and the status it answers.
func ResumeOf(r engine.ResumeResult) (wire.ResumeResult, int) {
	out := wire.ResumeResult{SagaID: r.SagaID, JournalSeq: r.Seq, Status: wire.Status(r.Status), Reason: r.Reason}
	switch {
	case r.Refused:
		out.Outcome, out.Problem = wire.Refused, wire.Problem{Error: r.Reason, Kind: wire.KindConflict, Code: wire.CodeRefused}
		return out, http.StatusConflict
	case r.Call.Outcome == engine.OutcomeInDoubt:
		out.Outcome, out.Problem = wire.InDoubt, wire.Problem{Error: r.Reason, Code: wire.CodeInDoubt}
		return out, http.StatusAccepted
	case r.Call.Outcome != engine.OutcomeExecuted:
		out.Outcome, out.Problem = wire.Failed, wire.Problem{Error: r.Reason, Kind: wire.KindUnprocessable, Code: wire.CodeToolFailed}
		return out, http.StatusUnprocessableEntity
	}
	out.Outcome, out.Result, out.Reason = wire.Executed, &r.Result, ""
	return out, http.StatusOK
}

// SagaOf is a saga on the wire.
func SagaOf(s engine.Saga) wire.Saga {
	return wire.Saga{SagaID: s.ID, Status: wire.Status(s.Status), Initiator: s.Initiator, Ended: s.Ended, Reason: s.Reason,
		HeadSeq: s.HeadSeq, HeadHash: s.HeadHash, CreatedAt: s.CreatedAt, UpdatedAt: s.UpdatedAt}
}

// DecisionOf is a decision on the wire.
func DecisionOf(d engine.Decision) wire.Decision {
	return wire.Decision{SagaID: d.SagaID, JournalSeq: d.JournalSeq, Decision: string(d.Decided), Approved: d.Approved,
		Votes: d.Votes, Quorum: d.Quorum, Progress: d.Progress, ApproverIdentity: d.Approver, DecidedAt: d.DecidedAt, Status: wire.Status(d.Status),
		OnBehalfOf: d.OnBehalfOf}
}

// DelegationOf is a delegation on the wire.
func DelegationOf(d engine.Delegation) wire.Delegation {
	roles := make([]string, 0, len(d.Roles))
	for _, r := range d.Roles {
		roles = append(roles, string(r))
	}
	return wire.Delegation{Seq: d.Seq, From: d.From, To: d.To, Rules: d.Rules, Roles: roles, Groups: append([]string{}, d.Groups...),
		Start: d.Start.UTC(), Until: d.Until.UTC(), Reason: d.Reason, Made: d.Made.UTC(), Revoked: utc(d.Revoked), RevokedBy: d.RevokedBy}
}

// ApprovalOf is a pending request on the wire.
func ApprovalOf(q engine.ApprovalRequest) wire.Approval {
	r := rulingOf(q.Rule, q.Policy, q.Quorum, q.Voters, q.Due, len(q.Voters) >= max(q.Quorum, 1))
	if q.Wait != nil {
		// Under a wait timer the row's due may be the wait's end: the
		// journal's tally says both clocks.
		r.RunsFrom, r.ExecuteBy = utc(q.Wait.RunsFrom), utc(q.Wait.GrantUntil)
	}
	return wire.Approval{SagaID: q.SagaID, JournalSeq: q.JournalSeq, ToolName: q.ToolName, Input: q.Input, InputHash: q.InputHash,
		Requester: q.Requester, Reason: q.Reason, Ruling: r}
}

// utc is t in UTC, nil when it is zero.
func utc(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	t = t.UTC()
	return &t
}

// rulingOf says where a request stands under its rule: due is when its
// clock runs out, for its quorum or, once approved, for its execution.
func rulingOf(rule, policy string, quorum int, voters []string, due time.Time, approved bool) wire.Ruling {
	r := wire.Ruling{Rule: rule, Policy: policy, Quorum: max(quorum, 1), ApprovedBy: voters}
	if r.ApprovedBy == nil {
		r.ApprovedBy = []string{}
	}
	if !due.IsZero() {
		due = due.UTC()
		if approved {
			r.ExecuteBy = &due
		} else {
			r.ExpiresAt = &due
		}
	}
	return r
}

// RequestOf is what became of a request, as an agent reads it: its
// state, who decided it, its result, what to change when a reviewer
// sent it back, and its ruling while it is open.
func RequestOf(rv engine.Review) wire.RequestState {
	g := rv.Gated
	rs := wire.RequestState{JournalSeq: g.Seq, ToolName: g.ToolName, InputHash: engine.PayloadHash(g.Input), State: string(rv.State)}
	for _, b := range rv.Votes {
		if b.Withdrawal == nil {
			rs.DecidedBy = append(rs.DecidedBy, "approved by "+b.Approver)
		}
	}
	for _, d := range []*engine.Decision{rv.Rejection, rv.Dismissal, rv.Changes} {
		if d != nil {
			rs.DecidedBy = append(rs.DecidedBy, string(d.Decided)+" by "+d.Approver)
		}
	}
	if rv.Changes != nil {
		rs.Message = engine.ChangesMessage(g.ToolName, rv.Changes.Reason)
	}
	if rv.Outcome != nil {
		rs.Result = rv.Outcome.Payload
	}
	if r := rv.Rule; r != nil {
		t := rv.Tally
		rs.Ruling = rulingOf(r.Name, g.Field(engine.KeyPolicy), r.Quorum, t.Voters(), time.Time{}, t.Met())
		if rv.Pending {
			rs.Progress = t.Progress()
			if !t.Deadline.IsZero() && !t.Met() {
				d := t.Deadline.UTC()
				rs.ExpiresAt = &d
			}
			if !t.GrantUntil.IsZero() && t.Met() {
				d := t.GrantUntil.UTC()
				rs.ExecuteBy = &d
			}
			rs.RunsFrom = utc(t.RunsFrom)
		}
	}
	return rs
}

// SagaRequestsOf is a saga with what became of its requests.
func SagaRequestsOf(s engine.Saga, reqs []engine.Review) wire.SagaRequests {
	out := wire.SagaRequests{SagaID: s.ID, Status: wire.Status(s.Status), Ended: s.Ended, Reason: s.Reason, Requests: []wire.RequestState{}}
	for _, rv := range reqs {
		out.Requests = append(out.Requests, RequestOf(rv))
	}
	return out
}

// PoliciesOf are the policy documents that took effect, on the wire.
func PoliciesOf(ph engine.PolicyHistory) wire.Policies {
	out := wire.Policies{InForce: ph.InForce, Documents: []wire.PolicyDocument{}, Proposals: []wire.PolicyProposal{}}
	for _, d := range ph.Documents {
		out.Documents = append(out.Documents, wire.PolicyDocument{SHA256: d.Hash, Since: d.Since.UTC(), Seq: d.Seq, Text: d.Text})
	}
	for _, p := range ph.Proposals {
		out.Proposals = append(out.Proposals, ProposalOf(p))
	}
	return out
}

// ProposalOf is a proposed policy on the wire.
func ProposalOf(p engine.Proposal) wire.PolicyProposal {
	return wire.PolicyProposal{SHA256: p.Hash, Since: p.Since.UTC(), Request: p.Request, Text: p.Text}
}

// CallInDoubtOf is a call in doubt on the wire.
func CallInDoubtOf(c engine.Call) wire.CallInDoubt {
	return wire.CallInDoubt{SagaID: c.SagaID, JournalSeq: c.Seq, ToolName: c.ToolName, Input: c.Input, Requester: c.Requester,
		State: string(c.State), StartedAt: c.StartedAt, UpdatedAt: c.UpdatedAt, IdempotencyKey: c.Key()}
}
