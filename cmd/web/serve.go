package main

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/mattn/go-isatty"
	"github.com/sagacity-go/sagacity/internal/app"
	"github.com/sagacity-go/sagacity/internal/auth"
	"github.com/sagacity-go/sagacity/internal/config"
	"github.com/sagacity-go/sagacity/internal/console"
	"github.com/sagacity-go/sagacity/internal/demo"
	"github.com/sagacity-go/sagacity/internal/engine"
	"github.com/sagacity-go/sagacity/internal/hook"
	"github.com/sagacity-go/sagacity/internal/httptool"
	"github.com/sagacity-go/sagacity/internal/mcpproxy"
	"github.com/sagacity-go/sagacity/internal/server"
	"github.com/sagacity-go/sagacity/internal/service"
	"github.com/sagacity-go/sagacity/internal/store"
	"github.com/sagacity-go/sagacity/internal/tlog"
	"github.com/sagacity-go/sagacity/internal/witness"
)

// shutdownGrace is how long in-flight requests, tool calls included, get
// to finish after SIGINT or SIGTERM.
const shutdownGrace = 30 * time.Second

// serve runs the server until ctx is cancelled, then shuts down gracefully.
func serve(ctx context.Context, environ []string, stdout io.Writer) error {
	if err := config.CheckNames(environ); err != nil {
		return err
	}
	cfg, err := config.Load(lookup(environ))
	if err != nil {
		return err
	}
	terminal := isTerminal(stdout)
	log := newLogger(stdout, terminal, cfg.LogLevel)
	db, err := store.Open(ctx, cfg.DatabaseURL)
	if err != nil {
		return fmt.Errorf("SAGACITY_DATABASE_URL: %w", err)
	}
	defer db.Close()
	keys, err := signingKeys(cfg, log)
	if err != nil {
		return err
	}
	cpDir := cfg.CheckpointDir
	if cpDir == "" {
		cpDir = devPath(cfg, ".checkpoints")
	}
	w, err := witness.Open(cpDir)
	if err != nil {
		return fmt.Errorf("SAGACITY_CHECKPOINT_DIR: %w", err)
	}
	upstream, err := openUpstreams(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer func() {
		for _, u := range upstream.conns {
			u.Close()
		}
	}()
	tools, err := configuredTools(cfg, db, upstream.tools)
	if err != nil {
		return err
	}
	opts, err := authOptions(ctx, cfg, db)
	if err != nil {
		return err
	}
	opts.ApprovalEndpoints, opts.MaxBody, opts.Hosts = cfg.ApprovalEndpoints, cfg.File.Policy.MaxBodyBytes, cfg.Hosts
	opts.MaxWait, opts.ExecutionsPerMinute = cfg.File.Policy.MaxWait, cfg.File.Policy.ExecutionsPerMinute
	opts.PublicURL = cfg.PublicURL
	// Listening first, the server knows its port, which a loopback
	// console's passkeys and notifications' links name; requests wait
	// until it serves.
	ln, err := net.Listen("tcp", cfg.Addr)
	if errors.Is(err, syscall.EADDRINUSE) {
		return fmt.Errorf("SAGACITY_ADDR: %s is in use by another process; stop it, or set SAGACITY_ADDR to another port", cfg.Addr)
	} else if err != nil {
		return fmt.Errorf("SAGACITY_ADDR: %w", err)
	}
	defer ln.Close()
	publicURL := cfg.PublicURL
	if publicURL == "" {
		publicURL = "http://" + ln.Addr().String()
	}
	a, err := app.Build(ctx, app.Parts{DB: db, Checkpoints: w, Keys: keys, Tools: tools, Logger: log, Version: version(),
		PublicURL: publicURL, Replica: replica(cpDir), Targets: cfg.Targets, MCPHold: cfg.File.MCP.HoldFor,
		// The log extends nothing it has not checked in full since the start.
		Log:   tlog.Options{Every: cfg.File.Log.Every, Interval: cfg.File.Log.Interval, FullCheckFirst: true},
		Every: app.Intervals{Check: cfg.File.Log.CheckEvery, FullCheck: cfg.File.Log.FullCheckEvery},
		Engine: []engine.Option{engine.WithMaxInput(int(cfg.File.Policy.MaxBodyBytes)),
			engine.WithAccess(engine.Access{ShareSagas: cfg.File.Policy.ShareSagas}), engine.WithApprovals(cfg.File.Approvals),
			engine.WithNotifications(cfg.Endpoints), engine.WithPeople(configuredPeople(cfg))},
		Server: opts})
	switch {
	case errors.Is(err, tlog.ErrKey):
		return fmt.Errorf("SAGACITY_SIGNING_KEY: %w; start with the key the database was first started with, or with a new database", err)
	case errors.Is(err, app.ErrClaim):
		return fmt.Errorf("SAGACITY_DATABASE_URL: %w", err)
	case err != nil:
		return err
	}
	eng := a.Engine
	// The services start before the first request (the database checked
	// against the newest checkpoint, this process registered as a runner
	// in place of the one its checkpoint directory names) and stop after
	// the last: the heartbeat outlives the calls in flight, and the log's
	// last checkpoint covers what they wrote.
	if err := service.StartAll(context.WithoutCancel(ctx), a.Services...); err != nil {
		return fmt.Errorf("SAGACITY_DATABASE_URL: %w", err)
	}
	// On the way out early; stopping them again once stopped does nothing.
	defer func() { _ = service.StopAll(context.WithoutCancel(ctx), a.Services...) }()
	if cfg.Demo {
		if err := demo.Seed(ctx, db, eng); err != nil {
			return err
		}
	}
	srv := &http.Server{
		Handler:           a.Handler,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      2 * time.Minute, // a gateway call waits for its tool
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	url := "http://" + ln.Addr().String()
	log.Info("serving", "url", url, "database", store.Redact(cfg.DatabaseURL), "checkpoints", cpDir, "auth", cfg.Auth,
		"tools", len(eng.Tools()), "demo", cfg.Demo)
	if cfg.Demo {
		hint := demoHint(url)
		if terminal {
			// Lines to read and copy, not a log record.
			fmt.Fprintln(stdout, hint)
		} else {
			log.Info("demo: saga "+demo.Seeded+" awaits approval", "try", hint)
		}
	}
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
	if err := service.StopAll(sctx, a.Services...); err != nil {
		return fmt.Errorf("shutdown: stopping the services: %w", err)
	}
	return nil
}

// replica names the deployment this process is a start of: its host and
// checkpoint directory, which no two live replicas share.
func replica(cpDir string) string {
	host, _ := os.Hostname()
	if abs, err := filepath.Abs(cpDir); err == nil {
		cpDir = abs
	}
	return host + ":" + cpDir
}

// signingKeys reads the configured signing key. In dev mode without one,
// it uses the key in a file beside the SQLite database (sagacity.signing-key
// in the working directory for PostgreSQL), making it the first time.
func signingKeys(cfg config.Config, log *slog.Logger) (*engine.Keys, error) {
	if cfg.SigningKey != "" {
		k, err := engine.NewKeys(cfg.SigningKey)
		if err != nil {
			return nil, fmt.Errorf("SAGACITY_SIGNING_KEY: %w", err)
		}
		return k, nil
	}
	path := devPath(cfg, ".signing-key")
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		skey, _, gerr := engine.GenerateKeys("sagacity-dev")
		if gerr != nil {
			return nil, gerr
		}
		if err := os.WriteFile(path, []byte(skey+"\n"), 0o600); err != nil {
			return nil, fmt.Errorf("dev mode: writing a new signing key to %s: %w", path, err)
		}
		log.Warn("dev mode: made a signing key for receipts and checkpoints; production needs SAGACITY_SIGNING_KEY", "file", path)
		b = []byte(skey)
	} else if err != nil {
		return nil, fmt.Errorf("dev mode: reading the signing key in %s: %w", path, err)
	}
	k, err := engine.NewKeys(string(b))
	if err != nil {
		return nil, fmt.Errorf("dev mode: the signing key in %s: %w", path, err)
	}
	return k, nil
}

// demoHint is the demo's walk through the API, with curl.
func demoHint(url string) string {
	return "Demo: saga " + demo.Seeded + " awaits approval. The console is at " + url + "/ ; try the API with curl:\n" +
		"  curl -s " + url + "/sagacity/approvals\n" +
		"  curl -s -X POST " + url + "/sagacity/approve/" + demo.Seeded + "/3 -H 'Content-Type: application/json' -d '{\"approver\":\"manager@company.com\"}'\n" +
		"  curl -s -X POST " + url + "/sagacity/resume/" + demo.Seeded + "/3 -H 'Content-Type: application/json' -d '{\"payload\":\"{\\\"amount\\\":\\\"100\\\",\\\"to\\\":\\\"alice\\\"}\"}'\n" +
		"  curl -s " + url + "/sagacity/audit/" + demo.Seeded + "/verify"
}

// isTerminal reports whether w is a terminal: logs are text for a
// person there, JSON lines for a collector anywhere else.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && (isatty.IsTerminal(f.Fd()) || isatty.IsCygwinTerminal(f.Fd()))
}

