// Package mcpgw puts the approval gate where agents already are: it serves
// the engine's tools over MCP (streamable HTTP, with the official SDK).
// Each call goes through the engine like a call of the JSON gateway:
// journaled, gated, compensated. A call of an IRREVERSIBLE tool answers,
// as a normal result the model reads, that a person must approve it; the
// agent then asks sagacity_status, or subscribes to its saga's resource
// to be told when a person decides, and executes the approved request
// with sagacity_resume.
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
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	mcpauth "github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/sagacity-go/sagacity/internal/api"
	"github.com/sagacity-go/sagacity/internal/auth"
	"github.com/sagacity-go/sagacity/internal/edge"
	"github.com/sagacity-go/sagacity/internal/engine"
	"github.com/sagacity-go/sagacity/internal/service"
	"github.com/sagacity-go/sagacity/wire"
)

// The gateway's own tools, beside the engine's.
const (
	statusTool = engine.ReservedPrefix + "status"
	resumeTool = engine.ReservedPrefix + "resume"
)

// SagaHeader names the saga an HTTP request's calls belong to.
const SagaHeader = "Sagacity-Saga-Id"

// The keys in a call's _meta that name its saga and hold the agent's
// idempotency key for it.
const (
	sagaMeta   = "sagacity/saga"
	keyMeta    = "sagacity/idempotency-key"
	reasonMeta = "sagacity/reason" // why the agent asks, shown to reviewers
)

// Gateway is the MCP server over an engine.
type Gateway struct {
	ctx    context.Context // ends when the server stops
	engine *engine.Engine
	server *mcp.Server
	bearer http.Handler // the SDK's streamable HTTP, behind its check of the principal
	log    *slog.Logger

	mu       sync.Mutex
	sessions map[*mcp.ServerSession]*session // sessions that called a tool
	watched  map[string]*watch               // sagas some session subscribed to, by resource URI
	owners   map[string]owner                // who opened each session, by its id
	opening  map[string]int                  // sessions being opened, by principal, not yet in owners
}

// session is who called through an MCP session, and into which sagas.
type session struct {
	principal engine.Principal // once it called a tool
	sagas     map[string]bool  // the sagas it called into
	watching  map[string]bool  // the resources it subscribed to
}

// watch is a subscribed saga: how it looked when last seen, and whom to
// read it as.
type watch struct {
	subscribers int
	reader      engine.Principal
	seen        engine.Saga
}

// watchEvery is how often subscribed sagas are looked at for a change: an
// agent waiting for a decision hears of it at most this late.
const watchEvery = 2 * time.Second

// maxWatched bounds the sagas the gateway watches for all its sessions at
// once: each is read every watchEvery. A variable for tests.
var maxWatched = 10_000

// maxWatchedPerSession bounds one session's subscriptions, so that one
// agent cannot take the watcher for itself. A variable for tests.
var maxWatchedPerSession = 100

