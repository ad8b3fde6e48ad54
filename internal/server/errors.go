package server

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"

	"github.com/sagacity-go/sagacity/internal/api"
	"github.com/sagacity-go/sagacity/internal/engine"
	"github.com/sagacity-go/sagacity/web/templates"
)

// Errors of the HTTP layer itself.
var (
	errTooMany     = &engine.Error{Kind: engine.Unavailable, Msg: "too many requests; wait and try again"}
	errCrossOrigin = &engine.Error{Kind: engine.Forbidden, Msg: "cross-origin request refused"}
	errHost        = &engine.Error{Kind: engine.Forbidden, Msg: "this server does not answer to that host name"}
	errMethod      = &engine.Error{Kind: engine.Invalid, Msg: "method not allowed here"}
)

// status is the one place an error becomes an HTTP status.
func status(err error) int {
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		return http.StatusRequestEntityTooLarge
	case errors.Is(err, api.ErrMediaType):
		return http.StatusUnsupportedMediaType
	case err == errTooMany:
		return http.StatusTooManyRequests
	case err == errHost:
		return http.StatusMisdirectedRequest
	case err == errMethod:
		return http.StatusMethodNotAllowed
	}
	switch engine.KindOf(err) {
	case engine.NotFound:
		return http.StatusNotFound
	case engine.Invalid:
		return http.StatusBadRequest
	case engine.Conflict:
		return http.StatusConflict
	case engine.Forbidden:
		return http.StatusForbidden
	case engine.Unauthenticated:
		return http.StatusUnauthorized
	case engine.Unavailable:
		return http.StatusServiceUnavailable
	case engine.Unprocessable:
		return http.StatusUnprocessableEntity
	}
	return http.StatusInternalServerError
}

// message is what the caller is told: the kind's message, never the
// cause. Internal errors say only "internal error" and the request id.
func message(err error, code int, reqID string) string {
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		return fmt.Sprintf("request body is larger than %d bytes", tooBig.Limit)
	}
	// A halt is the engine's own word on why nothing executes, and names
	// no database internals: it is said as it is.
	if e, ok := errors.AsType[*engine.Error](err); ok && (code < 500 || err == errTooMany || errors.Is(err, engine.ErrHalted)) {
		return e.Msg
	}
	if code == http.StatusServiceUnavailable {
		return "service unavailable, try again (request " + reqID + ")"
	}
	return "internal error (request " + reqID + ")"
}

type errorJSON struct {
	Error      string `json:"error"`
	SagaID     string `json:"sagaId,omitempty"`
	JournalSeq int64  `json:"journalSeq,omitempty"`
	// Code says in one word what the caller can act on (engine.Code…).
	Code string `json:"code,omitempty"`
}

// handler is how every route is written: it returns an error instead of
// writing one, and fail writes it.
type handler func(w http.ResponseWriter, r *http.Request) error

// h adapts a handler to net/http.
func (s *server) h(fn handler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if err := fn(w, r); err != nil {
			s.fail(w, r, err)
		}
	}
}

// fail is the one adapter that writes every error response: JSON to the
// bearer-token routes (under /sagacity/, /metrics, and /mcp, whose
// clients are no browsers to send to a sign-in page), an htmx fragment
// for htmx requests, an HTML page otherwise. The caller sees the kind's
// message; the cause goes to the log.
func (s *server) fail(w http.ResponseWriter, r *http.Request, err error) {
	code := status(err)
	s.logError(r, err, code)
	msg := message(err, code, requestID(r.Context()))
	if strings.HasPrefix(r.URL.Path, "/sagacity/") || r.URL.Path == "/metrics" || r.URL.Path == "/mcp" {
		if code == http.StatusUnauthorized {
			w.Header().Set("WWW-Authenticate", `Bearer realm="sagacity"`)
		}
		body := errorJSON{Error: msg}
		if e, ok := errors.AsType[*engine.Error](err); ok {
			body.SagaID, body.JournalSeq, body.Code = e.SagaID, e.Seq, e.Code
		}
		api.WriteJSON(w, code, body)
		return
	}
	signIn := "/login?return_to=" + url.QueryEscape(r.URL.RequestURI())
	htmx := r.Header.Get("HX-Request") == "true"
	switch {
	case code == http.StatusUnauthorized && htmx:
		w.Header().Set("HX-Redirect", "/login")
		w.WriteHeader(code)
		return
	case code == http.StatusUnauthorized && r.Method == http.MethodGet:
		http.Redirect(w, r, signIn, http.StatusSeeOther)
		return
	}
	if htmx {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		// Show the error above the page and leave the card that was acted on.
		w.Header().Set("HX-Retarget", "#flash")
		w.Header().Set("HX-Reswap", "innerHTML")
		w.WriteHeader(code)
		templates.ErrorBox(msg).Render(r.Context(), w)
		return
	}
	s.Console.ErrorPage(w, r, code, msg)
}

func (s *server) logError(r *http.Request, err error, code int) {
	level := slog.LevelInfo
	if code >= 500 {
		level = slog.LevelError
	}
	s.Log.Log(r.Context(), level, "request failed", "method", r.Method, "path", r.URL.Path, "status", code, "err", err)
}
