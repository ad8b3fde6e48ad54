package console

import (
	"cmp"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"

	"github.com/sagacity-go/sagacity/evidence"
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
	f := engine.SagaFilter{Status: engine.Status(fv.Status), IDPrefix: fv.ID, Tool: fv.Tool, Initiator: fv.Initiator, Limit: pageSize,
		InDoubt: fv.InDoubt}
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
			AuditHref: auditHref(s.ID)}
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

// timelinePage is how many items (entries, or calls folded into one) a
// timeline page shows.
const timelinePage = 50

// Timeline is a saga's journal, and what the person may do with the
// saga: GET /saga?id=&from=&at=&phase=&unfold=1. It shows a page of items
// from the one at seq from, or the page holding the entry at seq at
// (marked, and shown unfolded); a call's INTENT and the entry of its
// answer are one item unless unfold; with phase, only the items with an
// entry of that phase. Each entry shows its hash and the hash it chains
// on, a decision its receipt decoded; where verification stops is marked.
func (h *Handlers) Timeline(w http.ResponseWriter, r *http.Request) error {
	v, _, err := h.timeline(r, r.URL.Query())
	if err != nil {
		return err
	}
	return render(w, r, http.StatusOK, templates.Timeline(v))
}

// timeline reads a saga's page as q asks for it, and what the engine
// lets the signed-in person do with the saga.
func (h *Handlers) timeline(r *http.Request, q url.Values) (templates.TimelinePage, engine.SagaActions, error) {
	me := auth.From(r.Context())
	fail := func(err error) (templates.TimelinePage, engine.SagaActions, error) {
		return templates.TimelinePage{}, engine.SagaActions{}, err
	}
	hist, err := h.Engine.History(r.Context(), me, q.Get("id"))
	if err != nil {
		return fail(err)
	}
	f := templates.TimelineFilter{Phase: q.Get("phase"), Unfold: q.Get("unfold") == "1"}
	if f.Phase != "" && !slices.Contains(engine.Phases, engine.Phase(f.Phase)) {
		return fail(engine.Errorf(engine.Invalid, "unknown phase %q", f.Phase))
	}
	var from, at int64
	if s := q.Get("at"); s != "" {
		if at, err = seqParam(s); err != nil {
			return fail(err)
		}
	}
	if s := q.Get("from"); s != "" {
		if from, err = seqParam(s); err != nil {
			return fail(err)
		}
	}
	saga := engine.Saga{ID: q.Get("id")}
	if hist.Saga != nil {
		saga = *hist.Saga
	}
	v := templates.TimelinePage{Chrome: h.chrome(r, "Saga "+saga.ID, "/sagas"), Saga: saga, Verification: hist.Verification,
		Total: len(hist.Entries), Filter: f, Phases: engine.Phases, ExportHref: templates.ExportHref(saga.ID), AuditHref: auditHref(saga.ID)}
	for _, p := range hist.Requests {
		v.Pending = append(v.Pending, templates.Sibling{Seq: p.JournalSeq, Tool: p.ToolName, Href: templates.RequestHref(saga.ID, p.JournalSeq)})
	}
	es, pairs := hist.Entries, evidence.Pairs(hist.Entries)
	items := timelineItems(es, pairs, f)
	start := 0
	switch {
	case from > 0:
		start, _ = slices.BinarySearchFunc(items, from, func(it []int, seq int64) int { return cmp.Compare(es[it[0]].Seq, seq) })
	case at > 0:
		if k := slices.IndexFunc(items, func(it []int) bool {
			return slices.ContainsFunc(it, func(i int) bool { return es[i].Seq == at })
		}); k >= 0 {
			start = max(0, k-timelinePage/2)
		}
	}
	end := min(start+timelinePage, len(items))
	decisions := map[int64]engine.DecisionReceipt{}
	for _, d := range hist.Decisions {
		decisions[d.Seq] = d
	}
	for _, it := range items[start:end] {
		ti := templates.TimelineItem{Folded: len(it) > 1}
		for _, i := range it {
			te := h.timelineEntry(hist, i, at, pairs, decisions)
			ti.Open = ti.Open || te.Target || te.Broken != "" || te.Orphan
			ti.Entries = append(ti.Entries, te)
		}
		v.Items = append(v.Items, ti)
	}
	keep := url.Values{"id": {saga.ID}}
	if f.Phase != "" {
		keep.Set("phase", f.Phase)
	}
	if f.Unfold {
		keep.Set("unfold", "1")
	}
	page := func(k int) string {
		u := maps.Clone(keep)
		u.Set("from", strconv.FormatInt(es[items[k][0]].Seq, 10))
		return "/saga?" + u.Encode()
	}
	if start > 0 {
		v.First, v.Earlier = "/saga?"+keep.Encode(), page(max(0, start-timelinePage))
	}
	if end < len(items) {
		v.Later = page(end)
	}
	if end > start {
		v.Shown = fmt.Sprintf("Items %d–%d of %d, from seq %d", start+1, end, len(items), es[items[start][0]].Seq)
	}
	a := h.Engine.SagaAllowed(me, hist)
	v.Actions = templates.SagaActions{Abort: a.Abort, Why: a.Why}
	for _, fu := range a.Failed {
		row := templates.FailedUndo{Seq: fu.Seq, Tool: fu.ToolName, Input: payload.Reveal(fu.Input), Why: fu.Why}
		for _, e := range es {
			if pairs[e.Seq] == fu.Seq && e.Phase == engine.PhaseCompensationFailed {
				row.Error, row.Href = payload.Reveal(e.Payload), templates.EntryHref(saga.ID, e.Seq)
			}
		}
		v.Actions.Failed = append(v.Actions.Failed, row)
	}
	return v, a, nil
}

