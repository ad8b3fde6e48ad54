package console

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/sagacity-go/sagacity/evidence"
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
	// Back from signing in again for a vote: what was typed is kept.
	v.Actions.Reason = cleanReason(r.URL.Query().Get("reason"))
	return render(w, r, http.StatusOK, templates.Request(v))
}

// cleanReason keeps a reason carried through a sign-in to one line of at
// most engine.MaxReasonLen bytes; the engine checks it again.
func cleanReason(s string) string {
	s = strings.Join(strings.Fields(strings.ToValidUTF8(s, "")), " ")
	for len(s) > engine.MaxReasonLen {
		s = s[:len(s)-1]
	}
	return strings.ToValidUTF8(s, "")
}

// requestRef reads a reference to one request, its saga and seq:
// Invalid when seq is not a positive integer or saga is missing.
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

// postedRef parses a form posted about one request: the form, and the
// request's saga and seq as requestRef reads them. parseForm's error when
// the body is no form.
func postedRef(r *http.Request) (url.Values, string, int64, error) {
	if err := parseForm(r); err != nil {
		return nil, "", 0, err
	}
	saga, seq, err := requestRef(r.PostForm.Get("saga"), r.PostForm.Get("seq"))
	return r.PostForm, saga, seq, err
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
	return render(w, r, http.StatusOK, templates.RequestChanged(v))
}

// requestPage reads a request through the engine and shapes it for the
// page: its status, bytes, diffs, what a rejection does, and what the
// signed-in person may do.
func (h *Handlers) requestPage(r *http.Request, saga string, seq int64) (templates.RequestPage, error) {
	rv, err := h.Engine.Review(r.Context(), auth.From(r.Context()), saga, seq)
	if err != nil {
		return templates.RequestPage{}, err
	}
	return h.reviewPage(r, rv)
}

// reviewPage shapes a request the engine read (Review) or decided
// (Decide) for the page.
func (h *Handlers) reviewPage(r *http.Request, rv engine.Review) (templates.RequestPage, error) {
	me := auth.From(r.Context())
	g, saga, seq := rv.Gated, rv.Saga.ID, rv.Gated.Seq
	var err error
	v := templates.RequestPage{
		Chrome:       h.chrome(r, fmt.Sprintf("%s in %s · seq %d", g.ToolName, saga, seq), "/"),
		Ref:          templates.RequestRef{Saga: saga, Seq: seq, Hash: engine.PayloadHash(g.Input)},
		SagaHref:     templates.SagaHref(saga),
		Saga:         rv.Saga,
		Tool:         g.ToolName,
		Requester:    g.Field(engine.KeyRequester),
		Client:       g.Field(engine.KeyClient),
		Reason:       g.Field(engine.KeyReason),
		Ruling:       h.ruling(rv),
		Requested:    h.when(g.Timestamp),
		Input:        g.Input,
		Payload:      prepare(g.Input),
		Verification: rv.Verification,
		TimelineHref: templates.EntryHref(saga, seq),
		SupersededBy: rv.SupersededBy,
	}
	v.Status = h.status(rv)
	v.Ref.Digest = digest(v.Status.State, len(v.Status.Decisions), rv.Saga.HeadSeq, v.Status.Late)
	if p := rv.Previous; p != nil {
		title := "Against the saga's earlier proposal of " + g.ToolName + " (re-planned)"
		if back := sentBack(rv.Journal, p.Seq); back != nil {
			title = fmt.Sprintf("Against the request at seq %d, which %s sent back: %q", p.Seq, back.Field(engine.KeyChangesBy), back.Field(engine.KeyReason))
		}
		v.Diffs = append(v.Diffs, diff(title, fmt.Sprintf("seq %d of this saga", p.Seq), templates.RequestHref(saga, p.Seq), p.Input, g.Input))
	}
	if l := rv.LastExecuted; l != nil {
		v.Diffs = append(v.Diffs, diff("Against the last executed call of "+g.ToolName,
			fmt.Sprintf("seq %d of saga %s", l.Seq, l.SagaID), templates.EntryHref(l.SagaID, l.Seq), l.Input, g.Input))
	}
	executed := func(cs []engine.Call) []templates.Step {
		var out []templates.Step
		for _, c := range cs {
			out = append(out, templates.Step{Seq: c.Seq, Tool: c.ToolName, Input: payload.Reveal(c.Input), Detail: payload.Reveal(c.Result),
				Href: templates.EntryHref(saga, c.Seq)})
		}
		return out
	}
	v.WouldUndo, v.StaysDone = executed(rv.WouldUndo), executed(rv.StaysDone)
	for _, s := range rv.Siblings {
		v.Siblings = append(v.Siblings, templates.Sibling{Seq: s.JournalSeq, Tool: s.ToolName,
			Href: templates.RequestHref(saga, s.JournalSeq), Summary: summary(s.Input, 4)})
	}
	for i := seq - 2; i >= 0 && len(v.Steps) < stepsShown; i-- {
		v.Steps = append(v.Steps, h.step(rv.Journal[i]))
	}
	v.MoreSteps = int(seq-1) - len(v.Steps)
	if v.Notifications, err = h.notificationsOf(r, saga, seq); err != nil {
		return templates.RequestPage{}, err
	}
	v.Actions = templates.Actions{Actions: h.Engine.Allowed(me, rv)}
	v.RejectEffects = v.Actions.Reject && rv.State != engine.StateApproved
	if a := v.Actions; a.Passkey && (a.Approve || a.Reject || a.RequestChanges) {
		keys, err := h.Engine.Passkeys(r.Context(), me)
		if err != nil {
			return templates.RequestPage{}, err
		}
		v.Actions.Passkeys = h.passkeyRows(keys, true)
		v.Payload.Exact = exact(g.Input)
	}
	return v, nil
}

