// Package mcpgw puts the approval gate where agents already are: it serves
// the engine's tools over MCP (streamable HTTP, with the official SDK).
// Each call goes through the engine like a call of the JSON gateway:
// journaled, gated, compensated. A call of an IRREVERSIBLE tool answers,
// as a normal result the model reads, that a person must approve it; the
// agent then asks sagacity_status, or subscribes to its saga's resource
// to be told when a person decides, and executes the approved request
// with sagacity_resume. A client that asks for a task gets one instead
// (tasks.go), and one that does not may be held for the decision
// (hold.go).
//
// An MCP session is a saga: the first call creates it, with the caller as
// its initiator, and the session's end ends it. A Sagacity-Saga-Id header
// (or "sagacity/saga" in a call's _meta) names another.
//
// A call's _meta may hold the agent's idempotency key,
// "sagacity/idempotency-key": the call sent again under it, after a lost
// answer or a restart, answers the first one's outcome and runs nothing;
// and "sagacity/reason", why the agent asks, which the people who decide
// read. A request a reviewer sends back is told to the model, in
// sagacity_status and sagacity_resume, as
// "[CHANGES_REQUESTED] Tool '<tool>': <what to change>".
package mcpgw

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"sync"
	"time"

	mcpauth "github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/sagacity-go/sagacity/internal/auth"
	"github.com/sagacity-go/sagacity/internal/engine"
)

// Gateway is the MCP server over an engine.
type Gateway struct {
	ctx    context.Context // ends when the server stops
	engine *engine.Engine
	server *mcp.Server
	bearer http.Handler // the SDK's streamable HTTP, behind its check of the principal
	log    *slog.Logger
	gated  map[string]bool // the IRREVERSIBLE tools, whose calls may become tasks
	hold   time.Duration   // how long a gated call is held (held)

	mu       sync.Mutex
	sessions map[*mcp.ServerSession]*session // sessions that called a tool
	watched  map[string]*watch               // sagas some session subscribed to, by resource URI
	owners   map[string]owner                // who opened each session, by its id
	opening  map[string]int                  // sessions being opened, by principal, not yet in owners
}

