package app_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sagacity-go/sagacity/internal/app"
	"github.com/sagacity-go/sagacity/internal/auth"
	"github.com/sagacity-go/sagacity/internal/console"
	"github.com/sagacity-go/sagacity/internal/demo"
	"github.com/sagacity-go/sagacity/internal/engine"
	"github.com/sagacity-go/sagacity/internal/httptool"
	"github.com/sagacity-go/sagacity/internal/notify"
	"github.com/sagacity-go/sagacity/internal/server"
	"github.com/sagacity-go/sagacity/internal/service"
	"github.com/sagacity-go/sagacity/internal/store"
	"github.com/sagacity-go/sagacity/internal/testkit"
	"github.com/sagacity-go/sagacity/internal/tlog"
	"github.com/sagacity-go/sagacity/internal/witness"
	"github.com/sagacity-go/sagacity/toolsig"
	"github.com/sagacity-go/sagacity/wire"
)

var secret = []byte("test-signing-secret-0123456789-abcdef")

// toolRequest is what the tool server received.
type toolRequest struct {
	Path   string
	Header http.Header
	Body   string
}

// toolServer is a real tool server over HTTP. Each endpoint refuses
// requests that are not signed with the shared secret for its own tool and
// phase, and records the rest.
type toolServer struct {
	*httptest.Server
	mu   sync.Mutex
	reqs []toolRequest
}

func newToolServer(t testing.TB) *toolServer {
	ts := &toolServer{}
	mux := http.NewServeMux()
	ok := func(result string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, result) }
	}
	mux.Handle("POST /reserve", ok(`{"reserved":1}`))
	mux.Handle("POST /release", ok("released"))
	mux.Handle("POST /order", ok("order-1"))
	mux.Handle("POST /cancel", ok("cancelled"))
	mux.Handle("POST /wire", ok("transfer-ok"))
	mux.Handle("POST /pay", ok("paid"))
	mux.Handle("POST /binary", ok("\xff\x00ok")) // a result that is not text
	mux.Handle("POST /unbinary", ok("undone"))
	mux.HandleFunc("POST /ship", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "no carrier available", http.StatusServiceUnavailable)
	})
	mux.HandleFunc("POST /slow", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(5 * time.Second):
		case <-r.Context().Done():
		}
	})
	mux.HandleFunc("POST /huge", func(w http.ResponseWriter, r *http.Request) {
		chunk := bytes.Repeat([]byte("x"), 64<<10)
		for range 100 << 20 / len(chunk) { // 100 MiB, unless the client hangs up first
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	})
	record := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		ts.mu.Lock()
		ts.reqs = append(ts.reqs, toolRequest{Path: r.URL.Path, Header: r.Header.Clone(), Body: string(b)})
		ts.mu.Unlock()
		r.Body = io.NopCloser(bytes.NewReader(b))
		mux.ServeHTTP(w, r)
	})
	// The tool and phase each endpoint serves (see newAPI's tools).
	expect := map[string]toolsig.Expect{
		"/reserve":  {Tool: "reserveInventory", Phase: toolsig.Execute},
		"/release":  {Tool: "reserveInventory", Phase: toolsig.Compensate},
		"/order":    {Tool: "createOrder", Phase: toolsig.Execute},
		"/cancel":   {Tool: "createOrder", Phase: toolsig.Compensate},
		"/ship":     {Tool: "scheduleShipment", Phase: toolsig.Execute},
		"/wire":     {Tool: "sendWireTransfer", Phase: toolsig.Execute},
		"/pay":      {Tool: "payTyped", Phase: toolsig.Execute},
		"/slow":     {Tool: "slowTool", Phase: toolsig.Execute},
		"/huge":     {Tool: "hugeTool", Phase: toolsig.Execute},
		"/binary":   {Tool: "binaryTool", Phase: toolsig.Execute},
		"/unbinary": {Tool: "binaryTool", Phase: toolsig.Compensate},
	}
	guarded := http.NewServeMux()
	for path, want := range expect {
		guarded.Handle("POST "+path, toolsig.Handler(secret, want, 1<<20, record))
	}
	ts.Server = httptest.NewServer(guarded)
	t.Cleanup(ts.Close)
	return ts
}

func (ts *toolServer) requests() []toolRequest {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return append([]toolRequest(nil), ts.reqs...)
}

