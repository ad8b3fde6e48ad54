// Package console is the HTML shell around the engine: server-rendered
// pages (web/templates) enhanced with htmx. Like the JSON API, its handlers
// only decode, call the engine with the session's principal and render;
// they return errors for the server's error adapter.
package console

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/a-h/templ"
	"github.com/sagacity-go/sagacity/internal/api"
	"github.com/sagacity-go/sagacity/internal/auth"
	"github.com/sagacity-go/sagacity/internal/engine"
	"github.com/sagacity-go/sagacity/web/templates"
)

// Handlers serves the console.
type Handlers struct {
	Engine   *engine.Engine
	Sessions *auth.Sessions
	Mode     string // "oidc", "tokens" or "dev"
}

// render writes a page or fragment.
func render(w http.ResponseWriter, r *http.Request, status int, c templ.Component) error {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	return c.Render(r.Context(), w)
}

// htmx reports whether the request comes from htmx and wants a fragment.
func htmx(r *http.Request) bool { return r.Header.Get("HX-Request") == "true" }

// inDoubtAfter is how long a call may run before the console calls it in
// doubt; tools time out well before.
const inDoubtAfter = 10 * time.Minute

// Approvals is the pending approvals page: GET /.
func (h *Handlers) Approvals(w http.ResponseWriter, r *http.Request) error {
	me := auth.From(r.Context())
	reqs, err := h.Engine.Approvals(r.Context(), me, "")
	if err != nil {
		return err
	}
	doubt, err := h.Engine.InDoubt(r.Context(), me, inDoubtAfter)
	if err != nil {
		return err
	}
	f, err := h.decided(r, me)
	if err != nil {
		return err
	}
	return render(w, r, http.StatusOK, templates.Approvals(templates.ApprovalsPage{Me: me, Requests: reqs, InDoubt: doubt, Flash: f}))
}

// decided is the notice shown after a decision made without JavaScript:
// the redirect names the request (?decided=<saga>&seq=<n>) and the notice
// says what the journal records for it, so a crafted link cannot show a
// decision that was never made.
func (h *Handlers) decided(r *http.Request, me engine.Principal) (templates.Flash, error) {
	q := r.URL.Query()
	if q.Get("decided") == "" {
		return templates.Flash{}, nil
	}
	seq, err := strconv.ParseInt(q.Get("seq"), 10, 64)
	if err != nil || seq <= 0 {
		return templates.Flash{}, nil
	}
	d, err := h.Engine.Decision(r.Context(), me, q.Get("decided"), seq)
	switch {
	case engine.IsKind(err, engine.NotFound), engine.IsKind(err, engine.Invalid):
		return templates.Flash{}, nil
	case err != nil:
		return templates.Flash{}, err
	}
	return templates.Flash{Kind: "ok", Text: decisionText(d)}, nil
}

// decisionText says what was decided, as the journal records it.
func decisionText(d engine.Decision) string {
	if d.Approved {
		return fmt.Sprintf("Approved %s seq %d as %s. It runs when resumed with exactly these bytes.", d.SagaID, d.JournalSeq, d.Approver)
	}
	return fmt.Sprintf("Rejected %s seq %d as %s; the saga is %s.", d.SagaID, d.JournalSeq, d.Approver, d.Status)
}

// Decide approves or rejects a pending request: POST /approvals/decide
// with saga, seq, decision (approve or reject) and an optional reason. The
// engine decides who may; the principal is the session's, never a form value.
func (h *Handlers) Decide(w http.ResponseWriter, r *http.Request) error {
	if err := r.ParseForm(); err != nil {
		return api.BodyError(err)
	}
	saga := r.PostForm.Get("saga")
	seq, err := strconv.ParseInt(r.PostForm.Get("seq"), 10, 64)
	if err != nil || seq <= 0 {
		return engine.Errorf(engine.Invalid, "seq must be a positive integer")
	}
	me := auth.From(r.Context())
	var d engine.Decision
	switch r.PostForm.Get("decision") {
	case "approve":
		d, err = h.Engine.Approve(r.Context(), me, saga, seq, r.PostForm.Get("reason"))
	case "reject":
		d, err = h.Engine.Reject(r.Context(), me, saga, seq, r.PostForm.Get("reason"))
	default:
		return engine.Errorf(engine.Invalid, "decision must be approve or reject")
	}
	if err != nil {
		return err
	}
	if !htmx(r) {
		http.Redirect(w, r, fmt.Sprintf("/?decided=%s&seq=%d", url.QueryEscape(saga), seq), http.StatusSeeOther)
		return nil
	}
	return render(w, r, http.StatusOK, templates.DecidedCard(templates.Decided{Decision: d, Flash: templates.Flash{Kind: "ok", Text: decisionText(d)}}))
}

// Login is the sign-in page of dev and tokens modes: GET /login.
func (h *Handlers) Login(w http.ResponseWriter, r *http.Request) error {
	returnTo, err := auth.ReturnTo(r.URL.Query().Get("return_to"))
	if err != nil {
		return err
	}
	return render(w, r, http.StatusOK, templates.Login(templates.LoginPage{Mode: h.Mode, ReturnTo: returnTo}))
}

// DevSignIn signs in whoever is named: POST /login in dev mode only. The
// decisions they make are journaled with auth=dev.
func (h *Handlers) DevSignIn(w http.ResponseWriter, r *http.Request) error {
	if err := r.ParseForm(); err != nil {
		return api.BodyError(err)
	}
	returnTo, err := auth.ReturnTo(r.PostForm.Get("return_to"))
	if err != nil {
		return err
	}
	p, err := auth.Anonymous.Claiming(r.PostForm.Get("name"))
	if err != nil {
		return err
	}
	p.Name, p.Anonymous = p.ID, false
	if p.ID == engine.Unknown {
		return engine.Errorf(engine.Invalid, "type a name to sign in")
	}
	if err := h.Sessions.SignIn(w, r, p); err != nil {
		return err
	}
	http.Redirect(w, r, returnTo, http.StatusSeeOther)
	return nil
}

// Logout ends the session: POST /logout.
func (h *Handlers) Logout(w http.ResponseWriter, r *http.Request) error {
	if err := h.Sessions.SignOut(w, r); err != nil {
		return err
	}
	http.Redirect(w, r, "/login", http.StatusSeeOther)
	return nil
}