// New makes the gateway for the engine's tools. version is the server's;
// hold is how long a gated call of a client that asked for no task is
// held for its decision (0: not at all; see held).
// ctx ends when the server stops: a session that ends after that leaves
// its sagas open for the agent to go on with. The Watcher tells
// subscribers of changes.
func New(ctx context.Context, e *engine.Engine, version string, hold time.Duration, log *slog.Logger) *Gateway {
	g := &Gateway{ctx: ctx, engine: e, log: log, hold: hold, sessions: map[*mcp.ServerSession]*session{}, watched: map[string]*watch{},
		owners: map[string]owner{}, opening: map[string]int{}, gated: map[string]bool{}}
	g.server = mcp.NewServer(&mcp.Implementation{Name: "sagacity", Title: "Sagacity", Version: version}, &mcp.ServerOptions{
		Instructions: "Every tool call here is journaled. A tool that cannot be undone answers AWAITING_APPROVAL: " +
			"a person decides it; ask " + statusTool + " (or subscribe to the saga's resource) and, once it is approved, " +
			"call " + resumeTool + " with its seq.",
		Logger:             log,
		SubscribeHandler:   g.subscribe,
		UnsubscribeHandler: g.unsubscribe,
	})
	for _, t := range e.Tools() {
		g.server.AddTool(listed(t), g.call(t))
		g.gated[t.Name] = t.Reversibility == engine.Irreversible
	}
	g.server.AddReceivingMiddleware(g.tasks)
	must(mcp.AddReceivingCustomMethod(g.server, methodTaskGet, g.taskGet))
	must(mcp.AddReceivingCustomMethod(g.server, methodTaskResult, g.taskResultOf))
	must(mcp.AddReceivingCustomMethod(g.server, methodTaskCancel, g.taskCancel))
	g.server.AddTool(&mcp.Tool{Name: statusTool, Title: "What became of this saga's requests",
		Description: "Reports the saga of this session: its status and, for each request that waits or waited for a person, " +
			"whether it is pending, approved, rejected, executed or refused. Give seq to ask about one request.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"seq":{"type":"integer","minimum":1}},"additionalProperties":false}`),
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true},
	}, g.status)
	g.server.AddTool(&mcp.Tool{Name: resumeTool, Title: "Execute an approved request",
		Description: "Executes the request at seq of this session's saga once a person has approved it, with exactly the bytes " +
			"they approved. Asked before anyone decided, it changes nothing and says to wait (ask " + statusTool + " or subscribe " +
			"to the saga's resource).",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"seq":{"type":"integer","minimum":1}},"required":["seq"],"additionalProperties":false}`),
	}, g.resume)
	g.server.AddResourceTemplate(&mcp.ResourceTemplate{Name: "saga", URITemplate: sagaResource + "{id}", MIMEType: "application/json",
		Description: "A saga's status and its requests; subscribe to be told when a person decides one."}, g.readSaga)
	verify := func(_ context.Context, _ string, r *http.Request) (*mcpauth.TokenInfo, error) {
		p := auth.From(r.Context())
		if p.ID == "" {
			return nil, mcpauth.ErrInvalidToken
		}
		return &mcpauth.TokenInfo{UserID: p.ID, Extra: map[string]any{principalKey: p}}, nil
	}
	g.bearer = mcpauth.RequireBearerToken(verify, &mcpauth.RequireBearerTokenOptions{AllowMissingExpiration: true})(
		mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return g.server },
			&mcp.StreamableHTTPOptions{Logger: log, SessionTimeout: sessionIdle}))
	return g
}

// Serve serves MCP to a principal the server has authenticated (see
// auth.From): it hands the principal to the SDK as the session's token
// information, which also binds each session to its principal. A new
// session beyond the bounds (maxSessions in all, maxSessionsEach for one
// principal) is refused with an Unavailable error before anything is
// written. A request of a method it does not serve is answered -32601
// (see screen).
func (g *Gateway) Serve(w http.ResponseWriter, r *http.Request) error {
	p := auth.From(r.Context())
	method, answered, err := screen(w, r)
	if answered || err != nil {
		return err
	}
	if wait := map[string]time.Duration{"tools/call": g.hold, methodTaskResult: resultWait}[method]; wait > 0 {
		// A held call and tasks/result answer once a person decides: the
		// server's write timeout, sized for a tool's call, would cut them.
		_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(wait + time.Minute))
	}
	if r.Method == http.MethodPost && r.Header.Get(sessionHeader) == "" {
		if err := g.admit(p.ID); err != nil {
			return err
		}
		o := &opened{ResponseWriter: w, g: g, principal: p.ID}
		defer o.note()
		w = o
	}
	if p.Anonymous && r.Header.Get("Authorization") == "" {
		// A dev-mode caller without a token: the SDK takes the principal
		// only from a bearer token, so give it one to read (its value is
		// never looked at).
		r = r.Clone(r.Context())
		r.Header.Set("Authorization", "Bearer anonymous")
	}
	g.bearer.ServeHTTP(w, r)
	if id := r.Header.Get(sessionHeader); r.Method == http.MethodDelete {
		g.mu.Lock()
		defer g.mu.Unlock()
		if g.owners[id].principal == p.ID {
			delete(g.owners, id) // the SDK ends only its own principal's session
		}
	}
	return nil
}

// must panics on an error that only a mistake in this package makes.
func must(err error) {
	if err != nil {
		panic(err)
	}
}

// principalKey holds the principal in the SDK's token information.
const principalKey = "sagacity/principal"

// caller is the principal making a request, as the server authenticated
// it, with the MCP client and session it came through.
func caller(ss *mcp.ServerSession, extra *mcp.RequestExtra) (engine.Principal, error) {
	var p engine.Principal
	if extra != nil && extra.TokenInfo != nil {
		p, _ = extra.TokenInfo.Extra[principalKey].(engine.Principal)
	}
	if p.ID == "" {
		return p, errors.New("no authenticated principal")
	}
	p.Client = "mcp"
	if ip := ss.InitializeParams(); ip != nil && ip.ClientInfo != nil {
		p.Client += " " + ip.ClientInfo.Name + "/" + ip.ClientInfo.Version
	}
	if id := ss.ID(); id != "" {
		p.Client += " session " + id
	}
	return p, nil
}
