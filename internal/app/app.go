// Package app composes a server from its parts: the global log over the
// store and the checkpoint directory, the engine with its tools, the
// metrics, the handlers of the API, the MCP gateway and the console, and
// the background services the server runs, in the order they start.
// `sagacity serve` builds one from its configuration and the tests from
// theirs, so the server is wired in one place and the tests run the same
// services.
package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/sagacity-go/sagacity/internal/api"
	"github.com/sagacity-go/sagacity/internal/engine"
	"github.com/sagacity-go/sagacity/internal/mcpgw"
	"github.com/sagacity-go/sagacity/internal/metrics"
	"github.com/sagacity-go/sagacity/internal/notify"
	"github.com/sagacity-go/sagacity/internal/passkey"
	"github.com/sagacity-go/sagacity/internal/server"
	"github.com/sagacity-go/sagacity/internal/service"
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
	// PublicURL is the console's public URL, which notifications link
	// to and its passkeys are bound to: https, or http on loopback
	// (served as localhost). "" or any other URL: no passkeys (Build
	// logs why), and a policy that asks for them does not start.
	PublicURL string
	// Replica names, in the runners table, the deployment this process
	// is a start of; the checkpoint directory names the process it
	// replaces.
	Replica string
	// Targets are the notifications' endpoints: with any, the server
	// runs the relay and the Notifier.
	Targets []notify.Target
	// Every says how often the services run; zero: each one's default.
	Every Intervals
	// MCPHold is how long the MCP gateway holds a gated call for its
	// decision (config's mcp.holdFor).
	MCPHold time.Duration
	// Engine holds the engine's options besides its keys, logger, log,
	// observer and passkeys, which Build sets.
	Engine []engine.Option
	// Server says who is calling (APIAuth, the console's sessions and
	// mode, OIDC, token issuers) and the HTTP edge's limits; Build fills
	// in the handlers, the logger, readiness and metrics.
	Server server.Options
}

// Intervals are how often each service runs: the checker's come from the
// configuration; tests make the others shorter, or long enough that the
// test drives the service itself.
type Intervals struct {
	Check, FullCheck     time.Duration // tlog.Checker
	Beat                 time.Duration // engine.Heartbeat
	Sequence             time.Duration // tlog.Sequencer
	Recover              time.Duration // engine.Recoverer
	Lapse, LapseAll      time.Duration // engine.Lapser
	Relay, Notice, Watch time.Duration // notify.Relay, engine.Notifier, mcpgw.Watcher
}

// App is a composed server.
type App struct {
	Engine  *engine.Engine
	Log     *tlog.Log
	Metrics *metrics.Recorder
	Handler http.Handler
	Options server.Options // what Handler was built from
	// Services are the server's background services, in the order they
	// start (service.StartAll) and the reverse of the one they stop in
	// (service.StopAll): the checker first, so that a database rolled
	// back behind the newest checkpoint executes nothing; the heartbeat
	// before any service that runs calls; the sequencer before every
	// service that writes to the journal, so that its last checkpoint,
	// signed as it stops, covers all they wrote. The server takes
	// requests only once they started, and stops them once the
	// requests in flight are done.
	Services []service.Service
}

// ErrClaim wraps a failure to record the signing key in the database
// (tlog.ErrKey when the database records another key).
var ErrClaim = errors.New("recording the signing key")

// Build composes the parts; it starts no service. ctx ends when the
// server stops (MCP sessions ending after that leave their sagas open,
// and the calls held for their decision answer as their wait ending
// would).
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
	if rp, err := passkey.New(p.PublicURL); err != nil {
		p.Logger.Info("passkeys are off", "why", err)
	} else {
		opts = append(opts, engine.WithPasskeys(rp, passkey.Check))
	}
	eng, err := engine.New(p.DB, p.Tools, opts...)
	if err != nil {
		return nil, err
	}
	// The approval policy takes effect, its document going into the
	// journal, and so into the log, before any request is pinned to it;
	// or, when the policy in force says a change needs approval, waits
	// for it, the server deciding by the one in force.
	proposal, err := eng.RecordPolicy(ctx)
	if err != nil {
		return nil, fmt.Errorf("recording the approval policy: %w", err)
	}
	if proposal != nil {
		p.Logger.Warn("the approval policy this server was started with waits for approval under the policy in force, "+
			"which decides every request until then", "configured", proposal.Hash, "in force", eng.Policy().Hash,
			"request", fmt.Sprintf("/request?saga=%s&seq=%d", engine.PolicySaga, proposal.Request))
	}
	rec.Watch(eng)
	o := p.Server
	o.Log, o.Ready, o.Metrics = p.Logger, p.DB.Ping, rec
	o.API = &api.Handlers{Engine: eng, MaxWait: o.MaxWait, Serving: ctx}
	gw := mcpgw.New(ctx, eng, p.Version, p.MCPHold, p.Logger)
	o.MCP = gw
	o.Console.Engine = eng
	if o.Console.Sessions != nil {
		o.Console.Sessions.Known = eng // team health counts who signs in
	}
	ev := p.Every
	svcs := []service.Service{
		&tlog.Checker{Log: lg, Every: ev.Check, FullEvery: ev.FullCheck, Logger: p.Logger},
		&engine.Heartbeat{Engine: eng, Replica: p.Replica, Lineage: p.Checkpoints, Every: ev.Beat, Logger: p.Logger},
		&tlog.Sequencer{Log: lg, Every: ev.Sequence, Logger: p.Logger},
		&engine.Listener{Engine: eng, Logger: p.Logger},
		&engine.Recoverer{Engine: eng, Every: ev.Recover, Logger: p.Logger},
		&engine.Lapser{Engine: eng, Every: ev.Lapse, All: ev.LapseAll, Logger: p.Logger},
	}
	if len(p.Targets) > 0 {
		svcs = append(svcs,
			&notify.Relay{Engine: eng, Targets: p.Targets, PublicURL: p.PublicURL, Every: ev.Relay, Observer: rec, Logger: p.Logger},
			&engine.Notifier{Engine: eng, Every: ev.Notice, Logger: p.Logger})
	}
	svcs = append(svcs, &mcpgw.Watcher{Gateway: gw, Every: ev.Watch})
	return &App{Engine: eng, Log: lg, Metrics: rec, Handler: server.New(o), Options: o, Services: svcs}, nil
}
