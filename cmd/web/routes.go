package main

import (
	"log/slog"
	"net/http"

	"github.com/go-chi/chi/v5"
	"github.com/sagacity-go/sagacity/internal/engine"
	"github.com/sagacity-go/sagacity/internal/store"
)

// routes is the one route table.
func routes(log *slog.Logger, db store.DB, eng *engine.Engine) http.Handler {
	r := chi.NewRouter()

	// Public.
	r.Get("/healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Write([]byte("ok\n"))
	})
	r.Get("/readyz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if err := db.Ping(r.Context()); err != nil {
			log.Warn("not ready", "err", err)
			w.WriteHeader(http.StatusServiceUnavailable)
			w.Write([]byte("database unavailable\n"))
			return
		}
		w.Write([]byte("ok\n"))
	})
	_ = eng
	return r
}
