package console

import (
	"net/http"

	"github.com/sagacity-go/sagacity/internal/auth"
	"github.com/sagacity-go/sagacity/internal/engine"
	"github.com/sagacity-go/sagacity/web/templates"
)

// abilities are the engine's actions in words, for the who-am-I page.
var abilities = []struct {
	action engine.Action
	words  string
}{
	{engine.ActReview, "see the requests that wait for a decision"},
	{engine.ActApprove, "approve requests (not of sagas you started, nor calls you asked for)"},
	{engine.ActReject, "reject requests, which compensates their saga"},
	{engine.ActResume, "execute approved requests with their approved bytes"},
	{engine.ActAbort, "abort sagas, from a saga's page (an agent, only the sagas it started)"},
	{engine.ActCall, "call tools as an agent"},
	{engine.ActRead, "read sagas and their journals"},
	{engine.ActVerify, "verify journals"},
	{engine.ActInDoubt, "see calls in doubt"},
	{engine.ActResolve, "record what a call in doubt came to, and a step whose undo failed as undone by hand (not of sagas you started, nor calls you asked for)"},
	{engine.ActEnrol, "add passkeys that sign your votes"},
}

// Me is who is signed in, what the engine lets them do, and their
// passkeys: GET /me.
func (h *Handlers) Me(w http.ResponseWriter, r *http.Request) error {
	me := auth.From(r.Context())
	v := templates.MePage{Chrome: h.chrome(r, "You", "")}
	for _, a := range abilities {
		if err := h.Engine.Can(me, a.action, engine.Subject{}); err != nil {
			v.MayNot = append(v.MayNot, a.words+": "+message(err))
		} else {
			v.May = append(v.May, a.words)
		}
	}
	var err error
	if v.Passkeys, err = h.passkeys(r, me); err != nil {
		return err
	}
	return render(w, r, http.StatusOK, templates.Me(v))
}