// paths lists the paths the tool server was asked for, in order.
func (ts *toolServer) paths() []string {
	var out []string
	for _, r := range ts.requests() {
		out = append(out, r.Path)
	}
	return out
}

// typed gives a tool a description and an input schema: an amount in
// whole cents and an account, nothing else.
func typed(t engine.Tool) engine.Tool {
	t.Description = "Pays cents to the account to."
	t.InputSchema = []byte(`{"type":"object","properties":{"cents":{"type":"integer","minimum":1},"to":{"type":"string","minLength":1}},` +
		`"required":["cents","to"],"additionalProperties":false}`)
	return t
}

// api is a running server with its tool server, over one store.
type apiEnv struct {
	t     testing.TB
	url   string
	tools *toolServer
	db    *store.DB
	dbURL string
	logs  *testkit.Buffer // what the server logged
	eng   *engine.Engine
	log   *tlog.Log      // to sequence and check, as the server's services do
	opts  server.Options // what the server was built from
}

type envOptions struct {
	tokens []auth.Token // set: tokens mode, no anonymous API calls
	// oidc, when set, registers a client for the server's callback URL and
	// returns the provider's issuer and the client: oidc mode.
	oidc func(redirectURL string) (issuer, clientID, clientSecret string)
	// roles maps the groups claim in oidc mode.
	roles               map[string][]engine.Role
	apiAudience         string
	approvals           *engine.Approvals // the approval policy; the engine's default when nil
	now                 func() time.Time
	noApprovalEndpoints bool
	maxBody             int64
	maxResult           int64
	shareSagas          bool
	demo                bool          // the demo's tools and sagas instead of the HTTP tools
	inDoubtAfter        time.Duration // how long a call stands still before it may be resolved (0: at once)
	hosts               []string      // host names served besides loopback
	readTimeout         time.Duration // the server's, when set
	upstream            []engine.Tool // an upstream MCP server's tools, besides the HTTP tools
	// targets are notifications' endpoints, each hearing of every event
	// unless endpoints route them: the server runs a relay (every 50ms)
	// and the Notifier.
	targets   []notify.Target
	endpoints []engine.Endpoint
	// clock is the engine's (expiry, escalation); time.Now when nil.
	clock func() time.Time
	// maxWait bounds Prefer: wait (none held when 0); executions is the
	// resumes' budget a minute (the server's default when 0).
	maxWait    time.Duration
	executions int
	// mcpHold is how long MCP holds a gated call (mcp.holdFor).
	mcpHold time.Duration
}

