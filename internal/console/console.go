// Package console is the HTML shell around the engine: server-rendered
// pages (web/templates) enhanced with htmx, one file per page. Like the JSON
// API, its handlers only decode, call the engine with the session's
// principal, shape what it returns for the templates and render; who may do
// what is the engine's to say (engine.Can). Handlers return errors for the
// server's error adapter.
package console

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/a-h/templ"
	"github.com/sagacity-go/sagacity/internal/auth"
	"github.com/sagacity-go/sagacity/internal/edge"
	"github.com/sagacity-go/sagacity/internal/engine"
	"github.com/sagacity-go/sagacity/internal/payload"
	"github.com/sagacity-go/sagacity/web/templates"
)

// Handlers serves the console.
type Handlers struct {
	Engine   *engine.Engine
	Sessions *auth.Sessions
	Mode     auth.Mode
	Now      func() time.Time
	// People are offered on dev mode's sign-in page, each signed in with
	// their roles in one click: the demo's (demo.People), or none.
	People []engine.Principal
}

// render writes a page or fragment.
func render(w http.ResponseWriter, r *http.Request, status int, c templ.Component) error {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	return c.Render(r.Context(), w)
}

// htmx reports whether the request comes from htmx and wants a fragment.
func htmx(r *http.Request) bool { return r.Header.Get("HX-Request") == "true" }

// parseForm parses a posted form; errors as edge.BodyError.
func parseForm(r *http.Request) error { return edge.BodyError(r.ParseForm()) }

// places are the console's pages in the header, each shown to those the
// engine lets take its action.
var places = []struct {
	href, label string
	action      engine.Action
}{
	{"/", "Pending approvals", engine.ActReview},
	{"/sagas", "Sagas", engine.ActRead},
	{"/audit", "Audit", engine.ActVerify},
	{"/in-doubt", "In doubt", engine.ActInDoubt},
	{"/policy", "Policy", engine.ActReview},
	{"/delegations", "Delegations", engine.ActReview},
	{"/notifications", "Notifications", engine.ActOutbox},
}

// chrome is the shared part of a page for the request's principal.
func (h *Handlers) chrome(r *http.Request, title, href string) templates.Chrome {
	c := templates.Chrome{Title: title}
	me := auth.From(r.Context())
	if me.ID == "" {
		return c
	}
	c.Me, c.Halted = &me, h.Engine.Halted()
	if h.Engine.Can(me, engine.ActReview, engine.Subject{}) == nil {
		uses, err := h.Engine.Unratified(r.Context(), me)
		if err != nil {
			c.GlassUnread = message(err)
		}
		now := h.Now()
		for _, u := range uses {
			c.Glass = append(c.Glass, templates.GlassRow{Href: templates.RequestHref(u.SagaID, u.JournalSeq), Tool: u.ToolName, Saga: u.SagaID,
				Seq: u.JournalSeq, By: u.By, Reason: u.Reason, RatifyBy: h.when(u.RatifyBy), Overdue: u.Overdue(now)})
		}
	}
	for _, p := range places {
		if p.action == engine.ActOutbox && len(h.Engine.Endpoints()) == 0 {
			continue // a server without notifications has none to show
		}
		if h.Engine.Can(me, p.action, engine.Subject{}) == nil {
			c.Nav = append(c.Nav, templates.NavItem{Href: p.href, Label: p.label, Current: p.href == href})
		}
	}
	return c
}

// ErrorPage renders a failed request as a page that keeps the signed-in
// header; the server's error adapter calls it.
func (h *Handlers) ErrorPage(w http.ResponseWriter, r *http.Request, status int, msg string) error {
	title := http.StatusText(status)
	return render(w, r, status, templates.Error(templates.ErrorPage{Chrome: h.chrome(r, title, ""), Status: status, Message: msg}))
}

// when shows t to people.
func (h *Handlers) when(t time.Time) templates.Time {
	t = t.UTC()
	return templates.Time{UTC: t.Format("2006-01-02 15:04:05 UTC"), ISO: t.Format(time.RFC3339), Ago: ago(h.Now().Sub(t))}
}

// ago says how long ago in one unit.
func ago(d time.Duration) string {
	switch {
	case d < 5*time.Second:
		return "just now"
	case d < time.Minute:
		return fmt.Sprintf("%ds ago", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm ago", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh ago", int(d.Hours()))
	}
	return fmt.Sprintf("%dd ago", int(d.Hours()/24))
}

// prepare readies an exact payload for display.
func prepare(s string) templates.Payload {
	hash := engine.PayloadHash(s)
	p := templates.Payload{Bytes: payload.Reveal(s), Size: len(s), SHA256: hash, Fingerprint: engine.Fingerprint(hash), Findings: payload.Inspect(s)}
	if pretty, ok := payload.Pretty(s); ok {
		p.Pretty = payload.Reveal(pretty)
	}
	return p
}

// summary is a payload's one-line summary of at most n fields, revealed
// for display.
func summary(s string, n int) templates.Summary {
	fields, more := payload.Summary(s, n)
	out := templates.Summary{More: more}
	for _, f := range fields {
		out.Fields = append(out.Fields, templates.SummaryField{Key: payload.Reveal(f.Key), Value: payload.Reveal(f.Value),
			KeyCut: f.KeyCut, Cut: f.Cut})
	}
	return out
}

// diff compares payload old, which oldLabel names and oldHref shows, with
// new, revealed for display under title.
func diff(title, oldLabel, oldHref, old, new string) templates.Diff {
	d := payload.Compare(old, new)
	out := templates.Diff{Title: title, OldLabel: oldLabel, OldHref: oldHref, Identical: d.Identical, FormattingOnly: d.FormattingOnly}
	for _, c := range d.Changes {
		ch := templates.Change{Path: c.Path, Kind: c.Kind, Old: payload.Reveal(c.Old), New: payload.Reveal(c.New)}
		for _, e := range c.Edits {
			ch.Edits = append(ch.Edits, templates.Edit{Op: e.Op, Text: payload.Reveal(e.Text)})
		}
		out.Changes = append(out.Changes, ch)
	}
	return out
}

// digest identifies what a page shows, for its update loop.
func digest(parts ...any) string {
	h := sha256.New()
	for _, p := range parts {
		fmt.Fprintf(h, "%v\x00", p)
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// seqParam reads a positive seq; Invalid otherwise.
func seqParam(s string) (int64, error) {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 {
		return 0, engine.Errorf(engine.Invalid, "seq must be a positive integer")
	}
	return n, nil
}

// unchanged answers an update loop that already shows the latest state:
// 204, which htmx does not swap.
func unchanged(w http.ResponseWriter) error {
	w.WriteHeader(http.StatusNoContent)
	return nil
}
