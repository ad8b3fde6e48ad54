package console

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"github.com/sagacity-go/sagacity/internal/auth"
	"github.com/sagacity-go/sagacity/internal/engine"
	"github.com/sagacity-go/sagacity/internal/payload"
	"github.com/sagacity-go/sagacity/web/templates"
)

// Sagas lists sagas, newest first: GET /sagas?status=&id=&tool=&initiator=&doubt=1&cursor=.
func (h *Handlers) Sagas(w http.ResponseWriter, r *http.Request) error {
	me := auth.From(r.Context())
	q := r.URL.Query()
	fv := templates.SagaFilter{Status: q.Get("status"), ID: q.Get("id"), Tool: q.Get("tool"), Initiator: q.Get("initiator"),
		InDoubt: q.Get("doubt") == "1"}
	f := engine.SagaFilter{Status: engine.Status(fv.Status), IDPrefix: fv.ID, Tool: fv.Tool, Initiator: fv.Initiator, Limit: pageSize}
	if fv.InDoubt {
		f.InDoubtBefore = h.Now().Add(-h.Engine.InDoubtAfter())
	}
	items, next, err := h.sagaPage(r, me, f, "/sagas", url.Values{"status": {fv.Status}, "id": {fv.ID}, "tool": {fv.Tool},
		"initiator": {fv.Initiator}, "doubt": {map[bool]string{true: "1"}[fv.InDoubt]}}, false)
	if err != nil {
		return err
	}
	total, err := h.Engine.CountSagas(r.Context(), me, f)
	if err != nil {
		return err
	}
	return render(w, r, http.StatusOK, templates.Sagas(templates.SagasPage{Chrome: h.chrome(r, fmt.Sprintf("Sagas (%d)", total), "/sagas"),
		Filter: fv, Statuses: engine.Statuses, Items: items, Total: total, Next: next, Paged: q.Get("cursor") != ""}))
}

// sagaPage reads the page of sagas f selects after the query's cursor, and
// the next page's URL (base with keep and the new cursor). With chains,
// each saga comes with what its newest verification found, and when.
func (h *Handlers) sagaPage(r *http.Request, me engine.Principal, f engine.SagaFilter, base string, keep url.Values, chains bool) ([]templates.SagaRow, string, error) {
	if c := r.URL.Query().Get("cursor"); c != "" {
		after, err := engine.ParseSagaCursor(c)
		if err != nil {
			return nil, "", err
		}
		f.After = &after
	}
	sagas, err := h.Engine.Sagas(r.Context(), me, f)
	if err != nil {
		return nil, "", err
	}
	var kept map[string]engine.Verified
	if chains {
		ids := make([]string, len(sagas))
		for i, s := range sagas {
			ids[i] = s.ID
		}
		if kept, err = h.Engine.Verifications(r.Context(), me, ids); err != nil {
			return nil, "", err
		}
	}
	items := make([]templates.SagaRow, 0, len(sagas))
	for _, s := range sagas {
		row := templates.SagaRow{ID: s.ID, Href: templates.SagaHref(s.ID), Status: s.Status, Initiator: s.Initiator,
			Reason: s.Reason, Entries: s.HeadSeq, Created: h.when(s.CreatedAt), Updated: h.when(s.UpdatedAt),
			AuditHref: auditHref(s.ID), ExportHref: templates.ExportHref(s.ID)}
		if v, ok := kept[s.ID]; ok {
			at := h.when(v.At)
			row.Chain, row.Checked, row.Since = &v.Verification, &at, max(s.HeadSeq-v.HeadSeq, 0)
		}
		items = append(items, row)
	}
	next := ""
	if len(sagas) == f.Limit {
		last := sagas[len(sagas)-1]
		v := url.Values{}
		for k, vs := range keep {
			if len(vs) > 0 && vs[0] != "" {
				v.Set(k, vs[0])
			}
		}
		v.Set("cursor", engine.SagaCursor{CreatedAt: last.CreatedAt, ID: last.ID}.String())
		next = base + "?" + v.Encode()
	}
	return items, next, nil
}