func (h *Handlers) step(e engine.Entry) templates.Step {
	return templates.Step{Seq: e.Seq, Tool: e.ToolName, Phase: e.Phase, Input: payload.Reveal(e.Input), Detail: payload.Reveal(e.Payload),
		At: h.when(e.Timestamp), Href: templates.EntryHref(e.SagaID, e.Seq)}
}

// status says what became of the request, with its evidence.
func (h *Handlers) status(rv engine.Review) templates.RequestStatus {
	s := templates.RequestStatus{State: rv.State}
	decision := func(d *engine.Decision) templates.Decision {
		who := engine.Vote{Voter: d.Approver, OnBehalfOf: d.OnBehalfOf}.Name() // "carol for alice" for a delegate's
		return templates.Decision{Verb: string(d.Decided), Kind: decidedKind[d.Decided], Who: who, At: h.when(d.DecidedAt),
			Reason: d.Reason, ReceiptHref: templates.ReceiptHref(rv.Saga.ID, d.Receipt)}
	}
	for _, b := range rv.Votes {
		d := decision(&b.Decision)
		d.Withdrawn = b.Withdrawal != nil
		s.Decisions = append(s.Decisions, d)
		if b.Withdrawal != nil {
			s.Decisions = append(s.Decisions, decision(b.Withdrawal))
		}
	}
	for _, d := range []*engine.Decision{rv.Rejection, rv.Dismissal, rv.Changes, rv.Expiry, rv.Cancellation, rv.BreakGlass} {
		if d != nil {
			s.Decisions = append(s.Decisions, decision(d))
		}
	}
	for _, d := range rv.Ratifications {
		s.Decisions = append(s.Decisions, decision(&d))
	}
	if rv.Outcome != nil {
		st := h.step(*rv.Outcome)
		s.Outcome = &st
	}
	if r := rv.Resumed; r != nil {
		s.ExecutedBy, s.ExecutedAt = r.Field(engine.KeyRequester), h.when(r.Timestamp)
	}
	if rv.State == engine.StateApproved {
		s.Next = executors(rv.Executors)
	}
	h.clock(&s, rv)
	switch rv.State {
	case engine.StateUndecided:
		s.Headline = "Undecided: waiting for a person"
		if rv.Rule != nil && (rv.Rule.Quorum > 1 || len(rv.Tally.Votes) > 0) {
			s.Headline = "Undecided: " + rv.Tally.Progress()
		}
	case engine.StateApproved:
		s.Headline, s.Kind = "Approved by "+strings.Join(rv.Tally.Voters(), ", ")+", awaiting execution", "ok"
		if rv.Tally.Early(h.Now()) {
			s.Headline = "Approved by " + strings.Join(rv.Tally.Voters(), ", ") + "; may run " + h.until(rv.Tally.RunsFrom) // its rule's wait timer
		}
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
			d := diff("What the refused resume presented, against what was approved", "the approved bytes (above)", "", rv.Gated.Input, attempted)
			s.Attempted = &d
		}
	case engine.StateDropped:
		s.Headline, s.Kind = "Dropped: the saga failed ("+rv.Saga.Reason+") before this was decided or executed", "warn"
		if rv.Dropped != nil {
			s.Headline = fmt.Sprintf("Dropped at seq %d: the saga failed (%s) before this was decided or executed", rv.Dropped.Seq, rv.Saga.Reason)
		}
	case engine.StateSuperseded:
		s.Headline, s.Kind = fmt.Sprintf("Superseded: the saga re-planned, and its request at seq %d was approved or executed; "+
			"this one can no longer be approved or executed", rv.SupersededBy), "warn"
	case engine.StateChangesRequested:
		s.Headline, s.Kind = fmt.Sprintf("Sent back by %s: the agent was asked to change it; the saga went on", rv.Changes.Approver), "warn"
	case engine.StateExpired:
		s.Headline, s.Kind = fmt.Sprintf("Expired at %s without its quorum (%s): the server rejected it and the saga was compensated",
			rv.Journal[rv.Expiry.Receipt-1].Field(engine.KeyExpired), rv.Tally.Progress()), "bad"
	case engine.StateDismissed:
		s.Headline, s.Kind = fmt.Sprintf("Dismissed by %s: superseded by the saga's request at seq %d; the saga went on",
			rv.Dismissal.Approver, rv.SupersededBy), "warn"
	case engine.StateCancelled:
		s.Headline, s.Kind = fmt.Sprintf("Cancelled by %s, who made it: the saga went on", rv.Cancellation.Approver), "warn"
	}
	if g := rv.BreakGlass; g != nil {
		s.Headline = fmt.Sprintf("%s; by break-glass (%s), without its quorum", s.Headline, g.Approver)
		switch {
		case rv.Ratification.Met():
			s.Headline += "; ratified by " + strings.Join(rv.Ratification.Voters(), ", ")
		case h.Now().After(rv.RatifyBy):
			s.Headline, s.Kind = s.Headline+"; not ratified by "+h.when(rv.RatifyBy).UTC+": flagged in verification", "bad"
		default:
			s.Headline, s.Kind = s.Headline+"; to be ratified by its rule's quorum "+h.until(rv.RatifyBy)+" ("+rv.Ratification.Progress()+")", "warn"
		}
	}
	return s
}

