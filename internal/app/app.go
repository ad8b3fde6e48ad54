// Package app composes a server from its parts: the global log over the
// store and the checkpoint directory, the engine with its tools, the
// metrics, and the handlers of the API, the MCP gateway and the console.
// `sagacity serve` builds one from its configuration and the tests from
// theirs, so the server is wired in one place; the services a server runs
// (heartbeat, recovery, sequencer, checker) are started by serve.
package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/sagacity-go/sagacity/internal/api"
	"github.com/sagacity-go/sagacity/internal/engine"
	"github.com/sagacity-go/sagacity/internal/mcpgw"
	"github.com/sagacity-go/sagacity/internal/metrics"
	"github.com/sagacity-go/sagacity/internal/passkey"
	"github.com/sagacity-go/sagacity/internal/server"
	"github.com/sagacity-go/sagacity/internal/store"
	"github.com/sagacity-go/sagacity/internal/tlog"
	"github.com/sagacity-go/sagacity/internal/witness"
)

// Parts are what a server is made of.
type Parts struct {
	DB          *store.DB
	Checkpoints *witness.Dir
	Keys        *engine.Keys
	Tools       []engine.Tool
	Logger      *slog.Logger
	Version     string // the server's, told to MCP clients
	// Log says when checkpoints are signed and checked; Build sets its
	// observer.
	Log tlog.Options
	// PasskeyURL is the console's public URL, which its passkeys are
	// bound to: https, or http on loopback (served as localhost). ""
	// or any other URL: no passkeys (Build logs why), and a policy that
	// asks for them does not start.
	PasskeyURL string
	// Engine holds the engine's options besides its keys, logger, log,
	// observer and passkeys, which Build sets.
	Engine []engine.Option
	// Server says who is calling (APIAuth, the console's sessions and
	// mode, OIDC, token issuers) and the HTTP edge's limits; Build fills
	// in the handlers, the logger, readiness and metrics.
	Server server.Options
}

// App is a composed server.
type App struct {
	Engine  *engine.Engine
	Log     *tlog.Log
	Metrics *metrics.Recorder
	Handler http.Handler
	Options server.Options // what Handler was built from
}

// ErrClaim wraps a failure to record the signing key in the database
// (tlog.ErrKey when the database records another key).
var ErrClaim = errors.New("recording the signing key")

// Build composes the parts. ctx bounds the MCP gateway's watcher.
func Build(ctx context.Context, p Parts) (*App, error) {
	rec := metrics.New(p.Logger)
	lo := p.Log
	lo.Observer = rec
	lg := tlog.New(p.DB, p.Checkpoints, p.Keys, lo)
	if err := lg.Claim(ctx); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrClaim, err)
	}
	opts := append([]engine.Option{engine.WithKeys(p.Keys), engine.WithLogger(p.Logger), engine.WithLog(lg),
		engine.WithObserver(rec)}, p.Engine...)
	if rp, err := passkey.New(p.PasskeyURL); err != nil {
		p.Logger.Info("passkeys are off", "why", err)
	} else {
		opts = append(opts, engine.WithPasskeys(rp, passkey.Check))
	}
	eng, err := engine.New(p.DB, p.Tools, opts...)
	if err != nil {
		return nil, err
	}
	// The approval policy takes effect: its document goes into the
	// journal, and so into the log, before any request is pinned to it.
	if err := eng.RecordPolicy(ctx); err != nil {
		return nil, fmt.Errorf("recording the approval policy: %w", err)
	}
	rec.Watch(eng)
	o := p.Server
	o.Log, o.Ready, o.Metrics = p.Logger, p.DB.Ping, rec
	o.API = &api.Handlers{Engine: eng}
	o.MCP = mcpgw.New(ctx, eng, p.Version, p.Logger)
	o.Console.Engine = eng
	return &App{Engine: eng, Log: lg, Metrics: rec, Handler: server.New(o), Options: o}, nil
}
