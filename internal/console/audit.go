package console

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/sagacity-go/sagacity/internal/auth"
	"github.com/sagacity-go/sagacity/internal/engine"
	"github.com/sagacity-go/sagacity/web/templates"
)

// Audit lists sagas with the state of their chains, and the job that
// verifies them all: GET /audit?cursor=.
func (h *Handlers) Audit(w http.ResponseWriter, r *http.Request) error {
	me := auth.From(r.Context())
	if err := h.Engine.Can(me, engine.ActVerify, engine.Subject{}); err != nil {
		return err
	}
	items, next, err := h.sagaPage(r, me, engine.SagaFilter{Limit: pageSize}, "/audit", nil, true)
	if err != nil {
		return err
	}
	return render(w, r, http.StatusOK, templates.Audit(templates.AuditPage{Chrome: h.chrome(r, "Audit", "/audit"),
		Items: items, Next: next, Paged: r.URL.Query().Get("cursor") != "", Job: h.job(me)}))
}

// VerifySaga is one saga's verification in words, and how to check it
// offline: GET /audit/saga?id=. An id that names no saga is 404 "no such
// saga", not a green "empty journal".
func (h *Handlers) VerifySaga(w http.ResponseWriter, r *http.Request) error {
	me := auth.From(r.Context())
	if err := h.Engine.Can(me, engine.ActVerify, engine.Subject{}); err != nil {
		return err
	}
	id := r.URL.Query().Get("id")
	hist, err := h.Engine.History(r.Context(), me, id)
	if err != nil {
		return err
	}
	v := templates.VerifyPage{Chrome: h.chrome(r, "Verification of "+id, "/audit"), Verification: hist.Verification,
		Saga: engine.Saga{ID: id}, ExportHref: templates.ExportHref(id), FileName: exportName(id), TimelineHref: templates.SagaHref(id)}
	if hist.Saga != nil {
		v.Saga = *hist.Saga
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
// checks: GET /audit/export?id=.
func (h *Handlers) Export(w http.ResponseWriter, r *http.Request) error {
	me := auth.From(r.Context())
	id := r.URL.Query().Get("id")
	hist, err := h.Engine.History(r.Context(), me, id)
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.Header().Set("Content-Disposition", fmt.Sprintf(`attachment; filename="%s"; filename*=UTF-8''%s`,
		exportName(id), url.PathEscape("sagacity-"+id+".ndjson")))
	return engine.WriteNDJSON(w, hist.Entries)
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

// VerifyAll starts verifying every saga in the background: POST
// /audit/verify-all. One run at a time per server; the page shows its
// progress.
func (h *Handlers) VerifyAll(w http.ResponseWriter, r *http.Request) error {
	me := auth.From(r.Context())
	if err := h.Engine.Can(me, engine.ActVerify, engine.Subject{}); err != nil {
		return err
	}
	h.audit.start(h, me)
	if !htmx(r) {
		http.Redirect(w, r, "/audit", http.StatusSeeOther)
		return nil
	}
	return render(w, r, http.StatusOK, templates.AuditJob(h.job(me)))
}

// AuditJob is the job's progress, for its update loop: GET /audit/job.
func (h *Handlers) AuditJob(w http.ResponseWriter, r *http.Request) error {
	me := auth.From(r.Context())
	if err := h.Engine.Can(me, engine.ActVerify, engine.Subject{}); err != nil {
		return err
	}
	return render(w, r, http.StatusOK, templates.AuditJob(h.job(me)))
}

// maxBroken caps how many broken sagas a run remembers; it counts them all.
const maxBroken = 100

// auditJob is the verification of every saga on this server.
type auditJob struct {
	mu       sync.Mutex
	running  bool
	started  time.Time
	finished time.Time
	done     int
	total    int
	broken   []engine.Saga
	chains   []engine.Verification
	err      string
}

// jobTimeout bounds one run.
const jobTimeout = time.Hour

// start runs the job as me unless it is running.
func (j *auditJob) start(h *Handlers, me engine.Principal) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.running {
		return
	}
	j.running, j.started, j.finished, j.done, j.total, j.broken, j.chains, j.err = true, h.Now(), time.Time{}, 0, 0, nil, nil, ""
	go j.run(h, me)
}

func (j *auditJob) run(h *Handlers, me engine.Principal) {
	ctx, cancel := context.WithTimeout(context.Background(), jobTimeout)
	defer cancel()
	err := func() error {
		total, err := h.Engine.CountSagas(ctx, me, engine.SagaFilter{})
		if err != nil {
			return err
		}
		j.mu.Lock()
		j.total = total
		j.mu.Unlock()
		f := engine.SagaFilter{Limit: engine.MaxList}
		for {
			sagas, err := h.Engine.Sagas(ctx, me, f)
			if err != nil {
				return err
			}
			for _, s := range sagas {
				v, err := h.Engine.Verify(ctx, me, s.ID)
				if err != nil {
					return err
				}
				j.mu.Lock()
				j.done++
				if !v.Valid && len(j.broken) < maxBroken {
					j.broken, j.chains = append(j.broken, s), append(j.chains, v)
				}
				j.mu.Unlock()
			}
			if len(sagas) < f.Limit {
				return nil
			}
			last := sagas[len(sagas)-1]
			f.After = &engine.SagaCursor{CreatedAt: last.CreatedAt, ID: last.ID}
		}
	}()
	j.mu.Lock()
	defer j.mu.Unlock()
	j.running, j.finished = false, h.Now()
	if err != nil {
		j.err = message(err)
	}
}

// job shapes the job's state for the page.
func (h *Handlers) job(me engine.Principal) templates.Job {
	j := &h.audit
	j.mu.Lock()
	defer j.mu.Unlock()
	out := templates.Job{Running: j.running, Done: j.done, Total: j.total, Error: j.err,
		CanStart: h.Engine.Can(me, engine.ActVerify, engine.Subject{}) == nil}
	if !j.started.IsZero() {
		out.Started = h.when(j.started)
	}
	if !j.finished.IsZero() {
		f := h.when(j.finished)
		out.Finished = &f
	}
	for i, s := range j.broken {
		v := j.chains[i]
		out.Broken = append(out.Broken, templates.SagaRow{ID: s.ID, Href: templates.SagaHref(s.ID), Status: s.Status,
			Initiator: s.Initiator, Entries: s.HeadSeq, Created: h.when(s.CreatedAt), Updated: h.when(s.UpdatedAt),
			Chain: &v, AuditHref: auditHref(s.ID), ExportHref: templates.ExportHref(s.ID)})
	}
	return out
}