// New makes the gateway for the engine's tools. version is the server's.
// ctx ends when the server stops: a session that ends after that leaves
// its sagas open for the agent to go on with. The Watcher tells
// subscribers of changes.
func New(ctx context.Context, e *engine.Engine, version string, log *slog.Logger) *Gateway {
	g := &Gateway{ctx: ctx, engine: e, log: log, sessions: map[*mcp.ServerSession]*session{}, watched: map[string]*watch{},
		owners: map[string]owner{}, opening: map[string]int{}}
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
	}
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
	g.server.AddResourceTemplate(&mcp.ResourceTemplate{Name: "saga", URITemplate: "sagacity://saga/{id}", MIMEType: "application/json",
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
// written.
func (g *Gateway) Serve(w http.ResponseWriter, r *http.Request) error {
	p := auth.From(r.Context())
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

// opened is the answer to a request that may open a session: the
// session is its principal's from the moment its id is sent, before the
// client can open another (see admit).
type opened struct {
	http.ResponseWriter
	g         *Gateway
	principal string
	noted     bool
}

// note takes the slot admit held for the session: the session's, once
// the answer names it, or nobody's.
func (o *opened) note() {
	if o.noted {
		return
	}
	o.noted = true
	g := o.g
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.opening[o.principal]--; g.opening[o.principal] <= 0 {
		delete(g.opening, o.principal)
	}
	if id := o.Header().Get(sessionHeader); id != "" {
		g.owners[id] = owner{o.principal, time.Now()}
	}
}

func (o *opened) WriteHeader(code int) {
	o.note()
	o.ResponseWriter.WriteHeader(code)
}

func (o *opened) Write(b []byte) (int, error) {
	o.note()
	return o.ResponseWriter.Write(b)
}

func (o *opened) Flush() {
	o.note()
	http.NewResponseController(o.ResponseWriter).Flush()
}

func (o *opened) Unwrap() http.ResponseWriter { return o.ResponseWriter }

// owner is who opened a session, and when.
type owner struct {
	principal string
	at        time.Time
}

// sessionHeader names an MCP session in streamable HTTP.
const sessionHeader = "Mcp-Session-Id"

// The bounds of the sessions open at once: each holds memory until it
// ends, or has been idle for sessionIdle. Variables for tests.
var (
	maxSessions     = 1000
	maxSessionsEach = 100
)

// sessionIdle is how long a session may go without a request.
const sessionIdle = 10 * time.Minute

// admit refuses a new session for principal when the sessions open, and
// being opened, are at a bound: Unavailable, saying which; otherwise it
// holds a slot for the session (see opened). A session its client ended
// (DELETE) counts no more; one the SDK ended (idle) once it no longer
// holds it (one just opened may not be listed yet). Sessions the SDK
// keeps only while it answers (a client's server/discover) are not
// counted: every session that lasts was opened through admit.
func (g *Gateway) admit(principal string) error {
	live := map[string]bool{}
	for ss := range g.server.Sessions() {
		live[ss.ID()] = true
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	mine, opening := g.opening[principal], 0
	for _, n := range g.opening {
		opening += n
	}
	for id, o := range g.owners {
		switch {
		case !live[id] && time.Since(o.at) > time.Minute:
			delete(g.owners, id)
		case o.principal == principal:
			mine++
		}
	}
	switch {
	case len(g.owners)+opening >= maxSessions:
		return engine.Errorf(engine.Unavailable, "the server has %d MCP sessions open, the most it keeps: try again once one ends", maxSessions)
	case mine >= maxSessionsEach:
		return engine.Errorf(engine.Unavailable, "%s has %d MCP sessions open, the most one principal may: end one (DELETE /mcp) first", principal, maxSessionsEach)
	}
	g.opening[principal]++
	return nil
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

// sagaOf is the saga a call belongs to: named by its _meta or its HTTP
// request's header (named), else the session's own.
func sagaOf(req *mcp.CallToolRequest) (saga string, named bool) {
	if s, ok := req.Params.Meta[sagaMeta].(string); ok && s != "" {
		return s, true
	}
	if req.Extra != nil {
		if s := req.Extra.Header.Get(SagaHeader); s != "" {
			return s, true
		}
	}
	if id := req.Session.ID(); id != "" {
		return "mcp-" + id, false
	}
	return "mcp-" + fmt.Sprintf("%p", req.Session), false
}

// listed is how a tool is listed: its schema, or any object, and what its
// reversibility means for the agent.
func listed(t engine.ToolInfo) *mcp.Tool {
	schema := t.InputSchema
	if len(schema) == 0 {
		schema = json.RawMessage(`{"type":"object"}`)
	}
	desc := strings.TrimSpace(t.Description)
	destructive := t.Reversibility == engine.Irreversible
	if destructive {
		desc = strings.TrimSpace(desc + " Cannot be undone: each call waits for a person's approval (the call answers " +
			"AWAITING_APPROVAL; then " + statusTool + " and " + resumeTool + ").")
	}
	return &mcp.Tool{Name: t.Name, Description: desc, InputSchema: schema,
		Annotations: &mcp.ToolAnnotations{DestructiveHint: &destructive}}
}

// call runs an engine tool.
func (g *Gateway) call(t engine.ToolInfo) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		p, err := caller(req.Session, req.Extra)
		if err != nil {
			return nil, err
		}
		saga, named := sagaOf(req)
		input := string(req.Params.Arguments)
		if input == "" {
			input = "{}"
		}
		key, ok := req.Params.Meta[keyMeta].(string)
		if _, set := req.Params.Meta[keyMeta]; set && (!ok || key == "") {
			return failed(engine.Errorf(engine.Invalid, "_meta %q must be a string that is not empty", keyMeta))
		}
		reason, ok := req.Params.Meta[reasonMeta].(string)
		if _, set := req.Params.Meta[reasonMeta]; set && !ok {
			return failed(engine.Errorf(engine.Invalid, "_meta %q must be a string", reasonMeta))
		}
		if !named {
			g.joined(req.Session, p, saga)
		}
		r, err := g.engine.CallOnce(ctx, p, saga, engine.Ask{Tool: t.Name, Input: input, Key: key, Reason: reason})
		if err != nil {
			return failed(err)
		}
		out, _ := api.CallOf(r)
		switch r.Outcome {
		case engine.OutcomeExecuted:
			return result(r.Result, out, false), nil
		case engine.OutcomeAwaitingApproval:
			return result(fmt.Sprintf("%s Its saga is %s, its seq %d: ask %s, and once it is approved call %s with that seq.",
				r.Message, r.SagaID, r.Seq, statusTool, resumeTool), out, false), nil
		}
		return result(fmt.Sprintf("%s: %s", r.Outcome, r.Error), out, true), nil
	}
}

// result is a tool result: text for the model, the same as structured
// content, and whether it is the tool's failure.
func result(text string, structured any, isError bool) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}, StructuredContent: structured, IsError: isError}
}

