package server

import (
	"context"
	"crypto/rand"
	"fmt"
	"net"
	"net/http"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/sagacity-go/sagacity/internal/auth"
	"github.com/sagacity-go/sagacity/internal/engine"
)

// statusWriter remembers the status a handler wrote.
type statusWriter struct {
	http.ResponseWriter
	code  int
	bytes int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	n, err := w.ResponseWriter.Write(b)
	w.bytes += n
	return n, err
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// observe gives every request an id (echoed as X-Request-Id), logs it when
// it ends, and turns a panic into a 500 that names the id, in the
// language of the route group the request was in. Logs carry the
// method, the route's pattern and path, and who asked (see withRequest):
// no query, header, cookie or body.
// It makes the request's routing context for routes (the router next
// ends in), so that the line can name the route and its saga.
func (s *server) observe(routes chi.Routes, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		in := &requestInfo{id: rand.Text()[:16], route: chi.NewRouteContext()}
		in.route.Routes = routes
		w.Header().Set("X-Request-Id", in.id)
		ctx := context.WithValue(context.WithValue(r.Context(), requestKey{}, in), chi.RouteCtxKey, in.route)
		r = r.WithContext(ctx)
		sw := &statusWriter{ResponseWriter: w}
		start := time.Now()
		defer func() {
			if p := recover(); p != nil {
				s.Log.ErrorContext(ctx, "panic", "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
				if sw.code == 0 {
					s.fail(sw, r, &engine.Error{Kind: engine.Internal, Msg: "internal error", Err: fmt.Errorf("panic: %v", p)})
				}
			}
			s.Log.InfoContext(ctx, "request", "method", r.Method, "route", in.route.RoutePattern(), "path", r.URL.Path,
				"status", sw.code, "bytes", sw.bytes, "ms", time.Since(start).Milliseconds())
		}()
		next.ServeHTTP(sw, r)
	})
}

// hosts refuses requests addressed to a host name the server is not
// configured for: a page on another site whose name an attacker pointed at
// this server (DNS rebinding) would otherwise be same-origin with it.
// Loopback names are always served; they cannot be another site's.
func (s *server) hosts(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host := r.Host
		if h, _, err := net.SplitHostPort(host); err == nil {
			host = h
		}
		host = strings.ToLower(strings.TrimSuffix(host, "."))
		if ip := net.ParseIP(strings.Trim(host, "[]")); host == "localhost" || (ip != nil && ip.IsLoopback()) ||
			slices.Contains(s.Hosts, host) {
			next.ServeHTTP(w, r)
			return
		}
		s.fail(w, r, errHost)
	})
}

// limitBody caps every request body; reading past the cap fails and the
// handler's error becomes a 413.
func (s *server) limitBody(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Body = http.MaxBytesReader(w, r.Body, s.MaxBody)
		next.ServeHTTP(w, r)
	})
}

// csp allows scripts, styles and requests from this origin only: no
// inline script, no eval, no framing; forms go to formAction (this origin,
// and the OpenID provider's end-session page a sign-out goes on to).
func csp(formAction string) string {
	return "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; " +
		"object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action " + formAction
}

// secureHeaders sets the headers every response carries, refusals
// included, with the content security policy given. Pages are never
// cached: they show who is signed in and what awaits them.
func secureHeaders(policy string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", policy)
		h.Set("X-Frame-Options", "DENY")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "same-origin")
		h.Set("Cache-Control", "no-store")
		next.ServeHTTP(w, r)
	})
}

// authenticate puts the principal who returns in the request's context,
// or fails the request with their error.
func (s *server) authenticate(who func(*http.Request) (engine.Principal, error)) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			p, err := who(r)
			if err != nil {
				s.fail(w, r, err)
				return
			}
			if in := infoFrom(r.Context()); in != nil {
				in.principal = p.ID
			}
			next.ServeHTTP(w, r.WithContext(auth.WithPrincipal(r.Context(), p)))
		})
	}
}
