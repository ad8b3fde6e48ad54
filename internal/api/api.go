// Package api is the JSON shell around the engine: the seed's approval
// endpoints and the agent gateway under /sagacity. Handlers decode, call
// the engine with the request's principal and encode; they return errors
// for the server's one error adapter to write.
package api

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/sagacity-go/sagacity/evidence"
	"github.com/sagacity-go/sagacity/internal/auth"
	"github.com/sagacity-go/sagacity/internal/edge"
	"github.com/sagacity-go/sagacity/internal/engine"
	"github.com/sagacity-go/sagacity/wire"
)

// Handlers serves the API from one engine.
type Handlers struct {
	Engine *engine.Engine
	// MaxWait bounds how long a call or a resume is held for its
	// decision (Prefer: wait); 0 holds none.
	MaxWait time.Duration
	// Serving ends when the server stops: the calls it holds then answer
	// as if their wait had ended, so that shutting down waits for none of
	// them. Nil: never.
	Serving context.Context
}

// Approvals lists pending requests: GET /sagacity/approvals[/{sagaId}],
// oldest first, at most 5000; X-Total-Count says how many are pending, so
// a client can tell when the list is cut.
func (h *Handlers) Approvals(w http.ResponseWriter, r *http.Request) error {
	sagaID := ""
	if chi.URLParam(r, "sagaId") != "" {
		var err error
		if sagaID, err = param(r, "sagaId"); err != nil {
			return err
		}
	}
	me := auth.From(r.Context())
	reqs, err := h.Engine.Approvals(r.Context(), me, sagaID)
	if err != nil {
		return err
	}
	_, total, err := h.Engine.Pending(r.Context(), me, engine.PendingFilter{SagaID: sagaID, Limit: 1})
	if err != nil {
		return err
	}
	w.Header().Set("X-Total-Count", strconv.Itoa(total))
	out := make([]wire.Approval, 0, len(reqs))
	for _, q := range reqs {
		out = append(out, ApprovalOf(q))
	}
	return edge.WriteJSON(w, http.StatusOK, out)
}

// Approve records a decision: POST /sagacity/approve/{sagaId}/{seq}.
func (h *Handlers) Approve(w http.ResponseWriter, r *http.Request) error {
	return h.decide(w, r, h.Engine.Approve, engine.ActApprove)
}

// Reject records a rejection and compensates: POST /sagacity/reject/{sagaId}/{seq}.
func (h *Handlers) Reject(w http.ResponseWriter, r *http.Request) error {
	return h.decide(w, r, h.Engine.Reject, engine.ActReject)
}

// Dismiss drops a superseded request, the saga going on:
// POST /sagacity/dismiss/{sagaId}/{seq}.
func (h *Handlers) Dismiss(w http.ResponseWriter, r *http.Request) error {
	return h.decide(w, r, h.Engine.Dismiss, engine.ActDismiss)
}

type decideFunc = func(ctx context.Context, p engine.Principal, sagaID string, seq int64, reason string) (engine.Decision, error)

// decide takes the decision of a (decide's) on the request the path
// names; cast for a delegator when the body names one (VoteFor).
func (h *Handlers) decide(w http.ResponseWriter, r *http.Request, decide decideFunc, a engine.Action) error {
	var body wire.DecisionRequest
	sagaID, seq, err := stepBody(r, edge.DecodeOptional, &body)
	if err != nil {
		return err
	}
	p, err := auth.From(r.Context()).Claiming(body.Approver)
	if err != nil {
		return err
	}
	var d engine.Decision
	if body.OnBehalfOf != "" {
		d, err = h.Engine.VoteFor(r.Context(), p, body.OnBehalfOf, a, sagaID, seq, body.Reason)
	} else {
		d, err = decide(r.Context(), p, sagaID, seq, body.Reason)
	}
	if err != nil {
		return err
	}
	return edge.WriteJSON(w, http.StatusOK, DecisionOf(d))
}

