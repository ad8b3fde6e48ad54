package console

import (
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/sagacity-go/sagacity/internal/auth"
	"github.com/sagacity-go/sagacity/internal/engine"
	"github.com/sagacity-go/sagacity/web/templates"
)

// decision is what a person may decide on the request page: the form's
// word for it, how a confirmation asks for it, the engine's action it
// takes (Engine.Decide takes it; whether it is a vote, held to the rule's
// step-up and passkey, is the action's to say), and whether the engine's
// Actions offer it.
type decision struct {
	name, verb string
	action     engine.Action
	offered    func(templates.Actions) bool
}

// decisions are the request page's decisions, one row each, by name.
var decisions = []decision{
	{"approve", "Approve", engine.ActApprove, func(a templates.Actions) bool { return a.Approve }},
	{"dismiss", "Dismiss", engine.ActDismiss, func(a templates.Actions) bool { return a.Dismiss }},
	{"execute", "Execute", engine.ActResume, func(a templates.Actions) bool { return a.Execute }},
	{"reject", "Reject", engine.ActReject, func(a templates.Actions) bool { return a.Reject }},
	{"request-changes", "Send back", engine.ActRequestChanges, func(a templates.Actions) bool { return a.RequestChanges }},
	{"withdraw", "Withdraw your approval of", engine.ActWithdraw, func(a templates.Actions) bool { return a.Withdraw }},
	{"break-glass", "Break the glass: execute, without its quorum,", engine.ActBreakGlass, func(a templates.Actions) bool { return a.BreakGlass }},
	{"ratify", "Ratify the break-glass execution of", engine.ActRatify, func(a templates.Actions) bool { return a.Ratify }},
}

// Decide approves, rejects, dismisses, withdraws an approval or sends a
// request back: POST /request/decide with saga, seq, hash (of the bytes
// the form showed), decision, reason and, in the second step,
// confirm=yes. The first step asks for confirmation, repeating the tool
// and the payload's key fields. A form that is out of date (the request
// was decided or changed since) is answered with the request's current
// state, never by deciding it again.
func (h *Handlers) Decide(w http.ResponseWriter, r *http.Request) error {
	return h.act(w, r, func(d decision) bool { return d.action != engine.ActResume })
}

// Execute resumes an approved request with the bytes the journal holds:
// POST /request/execute with saga, seq, hash and, in the second step,
// confirm=yes. It is the engine's own Resume, so every check applies.
func (h *Handlers) Execute(w http.ResponseWriter, r *http.Request) error {
	return h.act(w, r, func(d decision) bool { return d.action == engine.ActResume })
}