// newLogger logs at level and above: text on a terminal, JSON elsewhere.
func newLogger(w io.Writer, terminal bool, level slog.Level) *slog.Logger {
	opts := &slog.HandlerOptions{Level: level}
	if terminal {
		return slog.New(slog.NewTextHandler(w, opts))
	}
	return slog.New(slog.NewJSONHandler(w, opts))
}

// devPath is where dev mode keeps a file it makes: beside the SQLite
// database, or in the working directory for PostgreSQL.
func devPath(cfg config.Config, suffix string) string {
	if p, ok := strings.CutPrefix(cfg.DatabaseURL, "sqlite:"); ok {
		return p + suffix
	}
	return "sagacity" + suffix
}

// upstreams are the configured MCP servers, connected, and their tools.
type upstreams struct {
	conns []*mcpproxy.Upstream
	tools []engine.Tool
}

// openUpstreams connects to the configured MCP servers and lists their
// tools. One that cannot be reached stops the start: which of its tools
// need a person is not known without it.
func openUpstreams(ctx context.Context, cfg config.Config, log *slog.Logger) (upstreams, error) {
	var out upstreams
	for _, c := range cfg.File.Upstreams {
		u, tools, err := mcpproxy.Open(ctx, c, cfg.File.Policy.MaxResultBytes, version(), log)
		if err != nil {
			for _, u := range out.conns {
				u.Close()
			}
			return upstreams{}, fmt.Errorf("SAGACITY_CONFIG: %w", err)
		}
		out.conns, out.tools = append(out.conns, u), append(out.tools, tools...)
	}
	return out, nil
}

