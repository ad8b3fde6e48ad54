package console

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/sagacity-go/sagacity/internal/auth"
	"github.com/sagacity-go/sagacity/internal/engine"
	"github.com/sagacity-go/sagacity/internal/payload"
	"github.com/sagacity-go/sagacity/web/templates"
)

// stepsShown is how many earlier steps the request page lists.
const stepsShown = 20

// Request is one request's page: GET /request?saga=&seq=.
func (h *Handlers) Request(w http.ResponseWriter, r *http.Request) error {
	saga, seq, err := requestRef(r.URL.Query().Get("saga"), r.URL.Query().Get("seq"))
	if err != nil {
		return err
	}
	v, err := h.requestPage(r, saga, seq)
	if err != nil {
		return err
	}
	return render(w, r, http.StatusOK, templates.Request(v))
}

func requestRef(saga, seq string) (string, int64, error) {
	n, err := seqParam(seq)
	if err != nil {
		return "", 0, err
	}
	if saga == "" {
		return "", 0, engine.Errorf(engine.Invalid, "saga is missing")
	}
	return saga, n, nil
}

// RequestStatus is the request page's update loop: GET
// /request/status?saga=&seq=&digest=. 204 while nothing changed; the
// status otherwise, marked as changed.
func (h *Handlers) RequestStatus(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	saga, seq, err := requestRef(q.Get("saga"), q.Get("seq"))
	if err != nil {
		return err
	}
	v, err := h.requestPage(r, saga, seq)
	if err != nil {
		return err
	}
	if v.Ref.Digest == q.Get("digest") {
		return unchanged(w)
	}
	v.Status.Changed = true
	return render(w, r, http.StatusOK, templates.RequestStatusBox(v.Ref, v.Status, false))
}

// requestPage reads a request through the engine and shapes it for the
// page: its status, bytes, diffs, what a rejection does, and what the
// signed-in person may do.
func (h *Handlers) requestPage(r *http.Request, saga string, seq int64) (templates.RequestPage, error) {
	me := auth.From(r.Context())
	rv, err := h.Engine.Review(r.Context(), me, saga, seq)
	if err != nil {
		return templates.RequestPage{}, err
	}
	g := rv.Gated
	v := templates.RequestPage{
		Chrome:       h.chrome(r, fmt.Sprintf("%s in %s · seq %d", g.ToolName, saga, seq), "/"),
		Ref:          templates.RequestRef{Saga: saga, Seq: seq, Hash: engine.PayloadHash(g.Input)},
		SagaHref:     templates.SagaHref(saga),
		Saga:         rv.Saga,
		Tool:         g.ToolName,
		Requester:    g.Field(engine.KeyRequester),
		Client:       g.Field(engine.KeyClient),
		Rule:         g.Field(engine.KeyRule),
		Policy:       g.Field(engine.KeyPolicy),
		Requested:    h.when(g.Timestamp),
		Input:        g.Input,
		Payload:      prepare(g.Input),
		Verification: rv.Verification,
		TimelineHref: templates.EntryHref(saga, seq),
		SupersededBy: rv.SupersededBy,
	}
	v.Status = h.status(rv)
	v.Ref.Digest = digest(v.Status.State, len(v.Status.Decisions), rv.Saga.HeadSeq)
	if rv.Previous != nil {
		v.Diffs = append(v.Diffs, templates.Diff{Title: "Against the saga's earlier proposal of " + g.ToolName + " (re-planned)",
			OldLabel: fmt.Sprintf("seq %d of this saga", rv.Previous.Seq), OldHref: templates.RequestHref(saga, rv.Previous.Seq),
			D: payload.Compare(rv.Previous.Input, g.Input)})
	}
	if l := rv.LastExecuted; l != nil {
		v.Diffs = append(v.Diffs, templates.Diff{Title: "Against the last executed call of " + g.ToolName,
			OldLabel: fmt.Sprintf("seq %d of saga %s", l.Seq, l.SagaID), OldHref: templates.EntryHref(l.SagaID, l.Seq),
			D: payload.Compare(l.Input, g.Input)})
	}
	executed := func(cs []engine.Call) []templates.Step {
		var out []templates.Step
		for _, c := range cs {
			out = append(out, templates.Step{Seq: c.Seq, Tool: c.ToolName, Input: c.Input, Detail: c.Result,
				Href: templates.EntryHref(saga, c.Seq)})
		}
		return out
	}
	v.WouldUndo, v.StaysDone = executed(rv.WouldUndo), executed(rv.StaysDone)
	for _, s := range rv.Siblings {
		fields, more := payload.Summary(s.Input, 4)
		v.Siblings = append(v.Siblings, templates.Sibling{Seq: s.JournalSeq, Tool: s.ToolName,
			Href: templates.RequestHref(saga, s.JournalSeq), Summary: fields, More: more})
	}
	for i := seq - 2; i >= 0 && len(v.Steps) < stepsShown; i-- {
		v.Steps = append(v.Steps, h.step(rv.Journal[i]))
	}
	v.MoreSteps = int(seq-1) - len(v.Steps)
	v.Actions = templates.Actions{Actions: h.Engine.Allowed(me, rv)}
	return v, nil
}

