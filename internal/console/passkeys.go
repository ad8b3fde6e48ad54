package console

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/sagacity-go/sagacity/internal/auth"
	"github.com/sagacity-go/sagacity/internal/edge"
	"github.com/sagacity-go/sagacity/internal/engine"
	"github.com/sagacity-go/sagacity/web/templates"
	"github.com/sagacity-go/sagacity/wire"
)

// Passkeys: enrolled on /me, and signing votes on a request page. The
// engine begins and checks every ceremony; web/static/passkey.js hands
// its options to the browser and the browser's answer back, in JSON.

// ceremonyAnswer is what passkey.js posts: the ceremony it answers, and
// the browser's PublicKeyCredential as JSON.
type ceremonyAnswer struct {
	Ceremony   string          `json:"ceremony"`
	Credential json.RawMessage `json:"credential"`
}

// ceremonyStart is a ceremony begun: what the browser is asked.
type ceremonyStart struct {
	Ceremony string          `json:"ceremony"`
	Options  json.RawMessage `json:"options"`
}

// ceremonyDone says where to go once a ceremony is done.
type ceremonyDone struct {
	Next string `json:"next"`
}

// BeginEnrolment starts adding a passkey: POST /me/passkeys/begin.
func (h *Handlers) BeginEnrolment(w http.ResponseWriter, r *http.Request) error {
	id, options, err := h.Engine.BeginEnrolment(r.Context(), auth.From(r.Context()))
	if err != nil {
		return err
	}
	return edge.WriteJSON(w, http.StatusOK, ceremonyStart{Ceremony: id, Options: options})
}

// FinishEnrolment enrols the passkey the browser made: POST
// /me/passkeys/finish with a ceremonyAnswer.
func (h *Handlers) FinishEnrolment(w http.ResponseWriter, r *http.Request) error {
	var a ceremonyAnswer
	if err := edge.Decode(r, &a); err != nil {
		return err
	}
	if _, err := h.Engine.FinishEnrolment(r.Context(), auth.From(r.Context()), a.Ceremony, a.Credential); err != nil {
		return err
	}
	return edge.WriteJSON(w, http.StatusOK, ceremonyDone{Next: "/me"})
}

// RemovePasskey removes one of the person's passkeys: POST
// /me/passkeys/remove with credential; from a sign-in too old, it sends
// them to sign in again first.
func (h *Handlers) RemovePasskey(w http.ResponseWriter, r *http.Request) error {
	if err := parseForm(r); err != nil {
		return err
	}
	err := h.Engine.RemovePasskey(r.Context(), auth.From(r.Context()), r.PostForm.Get("credential"))
	if needsStepUp(err) {
		http.Redirect(w, r, signInAgain("/me", engine.EnrolWithin), http.StatusSeeOther)
		return nil
	}
	if err != nil {
		return err
	}
	http.Redirect(w, r, "/me", http.StatusSeeOther)
	return nil
}

// VoteWithPasskey casts the vote the browser's passkey signed: POST
// /request/passkey with a ceremonyAnswer.
func (h *Handlers) VoteWithPasskey(w http.ResponseWriter, r *http.Request) error {
	var a ceremonyAnswer
	if err := edge.Decode(r, &a); err != nil {
		return err
	}
	d, err := h.Engine.VoteWithPasskey(r.Context(), auth.From(r.Context()), a.Ceremony, a.Credential)
	if err != nil {
		return err
	}
	return edge.WriteJSON(w, http.StatusOK, ceremonyDone{Next: templates.RequestHref(d.SagaID, d.JournalSeq)})
}

// passkeys shows the person's passkeys and whether they may change them.
func (h *Handlers) passkeys(r *http.Request, me engine.Principal) (templates.Passkeys, error) {
	keys, err := h.Engine.Passkeys(r.Context(), me)
	if err != nil {
		return templates.Passkeys{}, err
	}
	origin, may := h.Engine.MayEnrol(me)
	v := templates.Passkeys{Origin: origin, Within: engine.EnrolWithin.String(), Keys: h.passkeyRows(keys, false)}
	switch {
	case may == nil:
	case needsStepUp(may):
		// Enrolling takes a sign-in of its own: the provider
		// authenticates the person again (max_age=0).
		v.SignIn = signInAgain("/me", 0)
	default:
		v.Off = message(may)
	}
	v.Shown = len(keys) > 0 || !engine.IsKind(may, engine.Forbidden) || v.SignIn != ""
	return v, nil
}

// passkeyRows shows passkeys: only those that count, when usable is set.
func (h *Handlers) passkeyRows(keys []engine.Passkey, usable bool) []templates.PasskeyRow {
	var rows []templates.PasskeyRow
	for _, k := range keys {
		if usable && !k.Removed.IsZero() {
			continue
		}
		row := templates.PasskeyRow{ID: k.ID, Enrolled: h.when(k.Enrolled), Seq: k.EnrolledSeq}
		if !k.Removed.IsZero() {
			t := h.when(k.Removed)
			row.Removed = &t
		}
		rows = append(rows, row)
	}
	return rows
}

// ballot begins the passkey ceremony of the vote v's confirmation asks
// for, with the credential the form chose.
func (h *Handlers) ballot(r *http.Request, v templates.RequestPage, a engine.Action, reason string) (*templates.Ballot, error) {
	me := auth.From(r.Context())
	c, err := h.Engine.BeginVote(r.Context(), me, v.Ref.Saga, v.Ref.Seq, a, reason, r.PostForm.Get("credential"))
	if err != nil {
		return nil, err
	}
	return &templates.Ballot{Ceremony: c.ID, Options: string(c.Options), Text: c.PasskeyBallot.Text(),
		PayloadSHA256: c.PasskeyBallot.PayloadSHA256, Origin: c.Origin}, nil
}

// exact is what the page hashes itself before a passkey signs a vote.
func exact(input string) string { return base64.StdEncoding.EncodeToString([]byte(input)) }

// needsStepUp reports whether err asks for a more recent sign-in.
func needsStepUp(err error) bool {
	e, ok := errors.AsType[*engine.Error](err)
	return ok && e.Code == wire.CodeStepUp
}

// signInAgain is where to sign in again, no longer than within ago (0:
// now, the provider authenticating the person again), and come back to
// back.
func signInAgain(back string, within time.Duration) string {
	return "/login?" + url.Values{"return_to": {back}, auth.MaxAgeParam: {strconv.Itoa(int(within.Seconds()))}}.Encode()
}
