package api

import (
	"net/http"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/sagacity-go/sagacity/internal/auth"
	"github.com/sagacity-go/sagacity/internal/edge"
	"github.com/sagacity-go/sagacity/internal/engine"
	"github.com/sagacity-go/sagacity/wire"
)

// Delegations lists every delegation, newest first: GET /sagacity/delegations.
func (h *Handlers) Delegations(w http.ResponseWriter, r *http.Request) error {
	ds, err := h.Engine.Delegations(r.Context(), auth.From(r.Context()))
	if err != nil {
		return err
	}
	out := make([]wire.Delegation, 0, len(ds))
	for _, d := range ds {
		out = append(out, DelegationOf(d))
	}
	return edge.WriteJSON(w, http.StatusOK, out)
}

// Delegate hands the caller's eligibility under named rules to another
// for a window: POST /sagacity/delegations.
func (h *Handlers) Delegate(w http.ResponseWriter, r *http.Request) error {
	var body wire.DelegationRequest
	if err := edge.Decode(r, &body); err != nil {
		return err
	}
	var from time.Time
	if body.From != nil {
		from = *body.From
	}
	d, err := h.Engine.Delegate(r.Context(), auth.From(r.Context()), body.To, body.Rules, from, body.Until, body.Reason)
	if err != nil {
		return err
	}
	return edge.WriteJSON(w, http.StatusCreated, DelegationOf(d))
}

// Revoke ends a delegation the caller made or holds:
// POST /sagacity/delegations/{seq}/revoke.
func (h *Handlers) Revoke(w http.ResponseWriter, r *http.Request) error {
	seq, err := strconv.ParseInt(chi.URLParam(r, "seq"), 10, 64)
	if err != nil || seq <= 0 {
		return engine.Errorf(engine.Invalid, "seq must be a positive integer")
	}
	d, err := h.Engine.Revoke(r.Context(), auth.From(r.Context()), seq)
	if err != nil {
		return err
	}
	return edge.WriteJSON(w, http.StatusOK, DelegationOf(d))
}
