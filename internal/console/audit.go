package console

import (
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/sagacity-go/sagacity/internal/auth"
	"github.com/sagacity-go/sagacity/internal/engine"
	"github.com/sagacity-go/sagacity/web/templates"
)

// Audit lists sagas with what the newest verification of each found, and
// when, and the job that verifies them all: GET /audit?cursor=.
func (h *Handlers) Audit(w http.ResponseWriter, r *http.Request) error {
	me := auth.From(r.Context())
	if err := h.Engine.Can(me, engine.ActVerify, engine.Subject{}); err != nil {
		return err
	}
	items, next, err := h.sagaPage(r, me, engine.SagaFilter{Limit: pageSize}, "/audit", nil, true)
	if err != nil {
		return err
	}
	job, err := h.job(me)
	if err != nil {
		return err
	}
	return render(w, r, http.StatusOK, templates.Audit(templates.AuditPage{Chrome: h.chrome(r, "Audit", "/audit"),
		Items: items, Next: next, Paged: r.URL.Query().Get("cursor") != "", Job: job, Log: h.logCard(r.Context(), me)}))
}

// logCard shapes the global log's state for the audit page; a log that
// cannot be read is said so on the page, which still lists the sagas.
func (h *Handlers) logCard(ctx context.Context, me engine.Principal) templates.LogCard {
	st, err := h.Engine.LogStatus(ctx, me)
	if err != nil {
		return templates.LogCard{Error: message(err), Key: h.Engine.VerifierKey()}
	}
	c := templates.LogCard{Size: st.Size, Checkpoint: st.Checkpoint.Size, Root: hex.EncodeToString(st.Checkpoint.Root),
		Halted: st.Halted, Key: h.Engine.VerifierKey(), Href: templates.CheckpointHref(st.Checkpoint.Size)}
	if !st.SignedAt.IsZero() {
		c.SignedAt = h.when(st.SignedAt)
	}
	if !st.CheckedAt.IsZero() {
		t := h.when(st.CheckedAt)
		c.Checked = &t
	}
	if !st.FullAt.IsZero() {
		t := h.when(st.FullAt)
		c.FullCheck = &t
	}
	return c
}

// VerifySaga is one saga's verification in words, and how to check it
// offline: GET /audit/saga?id=. The engine keeps what it found, for the
// audit page's list. An id that names no saga is 404 "no such saga", not
// a green "empty journal".
func (h *Handlers) VerifySaga(w http.ResponseWriter, r *http.Request) error {
	me := auth.From(r.Context())
	if err := h.Engine.Can(me, engine.ActVerify, engine.Subject{}); err != nil {
		return err
	}
	id := r.URL.Query().Get("id")
	hist, err := h.Engine.Audit(r.Context(), me, id)
	if err != nil {
		return err
	}
	v := templates.VerifyPage{Chrome: h.chrome(r, "Verification of "+id, "/audit"), Verification: hist.Verification,
		Saga: engine.Saga{ID: id}, ExportHref: templates.ExportHref(id), FileName: exportName(id), TimelineHref: templates.SagaHref(id),
		Key: h.Engine.VerifierKey()}
	if hist.Saga != nil {
		v.Saga = *hist.Saga
	}
	if st, err := h.Engine.LogStatus(r.Context(), me); err == nil && st.Checkpoint.Size > 0 {
		v.Checkpoint, v.CheckpointHref = st.Checkpoint.Size, templates.CheckpointHref(st.Checkpoint.Size)
		v.ExportHref = templates.ProvenExportHref(id, st.Checkpoint.Size)
	}
	for _, e := range hist.Entries {
		if e.Leaf < 0 || e.Leaf >= v.Checkpoint {
			v.Unproved++
		}
	}
	for _, d := range hist.Decisions {
		v.Dev = v.Dev || d.Auth == engine.AuthDev
		v.Decisions = append(v.Decisions, templates.DecisionRow{Seq: d.Seq, Decision: d.Decision, Decider: d.Decider, Problem: d.Problem,
			EntryHref: templates.EntryHref(id, d.Seq), Href: templates.ReceiptHref(id, d.Seq), File: receiptName(id, d.Seq),
			PayloadHref: templates.DecidedHref(id, d.Seq), PayloadFile: decidedName(id, d.Seq)})
	}
	if b := hist.Verification.BreakAtIndex; !hist.Verification.Valid && b >= 0 {
		seq := int64(b + 1)
		if b < len(hist.Entries) {
			seq = hist.Entries[b].Seq
		}
		v.BrokenHref = templates.EntryHref(id, seq)
	}
	return render(w, r, http.StatusOK, templates.Verification(v))
}

