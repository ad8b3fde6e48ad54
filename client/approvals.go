package client

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/sagacity-go/sagacity/wire"
)

// ApprovalList is the pending requests, oldest first.
type ApprovalList struct {
	Approvals []Approval
	// Total is how many are pending: more than len(Approvals) when the
	// server cut the list (at 5000).
	Total int
}

// Approvals lists the pending requests of a saga, or of every saga when
// sagaID is "": GET /sagacity/approvals[/{sagaID}]. An unknown saga has
// none. ErrForbidden without the approver or auditor role.
func (c *Client) Approvals(ctx context.Context, sagaID string) (ApprovalList, error) {
	path := "/sagacity/approvals"
	if sagaID != "" {
		path = sagaPath("approvals", sagaID)
	}
	a, err := c.send(ctx, http.MethodGet, path, nil, nil, nil)
	if err != nil {
		return ApprovalList{}, err
	}
	if !a.ok() {
		return ApprovalList{}, newError(a)
	}
	var l ApprovalList
	if err := a.decode(&l.Approvals); err != nil {
		return ApprovalList{}, err
	}
	if l.Total, err = strconv.Atoi(a.header.Get("X-Total-Count")); err != nil {
		return ApprovalList{}, fmt.Errorf("sagacity: GET %s: X-Total-Count: %w", path, err)
	}
	return l, nil
}

// Approve approves the request at seq, one vote, with a reason (which
// the request's rule may require), and executes nothing: Resume does,
// once the rule's quorum of distinct people approved it. POST
// /sagacity/approve/{sagaID}/{seq}. ErrNotFound when nothing is pending
// at seq; ErrConflict when its quorum is reached already, the caller
// approved it already, it expired (Code CodeExpired) or the journal does
// not verify; ErrForbidden without the approver role, outside the rule's
// approvers, for the saga's initiator or the request's maker
// (four-eyes), or from a sign-in older than the rule's step-up (Code
// CodeStepUp); ErrInvalid without a reason the rule requires.
func (c *Client) Approve(ctx context.Context, sagaID string, seq int64, reason string) (Decision, error) {
	path := fmt.Sprintf("%s/%d", sagaPath("approve", sagaID), seq)
	return do[Decision](ctx, c, http.MethodPost, path, nil, wire.DecisionRequest{Reason: reason})
}

// Reject rejects the request at seq, or an approved one not yet resumed,
// and compensates the saga: POST /sagacity/reject/{sagaID}/{seq}. Errors
// as Approve's.
func (c *Client) Reject(ctx context.Context, sagaID string, seq int64, reason string) (Decision, error) {
	path := fmt.Sprintf("%s/%d", sagaPath("reject", sagaID), seq)
	return do[Decision](ctx, c, http.MethodPost, path, nil, wire.DecisionRequest{Reason: reason})
}

// Dismiss drops the request at seq, which the saga superseded with a
// later request of the same tool, and the saga goes on:
// POST /sagacity/dismiss/{sagaID}/{seq}. ErrConflict when the request is
// not superseded (Reject ends the saga), other errors as Approve's.
func (c *Client) Dismiss(ctx context.Context, sagaID string, seq int64, reason string) (Decision, error) {
	path := fmt.Sprintf("%s/%d", sagaPath("dismiss", sagaID), seq)
	return do[Decision](ctx, c, http.MethodPost, path, nil, wire.DecisionRequest{Reason: reason})
}

// Withdraw takes back the caller's own approval of the request at seq,
// which stays pending one approval short: POST
// /sagacity/withdraw/{sagaID}/{seq}. ErrConflict when the caller has no
// standing approval of it; other errors as Approve's.
func (c *Client) Withdraw(ctx context.Context, sagaID string, seq int64, reason string) (Decision, error) {
	path := fmt.Sprintf("%s/%d", sagaPath("withdraw", sagaID), seq)
	return do[Decision](ctx, c, http.MethodPost, path, nil, wire.DecisionRequest{Reason: reason})
}

// RequestChanges sends the request at seq back to its agent, which is
// told reason as "[CHANGES_REQUESTED] Tool '<tool>': <reason>"; the saga
// goes on and nothing is compensated: POST
// /sagacity/request-changes/{sagaID}/{seq}. ErrInvalid without a reason;
// other errors as Approve's.
func (c *Client) RequestChanges(ctx context.Context, sagaID string, seq int64, reason string) (Decision, error) {
	path := fmt.Sprintf("%s/%d", sagaPath("request-changes", sagaID), seq)
	return do[Decision](ctx, c, http.MethodPost, path, nil, wire.DecisionRequest{Reason: reason})
}

// Policies lists the approval policies that took effect, oldest first,
// each with its document and the SHA-256 requests pin, and the one in
// force: GET /sagacity/policies. ErrForbidden for an agent.
func (c *Client) Policies(ctx context.Context) (Policies, error) {
	return do[Policies](ctx, c, http.MethodGet, "/sagacity/policies", nil, nil)
}

// Resume executes the approved request at seq with payload, which must be
// the exact bytes approved: POST /sagacity/resume/{sagaID}/{seq}. It runs
// the tool at most once, however many resumes race; a resume of a request
// executed already runs nothing and answers what its execution came to,
// so it is safe to send again. A resume before the request's quorum
// changes nothing: ErrConflict, Code CodeUndecided; with Wait set, it is
// held until the request is decided first.
//
// A refusal (other bytes, not approved, rejected: 409, ErrConflict) or a
// tool that failed (422) compensates the saga: Resume returns the result
// (its Outcome, the saga's Status and the Reason) with an *Error. Other
// errors:
// ErrNotFound when nothing is pending at seq (rejected or dropped),
// ErrConflict without a result when the journal does not verify (nothing
// is journaled), its time ran out (code EXPIRED), or its execution still
// runs (code IN_PROGRESS), ErrForbidden.
func (c *Client) Resume(ctx context.Context, sagaID string, seq int64, payload string) (ResumeResult, error) {
	path := fmt.Sprintf("%s/%d", sagaPath("resume", sagaID), seq)
	a, err := c.sendUntil(ctx, http.MethodPost, path, nil, nil, wire.ResumeRequest{Payload: &payload}, time.Now().Add(c.Wait))
	if err != nil {
		return ResumeResult{}, err
	}
	return read[ResumeResult](a, http.StatusConflict, http.StatusUnprocessableEntity)
}
