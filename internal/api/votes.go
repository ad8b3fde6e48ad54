package api

import (
	"net/http"

	"github.com/sagacity-go/sagacity/internal/auth"
	"github.com/sagacity-go/sagacity/internal/edge"
	"github.com/sagacity-go/sagacity/internal/engine"
	"github.com/sagacity-go/sagacity/wire"
)

// Withdraw takes back the caller's approval of a request until it is
// executed: POST /sagacity/withdraw/{sagaId}/{seq}.
func (h *Handlers) Withdraw(w http.ResponseWriter, r *http.Request) error {
	return h.decide(w, r, h.Engine.Withdraw, engine.ActWithdraw)
}

// RequestChanges sends a request back to its agent with what to change,
// the saga going on: POST /sagacity/request-changes/{sagaId}/{seq} with
// the reason the agent is told.
func (h *Handlers) RequestChanges(w http.ResponseWriter, r *http.Request) error {
	return h.decide(w, r, h.Engine.RequestChanges, engine.ActRequestChanges)
}

// BreakGlass has a pending request executed without its quorum, with
// the reason the body must give (the policy's breakGlass):
// POST /sagacity/approvals/{sagaId}/{seq}/break-glass.
func (h *Handlers) BreakGlass(w http.ResponseWriter, r *http.Request) error {
	return h.decide(w, r, h.Engine.BreakGlass, engine.ActBreakGlass)
}

// Ratify ratifies the break-glass execution of a request, under its
// rule: POST /sagacity/approvals/{sagaId}/{seq}/ratify.
func (h *Handlers) Ratify(w http.ResponseWriter, r *http.Request) error {
	return h.decide(w, r, h.Engine.Ratify, engine.ActRatify)
}

// Propose proposes an approval policy, which takes effect once approved
// under the policyChange rules of the one in force:
// POST /sagacity/policies with {"document": {...}}.
func (h *Handlers) Propose(w http.ResponseWriter, r *http.Request) error {
	var body wire.ProposalRequest
	if err := edge.Decode(r, &body); err != nil {
		return err
	}
	if len(body.Document) == 0 {
		return engine.Errorf(engine.Invalid, "body must contain a 'document' field: the policy's JSON")
	}
	a, err := engine.ParsePolicySpec(body.Document)
	if err != nil {
		return err
	}
	p, err := h.Engine.ProposePolicy(r.Context(), auth.From(r.Context()), a)
	if err != nil {
		return err
	}
	return edge.WriteJSON(w, http.StatusCreated, ProposalOf(p))
}

// Policies lists the approval policies that took effect, each with its
// whole document and hash, and names the one in force:
// GET /sagacity/policies.
func (h *Handlers) Policies(w http.ResponseWriter, r *http.Request) error {
	ph, err := h.Engine.Policies(r.Context(), auth.From(r.Context()))
	if err != nil {
		return err
	}
	return edge.WriteJSON(w, http.StatusOK, PoliciesOf(ph))
}

// Requests says what became of each request of a saga, as its agent
// reads it (what to change when a reviewer sent one back):
// GET /sagacity/sagas/{sagaId}/requests.
func (h *Handlers) Requests(w http.ResponseWriter, r *http.Request) error {
	sagaID, err := param(r, "sagaId")
	if err != nil {
		return err
	}
	s, reqs, err := h.Engine.Requests(r.Context(), auth.From(r.Context()), sagaID)
	if err != nil {
		return err
	}
	return edge.WriteJSON(w, http.StatusOK, SagaRequestsOf(s, reqs))
}
