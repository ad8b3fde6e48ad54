package api

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/sagacity-go/sagacity/internal/auth"
	"github.com/sagacity-go/sagacity/internal/edge"
	"github.com/sagacity-go/sagacity/internal/engine"
	"github.com/sagacity-go/sagacity/wire"
)

// Call runs a tool in a saga: POST /sagacity/sagas/{sagaId}/calls with
// {"tool": "...", "input": "<exact input>"} and, optionally, an
// Idempotency-Key header: the same call sent again under it answers the
// first one's outcome and runs nothing. 200 executed, 202 gated (seq is
// the one to approve and resume) or in doubt (the tool ran but its
// outcome could not be journaled: not to be retried), 422 the tool failed
// and the saga was compensated, or the key was used with other bytes.
func (h *Handlers) Call(w http.ResponseWriter, r *http.Request) error {
	sagaID, err := param(r, "sagaId")
	if err != nil {
		return err
	}
	key, err := idempotencyKey(r.Header)
	if err != nil {
		return err
	}
	var body wire.CallRequest
	if err := edge.Decode(r, &body); err != nil {
		return err
	}
	if body.Tool == "" || body.Input == nil {
		return engine.Errorf(engine.Invalid, `body must contain "tool" and "input"`)
	}
	p, hd := auth.From(r.Context()), h.holding(w, r)
	ask := engine.Ask{Tool: body.Tool, Input: *body.Input, Key: key, Reason: body.Reason}
	res, err := apart(hd, func() (engine.CallResult, error) { return h.Engine.CallOnce(r.Context(), p, sagaID, ask) })
	if err == nil && res.Outcome == engine.OutcomeAwaitingApproval {
		// Held: answered as the call sent again would be, once decided.
		if decided, werr := hd.await(r.Context(), h.Engine, p, sagaID, res.Seq); werr != nil {
			return werr
		} else if decided {
			res, err = h.Engine.Gated(r.Context(), p, sagaID, res.Seq)
		}
	}
	if err != nil {
		return err
	}
	out, code := CallOf(res)
	return edge.WriteJSON(w, code, out)
}

// KeyHeader is the header of an agent's idempotency key for a call.
const KeyHeader = "Idempotency-Key"

// idempotencyKey reads a call's Idempotency-Key: the sf-string the IETF
// draft writes ("…", with \" and \\ escaped), or the bare value many
// clients send; "" when there is none.
func idempotencyKey(h http.Header) (string, error) {
	vs := h.Values(KeyHeader)
	if len(vs) == 0 {
		return "", nil
	}
	v := strings.TrimSpace(vs[0])
	if len(vs) > 1 || v == "" {
		return "", engine.Errorf(engine.Invalid, "send one Idempotency-Key, not empty")
	}
	if len(v) < 2 || v[0] != '"' || v[len(v)-1] != '"' {
		return v, nil
	}
	var b strings.Builder
	for i := 1; i < len(v)-1; i++ {
		c := v[i]
		switch c {
		case '\\':
			if i++; i == len(v)-1 || (v[i] != '"' && v[i] != '\\') {
				return "", engine.Errorf(engine.Invalid, `Idempotency-Key escapes only \" and \\`)
			}
			c = v[i]
		case '"':
			return "", engine.Errorf(engine.Invalid, `Idempotency-Key has a '"' it does not escape`)
		}
		b.WriteByte(c)
	}
	if b.Len() == 0 {
		return "", engine.Errorf(engine.Invalid, "send one Idempotency-Key, not empty")
	}
	return b.String(), nil
}

// End says the agent's run is over: POST /sagacity/sagas/{sagaId}/end.
func (h *Handlers) End(w http.ResponseWriter, r *http.Request) error {
	sagaID, err := param(r, "sagaId")
	if err != nil {
		return err
	}
	if err := edge.DecodeOptional(r, &struct{}{}); err != nil {
		return err
	}
	s, err := h.Engine.End(r.Context(), auth.From(r.Context()), sagaID)
	if err != nil {
		return err
	}
	return edge.WriteJSON(w, http.StatusOK, SagaOf(s))
}

