package server

import (
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"strings"

	"github.com/sagacity-go/sagacity/internal/edge"
	"github.com/sagacity-go/sagacity/internal/engine"
	"github.com/sagacity-go/sagacity/web/templates"
	"github.com/sagacity-go/sagacity/wire"
)

// Refusals of the HTTP layer itself.
var (
	errTooMany     = &edge.Error{Status: http.StatusTooManyRequests, Kind: wire.KindTooManyRequests, Msg: "too many requests; wait and try again"}
	errHost        = &edge.Error{Status: http.StatusMisdirectedRequest, Kind: wire.KindMisdirected, Msg: "this server does not answer to that host name"}
	errMethod      = &edge.Error{Status: http.StatusMethodNotAllowed, Kind: wire.KindMethodNotAllowed, Msg: "method not allowed here"}
	errCrossOrigin = &engine.Error{Kind: engine.Forbidden, Msg: "cross-origin request refused"}
)

// message is what the caller is told: the refusal's own message, never
// its cause. Internal and unavailable errors say only that, with the
// request id that finds the cause in the log; a halt is the engine's own
// word on why nothing executes, and names no database internals.
func message(err error, code int, reqID string) string {
	if e, ok := errors.AsType[*edge.Error](err); ok {
		return e.Msg
	}
	if e, ok := errors.AsType[*engine.Error](err); ok && (code < 500 || errors.Is(err, engine.ErrHalted)) {
		return e.Msg
	}
	if code == http.StatusServiceUnavailable {
		return "service unavailable, try again (request " + reqID + ")"
	}
	return "internal error (request " + reqID + ")"
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

// fail is the one adapter that writes every error response, in the
// language of the request's route group (see speaksJSON): JSON to the
// bearer-token routes, an htmx fragment for htmx requests, an HTML page
// otherwise. The caller sees the refusal's message; the cause goes to the
// log.
func (s *server) fail(w http.ResponseWriter, r *http.Request, err error) {
	code, _ := edge.Classify(err)
	s.logError(r, err, code)
	msg := message(err, code, requestID(r.Context()))
	if speaksJSON(r) {
		if code == http.StatusUnauthorized {
			w.Header().Set("WWW-Authenticate", s.challenge(r))
		}
		_ = edge.WriteJSON(w, code, edge.Refusal(err, msg))
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
		_ = templates.ErrorBox(msg).Render(r.Context(), w)
		return
	}
	_ = s.Console.ErrorPage(w, r, code, msg)
}

// speaksJSON reports whether the request's answer is JSON: its route
// group says so (jsonGroup); a request refused before any route took it
// (another host, another site) is answered JSON unless a browser asked
// for a page.
func speaksJSON(r *http.Request) bool {
	if in := infoFrom(r.Context()); in != nil && in.group != groupNone {
		return in.group == groupJSON
	}
	return !strings.Contains(r.Header.Get("Accept"), "text/html")
}

// A request's route group, as far as errors are concerned.
const (
	groupNone = iota // not routed yet
	groupJSON        // the bearer-token routes: /sagacity, /mcp, /metrics
	groupHTML        // the console and its public pages
)

// inGroup marks the requests of a route group, so that their errors (a
// panic included) answer in its language.
func inGroup(group int) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if in := infoFrom(r.Context()); in != nil {
				in.group = group
			}
			next.ServeHTTP(w, r)
		})
	}
}

func (s *server) logError(r *http.Request, err error, code int) {
	level := slog.LevelInfo
	if code >= 500 {
		level = slog.LevelError
	}
	s.Log.Log(r.Context(), level, "request failed", "method", r.Method, "path", r.URL.Path, "status", code, "err", err)
}
