package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/sagacity-go/sagacity/internal/config"
	"github.com/sagacity-go/sagacity/internal/engine"
	"github.com/sagacity-go/sagacity/internal/store"
)

// shutdownGrace is how long in-flight requests, tool calls included, get
// to finish after SIGINT or SIGTERM.
const shutdownGrace = 30 * time.Second

// serve runs the server until ctx is cancelled, then shuts down gracefully.
func serve(ctx context.Context, getenv func(string) string, stdout io.Writer) error {
	log := slog.New(slog.NewTextHandler(stdout, nil))
	cfg, err := config.Load(getenv)
	if err != nil {
		return err
	}
	db, err := store.Open(ctx, cfg.DatabaseURL)
	if err != nil {
		return fmt.Errorf("SAGACITY_DATABASE_URL: %w", err)
	}
	defer db.Close()
	eng, err := engine.New(db, nil, engine.WithLogger(log))
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return fmt.Errorf("SAGACITY_ADDR: %w", err)
	}
	srv := &http.Server{
		Handler:           routes(log, db, eng),
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      2 * time.Minute, // a gateway call waits for its tool
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	log.Info("serving", "url", "http://"+ln.Addr().String(), "database", store.Redact(cfg.DatabaseURL))
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	log.Info("shutting down", "grace", shutdownGrace)
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownGrace)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