// Abort compensates the saga and drops its pending requests:
// POST /sagacity/sagas/{sagaId}/abort with an optional {"reason": "..."}.
func (h *Handlers) Abort(w http.ResponseWriter, r *http.Request) error {
	sagaID, err := param(r, "sagaId")
	if err != nil {
		return err
	}
	var body wire.AbortRequest
	if err := edge.DecodeOptional(r, &body); err != nil {
		return err
	}
	s, err := h.Engine.Abort(r.Context(), auth.From(r.Context()), sagaID, body.Reason)
	if err != nil {
		return err
	}
	return edge.WriteJSON(w, http.StatusOK, SagaOf(s))
}

// Saga reads one saga: GET /sagacity/sagas/{sagaId}.
func (h *Handlers) Saga(w http.ResponseWriter, r *http.Request) error {
	sagaID, err := param(r, "sagaId")
	if err != nil {
		return err
	}
	s, err := h.Engine.Lookup(r.Context(), auth.From(r.Context()), sagaID)
	if err != nil {
		return err
	}
	return edge.WriteJSON(w, http.StatusOK, SagaOf(s))
}

// Sagas lists sagas, newest first: GET /sagacity/sagas?status=&limit=&cursor=.
// limit defaults to 50 and is at most 500; nextCursor continues the listing.
func (h *Handlers) Sagas(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	f := engine.SagaFilter{Status: engine.Status(q.Get("status")), Limit: 50}
	if l := q.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > engine.MaxList {
			return engine.Errorf(engine.Invalid, "limit must be an integer from 1 to %d", engine.MaxList)
		}
		f.Limit = n
	}
	if c := q.Get("cursor"); c != "" {
		var err error
		after, err := engine.ParseSagaCursor(c)
		if err != nil {
			return err
		}
		f.After = &after
	}
	sagas, err := h.Engine.Sagas(r.Context(), auth.From(r.Context()), f)
	if err != nil {
		return err
	}
	out := wire.SagaPage{Sagas: make([]wire.Saga, 0, len(sagas))}
	for _, s := range sagas {
		out.Sagas = append(out.Sagas, SagaOf(s))
	}
	if len(sagas) == f.Limit {
		last := sagas[len(sagas)-1]
		out.NextCursor = engine.SagaCursor{CreatedAt: last.CreatedAt, ID: last.ID}.String()
	}
	return edge.WriteJSON(w, http.StatusOK, out)
}

// InDoubt lists calls whose outcome is unknown: those whose process is
// gone, at once, and those still for olderThan (GET
// /sagacity/in-doubt?olderThan=10m; by default the in-doubt window, after
// which a person may resolve them).
func (h *Handlers) InDoubt(w http.ResponseWriter, r *http.Request) error {
	age := time.Duration(-1)
	if s := r.URL.Query().Get("olderThan"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d < 0 {
			return engine.Errorf(engine.Invalid, "olderThan must be a duration such as 10m")
		}
		age = d
	}
	calls, err := h.Engine.InDoubt(r.Context(), auth.From(r.Context()), age)
	if err != nil {
		return err
	}
	out := make([]wire.CallInDoubt, 0, len(calls))
	for _, c := range calls {
		out = append(out, CallInDoubtOf(c))
	}
	return edge.WriteJSON(w, http.StatusOK, out)
}

// Resolve records what a person found out about a call in doubt:
// POST /sagacity/in-doubt/{sagaId}/{seq}/resolve with {"happened": true|false,
// "result": "...", "reason": "..."}. It answers with the saga.
func (h *Handlers) Resolve(w http.ResponseWriter, r *http.Request) error {
	var body wire.Resolution
	sagaID, seq, err := stepBody(r, edge.Decode, &body)
	if err != nil {
		return err
	}
	if body.Happened == nil {
		return engine.Errorf(engine.Invalid, `body must say "happened": true or false`)
	}
	s, err := h.Engine.Resolve(r.Context(), auth.From(r.Context()), sagaID, seq, *body.Happened, body.Result, body.Reason)
	if err != nil {
		return err
	}
	return edge.WriteJSON(w, http.StatusOK, SagaOf(s))
}
