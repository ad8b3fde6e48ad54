// Package server is the HTTP server's one route table and the plumbing
// every route shares: request ids and logs, body limits, security headers,
// authentication boundaries and the adapter that writes errors.
package server

import (
	"context"
	"log/slog"
	"net/http"

	"github.com/go-chi/chi/v5"
	"github.com/sagacity-go/sagacity/internal/api"
	"github.com/sagacity-go/sagacity/internal/engine"
)

// Options is what the server is built from.
type Options struct {
	Log *slog.Logger
	// Ready reports whether the database answers, for /readyz.
	Ready func(ctx context.Context) error
	API   *api.Handlers
	// Authenticate establishes the principal of API requests, or rejects them.
	Authenticate func(http.Handler) http.Handler
	// ApprovalEndpoints registers approve, reject and resume.
	ApprovalEndpoints bool
	// MaxBody caps request bodies, in bytes.
	MaxBody int64
}

type server struct{ Options }

// New returns the server's handler.
func New(o Options) http.Handler {
	s := &server{o}
	r := chi.NewRouter()
	r.Use(s.observe, secureHeaders, s.limitBody)
	r.NotFound(s.jsonErrors(func(http.ResponseWriter, *http.Request) error {
		return engine.Errorf(engine.NotFound, "no such endpoint")
	}))
	r.MethodNotAllowed(s.jsonErrors(func(w http.ResponseWriter, r *http.Request) error {
		return engine.Errorf(engine.Invalid, "method %s is not allowed here", r.Method)
	}))

	// Public: liveness and readiness.
	r.Get("/healthz", func(w http.ResponseWriter, r *http.Request) { text(w, http.StatusOK, "ok") })
	r.Get("/readyz", func(w http.ResponseWriter, r *http.Request) {
		if err := s.Ready(r.Context()); err != nil {
			s.Log.Warn("not ready", "request", requestID(r.Context()), "err", err)
			text(w, http.StatusServiceUnavailable, "database unavailable")
			return
		}
		text(w, http.StatusOK, "ok")
	})

	// Bearer token (JSON): the approval endpoints and the agent gateway.
	r.Route("/sagacity", func(r chi.Router) {
		r.Use(s.Authenticate)
		j := s.jsonErrors
		r.Get("/approvals", j(s.API.Approvals))
		r.Get("/approvals/{sagaId}", j(s.API.Approvals))
		if s.ApprovalEndpoints {
			r.Post("/approve/{sagaId}/{seq}", j(s.API.Approve))
			r.Post("/reject/{sagaId}/{seq}", j(s.API.Reject))
			r.Post("/resume/{sagaId}/{seq}", j(s.API.Resume))
		}
		r.Get("/audit/{sagaId}", j(s.API.Audit))
		r.Get("/audit/{sagaId}/verify", j(s.API.Verify))
		r.Get("/in-doubt", j(s.API.InDoubt))
		r.Get("/sagas", j(s.API.Sagas))
		r.Get("/sagas/{sagaId}", j(s.API.Saga))
		r.Post("/sagas/{sagaId}/calls", j(s.API.Call))
		r.Post("/sagas/{sagaId}/end", j(s.API.End))
		r.Post("/sagas/{sagaId}/abort", j(s.API.Abort))
	})
	return r
}

func text(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(code)
	w.Write([]byte(msg + "\n"))
}
