// Package server is the HTTP server's one route table and the plumbing
// every route shares: request ids and logs, body limits, security headers,
// cross-origin protection, rate limits, authentication boundaries and the
// adapter that writes errors.
package server

import (
	"cmp"
	"context"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"
	"github.com/sagacity-go/sagacity/internal/api"
	"github.com/sagacity-go/sagacity/internal/auth"
	"github.com/sagacity-go/sagacity/internal/console"
	"github.com/sagacity-go/sagacity/internal/engine"
	"github.com/sagacity-go/sagacity/web"
)

// Options is what the server is built from.
type Options struct {
	Log *slog.Logger
	// Ready reports whether the database answers, for /readyz.
	Ready   func(ctx context.Context) error
	API     *api.Handlers
	Console *console.Handlers
	// APIAuth names the caller of a JSON request (bearer token, or
	// anonymous in dev mode), or refuses it.
	APIAuth func(*http.Request) (engine.Principal, error)
	// TokenIssuers are the OpenID providers whose access tokens APIAuth
	// takes, told to OAuth clients as the API's authorization servers.
	TokenIssuers []string
	// PublicURL is where clients reach the server; "" is the URL each
	// request was addressed to (its host is one the server serves).
	PublicURL string
	// OIDC signs people in to the console; nil unless the mode is oidc.
	OIDC *auth.OIDC
	// MCP is the MCP gateway (internal/mcpgw), served at /mcp to the
	// callers APIAuth names; nil serves none.
	MCP interface {
		Serve(w http.ResponseWriter, r *http.Request) error
	}
	// ApprovalEndpoints registers approve, reject and resume.
	ApprovalEndpoints bool
	// MaxBody caps request bodies, in bytes.
	MaxBody int64
	// MaxWait bounds how long a call is held for its decision (Prefer:
	// wait; a gated MCP call); 0 holds none.
	MaxWait time.Duration
	// ExecutionsPerMinute is the budget of resumes, a minute, of each
	// principal and each client address (decisions have their own).
	ExecutionsPerMinute int
	// Hosts are the host names requests may be addressed to, besides the
	// loopback names; requests for any other are refused.
	Hosts []string
	// Metrics, when set, instruments every route and is served at
	// /metrics to the callers APIAuth names whom the engine lets read
	// them.
	Metrics Metrics
}

type server struct{ Options }

// Rate limits, per client IP and per principal, a minute.
const (
	signInPerMinute   = 20
	decidePerMinuteIP = 120
	decidePerMinute   = 60
	// defaultExecutionsPerMinute is the resumes' budget unless
	// ExecutionsPerMinute says otherwise: automation's, not a person's.
	defaultExecutionsPerMinute = 1200
)

// New returns the server's handler.
func New(o Options) http.Handler {
	s := &server{o}
	s.Log = slog.New(withRequest{o.Log.Handler()})
	r := s.routes()
	// Every state-changing request, everywhere, must come from this
	// origin (or from no browser at all). No bypass patterns.
	cop := http.NewCrossOriginProtection()
	cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { s.fail(w, r, errCrossOrigin) }))
	formAction := "'self'"
	if o.OIDC != nil && o.OIDC.EndSession != "" {
		// Sign out posts a form whose answer sends the browser on to the
		// provider's end-session page.
		if u, err := url.Parse(o.OIDC.EndSession); err == nil && u.Host != "" {
			formAction += " " + u.Scheme + "://" + u.Host
		}
	}
	// The security headers go on first, so every answer carries them: the
	// host check's 421, a panic's 500 and every other refusal too.
	return secureHeaders(csp(formAction), s.observe(r, s.hosts(cop.Handler(r))))
}