func auditHref(id string) string { return "/audit/saga?" + url.Values{"id": {id}}.Encode() }

// timelinePage is how many entries a timeline page shows.
const timelinePage = 100

// Timeline is a saga's journal: GET /saga?id=&from=&at=. It shows a page
// of entries from seq from (or the page holding at, marked), each with
// its hash and the hash it chains on; where verification stops is marked.
func (h *Handlers) Timeline(w http.ResponseWriter, r *http.Request) error {
	me := auth.From(r.Context())
	q := r.URL.Query()
	hist, err := h.Engine.History(r.Context(), me, q.Get("id"))
	if err != nil {
		return err
	}
	es := hist.Entries
	from, at := int64(1), int64(0)
	if s := q.Get("at"); s != "" {
		if at, err = seqParam(s); err != nil {
			return err
		}
		from = max(1, at-timelinePage/2)
	}
	if s := q.Get("from"); s != "" {
		if from, err = seqParam(s); err != nil {
			return err
		}
	}
	saga := engine.Saga{ID: q.Get("id")}
	if hist.Saga != nil {
		saga = *hist.Saga
	}
	v := templates.TimelinePage{Chrome: h.chrome(r, "Saga "+saga.ID, "/sagas"), Saga: saga, Verification: hist.Verification,
		Total: len(es), ExportHref: templates.ExportHref(saga.ID), AuditHref: auditHref(saga.ID)}
	for _, p := range hist.Requests {
		v.Pending = append(v.Pending, templates.Sibling{Seq: p.JournalSeq, Tool: p.ToolName, Href: templates.RequestHref(saga.ID, p.JournalSeq)})
	}
	start := min(int(from-1), len(es))
	end := min(start+timelinePage, len(es))
	for i := start; i < end; i++ {
		v.Entries = append(v.Entries, h.timelineEntry(hist, i, at))
	}
	page := func(from int) string {
		return "/saga?" + url.Values{"id": {saga.ID}, "from": {strconv.Itoa(from)}}.Encode()
	}
	if start > 0 {
		v.Earlier = page(max(1, start+1-timelinePage))
	}
	if end < len(es) {
		v.Later = page(end + 1)
	}
	return render(w, r, http.StatusOK, templates.Timeline(v))
}

// timelineEntry shapes entry i of a history.
func (h *Handlers) timelineEntry(hist engine.History, i int, at int64) templates.TimelineEntry {
	e := hist.Entries[i]
	prev := engine.ZeroHash
	if i > 0 {
		prev = hist.Entries[i-1].Hash
	}
	te := templates.TimelineEntry{ID: "e" + strconv.FormatInt(e.Seq, 10), Seq: e.Seq, Tool: e.ToolName, Phase: e.Phase,
		Input: payload.Reveal(e.Input), Payload: payload.Reveal(e.Payload), At: h.when(e.Timestamp), Hash: e.Hash, Prev: prev,
		Target: e.Seq == at, Actor: e.Actor()}
	if v := hist.Verification; !v.Valid && v.BreakAtIndex == i {
		te.Broken = v.Message
	}
	if e.Phase == engine.PhaseAwaitingApproval {
		te.Request = templates.RequestHref(e.SagaID, e.Seq)
	}
	for _, c := range hist.InDoubt {
		if c.Seq == e.Seq {
			te.Orphan, te.Undo, te.DoubtHref = true, c.State == engine.CallCompensating, "/in-doubt"
		}
	}
	if detail, attempted, ok := e.Refusal(); ok && attempted != "" {
		if g := e.Refers(); g >= 1 && g <= int64(len(hist.Entries)) && hist.Entries[g-1].Phase == engine.PhaseAwaitingApproval {
			te.Attempted = &templates.Diff{Title: "What the refused resume presented (" + detail + ")",
				OldLabel: fmt.Sprintf("the approved bytes, seq %d", g), OldHref: templates.EntryHref(e.SagaID, g),
				D: payload.Compare(hist.Entries[g-1].Input, attempted)}
		}
	}
	return te
}