// failed answers an engine error: what the agent can act on (invalid
// input, a refusal, a conflict) as a tool error the model reads; the
// store being down as a protocol error the client may retry.
func failed(err error) (*mcp.CallToolResult, error) {
	var e *engine.Error
	if !errors.As(err, &e) || e.Kind == engine.Internal || e.Kind == engine.Unavailable || e.Kind == engine.Unauthenticated {
		return nil, errors.New("the server could not take the call; try again later")
	}
	return result(e.Msg, edge.Refusal(err, e.Msg), true), nil
}

// track returns what the gateway knows of a session, noting it the first
// time, when it starts waiting for the session's end. Callers hold g.mu.
func (g *Gateway) track(ss *mcp.ServerSession) *session {
	s, ok := g.sessions[ss]
	if !ok {
		s = &session{sagas: map[string]bool{}, watching: map[string]bool{}}
		g.sessions[ss] = s
		go g.ended(ss)
	}
	return s
}

// joined notes that session, as p, called into its own saga, so that
// the session's end ends it. A saga a call names outlives the session:
// clients open one session per call, and later sessions name it too.
func (g *Gateway) joined(ss *mcp.ServerSession, p engine.Principal, saga string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	s := g.track(ss)
	s.principal = p
	s.sagas[saga] = true
}

// ended waits for a session to end, stops watching what it subscribed to
// and ends its sagas: the agent is done with them (a saga with requests
// pending stays AWAITING_APPROVAL until a person decides them). The SDK
// binds a session to its first request's principal, so every call of it
// was theirs.
func (g *Gateway) ended(ss *mcp.ServerSession) {
	_ = ss.Wait()
	g.mu.Lock()
	s := g.sessions[ss]
	delete(g.sessions, ss)
	for uri := range s.watching {
		g.unwatch(uri)
	}
	g.mu.Unlock()
	if g.ctx.Err() != nil {
		// The server is stopping, not the agent: its sagas stay open for
		// it to go on with.
		return
	}
	ctx, cancel := context.WithTimeout(g.ctx, time.Minute)
	defer cancel()
	for saga := range s.sagas {
		if _, err := g.engine.End(ctx, s.principal, saga); err != nil && !engine.IsKind(err, engine.Conflict) {
			g.log.Warn("ending the saga of an MCP session", "saga", saga, "err", err)
		}
	}
}

