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
// GET /?tool=&saga=&initiator=&state=&after=. Anyone else is sent to the
// sagas.
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
	out := templates.Rows{Filter: fv, After: q.Get("after"), Paged: q.Get("after") != ""}
	if out.After != "" {
		c, err := engine.ParsePendingCursor(out.After)
		if err != nil {
			return out, err
		}
		f.After = &c
	}
	page, total, err := h.Engine.Pending(r.Context(), me, f)
	if err != nil {
		return out, err
	}
	out.Total = total
	parts := []any{total}
	for _, p := range page {
		fields, more := payload.Summary(p.Input, 4)
		row := templates.PendingRow{Href: templates.RequestHref(p.SagaID, p.JournalSeq), SagaHref: templates.SagaHref(p.SagaID),
			SagaID: p.SagaID, Seq: p.JournalSeq, Tool: p.ToolName, Initiator: p.Initiator, Requester: p.Requester,
			Requested: h.when(p.CreatedAt), Summary: fields, More: more, Voters: p.Voters, Quorum: p.Quorum, Approved: p.Approved(),
			Replanned: p.Replanned, Refused: p.Refused, SupersededBy: p.SupersededBy, Flags: len(payload.Inspect(p.Input))}
		out.Items = append(out.Items, row)
		parts = append(parts, p.SagaID, p.JournalSeq, strings.Join(p.Voters, ","), p.SupersededBy)
	}
	if len(page) == f.Limit {
		last := page[len(page)-1]
		next := url.Values{"after": {engine.PendingCursor{CreatedAt: last.CreatedAt, SagaID: last.SagaID, JournalSeq: last.JournalSeq}.String()}}
		for k, v := range map[string]string{"tool": fv.Tool, "saga": fv.Saga, "initiator": fv.Initiator, "state": fv.State} {
			if v != "" {
				next.Set(k, v)
			}
		}
		out.Next = "/?" + next.Encode()
	}
	out.Digest = digest(parts...)
	return out, nil
}
