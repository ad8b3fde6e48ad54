package mcpgw

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/sagacity-go/sagacity/internal/auth"
	"github.com/sagacity-go/sagacity/internal/engine"
	"github.com/sagacity-go/sagacity/internal/store"
	"github.com/sagacity-go/sagacity/internal/testkit"
)

// TestWatches: the sagas watched are bounded, in all and for one
// session; only sagas that exist are watched; a session's second
// subscription to a saga or an unsubscription from one it never
// subscribed to changes nothing, and a session that ends without
// unsubscribing stops its watches.
func TestWatches(t *testing.T) {
	defer func(n, m int) { maxWatched, maxWatchedPerSession = n, m }(maxWatched, maxWatchedPerSession)
	maxWatched, maxWatchedPerSession = 3, 2
	g, e, srv := serve(t)
	p := engine.Principal{ID: "agent", Roles: engine.Roles}
	connect := func() *mcp.ClientSession {
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil).Connect(t.Context(),
			&mcp.StreamableClientTransport{Endpoint: srv.URL, HTTPClient: &http.Client{Transport: withToken{"agent"}}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		// Closed before the server (cleanups run last first): an open
		// session's stream would keep the server's Close waiting, and a
		// failing test would hang instead of failing.
		t.Cleanup(func() { cs.Close() })
		return cs
	}
	watched := func() int {
		g.mu.Lock()
		defer g.mu.Unlock()
		return len(g.watched)
	}
	sub := func(cs *mcp.ClientSession, saga string) error {
		return cs.Subscribe(t.Context(), &mcp.SubscribeParams{URI: sagaResource + saga})
	}
	for _, s := range []string{"s1", "s2", "s3", "s4"} {
		if _, err := e.Saga(t.Context(), p, s, func(*engine.Run) error { return nil }); err != nil {
			t.Fatal(err)
		}
	}
	a, b, c := connect(), connect(), connect()
	if err := sub(a, "nope"); err == nil || watched() != 0 {
		t.Errorf("a saga that does not exist watched: %v, %d watched; want it refused", err, watched())
	}
	for _, s := range []string{"s1", "s1", "s2"} {
		if err := sub(a, s); err != nil {
			t.Fatalf("subscribe %s: %v", s, err)
		}
	}
	if err := sub(a, "s3"); err == nil || watched() != 2 {
		t.Errorf("a session's third saga watched: %v, %d watched; want it refused, 2 watched", err, watched())
	}
	if err := sub(c, "s3"); err != nil {
		t.Fatalf("subscribe s3: %v", err)
	}
	if err := sub(b, "s4"); err == nil || watched() != 3 {
		t.Errorf("a fourth saga watched: %v, %d watched; want it refused, 3 watched", err, watched())
	}
	if err := sub(b, "s1"); err != nil {
		t.Errorf("another session subscribing to a watched saga: %v", err)
	}
	if err := b.Unsubscribe(t.Context(), &mcp.UnsubscribeParams{URI: sagaResource + "s2"}); err != nil || watched() != 3 {
		t.Errorf("unsubscribing from a saga another session watches: %v, %d watched; want nothing changed", err, watched())
	}
	a.Close()
	for deadline := time.Now().Add(5 * time.Second); watched() != 2; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d sagas watched after the session that watched s2 ended, want 2 (s1 and s3, for the others)", watched())
		}
	}
}

// serve runs a gateway over an engine with one tool (see serveHolding)
// on a SQLite store, serving the principal its bearer token names
// (withToken), with every role; it stops when the test ends.
func serve(t *testing.T) (*Gateway, *engine.Engine, *httptest.Server) {
	return serveHolding(t, 0, &paid{})
}

// serveHolding is serve with an IRREVERSIBLE tool, pay, and gated calls
// held for hold, the engine listening for decisions and taking opts.
func serveHolding(t *testing.T, hold time.Duration, pay engine.Executor, opts ...engine.Option) (*Gateway, *engine.Engine, *httptest.Server) {
	db, err := store.Open(t.Context(), testkit.SQLiteURL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	e, err := engine.New(db, []engine.Tool{{Name: "pay", Reversibility: engine.Irreversible, Executor: pay}},
		append([]engine.Option{engine.WithKeys(testkit.Keys(t))}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	l := &engine.Listener{Engine: e}
	if err := l.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Stop(context.Background()) })
	g := New(t.Context(), e, "test", hold, slog.New(slog.DiscardHandler))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := engine.Principal{ID: strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "), Roles: engine.Roles}
		if err := g.Serve(w, r.WithContext(auth.WithPrincipal(r.Context(), p))); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
		}
	}))
	t.Cleanup(srv.Close)
	return g, e, srv
}

