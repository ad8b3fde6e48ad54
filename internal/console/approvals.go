package console

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/sagacity-go/sagacity/internal/auth"
	"github.com/sagacity-go/sagacity/internal/engine"
	"github.com/sagacity-go/sagacity/internal/payload"
	"github.com/sagacity-go/sagacity/web/templates"
)

// pageSize is how many rows a list page shows.
const pageSize = 50

// Approvals is the pending approvals page, the home of those who review:
// GET /?tool=&saga=&initiator=&state=, and one of after=, before= (a
// cursor) or last=1 for the newest page. Anyone else is sent to the sagas.
func (h *Handlers) Approvals(w http.ResponseWriter, r *http.Request) error {
	me := auth.From(r.Context())
	if h.Engine.Can(me, engine.ActReview, engine.Subject{}) != nil {
		http.Redirect(w, r, "/sagas", http.StatusSeeOther)
		return nil
	}
	rows, err := h.rows(r, me)
	if err != nil {
		return err
	}
	doubt, err := h.Engine.InDoubt(r.Context(), me, -1)
	if err != nil {
		return err
	}
	v := templates.ApprovalsPage{Chrome: h.chrome(r, "Pending approvals ("+strconv.Itoa(rows.Total)+")", "/"),
		Filter: rows.Filter, Rows: rows, InDoubt: len(doubt)}
	for _, t := range h.Engine.Tools() {
		if t.Reversibility == engine.Irreversible {
			v.Tools = append(v.Tools, t.Name)
		}
	}
	return render(w, r, http.StatusOK, templates.Approvals(v))
}

// ApprovalRows is the list's update loop: GET /approvals/rows with the
// page's filter, cursor and digest. 204 while nothing changed, so the
// reader keeps their scroll and focus; the rows otherwise.
func (h *Handlers) ApprovalRows(w http.ResponseWriter, r *http.Request) error {
	rows, err := h.rows(r, auth.From(r.Context()))
	if err != nil {
		return err
	}
	if rows.Digest == r.URL.Query().Get("digest") {
		return unchanged(w)
	}
	return render(w, r, http.StatusOK, templates.ApprovalRowsUpdate(rows))
}

// rows reads one page of the list the query asks for.
func (h *Handlers) rows(r *http.Request, me engine.Principal) (templates.Rows, error) {
	q := r.URL.Query()
	fv := templates.PendingFilter{Tool: q.Get("tool"), Saga: q.Get("saga"), Initiator: q.Get("initiator"), State: q.Get("state")}
	f := engine.PendingFilter{Tool: fv.Tool, SagaID: fv.Saga, Initiator: fv.Initiator, Limit: pageSize}
	switch fv.State {
	case "":
	case "approved", "undecided":
		approved := fv.State == "approved"
		f.Approved = &approved
	case "mine":
		// What waits for this person's vote, as the engine's rules say.
		f.ForMe = true
	default:
		return templates.Rows{}, engine.Errorf(engine.Invalid, "state must be approved, undecided or mine")
	}
	out := templates.Rows{Filter: fv, After: q.Get("after"), Before: q.Get("before"), Last: q.Get("last") != ""}
	for _, c := range []struct {
		s  string
		to **engine.PendingCursor
	}{{out.After, &f.After}, {out.Before, &f.Before}} {
		if c.s == "" {
			continue
		}
		cur, err := engine.ParsePendingCursor(c.s)
		if err != nil {
			return out, err
		}
		*c.to = &cur
	}
	f.Last = out.Last
	// One more than a page says whether another lies beyond it, the way
	// the page was read.
	f.Limit = pageSize + 1
	page, total, err := h.Engine.Pending(r.Context(), me, f)
	if err != nil {
		return out, err
	}
	beyond := len(page) > pageSize
	if beyond && f.Backward() {
		page = page[1:]
	} else if beyond {
		page = page[:pageSize]
	}
	out.Total = total
	parts := []any{total}
	for _, p := range page {
		row := templates.PendingRow{Href: templates.RequestHref(p.SagaID, p.JournalSeq),
			SagaID: p.SagaID, Seq: p.JournalSeq, Tool: p.ToolName, Initiator: p.Initiator, Requester: p.Requester, Reason: p.Reason,
			Requested: h.when(p.CreatedAt), Summary: summary(p.Input, 4), Voters: p.Voters, Quorum: p.Quorum, Approved: p.Approved(),
			Replanned: p.Replanned, Refused: p.Refused, SupersededBy: p.SupersededBy, Flags: len(payload.Inspect(p.Input))}
		out.Items = append(out.Items, row)
		parts = append(parts, p.SagaID, p.JournalSeq, strings.Join(p.Voters, ","), p.SupersededBy)
	}
	// The pager: earlier pages lie before one read forwards from a
	// cursor, or beyond one read backwards; later ones the other way.
	href := func(k, v string) string {
		u := url.Values{}
		for k, v := range map[string]string{"tool": fv.Tool, "saga": fv.Saga, "initiator": fv.Initiator, "state": fv.State, k: v} {
			if v != "" {
				u.Set(k, v)
			}
		}
		if len(u) == 0 {
			return "/"
		}
		return "/?" + u.Encode()
	}
	cursor := func(p engine.Pending) string {
		return engine.PendingCursor{CreatedAt: p.CreatedAt, SagaID: p.SagaID, JournalSeq: p.JournalSeq}.String()
	}
	if earlier := f.After != nil || (f.Backward() && beyond); earlier {
		out.Oldest = href("", "")
		if len(page) > 0 {
			out.Previous = href("before", cursor(page[0]))
		}
	}
	if later := f.Before != nil || (!f.Backward() && beyond); later {
		out.Newest = href("last", "1")
		if len(page) > 0 {
			out.Next = href("after", cursor(page[len(page)-1]))
		}
	}
	out.Digest = digest(parts...)
	return out, nil
}