// timelineItems groups a journal's entries (by index) into the items a
// timeline lists, in order: each entry, or, unless f unfolds them, a
// call's INTENT with the entry of the tool's answer; only the items with
// an entry of f's phase, when it names one.
func timelineItems(es []engine.Entry, pairs map[int64]int64, f templates.TimelineFilter) [][]int {
	answer, folded := map[int64]int{}, map[int]bool{}
	for i, e := range es {
		if c, ok := pairs[e.Seq]; ok && !f.Unfold && e.ToolName != engine.GateTool && (e.Phase == engine.PhaseExecuted || e.Phase == engine.PhaseFailed) {
			answer[c], folded[i] = i, true
		}
	}
	var items [][]int
	for i, e := range es {
		if folded[i] {
			continue
		}
		it := []int{i}
		if j, ok := answer[e.Seq]; ok {
			it = append(it, j)
		}
		if f.Phase == "" || slices.ContainsFunc(it, func(k int) bool { return es[k].Phase == engine.Phase(f.Phase) }) {
			items = append(items, it)
		}
	}
	return items
}

// timelineEntry shapes entry i of a history: pairs names the call each
// answer, resolution and undo belongs to, decisions the decisions with a
// receipt.
func (h *Handlers) timelineEntry(hist engine.History, i int, at int64, pairs map[int64]int64, decisions map[int64]engine.DecisionReceipt) templates.TimelineEntry {
	e := hist.Entries[i]
	prev := engine.ZeroHash
	if i > 0 {
		prev = hist.Entries[i-1].Hash
	}
	te := templates.TimelineEntry{ID: "e" + strconv.FormatInt(e.Seq, 10), Seq: e.Seq, Tool: e.ToolName, Phase: e.Phase,
		Input: payload.Reveal(e.Input), Payload: payload.Reveal(e.Payload), At: h.when(e.Timestamp), Hash: e.Hash, Prev: prev,
		Target: e.Seq == at, Actor: e.Actor()}
	if c, ok := pairs[e.Seq]; ok {
		te.Call, te.CallHref = c, templates.EntryHref(e.SagaID, c)
	}
	if d, ok := decisions[e.Seq]; ok {
		if note := engine.ReceiptOf(e); note != "" {
			te.Payload = payload.Reveal(evidence.ParseLines(e.Payload).Without(engine.KeyReceipt).String())
			te.Receipt = &templates.ReceiptView{Note: payload.Reveal(note), Problem: d.Problem,
				Href: templates.ReceiptHref(e.SagaID, e.Seq), File: engine.ReceiptFile(e.SagaID, e.Seq)}
		}
	}
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
			d := diff("What the refused resume presented ("+detail+")", fmt.Sprintf("the approved bytes, seq %d", g),
				templates.EntryHref(e.SagaID, g), hist.Entries[g-1].Input, attempted)
			te.Attempted = &d
		}
	}
	return te
}

// Abort aborts a saga from its page: POST /saga/abort with id, reason
// and, in the second step, confirm=yes. The first step says what
// aborting does; then the engine aborts it as the person, which drops
// its pending requests and compensates it.
func (h *Handlers) Abort(w http.ResponseWriter, r *http.Request) error {
	if err := parseForm(r); err != nil {
		return err
	}
	f := r.PostForm
	id, reason := f.Get("id"), f.Get("reason")
	if id == "" {
		return engine.Errorf(engine.Invalid, "saga is missing")
	}
	me := auth.From(r.Context())
	q := url.Values{"id": {id}}
	v, a, err := h.timeline(r, q)
	if err != nil {
		return err
	}
	switch {
	case !a.Abort:
		if err := h.Engine.Can(me, engine.ActAbort, engine.Subject{Saga: &v.Saga}); err != nil {
			return err // never offered: the engine's word, not a stale form
		}
		v.Actions.Notice = "Your form was out of date; nothing was done. This is the saga as it is now."
		return render(w, r, http.StatusConflict, templates.Timeline(v))
	case f.Get("confirm") != "yes":
		c := &templates.AbortConfirm{Reason: reason, Undo: steps(id, a.WouldUndo), StaysDone: steps(id, a.StaysDone)}
		for _, rq := range a.Dropped {
			c.Dropped = append(c.Dropped, templates.Sibling{Seq: rq.JournalSeq, Tool: rq.ToolName,
				Href: templates.RequestHref(id, rq.JournalSeq), Summary: summary(rq.Input, 4)})
		}
		v.Actions.Confirm = c
		return render(w, r, http.StatusOK, templates.Timeline(v))
	}
	if _, err := h.Engine.Abort(r.Context(), me, id, reason); err != nil {
		code := map[engine.Kind]int{engine.Conflict: http.StatusConflict, engine.Invalid: http.StatusBadRequest}[engine.KindOf(err)]
		if code == 0 {
			return err
		}
		if now, _, rerr := h.timeline(r, q); rerr == nil {
			now.Actions.Notice = "Nothing was done: " + message(err) + "."
			return render(w, r, code, templates.Timeline(now))
		}
		return err
	}
	http.Redirect(w, r, templates.SagaHref(id), http.StatusSeeOther)
	return nil
}

// steps shows a saga's executed calls as steps.
func steps(saga string, cs []engine.Call) []templates.Step {
	var out []templates.Step
	for _, c := range cs {
		out = append(out, templates.Step{Seq: c.Seq, Tool: c.ToolName, Input: payload.Reveal(c.Input), Detail: payload.Reveal(c.Result), Href: templates.EntryHref(saga, c.Seq)})
	}
	return out
}