// seqArg reads a tool's {"seq": N} arguments; 0 when absent.
func seqArg(raw json.RawMessage) (int64, error) {
	var a struct {
		Seq int64 `json:"seq"`
	}
	if len(raw) > 0 {
		dec := json.NewDecoder(strings.NewReader(string(raw)))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&a); err != nil || a.Seq < 0 {
			return 0, errors.New(`arguments must be {"seq": a positive integer}`)
		}
	}
	return a.Seq, nil
}

// stateOf reads a saga and what became of its requests (only the one at
// seq, unless 0), as p.
func (g *Gateway) stateOf(ctx context.Context, p engine.Principal, saga string, seq int64) (wire.SagaRequests, error) {
	sg, reqs, err := g.engine.Requests(ctx, p, saga)
	if err != nil {
		return wire.SagaRequests{}, err
	}
	if seq != 0 {
		reqs = slices.DeleteFunc(reqs, func(rv engine.Review) bool { return rv.Gated.Seq != seq })
		if len(reqs) == 0 {
			return wire.SagaRequests{}, engine.Errorf(engine.NotFound, "saga %s has no request at seq=%d", saga, seq)
		}
	}
	return api.SagaRequestsOf(sg, reqs), nil
}

// status is sagacity_status.
func (g *Gateway) status(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	p, err := caller(req.Session, req.Extra)
	if err != nil {
		return nil, err
	}
	seq, err := seqArg(req.Params.Arguments)
	if err != nil {
		return failed(engine.Errorf(engine.Invalid, "%s", err.Error()))
	}
	saga, _ := sagaOf(req)
	st, err := g.stateOf(ctx, p, saga, seq)
	if err != nil {
		return failed(err)
	}
	b, _ := json.Marshal(st)
	// What a reviewer sent back is said first, in the words the model
	// acts on.
	var text strings.Builder
	for _, r := range st.Requests {
		if r.Message != "" {
			text.WriteString(r.Message + "\n")
		}
	}
	text.Write(b)
	return result(text.String(), st, false), nil
}

// resume is sagacity_resume: it executes an approved request with the
// bytes the person approved, which are the ones its journal entry holds.
func (g *Gateway) resume(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	p, err := caller(req.Session, req.Extra)
	if err != nil {
		return nil, err
	}
	seq, err := seqArg(req.Params.Arguments)
	if err == nil && seq == 0 {
		err = errors.New(`arguments must be {"seq": a positive integer}`)
	}
	if err != nil {
		return failed(engine.Errorf(engine.Invalid, "%s", err.Error()))
	}
	// The agent executes the bytes its request journaled, which are the
	// ones a person approved.
	saga, _ := sagaOf(req)
	r, err := g.engine.Execute(ctx, p, saga, seq)
	if err != nil {
		return failed(err)
	}
	out, _ := api.ResumeOf(r)
	if out.Outcome != wire.Executed {
		return result(fmt.Sprintf("%s: %s", out.Outcome, r.Reason), out, true), nil
	}
	return result(r.Result, out, false), nil
}

// sagaURI is the resource of a saga.
func sagaURI(saga string) string { return "sagacity://saga/" + saga }

// readSaga reads a saga's resource.
func (g *Gateway) readSaga(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	p, err := caller(req.Session, req.Extra)
	if err != nil {
		return nil, err
	}
	saga, ok := strings.CutPrefix(req.Params.URI, "sagacity://saga/")
	if !ok || saga == "" {
		return nil, mcp.ResourceNotFoundError(req.Params.URI)
	}
	st, err := g.stateOf(ctx, p, saga, 0)
	if engine.IsKind(err, engine.NotFound) {
		return nil, mcp.ResourceNotFoundError(req.Params.URI)
	}
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(st)
	if err != nil {
		return nil, err
	}
	return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, MIMEType: "application/json", Text: string(b)}}}, nil
}