// routes is the one route table.
func (s *server) routes() *chi.Mux {
	signIn := newLimiter(signInPerMinute, signInPerMinute)
	decideIP, decideWho := newLimiter(decidePerMinuteIP, decidePerMinuteIP), newLimiter(decidePerMinute, decidePerMinute)
	n := cmp.Or(s.ExecutionsPerMinute, defaultExecutionsPerMinute)
	executeIP, executeWho := newLimiter(n, n), newLimiter(n, n)

	r := chi.NewRouter()
	if s.Metrics != nil {
		r.Use(s.Metrics.Instrument)
	}
	r.Use(s.limitBody, middleware.GetHead)
	r.NotFound(s.h(func(http.ResponseWriter, *http.Request) error {
		return engine.Errorf(engine.NotFound, "no such page")
	}))
	r.MethodNotAllowed(s.h(func(w http.ResponseWriter, req *http.Request) error {
		var allow []string
		if r.Match(chi.NewRouteContext(), http.MethodGet, req.URL.Path) {
			allow = append(allow, http.MethodGet, http.MethodHead) // GetHead serves HEAD as GET
		}
		if r.Match(chi.NewRouteContext(), http.MethodPost, req.URL.Path) {
			allow = append(allow, http.MethodPost)
		}
		w.Header().Set("Allow", strings.Join(allow, ", "))
		return errMethod
	}))

	// Public: liveness, readiness, the API's description, static files and
	// signing in.
	r.Get("/healthz", func(w http.ResponseWriter, r *http.Request) { text(w, http.StatusOK, "ok") })
	r.Get("/readyz", func(w http.ResponseWriter, r *http.Request) {
		if err := s.Ready(r.Context()); err != nil {
			s.Log.WarnContext(r.Context(), "not ready", "err", err)
			text(w, http.StatusServiceUnavailable, "database unavailable")
			return
		}
		text(w, http.StatusOK, "ok")
	})
	// The description holds no secret, so it needs no token. A route of
	// its own here wins over the bearer-token subrouter at /sagacity.
	r.With(inGroup(groupJSON)).Get("/sagacity/openapi.json", s.h(api.Document))
	// Where OAuth clients (MCP clients first) learn how to get a token:
	// for the whole server, and for /mcp (RFC 9728 §3.1).
	r.With(inGroup(groupJSON)).Get(resourceMetadataPath, s.resourceMetadata(""))
	r.With(inGroup(groupJSON)).Get(resourceMetadataPath+"/mcp", s.resourceMetadata("/mcp"))
	static, _ := fs.Sub(web.Static, "static")
	r.Handle("/static/*", http.StripPrefix("/static/", cacheable(http.FileServerFS(static))))
	r.Group(func(r chi.Router) {
		r.Use(inGroup(groupHTML), s.limit(signIn, nil))
		if s.OIDC != nil {
			r.Get("/login", s.h(s.OIDC.Start))
			r.Get(auth.CallbackPath, s.h(s.OIDC.Callback))
			r.Get(auth.SignedOutPath, s.h(s.Console.SignedOut))
			return
		}
		r.Get("/login", s.h(s.Console.Login))
		if s.Console.Mode == auth.ModeDev {
			r.Post("/login", s.h(s.Console.DevSignIn))
		}
	})

	// Session (HTML): the console. Cross-origin protection wraps it all.
	r.Group(func(r chi.Router) {
		r.Use(inGroup(groupHTML), s.authenticate(s.Console.Sessions.Principal))
		r.Get("/", s.h(s.Console.Approvals))
		r.Get("/approvals/rows", s.h(s.Console.ApprovalRows))
		r.Get("/request", s.h(s.Console.Request))
		r.Get("/request/status", s.h(s.Console.RequestStatus))
		r.Get("/sagas", s.h(s.Console.Sagas))
		r.Get("/saga", s.h(s.Console.Timeline))
		r.Get("/audit", s.h(s.Console.Audit))
		r.Get("/audit/saga", s.h(s.Console.VerifySaga))
		r.Get("/audit/export", s.h(s.Console.Export))
		r.Get("/audit/checkpoint", s.h(s.Console.Checkpoint))
		r.Get("/audit/receipt", s.h(s.Console.Receipt))
		r.Get("/audit/decided", s.h(s.Console.Decided))
		r.Get("/audit/job", s.h(s.Console.AuditJob))
		r.Post("/audit/verify-all", s.h(s.Console.VerifyAll))
		r.Get("/in-doubt", s.h(s.Console.InDoubt))
		r.Get("/policy", s.h(s.Console.Policy))
		r.Get("/delegations", s.h(s.Console.Delegations))
		r.Get("/notifications", s.h(s.Console.Notifications))
		r.Post("/notifications/retry", s.h(s.Console.RetryDelivery))
		r.Post("/notifications/enable", s.h(s.Console.EnableEndpoint))
		r.Get("/me", s.h(s.Console.Me))
		r.Group(func(r chi.Router) {
			r.Use(s.limit(decideIP, decideWho))
			r.Post("/request/decide", s.h(s.Console.Decide))
			r.Post("/request/execute", s.h(s.Console.Execute))
			r.Post("/in-doubt/resolve", s.h(s.Console.Resolve))
			r.Post("/saga/abort", s.h(s.Console.Abort))
			r.Post("/me/passkeys/remove", s.h(s.Console.RemovePasskey))
			r.Post("/delegations", s.h(s.Console.Delegate))
			r.Post("/delegations/revoke", s.h(s.Console.Revoke))
			// Passkey ceremonies: JSON, for web/static/passkey.js.
			r.With(inGroup(groupJSON)).Post("/me/passkeys/begin", s.h(s.Console.BeginEnrolment))
			r.With(inGroup(groupJSON)).Post("/me/passkeys/finish", s.h(s.Console.FinishEnrolment))
			r.With(inGroup(groupJSON)).Post("/request/passkey", s.h(s.Console.VoteWithPasskey))
		})
		if s.OIDC != nil {
			r.Post("/logout", s.h(s.OIDC.Logout))
		} else {
			r.Post("/logout", s.h(s.Console.Logout))
		}
	})

	// Bearer token: the MCP gateway, for agents (its SDK handles GET,
	// POST and DELETE).
	if s.MCP != nil {
		r.With(inGroup(groupJSON), s.authenticate(s.APIAuth)).Handle("/mcp", s.h(s.MCP.Serve))
	}

	// Bearer token: the metrics, for Prometheus.
	if s.Metrics != nil {
		r.With(inGroup(groupJSON), s.authenticate(s.APIAuth)).Get("/metrics", s.h(s.metrics))
	}

	// Bearer token (JSON): the approval endpoints and the agent gateway.
	r.Route("/sagacity", func(r chi.Router) {
		r.Use(inGroup(groupJSON), s.authenticate(s.APIAuth))
		r.Get("/approvals", s.h(s.API.Approvals))
		r.Get("/approvals/{sagaId}", s.h(s.API.Approvals))
		if s.ApprovalEndpoints {
			r.Group(func(r chi.Router) {
				r.Use(s.limit(decideIP, decideWho))
				r.Post("/approve/{sagaId}/{seq}", s.h(s.API.Approve))
				r.Post("/reject/{sagaId}/{seq}", s.h(s.API.Reject))
				r.Post("/dismiss/{sagaId}/{seq}", s.h(s.API.Dismiss))
				r.Post("/withdraw/{sagaId}/{seq}", s.h(s.API.Withdraw))
				r.Post("/request-changes/{sagaId}/{seq}", s.h(s.API.RequestChanges))
				r.Post("/delegations", s.h(s.API.Delegate))
				r.Post("/policies", s.h(s.API.Propose))
				r.Post("/delegations/{seq}/revoke", s.h(s.API.Revoke))
				r.Post("/approvals/{sagaId}/{seq}/break-glass", s.h(s.API.BreakGlass))
				r.Post("/approvals/{sagaId}/{seq}/ratify", s.h(s.API.Ratify))
			})
			r.With(s.limit(executeIP, executeWho)).Post("/resume/{sagaId}/{seq}", s.h(s.API.Resume))
		}
		r.Get("/keys", s.h(s.API.Keys))
		r.Get("/receipts/{sagaId}/{seq}", s.h(s.API.Receipt))
		r.Get("/log", s.h(s.API.Log))
		r.Get("/checkpoints/consistency", s.h(s.API.Consistency))
		r.Get("/checkpoints/{size}", s.h(s.API.Checkpoint))
		r.Get("/audit/{sagaId}", s.h(s.API.Audit))
		r.Get("/audit/{sagaId}/verify", s.h(s.API.Verify))
		r.Get("/in-doubt", s.h(s.API.InDoubt))
		r.With(s.limit(decideIP, decideWho)).Post("/in-doubt/{sagaId}/{seq}/resolve", s.h(s.API.Resolve))
		r.Get("/sagas", s.h(s.API.Sagas))
		r.Get("/sagas/{sagaId}", s.h(s.API.Saga))
		r.Get("/sagas/{sagaId}/requests", s.h(s.API.Requests))
		r.Get("/policies", s.h(s.API.Policies))
		r.Get("/delegations", s.h(s.API.Delegations))
		r.Post("/sagas/{sagaId}/calls", s.h(s.API.Call))
		r.Post("/sagas/{sagaId}/end", s.h(s.API.End))
		r.Post("/sagas/{sagaId}/abort", s.h(s.API.Abort))
	})
	return r
}

// cacheable lets browsers keep static files for an hour.
func cacheable(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "public, max-age=3600")
		next.ServeHTTP(w, r)
	})
}

func text(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(code)
	_, _ = w.Write([]byte(msg + "\n"))
}