// TestSessions: the sessions open at once are bounded, for one principal
// and in all; a session that ends makes room.
func TestSessions(t *testing.T) {
	defer func(n, m int) { maxSessions, maxSessionsEach = n, m }(maxSessions, maxSessionsEach)
	maxSessions, maxSessionsEach = 3, 2
	_, _, srv := serve(t)
	var open []*mcp.ClientSession
	defer func() {
		for _, cs := range open {
			cs.Close()
		}
	}()
	connect := func(who string) {
		t.Helper()
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil).Connect(t.Context(),
			&mcp.StreamableClientTransport{Endpoint: srv.URL, MaxRetries: -1, DisableStandaloneSSE: true,
				HTTPClient: &http.Client{Transport: withToken{who}}}, nil)
		if err != nil {
			t.Fatalf("%s connects: %v", who, err)
		}
		open = append(open, cs)
	}
	// refused opens a session as who by hand, and says what the refusal
	// said; "" when the session opened.
	refused := func(who string) string {
		t.Helper()
		req, _ := http.NewRequest("POST", srv.URL, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize",`+
			`"params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		resp, err := (&http.Client{Transport: withToken{who}}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode == http.StatusServiceUnavailable {
			return string(b)
		}
		if id := resp.Header.Get(sessionHeader); id != "" {
			del, _ := http.NewRequest("DELETE", srv.URL, nil)
			del.Header.Set(sessionHeader, id)
			if resp, err := (&http.Client{Transport: withToken{who}}).Do(del); err == nil {
				resp.Body.Close()
			}
		}
		return ""
	}
	connect("a")
	connect("a")
	if why := refused("a"); !strings.Contains(why, "a has 2 MCP sessions open, the most one principal may") {
		t.Errorf("a's third session: %q; want it refused", why)
	}
	connect("b")
	if why := refused("b"); !strings.Contains(why, "the server has 3 MCP sessions open, the most it keeps") {
		t.Errorf("a fourth session: %q; want it refused", why)
	}
	open[0].Close()
	var why string
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if why = refused("b"); why == "" {
			break
		}
	}
	if why != "" {
		t.Errorf("b's second session once a's first ended: %q", why)
	}
}

// withToken sends every request with a bearer token naming who.
type withToken struct{ who string }

func (w withToken) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+w.who)
	return http.DefaultTransport.RoundTrip(r)
}

// paid is a tool that pays and says so, counting its payments.
type paid struct{ n atomic.Int64 }

func (p *paid) Execute(context.Context, engine.Invocation) (string, error) {
	p.n.Add(1)
	return "paid", nil
}

func (*paid) Compensate(context.Context, engine.Invocation, string) error {
	return errors.New("a payment is not undone")
}

// TestHeld: a gated call of a client that asks for no task is held: told
// it still waits (notifications/progress, as it sent a progressToken)
// until a person's approval, then answered the tool's result, run once,
// whether the held call executes it (the default rule) or the server
// does on the approval (execute: on-approval); one nobody decides is
// answered the gate's text once the hold ends.
func TestHeld(t *testing.T) {
	defer func(d time.Duration) { progressEvery = d }(progressEvery)
	progressEvery = 20 * time.Millisecond
	onApproval, err := engine.CompilePolicy(engine.PolicySpec{Default: []engine.RuleSpec{{Name: "server", Execute: engine.ExecuteOnApproval}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		opts []engine.Option
	}{
		{"default", nil},
		{"on-approval", []engine.Option{engine.WithApprovals(onApproval)}},
	} {
		t.Run(c.name, func(t *testing.T) { holdOne(t, c.opts...) })
	}
}

// holdOne is TestHeld under the engine's opts.
func holdOne(t *testing.T, opts ...engine.Option) {
	pay := &paid{}
	_, e, srv := serveHolding(t, time.Second, pay, opts...)
	var progress atomic.Int64
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(context.Context, *mcp.ProgressNotificationClientRequest) { progress.Add(1) },
	}).Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: srv.URL, HTTPClient: &http.Client{Transport: withToken{"agent"}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	call := func(saga string) (string, bool) {
		r, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "pay", Arguments: map[string]any{"to": "alice"},
			Meta: mcp.Meta{"progressToken": saga, sagaMeta: saga}})
		if err != nil {
			t.Fatalf("calling pay in %s: %v", saga, err)
		}
		return r.Content[0].(*mcp.TextContent).Text, r.IsError
	}
	go func() {
		// The reviewer approves once the client was told twice it waits.
		reviewer := engine.Principal{ID: "reviewer", Roles: engine.Roles}
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			if progress.Load() < 2 {
				continue
			}
			if _, err := e.Approve(context.Background(), reviewer, "approved", 1, ""); err == nil {
				return
			}
		}
		t.Error("the reviewer found nothing to approve")
	}()
	if text, isError := call("approved"); isError || text != "paid" || progress.Load() == 0 {
		t.Errorf("a held call approved = %q (error %v) after %d progress notifications; want the tool's result, and progress", text, isError, progress.Load())
	}
	if n := pay.n.Load(); n != 1 {
		t.Errorf("the approved call paid %d times, want once", n)
	}
	start := time.Now()
	if text, isError := call("undecided"); isError || !strings.HasPrefix(text, "[AWAITING_APPROVAL] Tool 'pay' requires human approval") ||
		time.Since(start) < time.Second {
		t.Errorf("a held call nobody decides = %q (error %v) after %s; want the gate's text once the hold ends", text, isError, time.Since(start))
	}
}

// TestTaskResultProgress: a tasks/result that carried a progressToken is
// told it still waits (notifications/progress, on its own stream) until
// the approval, then answered the tool's result, naming its task.
func TestTaskResultProgress(t *testing.T) {
	defer func(d time.Duration) { progressEvery = d }(progressEvery)
	progressEvery = 20 * time.Millisecond
	_, e, srv := serveHolding(t, 0, &paid{})
	// post sends body in session (none: a new one) and hands the answer
	// to read, if any.
	post := func(session, body string, read func(*http.Response)) {
		t.Helper()
		req, _ := http.NewRequest("POST", srv.URL, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set(SagaHeader, "tasked")
		if session != "" {
			req.Header.Set(sessionHeader, session)
			req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
		}
		resp, err := (&http.Client{Transport: withToken{"agent"}}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if read != nil {
			read(resp)
		}
	}
	var session string
	post("", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},`+
		`"clientInfo":{"name":"t","version":"1"}}}`, func(r *http.Response) { session = r.Header.Get(sessionHeader) })
	post(session, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, nil)
	var b []byte
	post(session, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"pay","arguments":{},"task":{}}}`,
		func(r *http.Response) { b, _ = io.ReadAll(r.Body) })
	var created struct {
		Result struct{ Task struct{ TaskID string } }
	}
	_, data, _ := strings.Cut(string(b), "data: ")
	if err := json.Unmarshal([]byte(data), &created); err != nil || created.Result.Task.TaskID == "" {
		t.Fatalf("tools/call asking for a task = %s", b)
	}
	id := created.Result.Task.TaskID
	// The reviewer approves once the client was told twice it waits, or
	// after 5 s without, so that the test fails rather than hangs.
	var once sync.Once
	approve := func() {
		once.Do(func() {
			if _, err := e.Approve(context.Background(), engine.Principal{ID: "reviewer", Roles: engine.Roles}, "tasked", 1, ""); err != nil {
				t.Error(err)
			}
		})
	}
	defer time.AfterFunc(5*time.Second, approve).Stop()
	progress, answer := 0, ""
	post(session, `{"jsonrpc":"2.0","id":3,"method":"tasks/result","params":{"taskId":"`+id+`","_meta":{"progressToken":"p"}}}`,
		func(r *http.Response) {
			for sc := bufio.NewScanner(r.Body); answer == "" && sc.Scan(); {
				line, ok := strings.CutPrefix(sc.Text(), "data: ")
				switch {
				case !ok:
				case strings.Contains(line, `"method":"notifications/progress"`):
					if progress++; progress == 2 {
						approve()
					}
				case strings.Contains(line, `"id":3`):
					answer = line
				}
			}
		})
	if progress < 2 || !strings.Contains(answer, `"text":"paid"`) || !strings.Contains(answer, `"io.modelcontextprotocol/related-task":{"taskId":"`+id+`"}`) {
		t.Errorf("tasks/result after %d progress notifications = %q; want the tool's result, naming its task", progress, answer)
	}
}