// executors says who may execute an approved request, as the engine
// says.
func executors(x engine.Executors) string {
	who := []string{"the agent that started the saga (" + x.Initiator + "), when it resumes the request"}
	if x.Agents {
		who = append(who, "any other agent, resuming it")
	}
	if x.Approvers {
		who = append(who, "a person with the approver role, with Execute on this page")
	}
	return "Who executes it next: " + strings.Join(who, "; or ") + ". Whoever does first runs the tool once, with the approved bytes."
}

// decidedKind is how each decision is marked: by a word always, and a
// colour.
var decidedKind = map[engine.Decided]string{engine.DecidedApproved: "ok", engine.DecidedRejected: "bad", engine.DecidedExpired: "bad",
	engine.DecidedDismissed: "warn", engine.DecidedWithdrawn: "warn", engine.DecidedChanges: "warn", engine.DecidedCancelled: "warn",
	engine.DecidedBreakGlass: "bad", engine.DecidedRatified: "ok"}

// sentBack is the entry by which a reviewer sent the request at seq back
// for changes, or nil.
func sentBack(journal []engine.Entry, seq int64) *engine.Entry {
	for i := seq; i < int64(len(journal)); i++ {
		if en := journal[i]; en.ToolName == engine.GateTool && en.Refers() == seq && en.Field(engine.KeyChangesBy) != "" {
			return &journal[i]
		}
	}
	return nil
}

