package console

import (
	"fmt"
	"net/http"
	"net/url"

	"github.com/sagacity-go/sagacity/internal/auth"
	"github.com/sagacity-go/sagacity/internal/engine"
	"github.com/sagacity-go/sagacity/internal/payload"
	"github.com/sagacity-go/sagacity/web/templates"
	"github.com/sagacity-go/sagacity/wire"
)

// InDoubt lists calls whose outcome the journal does not know, with their
// evidence and, for those who may, the forms to record what happened, and
// counts the sagas whose compensation failed: GET /in-doubt.
func (h *Handlers) InDoubt(w http.ResponseWriter, r *http.Request) error {
	me := auth.From(r.Context())
	doubts, after, err := h.Engine.Doubts(r.Context(), me)
	if err != nil {
		return err
	}
	failed, err := h.Engine.CountSagas(r.Context(), me, engine.SagaFilter{Status: wire.CompensationFailed})
	if err != nil {
		return err
	}
	v := templates.InDoubtPage{Chrome: h.chrome(r, fmt.Sprintf("In doubt (%d)", len(doubts)), "/in-doubt"),
		After: after.String(), Failed: failed,
		FailedHref: "/sagas?" + url.Values{"status": {string(wire.CompensationFailed)}}.Encode()}
	for _, d := range doubts {
		c := d.Call
		ic := templates.InDoubtCall{SagaID: c.SagaID, SagaHref: templates.SagaHref(c.SagaID), Seq: c.Seq, Tool: c.ToolName,
			Input: payload.Reveal(c.Input), Key: d.Key, Undo: c.State == engine.CallCompensating, Requester: c.Requester,
			Started: h.when(c.StartedAt), Updated: h.when(c.UpdatedAt), EntryHref: templates.EntryHref(c.SagaID, c.Seq)}
		if err := h.Engine.Can(me, engine.ActResolve, engine.Subject{Saga: &d.Saga, Requester: c.Requester}); err != nil {
			ic.Why = "You cannot record what happened: " + message(err) + "."
		}
		for _, en := range d.Later {
			ic.Later = append(ic.Later, templates.LaterCall{Seq: en.Seq, Tool: en.ToolName, Gated: en.Phase == engine.PhaseAwaitingApproval,
				Same: en.ToolName == c.ToolName && en.Input == c.Input, Href: templates.EntryHref(c.SagaID, en.Seq)})
		}
		v.Calls = append(v.Calls, ic)
	}
	return render(w, r, http.StatusOK, templates.InDoubt(v))
}

// Resolve records what a person found out about a call in doubt, or that
// they undid by hand a step whose undo failed (from the saga's page):
// POST /in-doubt/resolve with saga, seq, happened (yes or no), result,
// reason and confirm=yes. The engine journals it under the person's
// identity.
func (h *Handlers) Resolve(w http.ResponseWriter, r *http.Request) error {
	f, saga, seq, err := postedRef(r)
	if err != nil {
		return err
	}
	happened := f.Get("happened")
	switch {
	case happened != "yes" && happened != "no":
		return engine.Errorf(engine.Invalid, "say whether it happened")
	case f.Get("confirm") != "yes":
		return engine.Errorf(engine.Invalid, "confirm that you checked with the tool's owner")
	}
	if _, err := h.Engine.Resolve(r.Context(), auth.From(r.Context()), saga, seq, happened == "yes", f.Get("result"), f.Get("reason")); err != nil {
		return err
	}
	http.Redirect(w, r, templates.EntryHref(saga, seq), http.StatusSeeOther)
	return nil
}
