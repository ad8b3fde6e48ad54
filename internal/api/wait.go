package api

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/sagacity-go/sagacity/internal/engine"
	"github.com/sagacity-go/sagacity/wire"
)

// Calls that wait for their decision (RFC 7240): a call of a gated tool,
// or a resume, sent with "Prefer: wait=<seconds>" is held until people
// decide the request (and, under a rule that executes on approval, until
// the server executed it) or until the wait ends, whichever comes first,
// at most MaxWait. A decision reached while held answers as the call or
// the resume would answer then, with "Preference-Applied: wait=<s>"; a
// wait that ends first answers what it would have answered at once,
// without it. Held calls are woken through the store (engine.Await),
// never by polling.

// PreferHeader and AppliedHeader are RFC 7240's.
const (
	PreferHeader  = "Prefer"
	AppliedHeader = "Preference-Applied"
)

// writeMargin is how much longer than its wait a held answer may take to
// be written: the server's write timeout is moved that far out.
const writeMargin = 30 * time.Second

// preferredWait reads the wait preference of a request's Prefer headers:
// how long the client will wait, at most max; 0 when it states none, or
// none this server understands (RFC 7240 §2: a preference not understood
// is ignored).
func preferredWait(h http.Header, max time.Duration) time.Duration {
	for _, v := range h.Values(PreferHeader) {
		for pref := range strings.SplitSeq(v, ",") {
			token, _, _ := strings.Cut(pref, ";") // parameters: none defined for wait
			name, value, ok := strings.Cut(strings.TrimSpace(token), "=")
			if !ok || !strings.EqualFold(strings.TrimSpace(name), "wait") {
				continue
			}
			n, err := strconv.ParseUint(strings.Trim(strings.TrimSpace(value), `"`), 10, 32)
			if err != nil {
				return 0
			}
			return min(time.Duration(n)*time.Second, max)
		}
	}
	return 0
}

// held is a wait a handler may hold: how long, and until when the
// server may write its answer.
type held struct {
	wait    time.Duration
	w       http.ResponseWriter
	serving context.Context // nil: the server never stops early
}

// holding reads the request's wait (see preferredWait); zero, its
// answer is written at once.
func (h *Handlers) holding(w http.ResponseWriter, r *http.Request) held {
	return held{wait: preferredWait(r.Header, h.MaxWait), w: w, serving: h.Serving}
}

// apart runs fn, the engine's first work on a call that will be held, on
// a goroutine of its own (engine.Apart), so that the goroutine holding it
// afterwards keeps a small stack; at once when it is not held.
func apart[T any](hd held, fn func() (T, error)) (T, error) {
	if hd.wait <= 0 {
		return fn()
	}
	return engine.Apart(fn)
}

// await holds until the request at seq is no longer one to wait on, or
// the wait ends: it reports whether it was decided meanwhile (then the
// answer carries Preference-Applied). The server's write deadline moves
// out to cover the wait.
func (hd held) await(ctx context.Context, e *engine.Engine, p engine.Principal, sagaID string, seq int64) (bool, error) {
	if hd.wait <= 0 {
		return false, nil
	}
	// Best effort: a writer without deadlines (a test's recorder) holds
	// as long as it likes.
	_ = http.NewResponseController(hd.w).SetWriteDeadline(time.Now().Add(hd.wait + writeMargin))
	ctx, cancel := context.WithTimeout(ctx, hd.wait)
	defer cancel()
	if hd.serving != nil {
		defer context.AfterFunc(hd.serving, cancel)()
	}
	rv, err := e.Await(ctx, p, sagaID, seq)
	switch {
	case ctx.Err() != nil:
		return false, nil // the wait ended, perhaps in the middle of a read
	case err != nil:
		return false, err
	case rv.Waiting():
		return false, nil
	}
	hd.w.Header().Set(AppliedHeader, "wait="+strconv.Itoa(int(hd.wait/time.Second)))
	return true, nil
}

// notRun is the answer to a resume that ran nothing, asked before the
// quorum (Conflict, code UNDECIDED) or before the rule's wait timer ended
// (code NOT_YET): 409 with where the request stands, nothing changed.
func (h *Handlers) notRun(ctx context.Context, p engine.Principal, sagaID string, seq int64, cause error) (wire.ResumeResult, error) {
	rv, err := h.Engine.Review(ctx, p, sagaID, seq)
	if err != nil {
		return wire.ResumeResult{}, errors.Join(cause, err)
	}
	rs := RequestOf(rv)
	msg := cause.Error()
	if ee, ok := errors.AsType[*engine.Error](cause); ok {
		msg = ee.Msg
	}
	return wire.ResumeResult{SagaID: sagaID, JournalSeq: seq, Status: wire.Status(rv.Saga.Status), Outcome: wire.Gated,
		Reason: msg, Request: &rs, Problem: wire.Problem{Error: msg, Kind: wire.KindConflict, Code: engine.CodeOf(cause)}}, nil
}