// ruling shows the rule a request is decided by: what the engine says
// of it, in words.
func (h *Handlers) ruling(rv engine.Review) templates.Ruling {
	g := rv.Gated
	v := templates.Ruling{Rule: g.Field(engine.KeyRule), Policy: g.Field(engine.KeyPolicy), Problem: rv.RuleProblem}
	if line := g.Field(engine.KeyContext); line != "" {
		if c, err := evidence.ReadContext(line); err == nil {
			v.Saw = c.Says()
		}
	}
	if v.Policy != "" {
		v.PolicyHref = templates.PolicyHref(v.Policy)
	}
	if r := rv.Rule; r != nil {
		v.Rule, v.When, v.Approvers, v.Quorum, v.ReasonRequired = r.Name, r.When, r.Approvers, r.Quorum, r.ReasonRequired
		if r.Thresholds != nil {
			for _, alt := range rv.Tally.Requirements() {
				var qs []templates.Requirement
				for _, q := range alt {
					qs = append(qs, templates.Requirement{Label: q.Label, Count: q.Count, Voters: q.Voters})
				}
				v.Alternatives = append(v.Alternatives, qs)
			}
		}
		if r.StepUp > 0 {
			v.StepUp = r.StepUp.String()
		}
	}
	return v
}

// clock says, of a pending request, when its rule's deadline or grant
// runs out, and who else may vote while its votes are short.
func (h *Handlers) clock(s *templates.RequestStatus, rv engine.Review) {
	r, t := rv.Rule, rv.Tally
	if r == nil || !rv.Pending || rv.State == engine.StateSuperseded {
		return
	}
	now := h.Now()
	switch {
	case !t.Met() && !t.Deadline.IsZero():
		s.Late, s.Clock = now.After(t.Deadline), "Expires "+h.until(t.Deadline)+" without its quorum"
	case t.Met() && !t.GrantUntil.IsZero():
		s.Late, s.Clock = now.After(t.GrantUntil), "May be executed until "+h.until(t.GrantUntil)
	}
	if !t.Met() {
		not := []string{"the request's requester (" + rv.Gated.Field(engine.KeyRequester) + ")", "the saga's initiator (" + rv.Saga.Initiator + ")"}
		if voted := t.Voters(); len(voted) > 0 {
			not = append(not, strings.Join(voted, ", ")+", who approved")
		}
		s.Others = fmt.Sprintf("Anyone in %s may vote, except %s.", strings.Join(rv.Tally.StillShort(), " or "), strings.Join(not, ", "))
		s.Unmeetable = rv.Unmeetable
	}
}

// until says when t comes, or came: "in 42m (2026-12-02 16:00:00 UTC)".
func (h *Handlers) until(t time.Time) string {
	at := t.UTC().Format("2006-01-02 15:04:05 UTC")
	d := t.Sub(h.Now())
	if d < 0 {
		return "passed " + ago(-d) + " (" + at + ")"
	}
	switch {
	case d < time.Minute:
		return fmt.Sprintf("in %ds (%s)", int(d.Seconds()), at)
	case d < time.Hour:
		return fmt.Sprintf("in %dm (%s)", int(d.Minutes()), at)
	case d < 48*time.Hour:
		return fmt.Sprintf("in %dh%02dm (%s)", int(d.Hours()), int(d.Minutes())%60, at)
	}
	return fmt.Sprintf("in %dd (%s)", int(d.Hours()/24), at)
}

// message is an engine error's message for people.
func message(err error) string {
	if e, ok := errors.AsType[*engine.Error](err); ok {
		return e.Msg
	}
	return "internal error"
}