// subscribe starts watching a saga's resource for its subscriber.
func (g *Gateway) subscribe(ctx context.Context, req *mcp.SubscribeRequest) error {
	p, err := caller(req.Session, req.Extra)
	if err != nil {
		return err
	}
	saga, ok := strings.CutPrefix(req.Params.URI, "sagacity://saga/")
	if !ok || saga == "" {
		return mcp.ResourceNotFoundError(req.Params.URI)
	}
	// Only a saga the subscriber may read, and one that exists: watches
	// of sagas that do not exist would fill the watcher for nothing.
	s, err := g.engine.Lookup(ctx, p, saga)
	if engine.IsKind(err, engine.NotFound) {
		return mcp.ResourceNotFoundError(req.Params.URI)
	}
	if err != nil {
		return err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	sess := g.track(req.Session)
	if sess.watching[req.Params.URI] {
		return nil
	}
	if len(sess.watching) >= maxWatchedPerSession {
		return fmt.Errorf("this session watches %d sagas already, the most one session may; unsubscribe from one first", maxWatchedPerSession)
	}
	w, ok := g.watched[req.Params.URI]
	if !ok {
		if len(g.watched) >= maxWatched {
			return fmt.Errorf("the server watches %d sagas already, the most it will; unsubscribe from one first", maxWatched)
		}
		w = &watch{reader: p, seen: s}
		g.watched[req.Params.URI] = w
	}
	w.subscribers++
	sess.watching[req.Params.URI] = true
	return nil
}

// unsubscribe stops the session's watch of a saga.
func (g *Gateway) unsubscribe(_ context.Context, req *mcp.UnsubscribeRequest) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if sess := g.sessions[req.Session]; sess != nil && sess.watching[req.Params.URI] {
		delete(sess.watching, req.Params.URI)
		g.unwatch(req.Params.URI)
	}
	return nil
}

// unwatch drops one subscriber of a saga's resource, and the watch with
// the last. Callers hold g.mu.
func (g *Gateway) unwatch(uri string) {
	if w, ok := g.watched[uri]; ok {
		if w.subscribers--; w.subscribers <= 0 {
			delete(g.watched, uri)
		}
	}
}

// Watcher tells the subscribers of a saga when it changed: a person
// decided, or a request executed. It looks every Every (default
// watchEvery), at the saga rows alone, so an agent waiting for a decision
// asks nothing itself, and a decision made on another server is seen too:
// a service the server runs.
type Watcher struct {
	Gateway *Gateway
	Every   time.Duration
	service.Base
}

// Start watches the subscribed sagas until Stop or until ctx ends.
func (w *Watcher) Start(ctx context.Context) error {
	return w.Run(ctx, service.Work{Loops: []service.Loop{service.After(cmp.Or(w.Every, watchEvery), w.Gateway.look)}})
}

// look tells the subscribers of each watched saga that changed since it
// was last looked at.
func (g *Gateway) look(ctx context.Context) {
	g.mu.Lock()
	uris := make(map[string]watch, len(g.watched))
	for uri, w := range g.watched {
		uris[uri] = *w
	}
	g.mu.Unlock()
	for uri, w := range uris {
		s, err := g.engine.Lookup(ctx, w.reader, strings.TrimPrefix(uri, "sagacity://saga/"))
		if err != nil || (s.HeadSeq == w.seen.HeadSeq && s.Status == w.seen.Status) {
			continue
		}
		g.mu.Lock()
		if cur, ok := g.watched[uri]; ok {
			cur.seen = s
		}
		g.mu.Unlock()
		if err := g.server.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: uri}); err != nil {
			g.log.Warn("telling subscribers a saga changed", "uri", uri, "err", err)
		}
	}
}