// Resume executes an approved request bound to its payload:
// POST /sagacity/resume/{sagaId}/{seq} with {"payload": "..."}. A refusal
// is a completed action (409); so is a tool that failed (422); both with
// the saga's status and the reason, after compensating. A tool that ran
// but whose outcome could not be journaled is 202 IN_DOUBT: it must not
// be retried.
func (h *Handlers) Resume(w http.ResponseWriter, r *http.Request) error {
	var body wire.ResumeRequest
	sagaID, seq, err := stepBody(r, edge.DecodeOptional, &body)
	if err != nil {
		return err
	}
	if body.Payload == nil {
		return engine.Errorf(engine.Invalid, "body must contain a 'payload' field")
	}
	p, hd := auth.From(r.Context()), h.holding(w, r)
	res, err := apart(hd, func() (engine.ResumeResult, error) {
		return h.Engine.Resume(r.Context(), p, sagaID, seq, *body.Payload)
	})
	if c := engine.CodeOf(err); c == wire.CodeUndecided || c == wire.CodeNotYet {
		// Held: asked again once decided (and, under a rule that
		// executes on approval, executed), as the agent would.
		if decided, werr := hd.await(r.Context(), h.Engine, p, sagaID, seq); werr != nil {
			return werr
		} else if decided {
			res, err = h.Engine.Resume(r.Context(), p, sagaID, seq, *body.Payload)
		}
	}
	if c := engine.CodeOf(err); c == wire.CodeUndecided || c == wire.CodeNotYet {
		out, uerr := h.notRun(r.Context(), p, sagaID, seq, err)
		if uerr != nil {
			return uerr
		}
		return edge.WriteJSON(w, http.StatusConflict, out)
	}
	if err != nil {
		return err
	}
	out, code := ResumeOf(res)
	return edge.WriteJSON(w, code, out)
}

// Audit exports a saga's journal as NDJSON: GET /sagacity/audit/{sagaId}.
// With ?proofs=latest (or a checkpoint's size), each entry the checkpoint
// covers carries its leaf and inclusion proof: what sagacity verify
// -checkpoint checks offline.
func (h *Handlers) Audit(w http.ResponseWriter, r *http.Request) error {
	sagaID, err := param(r, "sagaId")
	if err != nil {
		return err
	}
	me := auth.From(r.Context())
	var entries []engine.Entry
	var proofs *engine.Proofs
	if q := r.URL.Query(); q.Has("proofs") {
		size, err := checkpointSize(q.Get("proofs"), "proofs")
		if err != nil {
			return err
		}
		entries, proofs, err = h.Engine.Evidence(r.Context(), me, sagaID, size)
		if err != nil {
			return err
		}
	} else if entries, err = h.Engine.Journal(r.Context(), me, sagaID); err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	return evidence.WriteNDJSON(w, entries, proofs)
}