// act takes a decision posted from the request page, one of those the
// route serves: it checks the form against the request's current state,
// asks for confirmation first, then has the engine take it, and answers
// with the request as the engine returns it (the actions box and, out of
// band, its status for htmx; the page otherwise).
func (h *Handlers) act(w http.ResponseWriter, r *http.Request, serves func(decision) bool) error {
	f, saga, seq, err := postedRef(r)
	if err != nil {
		return err
	}
	reason := f.Get("reason")
	i := slices.IndexFunc(decisions, func(d decision) bool { return d.name == f.Get("decision") })
	if i < 0 || !serves(decisions[i]) {
		var names []string
		for _, d := range decisions {
			if serves(d) {
				names = append(names, d.name)
			}
		}
		return engine.Errorf(engine.Invalid, "decision must be %s here", strings.Join(names, " or "))
	}
	d := decisions[i]
	v, err := h.requestPage(r, saga, seq)
	if err != nil {
		return err
	}
	me := auth.From(r.Context())
	if !d.offered(v.Actions) {
		if err := h.Engine.Can(me, d.action, engine.Subject{Saga: &v.Saga, Requester: v.Requester}); err != nil {
			return err // never offered: the engine's word, not a stale form
		}
	}
	switch {
	case f.Get("hash") != v.Ref.Hash:
		return h.answer(w, r, http.StatusConflict, v, "Your form showed other bytes than this request holds; nothing was decided. Read it again.")
	case !d.offered(v.Actions):
		return h.answer(w, r, http.StatusConflict, v, "Your form was out of date; nothing was done. This is the request as it is now.")
	case d.action.Vote() && v.Actions.StepUp > 0:
		// The rule counts this vote only from a sign-in more recent than
		// this one: sign in again first, and come back with the reason.
		return h.stepUp(w, r, v, reason)
	case f.Get("confirm") != "yes":
		v.Confirm = &templates.Confirm{Tool: v.Tool, Decision: d.name, Verb: d.verb, Summary: summary(v.Input, 6), Reason: reason}
		switch d.action {
		case engine.ActReject:
			v.Confirm.Undo, v.Confirm.StaysDone, v.Confirm.Dropped = v.WouldUndo, v.StaysDone, v.Siblings
		case engine.ActDismiss:
			v.Confirm.Keeps = v.SupersededBy
		}
		if d.action.Vote() && v.Actions.Passkey {
			// Confirming is the passkey's to do: it signs this ballot.
			if v.Confirm.Ballot, err = h.ballot(r, v, d.action, reason); err != nil {
				v.Confirm = nil
				return h.refused(w, r, v, reason, err)
			}
		}
		return h.answer(w, r, http.StatusOK, v, "")
	}
	rv, err := h.Engine.Decide(r.Context(), me, d.action, saga, seq, reason)
	if err != nil {
		return h.refused(w, r, v, reason, err)
	}
	if !htmx(r) {
		// The fragment moves the focus to the status heading, as the
		// htmx answer does: a browser focuses the part a URL names.
		http.Redirect(w, r, templates.RequestHref(saga, seq)+"#status-h", http.StatusSeeOther)
		return nil
	}
	now, err := h.reviewPage(r, rv)
	if err != nil {
		return err
	}
	now.Status.Changed, now.Status.Focus = false, true
	return render(w, r, http.StatusOK, templates.RequestUpdate(now))
}

// refused answers a decision the engine refused: a sign-in to renew, a
// request that moved on, or what to fix in the form; other errors go to
// the server's error adapter.
func (h *Handlers) refused(w http.ResponseWriter, r *http.Request, v templates.RequestPage, reason string, err error) error {
	if needsStepUp(err) && v.Actions.StepUp > 0 {
		return h.stepUp(w, r, v, reason)
	}
	if engine.IsKind(err, engine.Conflict) || engine.IsKind(err, engine.NotFound) {
		if now, rerr := h.requestPage(r, v.Ref.Saga, v.Ref.Seq); rerr == nil {
			return h.answer(w, r, http.StatusConflict, now, "Nothing was done: "+message(err)+". This is the request as it is now.")
		}
	}
	if !engine.IsKind(err, engine.Invalid) {
		return err
	}
	v.Actions.Reason = reason
	return h.answer(w, r, http.StatusBadRequest, v, message(err))
}

// stepUp sends the person to sign in again, as recently as the request's
// rule asks, and back to the request with the reason they typed.
func (h *Handlers) stepUp(w http.ResponseWriter, r *http.Request, v templates.RequestPage, reason string) error {
	back := templates.RequestHref(v.Ref.Saga, v.Ref.Seq)
	if reason != "" {
		back += "&" + url.Values{"reason": {reason}}.Encode()
	}
	to := signInAgain(back, v.Actions.StepUp)
	if htmx(r) {
		w.Header().Set("HX-Redirect", to)
		w.WriteHeader(http.StatusOK)
		return nil
	}
	http.Redirect(w, r, to, http.StatusSeeOther)
	return nil
}

// answer shows the request with a notice: the actions box (and its status
// out of band) to htmx, the whole page otherwise.
func (h *Handlers) answer(w http.ResponseWriter, r *http.Request, code int, v templates.RequestPage, notice string) error {
	v.Actions.Notice = notice
	if htmx(r) {
		return render(w, r, code, templates.RequestUpdate(v))
	}
	return render(w, r, code, templates.Request(v))
}