func (h *Handlers) step(e engine.Entry) templates.Step {
	return templates.Step{Seq: e.Seq, Tool: e.ToolName, Phase: e.Phase, Input: e.Input, Detail: e.Payload,
		At: h.when(e.Timestamp), Href: templates.EntryHref(e.SagaID, e.Seq)}
}

// status says what became of the request, with its evidence.
func (h *Handlers) status(rv engine.Review) templates.RequestStatus {
	s := templates.RequestStatus{State: rv.State}
	decided := []*engine.Decision{}
	for _, b := range rv.Votes {
		decided = append(decided, &b.Decision, b.Withdrawal)
	}
	for _, d := range append(decided, rv.Rejection, rv.Dismissal, rv.Changes, rv.Expiry) {
		if d != nil {
			s.Decisions = append(s.Decisions, templates.Decision{Approved: d.Approved, Dismissed: d == rv.Dismissal,
				Who: d.Approver, At: h.when(d.DecidedAt), Reason: d.Reason})
		}
	}
	if rv.Outcome != nil {
		st := h.step(*rv.Outcome)
		s.Outcome = &st
	}
	switch rv.State {
	case engine.StateUndecided:
		s.Headline = "Undecided: waiting for a person"
	case engine.StateApproved:
		s.Headline, s.Kind = "Approved by "+strings.Join(rv.Tally.Voters(), ", ")+", awaiting execution", "ok"
	case engine.StateExecuting:
		s.Headline, s.Kind = "Executing: the tool was called and its outcome is not journaled yet", "warn"
	case engine.StateExecuted:
		s.Headline, s.Kind = "Executed with the approved bytes", "ok"
	case engine.StateFailed:
		s.Headline, s.Kind = "Executed with the approved bytes, and the tool failed", "bad"
	case engine.StateRejected:
		s.Headline, s.Kind = "Rejected by "+rv.Rejection.Approver, "bad"
	case engine.StateRefused:
		detail, attempted, _ := rv.Refusal.Refusal()
		s.Headline, s.Kind = "Resume refused: "+detail, "bad"
		st := h.step(*rv.Refusal)
		s.Refusal = &st
		if attempted != "" {
			s.Attempted = &templates.Diff{Title: "What the refused resume presented, against what was approved",
				OldLabel: "the approved bytes (above)", D: payload.Compare(rv.Gated.Input, attempted)}
		}
	case engine.StateDropped:
		s.Headline, s.Kind = "Dropped: the saga failed ("+rv.Saga.Reason+") before this was decided or executed", "warn"
		if rv.Dropped != nil {
			s.Headline = fmt.Sprintf("Dropped at seq %d: the saga failed (%s) before this was decided or executed", rv.Dropped.Seq, rv.Saga.Reason)
		}
	case engine.StateSuperseded:
		s.Headline, s.Kind = fmt.Sprintf("Superseded: the saga re-planned, and its request at seq %d was approved or executed; "+
			"this one can no longer be approved or executed", rv.SupersededBy), "warn"
	case engine.StateDismissed:
		s.Headline, s.Kind = fmt.Sprintf("Dismissed by %s: superseded by the saga's request at seq %d; the saga went on",
			rv.Dismissal.Approver, rv.SupersededBy), "warn"
	}
	return s
}

// message is an engine error's message for people.
func message(err error) string {
	if e, ok := errors.AsType[*engine.Error](err); ok {
		return e.Msg
	}
	return "internal error"
}