func newAPI(t testing.TB, dbURL string, o envOptions) *apiEnv {
	t.Helper()
	ctx := context.Background()
	db, err := store.Open(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	ts := newToolServer(t)
	if o.maxBody == 0 {
		o.maxBody = 1 << 20
	}
	if o.maxResult == 0 {
		o.maxResult = 1 << 20
	}
	tool := func(name string, rev engine.Reversibility, exec, undo string, timeout time.Duration) engine.Tool {
		ht := &httptool.Tool{Name: name, Exec: httptool.Endpoint{URL: ts.URL + exec, Timeout: timeout},
			Secret: secret, MaxResult: o.maxResult}
		if undo != "" {
			ht.Undo = &httptool.Endpoint{URL: ts.URL + undo, Timeout: timeout}
		}
		return engine.Tool{Name: name, Reversibility: rev, Executor: ht}
	}
	// scheduleShipment, slowTool, hugeTool and unreachable always fail, so
	// they are never compensated and need no compensate endpoint.
	tools := []engine.Tool{
		tool("reserveInventory", engine.Compensatable, "/reserve", "/release", time.Second),
		tool("createOrder", engine.Reversible, "/order", "/cancel", time.Second),
		tool("scheduleShipment", engine.Compensatable, "/ship", "", time.Second),
		tool("sendWireTransfer", engine.Irreversible, "/wire", "", time.Second),
		tool("slowTool", engine.Compensatable, "/slow", "", 200*time.Millisecond),
		tool("hugeTool", engine.Compensatable, "/huge", "", 5*time.Second),
		tool("binaryTool", engine.Compensatable, "/binary", "/unbinary", time.Second),
		typed(tool("payTyped", engine.Irreversible, "/pay", "", time.Second)),
		{Name: "unreachable", Executor: &httptool.Tool{Name: "unreachable", Secret: secret, MaxResult: o.maxResult,
			Exec: httptool.Endpoint{URL: closedURL(t), Timeout: time.Second}}},
	}
	tools = append(tools, o.upstream...)
	var people []engine.Principal
	if o.demo {
		tools, people = demo.Tools(db, time.Now), demo.People
	}
	checkpoints, err := witness.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	logs := &testkit.Buffer{}
	log := slog.New(slog.NewTextHandler(io.MultiWriter(logs, suiteLog), nil))
	if o.now == nil {
		o.now = time.Now
	}
	if o.clock == nil {
		o.clock = time.Now
	}
	if o.endpoints == nil {
		o.endpoints = endpointsOf(o.targets)
	}
	mode := auth.ModeDev
	if o.tokens != nil {
		mode = auth.ModeTokens
	}
	srv := httptest.NewUnstartedServer(nil)
	base := "http://" + srv.Listener.Addr().String()
	sessions := &auth.Sessions{Store: db, Key: []byte("test-session-key-0123456789abcdef"), Now: o.now}
	bearer := &auth.Bearer{Anonymous: o.tokens == nil && o.oidc == nil, Tokens: o.tokens}
	var rp *auth.OIDC
	var issuers []string
	if o.oidc != nil {
		mode = auth.ModeOIDC
		issuer, id, sec := o.oidc(base + auth.CallbackPath)
		roles := auth.RoleMap{Claim: "groups", Map: o.roles}
		rp, err = auth.NewOIDC(ctx, auth.OIDCConfig{Issuer: issuer, ClientID: id, ClientSecret: sec, PublicURL: base,
			Roles: roles, Sessions: sessions})
		if err != nil {
			t.Fatal(err)
		}
		if o.apiAudience != "" {
			bearer.JWT, bearer.Issuer, bearer.Roles = rp.APIVerifier(o.apiAudience), issuer, roles
			issuers = []string{issuer}
		}
	}
	a, err := app.Build(t.Context(), app.Parts{DB: db, Checkpoints: checkpoints, Keys: testkit.Keys(t), Tools: tools, Logger: log,
		Version: "test", PublicURL: base, Replica: "server-test", Targets: o.targets, MCPHold: o.mcpHold,
		// Checkpoints are signed when a test sequences the log.
		Log:   tlog.Options{Every: 1, Interval: 24 * time.Hour},
		Every: testIntervals,
		Engine: []engine.Option{engine.WithAccess(engine.Access{ShareSagas: o.shareSagas}), engine.WithInDoubtAfter(o.inDoubtAfter),
			engine.WithApprovals(o.approvals), engine.WithNotifications(o.endpoints), engine.WithClock(o.clock)},
		Server: server.Options{
			Console:             &console.Handlers{Sessions: sessions, Mode: mode, Now: o.now, People: people},
			APIAuth:             bearer.Principal,
			TokenIssuers:        issuers,
			OIDC:                rp,
			ApprovalEndpoints:   !o.noApprovalEndpoints,
			MaxBody:             o.maxBody,
			Hosts:               o.hosts,
			MaxWait:             o.maxWait,
			ExecutionsPerMinute: o.executions,
		}})
	if err != nil {
		t.Fatal(err)
	}
	startServices(t, a.Services)
	if o.demo {
		if err := demo.Seed(ctx, db, a.Engine); err != nil {
			t.Fatal(err)
		}
	}
	srv.Config.Handler = a.Handler
	srv.Config.ReadTimeout = o.readTimeout
	srv.Start()
	// As serve stops: the requests in flight, then the services, then
	// the database.
	t.Cleanup(func() {
		srv.Close()
		if err := service.StopAll(context.Background(), a.Services...); err != nil {
			t.Errorf("stopping the services: %v", err)
		}
		db.Close()
	})
	return &apiEnv{t: t, url: srv.URL, tools: ts, db: db, logs: logs, dbURL: dbURL, eng: a.Engine, log: a.Log, opts: a.Options}
}

// testIntervals are the services' in these tests: the relay and the
// Notifier run often, so a notification arrives at once; the log's
// sequencer and checker, recovery and lapses make their first pass as
// the server starts and then leave the rest to the tests (sequencing and
// checking the log, moving the engine's clock), which nothing changes
// behind their backs. The heartbeat and the MCP watcher keep theirs.
var testIntervals = app.Intervals{Relay: 50 * time.Millisecond, Notice: 100 * time.Millisecond,
	Sequence: 24 * time.Hour, Check: 24 * time.Hour, FullCheck: 24 * time.Hour,
	Recover: 24 * time.Hour, Lapse: 24 * time.Hour, LapseAll: 24 * time.Hour}

// startServices starts the app's services as serve does, and waits until
// their first passes are over: those see only what the server started
// with.
func startServices(t testing.TB, svcs []service.Service) {
	t.Helper()
	if err := service.StartAll(context.Background(), svcs...); err != nil {
		t.Fatal(err)
	}
	if err := service.WaitStarted(t.Context(), svcs...); err != nil {
		t.Fatal(err)
	}
}

// endpointsOf routes every event to each target.
func endpointsOf(ts []notify.Target) []engine.Endpoint {
	// Team health's alerts are not the requests' events these suites
	// count (TestTeamHealthNotified hears them).
	events := slices.DeleteFunc(slices.Clone(wire.EventTypes), func(t wire.EventType) bool { return t == wire.EventUnmeetable })
	var eps []engine.Endpoint
	for _, t := range ts {
		eps = append(eps, engine.Endpoint{Name: t.Name, Events: events})
	}
	return eps
}

// noRedirects shows redirects to the test instead of following them.
var noRedirects = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// closedURL is the address of a listener that no longer listens.
func closedURL(t testing.TB) string {
	s := httptest.NewServer(http.NotFoundHandler())
	u := s.URL
	s.Close()
	return u
}

// response is a decoded HTTP answer.
type response struct {
	code   int
	header http.Header
	body   string
}

func (r response) json(t testing.TB) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(r.body), &m); err != nil {
		t.Fatalf("body %q is not a JSON object: %v", r.body, err)
	}
	return m
}

