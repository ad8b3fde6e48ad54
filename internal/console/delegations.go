package console

import (
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sagacity-go/sagacity/internal/auth"
	"github.com/sagacity-go/sagacity/internal/engine"
	"github.com/sagacity-go/sagacity/web/templates"
)

// formTime is how the delegation form writes a moment: datetime-local,
// read as UTC.
const formTime = "2006-01-02T15:04"

// Delegations lists every delegation, and lets an approver delegate and
// revoke: GET /delegations.
func (h *Handlers) Delegations(w http.ResponseWriter, r *http.Request) error {
	me := auth.From(r.Context())
	ds, err := h.Engine.Delegations(r.Context(), me)
	if err != nil {
		return err
	}
	v := templates.DelegationsPage{Chrome: h.chrome(r, "Delegations", "/delegations"), MaxDays: int(engine.MaxDelegation.Hours() / 24)}
	if err := h.Engine.Can(me, engine.ActDelegate, engine.Subject{}); err != nil {
		v.NoDelegate = "You cannot delegate: " + message(err) + "."
	}
	for _, rule := range h.Engine.Policy().All() {
		v.Rules = append(v.Rules, rule.Name)
	}
	now := h.Now()
	v.Until = now.UTC().Add(7 * 24 * time.Hour).Format(formTime)
	for _, d := range ds {
		state := d.State(now)
		as := slices.Clone(d.Groups)
		if len(as) == 0 {
			for _, r := range d.Roles {
				as = append(as, string(r))
			}
		}
		row := templates.DelegationRow{Seq: d.Seq, From: d.From, To: d.To, Rules: strings.Join(d.Rules, ", "), As: strings.Join(as, ", "),
			Start: h.when(d.Start), Until: h.when(d.Until), Reason: d.Reason, State: state, RevokedBy: d.RevokedBy,
			Revoke: v.NoDelegate == "" && d.Revoked.IsZero() && state != "ended" && (me.ID == d.From || me.ID == d.To)}
		if !d.Revoked.IsZero() {
			t := h.when(d.Revoked)
			row.Revoked = &t
		}
		v.Rows = append(v.Rows, row)
	}
	return render(w, r, http.StatusOK, templates.Delegations(v))
}

// Delegate hands the person's eligibility under the rules checked to
// another identity, from from (now when empty) until until, both UTC:
// POST /delegations.
func (h *Handlers) Delegate(w http.ResponseWriter, r *http.Request) error {
	if err := parseForm(r); err != nil {
		return err
	}
	f := r.PostForm
	var from time.Time
	if s := f.Get("from"); s != "" {
		t, err := time.Parse(formTime, s)
		if err != nil {
			return engine.Errorf(engine.Invalid, "from must be a date and time such as 2026-12-01T09:00")
		}
		from = t
	}
	until, err := time.Parse(formTime, f.Get("until"))
	if err != nil {
		return engine.Errorf(engine.Invalid, "until must be a date and time such as 2026-12-08T09:00")
	}
	if _, err := h.Engine.Delegate(r.Context(), auth.From(r.Context()), strings.TrimSpace(f.Get("to")), f["rule"], from, until,
		f.Get("reason")); err != nil {
		return err
	}
	http.Redirect(w, r, "/delegations", http.StatusSeeOther)
	return nil
}

// Revoke ends a delegation the person made or holds: POST
// /delegations/revoke with seq.
func (h *Handlers) Revoke(w http.ResponseWriter, r *http.Request) error {
	if err := parseForm(r); err != nil {
		return err
	}
	seq, err := strconv.ParseInt(r.PostForm.Get("seq"), 10, 64)
	if err != nil || seq <= 0 {
		return engine.Errorf(engine.Invalid, "seq must be a delegation's number")
	}
	if _, err := h.Engine.Revoke(r.Context(), auth.From(r.Context()), seq); err != nil {
		return err
	}
	http.Redirect(w, r, "/delegations", http.StatusSeeOther)
	return nil
}