// Decide approves, rejects or dismisses: POST /request/decide with saga,
// seq, hash (of the bytes the form showed), decision, reason and, in the
// second step, confirm=yes. The first step asks for confirmation, repeating the
// tool and the payload's key fields. A form that is out of date (the
// request was decided or changed since) is answered with the request's
// current state, never by deciding it again.
func (h *Handlers) Decide(w http.ResponseWriter, r *http.Request) error {
	return h.act(w, r, []string{"approve", "reject", "dismiss"}, func(me engine.Principal, v templates.RequestPage, reason string) error {
		var err error
		switch r.PostForm.Get("decision") {
		case "approve":
			_, err = h.Engine.Approve(r.Context(), me, v.Ref.Saga, v.Ref.Seq, reason)
		case "reject":
			_, err = h.Engine.Reject(r.Context(), me, v.Ref.Saga, v.Ref.Seq, reason)
		case "dismiss":
			_, err = h.Engine.Dismiss(r.Context(), me, v.Ref.Saga, v.Ref.Seq, reason)
		}
		return err
	})
}

// Execute resumes an approved request with the bytes the journal holds:
// POST /request/execute with saga, seq, hash and, in the second step,
// confirm=yes. It is the engine's own Resume, so every check applies.
func (h *Handlers) Execute(w http.ResponseWriter, r *http.Request) error {
	return h.act(w, r, []string{"execute"}, func(me engine.Principal, v templates.RequestPage, _ string) error {
		_, err := h.Engine.Execute(r.Context(), me, v.Ref.Saga, v.Ref.Seq)
		return err
	})
}

// act runs a decision posted from the request page, one of those the
// route serves: it checks the form against the request's current state,
// asks for confirmation first, then does it, and answers with the request
// as it is now (the actions box and, out of band, its status for htmx;
// the page otherwise).
func (h *Handlers) act(w http.ResponseWriter, r *http.Request, serves []string, do func(engine.Principal, templates.RequestPage, string) error) error {
	if err := parseForm(r); err != nil {
		return err
	}
	f := r.PostForm
	saga, seq, err := requestRef(f.Get("saga"), f.Get("seq"))
	if err != nil {
		return err
	}
	decision, reason := f.Get("decision"), f.Get("reason")
	allowed := map[string]func(templates.Actions) bool{
		"approve": func(a templates.Actions) bool { return a.Approve },
		"reject":  func(a templates.Actions) bool { return a.Reject },
		"dismiss": func(a templates.Actions) bool { return a.Dismiss },
		"execute": func(a templates.Actions) bool { return a.Execute },
	}[decision]
	if allowed == nil || !slices.Contains(serves, decision) {
		return engine.Errorf(engine.Invalid, "decision must be %s here", strings.Join(serves, " or "))
	}
	v, err := h.requestPage(r, saga, seq)
	if err != nil {
		return err
	}
	switch {
	case f.Get("hash") != v.Ref.Hash:
		return h.answer(w, r, http.StatusConflict, v, "Your form showed other bytes than this request holds; nothing was decided. Read it again.")
	case !allowed(v.Actions):
		return h.answer(w, r, http.StatusConflict, v, "Your form was out of date; nothing was done. This is the request as it is now.")
	case f.Get("confirm") != "yes":
		fields, more := payload.Summary(v.Input, 6)
		v.Confirm = &templates.Confirm{Tool: v.Tool, Decision: decision, Verb: strings.ToUpper(decision[:1]) + decision[1:],
			Summary: fields, More: more, Reason: reason}
		switch decision {
		case "reject":
			v.Confirm.Undo, v.Confirm.StaysDone, v.Confirm.Dropped = v.WouldUndo, v.StaysDone, v.Siblings
		case "dismiss":
			v.Confirm.Keeps = v.SupersededBy
		}
		return h.answer(w, r, http.StatusOK, v, "")
	}
	me := auth.From(r.Context())
	if err := do(me, v, reason); err != nil {
		if engine.IsKind(err, engine.Conflict) || engine.IsKind(err, engine.NotFound) {
			if now, rerr := h.requestPage(r, saga, seq); rerr == nil {
				return h.answer(w, r, http.StatusConflict, now, "Nothing was done: "+message(err)+". This is the request as it is now.")
			}
		}
		if !engine.IsKind(err, engine.Invalid) {
			return err
		}
		v.Actions.Reason = reason
		return h.answer(w, r, http.StatusBadRequest, v, message(err))
	}
	if !htmx(r) {
		http.Redirect(w, r, templates.RequestHref(saga, seq), http.StatusSeeOther)
		return nil
	}
	now, err := h.requestPage(r, saga, seq)
	if err != nil {
		return err
	}
	now.Status.Changed = false
	return render(w, r, http.StatusOK, templates.RequestUpdate(now))
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