// checkpointSize reads a size parameter: "latest" is 0.
func checkpointSize(v, name string) (int64, error) {
	if v == "latest" {
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 1 {
		return 0, engine.Errorf(engine.Invalid, "%s must be latest or a checkpoint's size, a positive integer", name)
	}
	return n, nil
}

// Checkpoint serves a signed checkpoint of the global log this server
// keeps outside its database, as the note sagacity verify and
// verify-log read: GET /sagacity/checkpoints/{size}, size latest or a
// number.
func (h *Handlers) Checkpoint(w http.ResponseWriter, r *http.Request) error {
	size, err := checkpointSize(chi.URLParam(r, "size"), "size")
	if err != nil {
		return err
	}
	signed, err := h.Engine.Checkpoint(r.Context(), auth.From(r.Context()), size)
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, err = io.WriteString(w, signed)
	return err
}

// Consistency proves that the log at size from is a prefix of the log at
// size to: GET /sagacity/checkpoints/consistency?from=&to=.
func (h *Handlers) Consistency(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	from, ferr := strconv.ParseInt(q.Get("from"), 10, 64)
	to, terr := strconv.ParseInt(q.Get("to"), 10, 64)
	if ferr != nil || terr != nil {
		return engine.Errorf(engine.Invalid, "from and to must be the sizes of two checkpoints")
	}
	p, err := h.Engine.ConsistencyProof(r.Context(), auth.From(r.Context()), from, to)
	if err != nil {
		return err
	}
	if p == nil {
		p = [][]byte{}
	}
	return edge.WriteJSON(w, http.StatusOK, wire.ConsistencyProof{From: from, To: to, Proof: p})
}

// Log reports the global log: its size, the newest checkpoint outside
// the database, and whether executions are halted because the database
// does not match it: GET /sagacity/log.
func (h *Handlers) Log(w http.ResponseWriter, r *http.Request) error {
	st, err := h.Engine.LogStatus(r.Context(), auth.From(r.Context()))
	if err != nil {
		return err
	}
	opt := func(t time.Time) *time.Time {
		if t.IsZero() {
			return nil
		}
		t = t.UTC()
		return &t
	}
	out := wire.LogStatus{Size: st.Size, SignedAt: opt(st.SignedAt), Halted: st.Halted, CheckedAt: opt(st.CheckedAt), FullCheckAt: opt(st.FullAt)}
	if st.Signed != "" {
		out.Checkpoint = &st.Signed
	}
	return edge.WriteJSON(w, http.StatusOK, out)
}

// Verify checks a saga's hash chain: GET /sagacity/audit/{sagaId}/verify.
func (h *Handlers) Verify(w http.ResponseWriter, r *http.Request) error {
	sagaID, err := param(r, "sagaId")
	if err != nil {
		return err
	}
	v, err := h.Engine.Verify(r.Context(), auth.From(r.Context()), sagaID)
	if err != nil {
		return err
	}
	return edge.WriteJSON(w, http.StatusOK, v)
}

// Keys serves the public key receipts and checkpoints verify with:
// GET /sagacity/keys.
func (h *Handlers) Keys(w http.ResponseWriter, r *http.Request) error {
	return edge.WriteJSON(w, http.StatusOK, wire.Keys{Keys: []string{h.Engine.VerifierKey()}})
}

// Receipt downloads the signed receipt of the decision journaled at seq:
// GET /sagacity/receipts/{sagaId}/{seq}. sagacity verify-receipt checks it
// offline with the payload and the public key.
func (h *Handlers) Receipt(w http.ResponseWriter, r *http.Request) error {
	sagaID, seq, err := sagaSeq(r)
	if err != nil {
		return err
	}
	receipt, err := h.Engine.Receipt(r.Context(), auth.From(r.Context()), sagaID, seq)
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	edge.Attachment(w, engine.ReceiptFile(sagaID, seq))
	_, err = io.WriteString(w, receipt)
	return err
}

// param returns a path parameter, unescaped when the router matched the
// escaped path (a saga id may hold any printable character, "/" included).
func param(r *http.Request, name string) (string, error) {
	v := chi.URLParam(r, name)
	if r.URL.RawPath == "" {
		return v, nil
	}
	u, err := url.PathUnescape(v)
	if err != nil {
		return "", engine.Errorf(engine.Invalid, "%s is not a valid path segment", name)
	}
	return u, nil
}

// stepBody reads a request about the step at {sagaId}/{seq}: the path's
// saga and seq as sagaSeq reads them, then the JSON body into body with
// decode (edge.Decode, or edge.DecodeOptional where an empty body is one).
// sagaSeq's or decode's errors.
func stepBody(r *http.Request, decode func(*http.Request, any) error, body any) (string, int64, error) {
	sagaID, seq, err := sagaSeq(r)
	if err != nil {
		return "", 0, err
	}
	return sagaID, seq, decode(r, body)
}

// sagaSeq reads the path's {sagaId} and {seq}: Invalid when the saga is
// no valid path segment or seq is not a positive integer.
func sagaSeq(r *http.Request) (string, int64, error) {
	sagaID, err := param(r, "sagaId")
	if err != nil {
		return "", 0, err
	}
	seq, err := strconv.ParseInt(chi.URLParam(r, "seq"), 10, 64)
	if err != nil || seq <= 0 {
		return "", 0, engine.Errorf(engine.Invalid, "seq must be a positive integer")
	}
	return sagaID, seq, nil
}
