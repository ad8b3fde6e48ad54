package console

import (
	"context"
	"encoding/hex"
	"io"
	"net/http"
	"strconv"

	"github.com/sagacity-go/sagacity/evidence"
	"github.com/sagacity-go/sagacity/internal/auth"
	"github.com/sagacity-go/sagacity/internal/edge"
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
		Halted: st.Halted, Key: h.Engine.VerifierKey(), Href: templates.CheckpointHref(st.Checkpoint.Size), File: engine.CheckpointFile(st.Checkpoint.Size)}
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
		Saga: engine.Saga{ID: id}, ExportHref: templates.ExportHref(id), FileName: engine.ExportFile(id), TimelineHref: templates.SagaHref(id),
		Key: h.Engine.VerifierKey()}
	if hist.Saga != nil {
		v.Saga = *hist.Saga
	}
	if st, err := h.Engine.LogStatus(r.Context(), me); err == nil && st.Checkpoint.Size > 0 {
		v.Checkpoint, v.CheckpointHref, v.CheckpointFile = st.Checkpoint.Size, templates.CheckpointHref(st.Checkpoint.Size), engine.CheckpointFile(st.Checkpoint.Size)
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
			EntryHref: templates.EntryHref(id, d.Seq), Href: templates.ReceiptHref(id, d.Seq), File: engine.ReceiptFile(id, d.Seq),
			PayloadHref: templates.DecidedHref(id, d.Seq), PayloadFile: engine.DecidedFile(id, d.Seq)})
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
	edge.Attachment(w, engine.ExportFile(id))
	return evidence.WriteNDJSON(w, entries, proofs)
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
	edge.Attachment(w, engine.CheckpointFile(size))
	_, err = io.WriteString(w, signed)
	return err
}

// Receipt downloads the signed receipt of the decision at seq of a saga:
// GET /audit/receipt?id=&seq=.
func (h *Handlers) Receipt(w http.ResponseWriter, r *http.Request) error {
	return download(w, r, "text/plain; charset=utf-8", engine.ReceiptFile, h.Engine.Receipt)
}

// Decided downloads the exact bytes the decision at seq of a saga was
// made on, the PAYLOAD_FILE verify-receipt checks its receipt against:
// GET /audit/decided?id=&seq=.
func (h *Handlers) Decided(w http.ResponseWriter, r *http.Request) error {
	return download(w, r, "application/octet-stream", engine.DecidedFile, h.Engine.Decided)
}

// download answers ?id=&seq= with a file about the decision at seq of
// saga id: what read gives the person asking, as contentType, named as
// name says (the name the API gives it too). Invalid when seq is not a
// positive integer; read's errors otherwise.
func download(w http.ResponseWriter, r *http.Request, contentType string, name func(string, int64) string,
	read func(context.Context, engine.Principal, string, int64) (string, error)) error {
	q := r.URL.Query()
	id := q.Get("id")
	seq, err := seqParam(q.Get("seq"))
	if err != nil {
		return err
	}
	body, err := read(r.Context(), auth.From(r.Context()), id, seq)
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", contentType)
	edge.Attachment(w, name(id, seq))
	_, err = io.WriteString(w, body)
	return err
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
