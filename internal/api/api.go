// Package api is the JSON shell around the engine: the seed's approval
// endpoints and the agent gateway under /sagacity. Handlers decode, call
// the engine with the request's principal and encode; they return errors
// for the server's one error adapter to write.
package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/sagacity-go/sagacity/internal/auth"
	"github.com/sagacity-go/sagacity/internal/engine"
	"github.com/sagacity-go/sagacity/wire"
)

// Handlers serves the API from one engine.
type Handlers struct {
	Engine *engine.Engine
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
	return WriteJSON(w, http.StatusOK, out)
}

// Approve records a decision: POST /sagacity/approve/{sagaId}/{seq}.
func (h *Handlers) Approve(w http.ResponseWriter, r *http.Request) error {
	return h.decide(w, r, h.Engine.Approve)
}

// Reject records a rejection and compensates: POST /sagacity/reject/{sagaId}/{seq}.
func (h *Handlers) Reject(w http.ResponseWriter, r *http.Request) error {
	return h.decide(w, r, h.Engine.Reject)
}

// Dismiss drops a superseded request, the saga going on:
// POST /sagacity/dismiss/{sagaId}/{seq}.
func (h *Handlers) Dismiss(w http.ResponseWriter, r *http.Request) error {
	return h.decide(w, r, h.Engine.Dismiss)
}

type decideFunc = func(ctx context.Context, p engine.Principal, sagaID string, seq int64, reason string) (engine.Decision, error)

func (h *Handlers) decide(w http.ResponseWriter, r *http.Request, decide decideFunc) error {
	sagaID, seq, err := sagaSeq(r)
	if err != nil {
		return err
	}
	var body wire.DecisionRequest
	if err := decode(r, &body, true); err != nil {
		return err
	}
	p, err := auth.From(r.Context()).Claiming(body.Approver)
	if err != nil {
		return err
	}
	d, err := decide(r.Context(), p, sagaID, seq, body.Reason)
	if err != nil {
		return err
	}
	return WriteJSON(w, http.StatusOK, DecisionOf(d))
}

// Resume executes an approved request bound to its payload:
// POST /sagacity/resume/{sagaId}/{seq} with {"payload": "..."}. A refusal
// is a completed action (409); so is a tool that failed (422); both with
// the saga's status and the reason, after compensating. A tool that ran
// but whose outcome could not be journaled is 202 IN_DOUBT: it must not
// be retried.
func (h *Handlers) Resume(w http.ResponseWriter, r *http.Request) error {
	sagaID, seq, err := sagaSeq(r)
	if err != nil {
		return err
	}
	var body wire.ResumeRequest
	if err := decode(r, &body, true); err != nil {
		return err
	}
	if body.Payload == nil {
		return engine.Errorf(engine.Invalid, "body must contain a 'payload' field")
	}
	res, err := h.Engine.Resume(r.Context(), auth.From(r.Context()), sagaID, seq, *body.Payload)
	if err != nil {
		return err
	}
	out, code := ResumeOf(res)
	return WriteJSON(w, code, out)
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
	return engine.WriteNDJSON(w, entries, proofs)
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
	return WriteJSON(w, http.StatusOK, wire.ConsistencyProof{From: from, To: to, Proof: p})
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
	return WriteJSON(w, http.StatusOK, out)
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
	return WriteJSON(w, http.StatusOK, v)
}

// Keys serves the public key receipts and checkpoints verify with:
// GET /sagacity/keys.
func (h *Handlers) Keys(w http.ResponseWriter, r *http.Request) error {
	return WriteJSON(w, http.StatusOK, wire.Keys{Keys: []string{h.Engine.VerifierKey()}})
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
	w.Header().Set("Content-Disposition", fmt.Sprintf(`attachment; filename="receipt-%d.note"`, seq))
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

// decode reads one JSON object into v, strictly: the body must be
// application/json and valid UTF-8 JSON, and its keys must be v's field
// names exactly, each once (a duplicate or case-variant key could make the
// engine and a reviewer read different values), with nothing after the
// object. An empty body is allowed when allowEmpty is set. The server caps
// the body's size.
func decode(r *http.Request, v any, allowEmpty bool) error {
	body, err := ReadBody(r)
	if err != nil {
		return err
	}
	if len(body) == 0 {
		if allowEmpty {
			return nil
		}
		return engine.Errorf(engine.Invalid, "request body is empty; send a JSON object")
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		return ErrMediaType
	}
	return Unmarshal(body, v)
}

// Decode reads one JSON object into v with decode's rules, for the
// console's JSON endpoints; a body is required.
func Decode(r *http.Request, v any) error { return decode(r, v, false) }

// ReadBody reads a request body whole; errors as BodyError.
func ReadBody(r *http.Request) ([]byte, error) {
	body, err := io.ReadAll(r.Body)
	return body, BodyError(err)
}

// BodyError classifies an error reading a request body (or parsing a form
// from it): a body over the server's cap is 413; one that cannot be read,
// as from a client that stalls or hangs up, is Invalid: the client's
// problem, not the server's.
func BodyError(err error) error {
	if tooBig, ok := errors.AsType[*http.MaxBytesError](err); ok {
		return &EdgeError{Status: http.StatusRequestEntityTooLarge, Kind: wire.KindTooLarge,
			Msg: fmt.Sprintf("request body is larger than %d bytes", tooBig.Limit), Err: err}
	}
	if err != nil {
		return &engine.Error{Kind: engine.Invalid, Msg: "the request body could not be read", Err: err}
	}
	return nil
}

// Unmarshal decodes one JSON object into v with decode's rules. Errors are
// Invalid and describe the problem without echoing the body.
func Unmarshal(body []byte, v any) error {
	if err := jsonv2.Unmarshal(body, v, jsonv2.RejectUnknownMembers(true)); err != nil {
		return engine.Errorf(engine.Invalid, "invalid JSON body: %s", jsonProblem(err))
	}
	return nil
}

// jsonProblem describes a decoding error: where, and what, in words.
func jsonProblem(err error) string {
	if se, ok := errors.AsType[*jsontext.SyntacticError](err); ok {
		// The cause may quote the offending bytes between backquotes.
		what, _, _ := strings.Cut(strings.TrimPrefix(se.Err.Error(), "jsontext: "), " `")
		return fmt.Sprintf("%s at byte %d", what, se.ByteOffset)
	}
	se, ok := errors.AsType[*jsonv2.SemanticError](err)
	switch {
	case ok && errors.Is(err, jsonv2.ErrUnknownName):
		return fmt.Sprintf("unknown field %s", strconv.Quote(string(se.JSONPointer.LastToken())))
	case ok && se.JSONPointer != "" && se.GoType != nil:
		return fmt.Sprintf("field %s must be %s", strconv.Quote(string(se.JSONPointer.LastToken())), jsonKind(se.GoType.Kind().String()))
	case ok:
		return "the body must be a JSON object"
	case errors.Is(err, io.ErrUnexpectedEOF):
		return "truncated"
	}
	return "not a JSON object"
}

func jsonKind(k string) string {
	switch k {
	case "string", "ptr":
		return "a string"
	case "int", "int64":
		return "an integer"
	case "bool":
		return "true or false"
	}
	return k
}

// WriteJSON writes v as a JSON response with the given status. The
// server's error adapter writes error bodies with it too.
func WriteJSON(w http.ResponseWriter, status int, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, err = w.Write(append(b, '\n'))
	return err
}
