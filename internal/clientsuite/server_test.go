package client_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sagacity-go/sagacity/client"
	"github.com/sagacity-go/sagacity/internal/app"
	"github.com/sagacity-go/sagacity/internal/auth"
	"github.com/sagacity-go/sagacity/internal/console"
	"github.com/sagacity-go/sagacity/internal/engine"
	"github.com/sagacity-go/sagacity/internal/httptool"
	"github.com/sagacity-go/sagacity/internal/server"
	"github.com/sagacity-go/sagacity/internal/service"
	"github.com/sagacity-go/sagacity/internal/store"
	"github.com/sagacity-go/sagacity/internal/tlog"
	"github.com/sagacity-go/sagacity/internal/witness"
	"github.com/sagacity-go/sagacity/toolsig"
)

// The client is tested against the real server: the route table, the
// JSON handlers and the engine over a real store, in tokens mode, with
// its tools on a real tool server that checks Sagacity's signature.

// TestMain starts a server for Example, which finds it in the
// environment as a program would.
func TestMain(m *testing.M) {
	os.Exit(func() int {
		dir, err := os.MkdirTemp("", "sagacity-client-example-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(dir)
		srv, err := start(sqliteURL(dir), dir, io.Discard)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer srv.close()
		os.Setenv("SAGACITY_URL", srv.url)
		os.Setenv("SAGACITY_AGENT_TOKEN", tokens["agent"])
		os.Setenv("SAGACITY_APPROVER_TOKEN", tokens["approver"])
		return m.Run()
	}())
}

var secret = []byte("client-test-tool-signing-secret-0123456789")

// tokens are the server's API tokens by name; the principal of each is
// token:<name>.
var tokens = map[string]string{
	"agent":       "sgc_client_test_agent_0123456789abcdef",
	"other-agent": "sgc_client_test_other_0123456789abcdef",
	"approver":    "sgc_client_test_approver_0123456789abc",
	"auditor":     "sgc_client_test_auditor_0123456789abcd",
	"lead":        "sgc_client_test_lead_0123456789abcdefg", // agent and approver
}

var roles = map[string][]engine.Role{
	"agent":       {engine.RoleAgent},
	"other-agent": {engine.RoleAgent},
	"approver":    {engine.RoleApprover},
	"auditor":     {engine.RoleAuditor},
	"lead":        {engine.RoleAgent, engine.RoleApprover},
}

// The tools, and what their endpoints answer.
const (
	reserve = "reserveInventory" // COMPENSATABLE: "reserved", undone by /release
	wire    = "sendWireTransfer" // IRREVERSIBLE: "sent <Idempotency-Key>"
	ship    = "scheduleShipment" // COMPENSATABLE, always fails (503)
	book    = "bookCourier"      // COMPENSATABLE: "booked", once the test lets it
)

// toolServer is a real tool server: each endpoint refuses requests not
// signed for its own tool and phase, and counts the rest by path and
// Idempotency-Key.
type toolServer struct {
	*httptest.Server
	hold chan struct{} // /book answers once it is closed, when set

	mu    sync.Mutex
	calls map[string]int // "<path> <Idempotency-Key>" → requests
}

func newToolServer() *toolServer {
	ts := &toolServer{calls: map[string]int{}, hold: make(chan struct{})}
	close(ts.hold)
	mux := http.NewServeMux()
	for _, ep := range []struct {
		path, tool string
		phase      toolsig.Phase
		answer     func(key string) string
	}{
		{"/reserve", reserve, toolsig.Execute, func(string) string { return "reserved" }},
		{"/release", reserve, toolsig.Compensate, func(string) string { return "released" }},
		{"/wire", wire, toolsig.Execute, func(key string) string { return "sent " + key }},
		{"/ship", ship, toolsig.Execute, nil},
		{"/book", book, toolsig.Execute, func(string) string { return "booked" }},
		{"/unbook", book, toolsig.Compensate, func(string) string { return "unbooked" }},
	} {
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			key := r.Header.Get(toolsig.HeaderKey)
			ts.mu.Lock()
			ts.calls[ep.path+" "+key]++
			hold := ts.hold
			ts.mu.Unlock()
			if ep.path == "/book" {
				<-hold
			}
			if ep.answer == nil {
				http.Error(w, "no carrier available", http.StatusServiceUnavailable)
				return
			}
			_, _ = io.WriteString(w, ep.answer(key))
		})
		mux.Handle("POST "+ep.path, toolsig.Handler(secret, toolsig.Expect{Tool: ep.tool, Phase: ep.phase}, 1<<20, h))
	}
	ts.Server = httptest.NewServer(mux)
	return ts
}

// count is how many requests reached path with the Idempotency-Key.
func (ts *toolServer) count(path, key string) int {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return ts.calls[path+" "+key]
}

// ran is how many requests reached path.
func (ts *toolServer) ran(path string) int {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	n := 0
	for k, c := range ts.calls {
		if strings.HasPrefix(k, path+" ") {
			n += c
		}
	}
	return n
}

// holdBooking makes /book wait until the returned func is called.
func (ts *toolServer) holdBooking() (release func()) {
	hold := make(chan struct{})
	ts.mu.Lock()
	ts.hold = hold
	ts.mu.Unlock()
	return sync.OnceFunc(func() { close(hold) })
}