// Export downloads a saga's journal as NDJSON, the file `sagacity verify`
// checks: GET /audit/export?id=&size=; with size, each entry carries its
// proof of inclusion in the log at that checkpoint's size.
func (h *Handlers) Export(w http.ResponseWriter, r *http.Request) error {
	me := auth.From(r.Context())
	q := r.URL.Query()
	id := q.Get("id")
	var entries []engine.Entry
	var proofs *engine.Proofs
	if q.Has("size") {
		size, err := strconv.ParseInt(q.Get("size"), 10, 64)
		if err != nil || size < 1 {
			return engine.Errorf(engine.Invalid, "size must be a checkpoint's size, a positive integer")
		}
		if entries, proofs, err = h.Engine.Evidence(r.Context(), me, id, size); err != nil {
			return err
		}
	} else {
		hist, err := h.Engine.History(r.Context(), me, id)
		if err != nil {
			return err
		}
		entries = hist.Entries
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	attachment(w, exportName(id), "sagacity-"+id+".ndjson")
	return engine.WriteNDJSON(w, entries, proofs)
}

// attachment makes a response download as a file: name is ASCII, full
// the name in UTF-8.
func attachment(w http.ResponseWriter, name, full string) {
	w.Header().Set("Content-Disposition", fmt.Sprintf(`attachment; filename="%s"; filename*=UTF-8''%s`, name, url.PathEscape(full)))
}

// Checkpoint downloads a signed checkpoint of the log that this server
// keeps outside its database: GET /audit/checkpoint?size=.
func (h *Handlers) Checkpoint(w http.ResponseWriter, r *http.Request) error {
	size, err := strconv.ParseInt(r.URL.Query().Get("size"), 10, 64)
	if err != nil || size < 1 {
		return engine.Errorf(engine.Invalid, "size must be a checkpoint's size, a positive integer")
	}
	signed, err := h.Engine.Checkpoint(r.Context(), auth.From(r.Context()), size)
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	name := fmt.Sprintf("checkpoint-%d.note", size)
	attachment(w, name, name)
	_, err = io.WriteString(w, signed)
	return err
}

// Receipt downloads the signed receipt of the decision at seq of a saga:
// GET /audit/receipt?id=&seq=.
func (h *Handlers) Receipt(w http.ResponseWriter, r *http.Request) error {
	me := auth.From(r.Context())
	q := r.URL.Query()
	id := q.Get("id")
	seq, err := strconv.ParseInt(q.Get("seq"), 10, 64)
	if err != nil || seq < 1 {
		return engine.Errorf(engine.Invalid, "seq must be a positive integer")
	}
	receipt, err := h.Engine.Receipt(r.Context(), me, id, seq)
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	attachment(w, receiptName(id, seq), fmt.Sprintf("receipt-%s-%d.note", id, seq))
	_, err = io.WriteString(w, receipt)
	return err
}

// Decided downloads the exact bytes the decision at seq of a saga was
// made on, the PAYLOAD_FILE verify-receipt checks its receipt against:
// GET /audit/decided?id=&seq=.
func (h *Handlers) Decided(w http.ResponseWriter, r *http.Request) error {
	me := auth.From(r.Context())
	q := r.URL.Query()
	id := q.Get("id")
	seq, err := seqParam(q.Get("seq"))
	if err != nil {
		return err
	}
	decided, err := h.Engine.Decided(r.Context(), me, id, seq)
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	attachment(w, decidedName(id, seq), fmt.Sprintf("decided-%s-%d.bin", id, seq))
	_, err = io.WriteString(w, decided)
	return err
}

// decidedName is the file the bytes the decision at seq was made on
// download as, beside its receipt's.
func decidedName(id string, seq int64) string {
	return strings.TrimSuffix(strings.Replace(exportName(id), "sagacity-", "decided-", 1), ".ndjson") + fmt.Sprintf("-%d.bin", seq)
}

// receiptName is the file the receipt at seq downloads as.
func receiptName(id string, seq int64) string {
	return strings.TrimSuffix(strings.Replace(exportName(id), "sagacity-", "receipt-", 1), ".ndjson") + fmt.Sprintf("-%d.note", seq)
}

// exportName is the file an export downloads as: the saga id with
// anything a file name or a header should not hold replaced.
func exportName(id string) string {
	return "sagacity-" + strings.Map(func(r rune) rune {
		if 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' || r == '-' || r == '_' || r == '.' {
			return r
		}
		return '_'
	}, id) + ".ndjson"
}

// VerifyAll starts the engine's verification of every saga in the
// background: POST /audit/verify-all. The page shows its progress.
func (h *Handlers) VerifyAll(w http.ResponseWriter, r *http.Request) error {
	me := auth.From(r.Context())
	if err := h.Engine.VerifyAll(me); err != nil {
		return err
	}
	if !htmx(r) {
		http.Redirect(w, r, "/audit", http.StatusSeeOther)
		return nil
	}
	return h.renderJob(w, r, me)
}

// AuditJob is the run's progress, for its update loop: GET /audit/job.
func (h *Handlers) AuditJob(w http.ResponseWriter, r *http.Request) error {
	return h.renderJob(w, r, auth.From(r.Context()))
}

func (h *Handlers) renderJob(w http.ResponseWriter, r *http.Request, me engine.Principal) error {
	j, err := h.job(me)
	if err != nil {
		return err
	}
	return render(w, r, http.StatusOK, templates.AuditJob(j))
}

// job shapes the engine's run for the page.
func (h *Handlers) job(me engine.Principal) (templates.Job, error) {
	run, err := h.Engine.AuditRun(me)
	if err != nil {
		return templates.Job{}, err
	}
	out := templates.Job{Running: run.Running, Done: run.Done, Total: run.Total, Error: run.Err, CanStart: true}
	if !run.Started.IsZero() {
		out.Started = h.when(run.Started)
	}
	if !run.Finished.IsZero() {
		f := h.when(run.Finished)
		out.Finished = &f
	}
	for _, b := range run.Broken {
		s, v := b.Saga, b.Verification
		out.Broken = append(out.Broken, templates.SagaRow{ID: s.ID, Href: templates.SagaHref(s.ID), Status: s.Status,
			Initiator: s.Initiator, Entries: s.HeadSeq, Created: h.when(s.CreatedAt), Updated: h.when(s.UpdatedAt),
			Chain: &v, AuditHref: auditHref(s.ID)})
	}
	return out, nil
}