// do sends a request, and holds the answer to the OpenAPI document.
func (e *apiEnv) do(method, path, contentType, body string, headers ...string) response {
	e.t.Helper()
	req, err := http.NewRequest(method, e.url+path, strings.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := noRedirects.Do(req)
	if err != nil {
		e.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	e.holdToContract(req, body, resp, b)
	return response{resp.StatusCode, resp.Header, string(b)}
}

func (e *apiEnv) get(path string) response {
	e.t.Helper()
	return e.do("GET", path, "", "")
}

func (e *apiEnv) post(path, body string) response {
	e.t.Helper()
	return e.do("POST", path, "application/json", body)
}

// call is the agent gateway.
func (e *apiEnv) call(saga, tool, input string) response {
	e.t.Helper()
	b, _ := json.Marshal(map[string]string{"tool": tool, "input": input})
	return e.post("/sagacity/sagas/"+saga+"/calls", string(b))
}

func (e *apiEnv) payload(p string) string {
	b, _ := json.Marshal(map[string]string{"payload": p})
	return string(b)
}

// want fails the test unless r has the status code.
func want(t testing.TB, what string, r response, code int) {
	t.Helper()
	if r.code != code {
		t.Errorf("%s: status %d %s, want %d", what, r.code, r.body, code)
	}
}

// stores runs fn against PostgreSQL and SQLite.
func stores(t *testing.T, fn func(t *testing.T, dbURL string)) {
	t.Run("sqlite", func(t *testing.T) { t.Parallel(); fn(t, testkit.SQLiteURL(t)) })
	t.Run("postgres", func(t *testing.T) { t.Parallel(); fn(t, testkit.PostgresURL(t)) })
}

// build composes a server over the database at dbURL, with notification
// targets or none.
func build(t *testing.T, dbURL string, targets []notify.Target) *app.App {
	t.Helper()
	db, err := store.Open(t.Context(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	dir, err := witness.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ok := engine.Funcs{Exec: func(context.Context, engine.Invocation) (string, error) { return "done", nil }}
	a, err := app.Build(t.Context(), app.Parts{DB: db, Checkpoints: dir, Keys: testkit.Keys(t), Logger: slog.New(slog.DiscardHandler),
		Version: "test", Replica: "app-test", Targets: targets,
		Tools: []engine.Tool{{Name: "reserve", Reversibility: engine.Reversible, Executor: ok}},
		// Only the sequencer's stop signs a checkpoint.
		Every: app.Intervals{Sequence: 24 * time.Hour},
		Server: server.Options{Console: &console.Handlers{Mode: auth.ModeDev, Now: time.Now},
			APIAuth: (&auth.Bearer{Anonymous: true}).Principal}})
	if err != nil {
		t.Fatal(err)
	}
	return a
}