// sagacity is a running server.
type sagacity struct {
	url   string
	tools *toolServer
	log   *tlog.Log // to sequence the global log, as the server's sequencer does
	close func()
}

func sqliteURL(dir string) string { return "sqlite:" + filepath.Join(dir, "sagacity.db") }

// start runs the server on dbURL, keeping its checkpoints in dir and
// writing its log to logs.
func start(dbURL, dir string, logs io.Writer) (*sagacity, error) {
	ctx := context.Background()
	db, err := store.Open(ctx, dbURL)
	if err != nil {
		return nil, err
	}
	ts := newToolServer()
	stop := func() { ts.Close(); db.Close() }
	tool := func(name string, rev engine.Reversibility, exec, undo string) engine.Tool {
		ht := &httptool.Tool{Name: name, Secret: secret, MaxResult: 1 << 20, Exec: httptool.Endpoint{URL: ts.URL + exec, Timeout: 10 * time.Second}}
		if undo != "" {
			ht.Undo = &httptool.Endpoint{URL: ts.URL + undo, Timeout: 10 * time.Second}
		}
		return engine.Tool{Name: name, Reversibility: rev, Executor: ht}
	}
	skey, _, err := engine.GenerateKeys("sagacity.client-test")
	if err != nil {
		stop()
		return nil, err
	}
	keys, err := engine.NewKeys(skey)
	if err != nil {
		stop()
		return nil, err
	}
	checkpoints, err := witness.Open(filepath.Join(dir, "checkpoints"))
	if err != nil {
		stop()
		return nil, err
	}
	log := slog.New(slog.NewTextHandler(logs, nil))
	var declared []auth.Token
	for name, value := range tokens {
		declared = append(declared, auth.Token{Name: name, SHA256: engine.PayloadHash(value), Roles: roles[name]})
	}
	sessions := &auth.Sessions{Store: db, Key: []byte("client-test-session-key-0123456789"), Now: time.Now}
	// A transfer of 10000 or more takes two approvers and a reason;
	// less, one.
	policy, err := engine.CompilePolicy(engine.PolicySpec{Tools: map[string][]engine.RuleSpec{wire: {
		{Name: "large", When: `double(payload.amount) >= 10000.0`, Quorum: 2, Reason: engine.ReasonRequired},
		{Name: "small"},
	}}})
	if err != nil {
		stop()
		return nil, err
	}
	a, err := app.Build(context.Background(), app.Parts{DB: db, Checkpoints: checkpoints, Keys: keys, Logger: log, Version: "test",
		Tools: []engine.Tool{
			tool(reserve, engine.Compensatable, "/reserve", "/release"),
			tool(wire, engine.Irreversible, "/wire", ""),
			tool(ship, engine.Compensatable, "/ship", ""),
			tool(book, engine.Compensatable, "/book", "/unbook"),
		},
		Log: tlog.Options{Every: 1, Interval: 24 * time.Hour},
		// The log is sequenced and checked when a test does it;
		// recovery and lapses make their first pass at the start.
		Every: app.Intervals{Sequence: 24 * time.Hour, Check: 24 * time.Hour, FullCheck: 24 * time.Hour,
			Recover: 24 * time.Hour, Lapse: 24 * time.Hour, LapseAll: 24 * time.Hour},
		Replica: "client-test",
		// Calls in doubt may be resolved at once, and an outcome that
		// cannot be journaled is given up on after 200ms.
		Engine: []engine.Option{engine.WithInDoubtAfter(0), engine.WithOutcomeRetry(200 * time.Millisecond), engine.WithApprovals(policy)},
		Server: server.Options{
			Console:           &console.Handlers{Sessions: sessions, Mode: auth.ModeTokens, Now: time.Now},
			APIAuth:           (&auth.Bearer{Tokens: declared}).Principal,
			ApprovalEndpoints: true,
			MaxBody:           1 << 20,
			MaxWait:           time.Minute,
		}})
	if err != nil {
		stop()
		return nil, err
	}
	// As serve runs them: started before the first request and stopped
	// after the last, each first pass over before a test begins.
	if err := service.StartAll(ctx, a.Services...); err != nil {
		stop()
		return nil, err
	}
	if err := service.WaitStarted(ctx, a.Services...); err != nil {
		_ = service.StopAll(ctx, a.Services...)
		stop()
		return nil, err
	}
	srv := httptest.NewServer(a.Handler)
	return &sagacity{url: srv.URL, tools: ts, log: a.Log, close: func() {
		srv.Close()
		_ = service.StopAll(ctx, a.Services...)
		stop()
	}}, nil
}

// newServer runs a server on dbURL for the test.
func newServer(t *testing.T, dbURL string) *sagacity {
	t.Helper()
	s, err := start(dbURL, t.TempDir(), t.Output())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.close)
	return s
}

// as is a client of the server with the named token.
func (s *sagacity) as(name string) *client.Client {
	return &client.Client{BaseURL: s.url, Token: tokens[name]}
}

// sequence appends the journal to the global log and signs a checkpoint,
// as the server's loop does, and returns the log's size.
func (s *sagacity) sequence(t *testing.T) int64 {
	t.Helper()
	st, err := s.log.Sequence(t.Context(), true)
	if err != nil {
		t.Fatal(err)
	}
	return st.Size
}