// configuredTools are the configured HTTP tools, the upstream MCP
// servers' and, in demo mode, the built-in ones.
func configuredTools(cfg config.Config, db *store.DB, upstream []engine.Tool) ([]engine.Tool, error) {
	var tools []engine.Tool
	for _, t := range cfg.File.Tools {
		if t.Hook != "" {
			tools = append(tools, hook.Tool(t.Name, t.Description))
			continue
		}
		ht := &httptool.Tool{Name: t.Name, Exec: httptool.Endpoint(t.Execute), Secret: cfg.ToolSigningSecret,
			MaxResult: cfg.File.Policy.MaxResultBytes}
		if t.Compensate != nil {
			c := httptool.Endpoint(*t.Compensate)
			ht.Undo = &c
		}
		tools = append(tools, engine.Tool{Name: t.Name, Reversibility: t.Reversibility, Executor: ht,
			Description: t.Description, InputSchema: t.InputSchema})
	}
	tools = append(tools, upstream...)
	if cfg.Demo {
		for _, t := range demo.Tools(db, time.Now) {
			for _, c := range cfg.File.Tools {
				if c.Name == t.Name {
					return nil, fmt.Errorf("SAGACITY_CONFIG: tool %q is also a built-in demo tool; rename it or unset SAGACITY_DEMO", t.Name)
				}
			}
			tools = append(tools, t)
		}
	}
	return tools, nil
}

// configuredPeople are the people team health knows without a sign-in:
// the tokens in tokens mode; in dev mode with the demo, the people its
// sign-in page offers.
func configuredPeople(cfg config.Config) []engine.Person {
	var out []engine.Person
	switch {
	case cfg.Auth == auth.ModeTokens:
		for _, t := range cfg.File.Tokens {
			out = append(out, engine.Person{ID: t.Name, Auth: engine.AuthToken, Roles: t.Roles, Groups: t.Groups})
		}
	case cfg.Auth == auth.ModeDev && cfg.Demo:
		for _, p := range demo.People {
			out = append(out, engine.Person{ID: p.ID, Auth: engine.AuthDev, Roles: p.Roles, Groups: p.Groups})
		}
	}
	return out
}

// authOptions builds who-is-calling for the configured mode: sessions for
// the console, bearer tokens (and in oidc mode JWTs) for the API, and the
// OIDC sign-in.
func authOptions(ctx context.Context, cfg config.Config, db *store.DB) (server.Options, error) {
	key := cfg.SessionKey
	if key == nil {
		// Dev and tokens modes may go without: sessions then end with the process.
		key = []byte(rand.Text() + rand.Text())
	}
	sessions := &auth.Sessions{Store: db, Key: key, Now: time.Now,
		Secure: !cfg.Loopback() || strings.HasPrefix(cfg.PublicURL, "https://")}
	roles := auth.RoleMap{Claim: cfg.File.Roles.Claim, Map: cfg.File.Roles.Map}
	bearer := &auth.Bearer{Roles: roles, Anonymous: cfg.Auth == auth.ModeDev}
	if a := cfg.File.Approvals; a != nil {
		bearer.Claims = a.Claims()
	}
	for _, t := range cfg.File.Tokens {
		bearer.Tokens = append(bearer.Tokens, auth.Token{Name: t.Name, SHA256: t.SHA256, Roles: t.Roles, Groups: t.Groups})
	}
	o := server.Options{APIAuth: bearer.Principal, Console: &console.Handlers{Sessions: sessions, Mode: cfg.Auth, Now: time.Now}}
	if cfg.Demo {
		o.Console.People = demo.People
	}
	if cfg.Auth != auth.ModeOIDC {
		return o, nil
	}
	var err error
	o.OIDC, err = auth.NewOIDC(ctx, auth.OIDCConfig{Issuer: cfg.OIDCIssuer, ClientID: cfg.OIDCClientID,
		ClientSecret: cfg.OIDCClientSecret, PublicURL: cfg.PublicURL, Roles: roles, Sessions: sessions})
	if err != nil {
		return o, fmt.Errorf("SAGACITY_OIDC_ISSUER: %w", err)
	}
	if cfg.APIAudience != "" {
		bearer.JWT, bearer.Issuer = o.OIDC.APIVerifier(cfg.APIAudience), cfg.OIDCIssuer
		o.TokenIssuers = []string{cfg.OIDCIssuer}
	}
	return o, nil
}
