package app_test

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"

	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/sagacity-go/sagacity/internal/api"
	"github.com/sagacity-go/sagacity/internal/auth"
	"github.com/sagacity-go/sagacity/internal/auth/authtest"
	"github.com/sagacity-go/sagacity/internal/engine"
	"github.com/sagacity-go/sagacity/internal/mcpgw"
	"github.com/sagacity-go/sagacity/internal/testkit"
	"github.com/sagacity-go/sagacity/wire"
)

// withHeaders adds headers to every request a client sends.
type withHeaders struct {
	h    http.Header
	next http.RoundTripper
}

func (t withHeaders) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, vs := range t.h {
		r.Header[k] = vs
	}
	return t.next.RoundTrip(r)
}

// mcpSession connects the official SDK's client to the server's /mcp as
// name, with the headers given (a bearer token, a saga).
func mcpSession(t *testing.T, e *apiEnv, name string, headers http.Header, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: name, Version: "1.0"}, opts)
	tr := &mcp.StreamableClientTransport{Endpoint: e.url + "/mcp",
		HTTPClient: &http.Client{Transport: withHeaders{headers, http.DefaultTransport}}}
	cs, err := c.Connect(t.Context(), tr, nil)
	if err != nil {
		t.Fatalf("connecting to /mcp: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// text is a tool result's text.
func text(r *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range r.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// TestMCP: an agent on the official MCP client lists the tools with their
// schemas, executes a compensatable one, gets the gate's text for an
// irreversible one, is told when a person approves it, and executes it
// once with the approved bytes; an input off its schema is refused with
// nothing journaled; the request shows which client and session made it;
// the session's end ends the saga.
func TestMCP(t *testing.T) {
	t.Parallel()
	stores(t, func(t *testing.T, dbURL string) {
		e := newAPI(t, dbURL, envOptions{})
		ctx := t.Context()
		updated := make(chan string, 10)
		cs := mcpSession(t, e, "test-agent", http.Header{mcpgw.SagaHeader: {"mcp-order"}}, &mcp.ClientOptions{
			ResourceUpdatedHandler: func(_ context.Context, r *mcp.ResourceUpdatedNotificationRequest) { updated <- r.Params.URI },
		})

		tools := map[string]*mcp.Tool{}
		for tool, err := range cs.Tools(ctx, nil) {
			if err != nil {
				t.Fatal(err)
			}
			tools[tool.Name] = tool
		}
		for _, name := range []string{"reserveInventory", "sendWireTransfer", "payTyped", "sagacity_status", "sagacity_resume"} {
			if tools[name] == nil {
				t.Fatalf("tools/list lacks %s: %v", name, tools)
			}
		}
		schema, _ := json.Marshal(tools["payTyped"].InputSchema)
		if !strings.Contains(string(schema), `"required":["cents","to"]`) || tools["payTyped"].Description == "" ||
			!*tools["sendWireTransfer"].Annotations.DestructiveHint {
			t.Errorf("payTyped = %s %q, sendWireTransfer annotations %+v; want the configured schema and description, and a destructive wire",
				schema, tools["payTyped"].Description, tools["sendWireTransfer"].Annotations)
		}

		call := func(name string, args any) *mcp.CallToolResult {
			t.Helper()
			r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
			if err != nil {
				t.Fatalf("tools/call %s: %v", name, err)
			}
			return r
		}
		if r := call("reserveInventory", map[string]any{"item": "laptop"}); r.IsError || text(r) != `{"reserved":1}` {
			t.Errorf("reserveInventory = %q (error %v), want the tool's result", text(r), r.IsError)
		}
		// Arguments a tool and a reviewer would read differently are
		// refused before anything is journaled.
		for _, args := range []string{`{"amount":"1","to":"alice","amount":"250000"}`, `{"amount":"1","\u0061mount":"2"}`,
			`{"to":"\ud800"}`, `{"to":"a\u0000"}`} {
			if r := call("sendWireTransfer", json.RawMessage(args)); !r.IsError || !strings.Contains(text(r), "tools and reviewers could read differently") {
				t.Errorf("sendWireTransfer(%s) = %q (error %v), want it refused as ambiguous", args, text(r), r.IsError)
			}
		}
		// A saga id that reads as one of the server's own is refused, as
		// on the API.
		for _, id := range []string{"Sagacity:passkeys", "sagacity\uff1apasskeys", "sagacity%3Apolicies"} {
			other := mcpSession(t, e, "test-agent", http.Header{mcpgw.SagaHeader: {id}}, nil)
			r, err := other.CallTool(ctx, &mcp.CallToolParams{Name: "reserveInventory", Arguments: map[string]any{"item": "laptop"}})
			if err != nil || !r.IsError || !strings.Contains(text(r), "are the server's own") {
				t.Errorf("reserveInventory in saga %+q = %v, %v; want it refused as the server's own", id, r, err)
			}
		}
		r := call("payTyped", map[string]any{"cents": 0, "to": "alice"})
		if !r.IsError || !strings.Contains(text(r), "input of tool payTyped does not match its schema") {
			t.Errorf("payTyped off its schema = %q (error %v), want the schema's refusal for the model", text(r), r.IsError)
		}
		r = call("payTyped", map[string]any{"cents": 500, "to": "alice"})
		var gate struct {
			SagaID, Outcome, InputHash string
			JournalSeq                 int64
		}
		b, _ := json.Marshal(r.StructuredContent)
		_ = json.Unmarshal(b, &gate)
		if r.IsError || !strings.HasPrefix(text(r), "[AWAITING_APPROVAL] Tool 'payTyped' requires human approval before execution.") ||
			gate.SagaID != "mcp-order" || gate.JournalSeq != 3 || gate.Outcome != "AWAITING_APPROVAL" {
			t.Fatalf("payTyped = %q %s (error %v), want the gate's text and the request, not an error", text(r), b, r.IsError)
		}
		if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: "sagacity://saga/mcp-order"}); err != nil {
			t.Fatal(err)
		}
		// An eager model resuming before anyone decided is told to wait,
		// and nothing changes: not the journal, the request, the saga.
		before := e.get("/sagacity/audit/mcp-order").body
		r = call("sagacity_resume", map[string]any{"seq": 3})
		b, _ = json.Marshal(r.StructuredContent)
		if !r.IsError || !strings.Contains(text(r), "not decided yet") || !strings.Contains(text(r), "wait") || !strings.Contains(string(b), `"code":"UNDECIDED"`) {
			t.Errorf("resume before a decision = %q %s (error %v), want it told to wait", text(r), b, r.IsError)
		}
		if after := e.get("/sagacity/audit/mcp-order").body; after != before {
			t.Errorf("resume before a decision changed the journal:\n%s\nwas\n%s", after, before)
		}
		if saga := e.get("/sagacity/sagas/mcp-order").json(t); saga["status"] != "AWAITING_APPROVAL" {
			t.Errorf("saga after resume before a decision = %v; want it still awaiting approval", saga)
		}
		if pending := e.get("/sagacity/approvals/mcp-order").body; !strings.Contains(pending, `"journalSeq":3`) {
			t.Errorf("pending after resume before a decision = %s; want the request still pending", pending)
		}

		// The request shows who asked, through which client and session.
		audit := e.get("/sagacity/audit/mcp-order").body
		if !strings.Contains(audit, `requester=anonymous\nauth=dev\nclient=mcp test-agent/1.0 session `) {
			t.Errorf("journal = %s, want the request's client and session", audit)
		}
		c := e.session(t, "reviewer")
		page := e.do("GET", "/request?saga=mcp-order&seq=3", "", "", "Cookie", c.String()).body
		if !strings.Contains(page, "through <span class=\"client\">mcp test-agent/1.0 session "+cs.ID()+"</span>") {
			t.Errorf("the request page does not say which client and session asked:\n%s", page)
		}
	})
}

// TestMCPApproved continues: a person approves, the agent is told, and the
// resume executes the approved bytes once.
func TestMCPApproved(t *testing.T) {
	t.Parallel()
	e := newAPI(t, testkit.SQLiteURL(t), envOptions{})
	ctx := t.Context()
	updated := make(chan string, 10)
	cs := mcpSession(t, e, "test-agent", nil, &mcp.ClientOptions{
		ResourceUpdatedHandler: func(_ context.Context, r *mcp.ResourceUpdatedNotificationRequest) { updated <- r.Params.URI },
	})
	r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "payTyped", Arguments: map[string]any{"to": "alice", "cents": 500}})
	if err != nil || r.IsError {
		t.Fatalf("payTyped = %v, %v", r, err)
	}
	var gate struct {
		SagaID string
		Seq    int64
	}
	b, _ := json.Marshal(r.StructuredContent)
	if err := json.Unmarshal(b, &gate); err != nil {
		t.Fatal(err)
	}
	uri := "sagacity://saga/" + gate.SagaID
	if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: uri}); err != nil {
		t.Fatal(err)
	}
	want(t, "approve", e.post("/sagacity/approve/"+gate.SagaID+"/1", `{"approver":"manager@company.com"}`), 200)
	select {
	case got := <-updated:
		if got != uri {
			t.Errorf("told %s changed, want %s", got, uri)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no notification that the saga changed after the approval")
	}
	st, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "sagacity_status", Arguments: map[string]any{"seq": 1}})
	if err != nil || st.IsError || !strings.Contains(text(st), `"state":"approved"`) || !strings.Contains(text(st), "approved by manager@company.com") {
		t.Fatalf("sagacity_status = %q, %v; want approved by the manager", text(st), err)
	}
	done, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "sagacity_resume", Arguments: map[string]any{"seq": 1}})
	if err != nil || done.IsError || text(done) != "paid" {
		t.Fatalf("sagacity_resume = %q, %v; want the tool's result", text(done), err)
	}
	again, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "sagacity_resume", Arguments: map[string]any{"seq": 1}})
	if err != nil || again.IsError || text(again) != "paid" {
		t.Errorf("a second resume = %q, %v; want what the first came to, the tool's result, and nothing run again", text(again), err)
	}
	var pays []string
	for _, req := range e.tools.requests() {
		if req.Path == "/pay" {
			pays = append(pays, req.Body)
		}
	}
	if len(pays) != 1 || pays[0] != `{"cents":500,"to":"alice"}` {
		t.Errorf("the tool server was paid %q, want once, the approved bytes", pays)
	}

	// The session's end ends its saga.
	cs.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var s struct {
			Ended  bool
			Status engine.Status
		}
		_ = json.Unmarshal([]byte(e.get("/sagacity/sagas/"+gate.SagaID).body), &s)
		if s.Ended && s.Status == wire.Completed {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("saga after the session closed = %+v, want ended and completed", s)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestMCPSessionPerCall: a client that opens one session per call and
// names its saga runs two steps through two sessions: the end of the
// first session ends only the session's own saga, never one a call named.
func TestMCPSessionPerCall(t *testing.T) {
	t.Parallel()
	e := newAPI(t, testkit.SQLiteURL(t), envOptions{})
	ctx := t.Context()
	call := func(cs *mcp.ClientSession, tool string, meta mcp.Meta) *mcp.CallToolResult {
		t.Helper()
		r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: map[string]any{"item": "desk"}, Meta: meta})
		if err != nil || r.IsError {
			t.Fatalf("%s = %v, %v", tool, r, err)
		}
		return r
	}
	first := mcpSession(t, e, "per-call", nil, nil)
	call(first, "reserveInventory", mcp.Meta{"sagacity/saga": "shared"})
	call(first, "createOrder", nil) // in the session's own saga
	own := "mcp-" + first.ID()
	first.Close()
	saga := func(id string) map[string]any { return e.get("/sagacity/sagas/" + url.PathEscape(id)).json(t) }
	deadline := time.Now().Add(10 * time.Second)
	for saga(own)["ended"] != true {
		if time.Now().After(deadline) {
			t.Fatalf("the session's own saga after it closed = %v; want it ended", saga(own))
		}
		time.Sleep(20 * time.Millisecond)
	}
	if s := saga("shared"); s["ended"] != false || s["status"] != "RUNNING" {
		t.Fatalf("the named saga after the first session closed = %v; want it running, not ended", s)
	}
	second := mcpSession(t, e, "per-call", http.Header{mcpgw.SagaHeader: {"shared"}}, nil)
	call(second, "createOrder", nil)
	second.Close()
	if s := saga("shared"); s["headSeq"] != float64(4) || s["ended"] != false {
		t.Errorf("the named saga after the second step = %v; want both steps journaled (4 entries), still open", s)
	}
}

// TestMCPTypeScript drives the server with the official MCP TypeScript
// SDK (testdata/node, installed by .ci/run with npm ci): from /mcp's 401
// it discovers the protected-resource metadata and, from it, the OpenID
// provider as the authorization server; then it runs two steps of one
// named saga, one session each, and the second step runs.
func TestMCPTypeScript(t *testing.T) {
	t.Parallel()
	nodePackage(t, "@modelcontextprotocol/sdk")
	p := authtest.NewProvider(t, people...)
	agentT, agentTok := token("agent", engine.RoleAgent)
	e := newAPI(t, testkit.SQLiteURL(t), envOptions{roles: groupRoles, tokens: []auth.Token{agentT}, apiAudience: "sagacity-api",
		oidc: func(redirect string) (string, string, string) {
			id, sec := p.WebClient(t, redirect)
			credential(sec)
			return p.Issuer, id, sec
		}})
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", "mcp.mjs", e.url, agentTok, "ts-shared")
	cmd.Dir = "testdata/node"
	stdout, err := cmd.Output()
	if err != nil {
		var stderr []byte
		if ee, ok := errors.AsType[*exec.ExitError](err); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("node mcp.mjs: %v\n%s", err, stderr)
	}
	var got struct {
		Status                int
		ResourceMetadataURL   string
		Resource              string
		AuthorizationServers  []string
		AuthorizationEndpoint string
		Steps                 []struct {
			IsError    bool
			Text       string
			Structured map[string]any
			Version    string
		}
	}
	if err := json.Unmarshal(stdout, &got); err != nil {
		t.Fatalf("node mcp.mjs printed %s: %v", stdout, err)
	}
	if got.Status != 401 || got.ResourceMetadataURL != e.url+"/.well-known/oauth-protected-resource/mcp" || got.Resource != e.url+"/mcp" ||
		!slices.Equal(got.AuthorizationServers, []string{p.Issuer}) || !strings.HasPrefix(got.AuthorizationEndpoint, p.Issuer) {
		t.Errorf("discovery = %+v; want the 401 to lead to %s/mcp's metadata and the provider %s as its authorization server", got, e.url, p.Issuer)
	}
	if len(got.Steps) != 2 {
		t.Fatalf("steps = %+v; want two", got.Steps)
	}
	for i, st := range got.Steps {
		if st.IsError || st.Structured["sagaId"] != "ts-shared" || st.Structured["outcome"] != "EXECUTED" {
			t.Errorf("step %d = %+v; want it executed in saga ts-shared", i+1, st)
		}
		if !strings.Contains(apiDescription(t, "/mcp"), st.Version) || st.Version == "" {
			t.Errorf("step %d spoke MCP %q; want a version the OpenAPI document names", i+1, st.Version)
		}
	}
	if s := e.do("GET", "/sagacity/sagas/ts-shared", "", "", bearer(agentTok)...).json(t); s["ended"] != false || s["headSeq"] != float64(4) {
		t.Errorf("saga after two sessions = %v; want both steps, and not ended by the first session's end", s)
	}
}

// apiDescription is the OpenAPI document's description of path.
func apiDescription(t *testing.T, path string) string {
	var doc struct {
		Paths map[string]struct{ Description string } `json:"paths"`
	}
	if err := json.Unmarshal(api.OpenAPI, &doc); err != nil {
		t.Fatal(err)
	}
	return doc.Paths[path].Description
}

// TestMCPIdempotencyKey: a call sent again by an MCP client under the
// same "sagacity/idempotency-key" in its _meta answers the first one's
// outcome and runs nothing; the key with other arguments is refused,
// naming the first call.
func TestMCPIdempotencyKey(t *testing.T) {
	t.Parallel()
	e := newAPI(t, testkit.SQLiteURL(t), envOptions{})
	ctx := t.Context()
	cs := mcpSession(t, e, "retrying-agent", nil, nil)
	params := func(sku string, key any) *mcp.CallToolParams {
		return &mcp.CallToolParams{Name: "reserveInventory", Arguments: map[string]any{"sku": sku},
			Meta: mcp.Meta{"sagacity/idempotency-key": key}}
	}
	first, err := cs.CallTool(ctx, params("SKU-1", "reserve-1"))
	if err != nil || first.IsError {
		t.Fatalf("first call = %v, %v", first, err)
	}
	again, err := cs.CallTool(ctx, params("SKU-1", "reserve-1"))
	if err != nil || again.IsError || text(again) != text(first) {
		t.Errorf("the call again under its key = %q, %v; want the first answer %q", text(again), err, text(first))
	}
	if n := strings.Count(strings.Join(e.tools.paths(), " "), "/reserve"); n != 1 {
		t.Errorf("the tool ran %d times, want once", n)
	}
	other, err := cs.CallTool(ctx, params("SKU-2", "reserve-1"))
	b, _ := json.Marshal(other.StructuredContent)
	if err != nil || !other.IsError || !strings.Contains(string(b), `"code":"KEY_REUSED"`) || !strings.Contains(text(other), "seq=1") {
		t.Errorf("the key with other arguments = %q %s, %v; want a tool error KEY_REUSED naming seq=1", text(other), b, err)
	}
	if bad, err := cs.CallTool(ctx, params("SKU-3", 7)); err != nil || !bad.IsError || !strings.Contains(text(bad), "must be a string") {
		t.Errorf("a key that is not a string = %v, %v; want it refused", bad, err)
	}
}

// TestMCPAuth: /mcp takes the API's bearer tokens and no one else, and
// nothing from another site's page.
func TestMCPAuth(t *testing.T) {
	t.Parallel()
	agentT, agentTok := token("agent", engine.RoleAgent)
	auditorT, auditorTok := token("auditor", engine.RoleAuditor)
	e := newAPI(t, testkit.SQLiteURL(t), envOptions{tokens: []auth.Token{agentT, auditorT}})
	// An MCP client is told to authenticate as the JSON API tells it, not
	// sent to the console's sign-in page.
	for _, method := range []string{"GET", "POST", "DELETE"} {
		r := e.do(method, "/mcp", "", "")
		if r.code != 401 || r.header.Get("WWW-Authenticate") != `Bearer realm="sagacity", resource_metadata="`+e.url+`/.well-known/oauth-protected-resource/mcp"` ||
			r.header.Get("Content-Type") != "application/json" {
			t.Errorf("%s /mcp without a token = %d %v %q, want 401 application/json with WWW-Authenticate", method, r.code, r.header, r.body)
		}
	}
	for _, h := range []http.Header{nil, {"Authorization": {"Bearer sgc_wrong"}}} {
		c := mcp.NewClient(&mcp.Implementation{Name: "x", Version: "1"}, nil)
		tr := &mcp.StreamableClientTransport{Endpoint: e.url + "/mcp", HTTPClient: &http.Client{Transport: withHeaders{h, http.DefaultTransport}}}
		if _, err := c.Connect(t.Context(), tr, nil); err == nil {
			t.Errorf("connecting with %v succeeded, want it refused", h)
		}
	}
	initialize := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`
	want(t, "initialize from another site's page", e.do("POST", "/mcp", "application/json", initialize,
		"Authorization", "Bearer "+agentTok, "Accept", "application/json, text/event-stream", "Origin", "https://evil.example",
		"Sec-Fetch-Site", "cross-site"), http.StatusForbidden)
	cs := mcpSession(t, e, "agent", http.Header{"Authorization": {"Bearer " + auditorTok}}, nil)
	r, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "reserveInventory", Arguments: map[string]any{}})
	if err != nil || !r.IsError || !strings.Contains(text(r), "calling a tool needs the agent role") {
		t.Errorf("an auditor calling a tool = %q, %v; want refused for the model to read", text(r), err)
	}
	cs = mcpSession(t, e, "agent", http.Header{"Authorization": {"Bearer " + agentTok}}, nil)
	if r, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "reserveInventory", Arguments: map[string]any{}}); err != nil || r.IsError {
		t.Errorf("an agent calling a tool = %v, %v; want it executed", r, err)
	}
}

// TestMCPPrivacy: an agent reads over MCP only the sagas it started —
// not another agent's through sagacity_status naming it, nor its
// resource, nor a subscription to it, nor its tasks.
func TestMCPPrivacy(t *testing.T) {
	t.Parallel()
	mineT, mineTok := token("agent1", engine.RoleAgent)
	otherT, otherTok := token("agent2", engine.RoleAgent)
	e := newAPI(t, testkit.SQLiteURL(t), envOptions{tokens: []auth.Token{mineT, otherT}})
	want(t, "agent1 gates", e.do("POST", "/sagacity/sagas/theirs/calls", js, callJSON("sendWireTransfer", transfer), bearer(mineTok)...), 202)
	cs := mcpSession(t, e, "agent2", http.Header{"Authorization": {"Bearer " + otherTok}}, nil)
	ctx := t.Context()
	r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "sagacity_status", Arguments: map[string]any{},
		Meta: mcp.Meta{"sagacity/saga": "theirs"}})
	if err != nil || !r.IsError || !strings.Contains(text(r), "saga theirs is not yours to read") || strings.Contains(text(r), "alice") {
		t.Errorf("sagacity_status of another agent's saga = %q, %v; want it refused, naming nothing of it", text(r), err)
	}
	if res, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "sagacity://saga/theirs"}); err == nil {
		t.Errorf("resources/read of another agent's saga = %+v; want it refused", res)
	}
	if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: "sagacity://saga/theirs"}); err == nil {
		t.Errorf("subscribing to another agent's saga succeeded; want it refused")
	}
	if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: "sagacity://saga/nobodys"}); err == nil {
		t.Errorf("subscribing to a saga that does not exist succeeded; want it refused")
	}
	mine := mcpSession(t, e, "agent1", http.Header{"Authorization": {"Bearer " + mineTok}}, nil)
	if res, err := mine.ReadResource(ctx, &mcp.ReadResourceParams{URI: "sagacity://saga/theirs"}); err != nil ||
		!strings.Contains(res.Contents[0].Text, `"state":"undecided"`) {
		t.Errorf("resources/read of its own saga = %+v, %v; want it read", res, err)
	}
	if err := mine.Subscribe(ctx, &mcp.SubscribeParams{URI: "sagacity://saga/theirs"}); err != nil {
		t.Errorf("subscribing to its own saga: %v", err)
	}

	// Nor through a task: another agent's tasks/get and tasks/result are
	// refused (-32602, naming nothing of it), and run nothing.
	created := rpcOpen(t, e, bearer(mineTok)...).call("tools/call", `{"name":"sendWireTransfer","arguments":`+transfer+`,"task":{}}`)
	task, _ := created["task"].(map[string]any)
	id, _ := task["taskId"].(string)
	other := rpcOpen(t, e, bearer(otherTok)...)
	for _, method := range []string{"tasks/get", "tasks/result"} {
		if got, err := other.try(method, `{"taskId":"`+id+`"}`); err == nil || !strings.Contains(err.Error(), `"code":-32602`) ||
			!strings.Contains(err.Error(), "not yours to read") || strings.Contains(err.Error(), "alice") {
			t.Errorf("%s of another agent's task = %v, %v; want -32602, naming nothing of it", method, got, err)
		}
	}
	if paths := e.tools.paths(); len(paths) != 0 {
		t.Errorf("the tool server was called at %v; want nothing run", paths)
	}
}

// TestMCPMethodNotFound: a request of a method /mcp does not serve
// (tasks/list, anything unknown), in a session or before one, is answered
// as JSON-RPC says, -32601 Method not found with the request's id, not a
// plain-text 400; a notification of one is not answered with a body;
// tasks/get of a task that does not exist is -32602, as the tasks utility
// says; the session goes on.
func TestMCPMethodNotFound(t *testing.T) {
	t.Parallel()
	e := newAPI(t, testkit.SQLiteURL(t), envOptions{})
	post := func(body string, headers ...string) response {
		t.Helper()
		return e.do("POST", "/mcp", "application/json", body, append([]string{"Accept", "application/json, text/event-stream"}, headers...)...)
	}
	init := post(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},` +
		`"clientInfo":{"name":"probe","version":"1"}}}`)
	session := init.header.Get("Mcp-Session-Id")
	if init.code != 200 || session == "" {
		t.Fatalf("initialize = %d %v %s", init.code, init.header, init.body)
	}
	in := []string{"Mcp-Session-Id", session, "Mcp-Protocol-Version", "2025-11-25"}
	want(t, "notifications/initialized", post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`, in...), http.StatusAccepted)
	for _, c := range []struct {
		name, method string
		id           any
		headers      []string
	}{
		{"tasks/list in a session", "tasks/list", 2, in},
		{"an unknown method in a session", "sagacity/nothing", "three", in},
		{"an unknown method before a session", "nothing/at-all", 4, nil},
	} {
		id, _ := json.Marshal(c.id)
		r := post(`{"jsonrpc":"2.0","id":`+string(id)+`,"method":"`+c.method+`","params":{"taskId":"x"}}`, c.headers...)
		var got struct {
			JSONRPC string
			ID      json.RawMessage
			Error   struct {
				Code    int
				Message string
			}
		}
		if err := json.Unmarshal([]byte(r.body), &got); err != nil || r.code != 200 || r.header.Get("Content-Type") != "application/json" ||
			got.JSONRPC != "2.0" || string(got.ID) != string(id) ||
			got.Error.Code != -32601 || !strings.Contains(got.Error.Message, c.method) {
			t.Errorf("%s = %d %s %q; want 200 application/json, a JSON-RPC error -32601 naming %s with id %s", c.name, r.code,
				r.header.Get("Content-Type"), r.body, c.method, id)
		}
	}
	if r := post(`{"jsonrpc":"2.0","method":"notifications/nothing"}`, in...); r.code == 200 || strings.Contains(r.body, "-32601") {
		t.Errorf("an unknown notification = %d %q; want no JSON-RPC answer", r.code, r.body)
	}
	if r := post(`{"jsonrpc":"2.0","id":6,"method":"tasks/get","params":{"taskId":"nothing"}}`, in...); !strings.Contains(r.body, `"code":-32602`) {
		t.Errorf("tasks/get of no task = %d %q; want -32602", r.code, r.body)
	}
	if r := post(`{"jsonrpc":"2.0","id":5,"method":"ping"}`, in...); r.code != 200 || !strings.Contains(r.body, `"result":{}`) {
		t.Errorf("ping after the unserved requests = %d %q; want the session to answer", r.code, r.body)
	}
}

// TestMCPProtocolVersion: the server negotiates 2025-11-25 at the newest,
// as the OpenAPI document says: the official Go client, which asks for
// 2026-07-28 first, gets 2025-11-25, and a client of 2026-07-28 that
// discovers the server is told the versions it serves, 2025-11-25 first.
func TestMCPProtocolVersion(t *testing.T) {
	t.Parallel()
	e := newAPI(t, testkit.SQLiteURL(t), envOptions{})
	cs := mcpSession(t, e, "go-agent", nil, nil)
	if v := cs.InitializeResult().ProtocolVersion; v != "2025-11-25" {
		t.Errorf("the Go SDK's client negotiated %q, want 2025-11-25", v)
	}
	r := e.do("POST", "/mcp", "application/json", `{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{"_meta":{`+
		`"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},`+
		`"io.modelcontextprotocol/clientInfo":{"name":"probe","version":"1"}}}}`,
		"Accept", "application/json, text/event-stream", "Mcp-Protocol-Version", "2026-07-28", "Mcp-Method", "server/discover")
	var got struct {
		Result struct{ SupportedVersions []string }
	}
	_, data, _ := strings.Cut(r.body, "data: ")
	_ = json.Unmarshal([]byte(data), &got)
	if v := got.Result.SupportedVersions; len(v) == 0 || v[0] != "2025-11-25" || slices.Contains(v, "2026-07-28") {
		t.Errorf("server/discover at 2026-07-28 = %d %s; want the versions served, 2025-11-25 first", r.code, r.body)
	}
	desc := apiDescription(t, "/mcp")
	if !strings.Contains(desc, "from 2024-11-05 to 2025-11-25") || strings.Contains(desc, "2026-07-28, the newest") {
		t.Errorf("the OpenAPI document's /mcp says %q; want it to name 2025-11-25 as the newest version negotiated", desc)
	}
}

// TestMCPTasks drives the server with the official MCP TypeScript SDK's
// tasks client (testdata/node/tasks.mjs): the gated tools are listed as
// ones whose calls may become tasks; a gated call becomes a task whose
// status shows the votes as they come, and completes with the tool's
// result once the quorum approves (run once, with the approved bytes); a
// cancelled one closes its request (journaled, the saga going on), and
// cancelling it again is refused; a rejected one completes with the
// reviewer's reason as a tool error; and a client that asks for no task
// is held until the quorum approves, then answered the tool's result.
func TestMCPTasks(t *testing.T) {
	t.Parallel()
	nodePackage(t, "@modelcontextprotocol/sdk")
	e := newAPI(t, testkit.SQLiteURL(t), envOptions{mcpHold: time.Minute,
		approvals: compile(t, engine.PolicySpec{Default: []engine.RuleSpec{{Name: "pair", Quorum: 2}}})})
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", "tasks.mjs", e.url, "ts-tasks")
	cmd.Dir = "testdata/node"
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	var stderr testkit.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }() // a test that failed sent no end
	type task struct{ TaskID, Status, StatusMessage string }
	type message struct {
		Type   string
		Tasks  []string
		Caps   map[string]any `json:"capabilities"`
		Task   task
		Result struct {
			IsError bool
			Content []struct{ Text string }
		}
		Error string
	}
	lines := make(chan message)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			var m message
			if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
				t.Errorf("tasks.mjs printed %s: %v", sc.Bytes(), err)
			}
			lines <- m
		}
	}()
	next := func(want string) message {
		t.Helper()
		select {
		case m, ok := <-lines:
			if !ok || m.Type != want {
				t.Fatalf("tasks.mjs: got %+v (open %v), want a %s; its errors:\n%s", m, ok, want, stderr.String())
			}
			return m
		case <-ctx.Done():
			t.Fatalf("tasks.mjs: no %s in time; its errors:\n%s", want, stderr.String())
		}
		return message{}
	}
	send := func(command string) {
		t.Helper()
		if _, err := io.WriteString(stdin, command+"\n"); err != nil {
			t.Fatal(err)
		}
	}
	pending := func(saga string) string {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			var reqs []struct{ JournalSeq int64 }
			_ = json.Unmarshal([]byte(e.get("/sagacity/approvals/"+saga).body), &reqs)
			if len(reqs) == 1 {
				return fmt.Sprint(reqs[0].JournalSeq)
			}
		}
		t.Fatalf("no request of saga %s pending", saga)
		return ""
	}
	text := func(m message) string {
		var b strings.Builder
		for _, c := range m.Result.Content {
			b.WriteString(c.Text)
		}
		return b.String()
	}

	tools := next("tools")
	if slices.Sort(tools.Tasks); !slices.Equal(tools.Tasks, []string{"payTyped", "sendWireTransfer"}) || tools.Caps["tasks"] == nil {
		t.Errorf("tools/list's tools that may become tasks = %v, capabilities %v; want the gated tools, and the tasks capability", tools.Tasks, tools.Caps)
	}

	// Approved by the quorum: the tool's result.
	send(`task sendWireTransfer ` + transfer)
	created := next("taskCreated")
	if created.Task.Status != "input_required" || !strings.HasPrefix(created.Task.StatusMessage, "0 of 2 approvals; waiting for 2 more") {
		t.Errorf("the task created = %+v; want input_required, no approval yet", created.Task)
	}
	next("taskStatus")
	seq := pending("ts-tasks")
	want(t, "alice approves", e.post("/sagacity/approve/ts-tasks/"+seq, `{"approver":"alice"}`), 200)
	send("get " + created.Task.TaskID)
	if got := next("get").Task; got.TaskID != created.Task.TaskID || got.Status != "input_required" ||
		!strings.HasPrefix(got.StatusMessage, "1 of 2 approvals (alice); waiting for 1 more") {
		t.Errorf("tasks/get after one vote = %+v; want the vote shown, one more awaited", got)
	}
	want(t, "bob approves", e.post("/sagacity/approve/ts-tasks/"+seq, `{"approver":"bob"}`), 200)
	if r := next("result"); r.Result.IsError || text(r) != "transfer-ok" {
		t.Errorf("the task's result once approved = %+v; want the tool's result", r)
	}
	var wires []string
	for _, req := range e.tools.requests() {
		if req.Path == "/wire" {
			wires = append(wires, req.Body)
		}
	}
	if len(wires) != 1 || wires[0] != transfer {
		t.Errorf("the tool server was sent %q, want the approved bytes once", wires)
	}

	// Held, for a client that asks for no task.
	send(`hold ts-held sendWireTransfer ` + transfer)
	next("tools")
	held := pending("ts-held")
	want(t, "alice approves the held call", e.post("/sagacity/approve/ts-held/"+held, `{"approver":"alice"}`), 200)
	want(t, "bob approves the held call", e.post("/sagacity/approve/ts-held/"+held, `{"approver":"bob"}`), 200)
	if r := next("held"); r.Result.IsError || text(r) != "transfer-ok" {
		t.Errorf("the held call once approved = %+v; want the tool's result", r)
	}

	// Cancelled by its requester: the request closed, journaled, the saga
	// going on, nothing run or compensated.
	send(`task sendWireTransfer {"amount":"300","to":"carol"}`)
	toCancel := next("taskCreated")
	next("taskStatus")
	pending("ts-tasks")
	send("cancel " + toCancel.Task.TaskID)
	// The stream's result and tasks/cancel's answer come in either order.
	got := map[string]message{}
	for range 2 {
		select {
		case m := <-lines:
			got[m.Type] = m
		case <-ctx.Done():
			t.Fatalf("tasks.mjs: no answer to tasks/cancel in time; its errors:\n%s", stderr.String())
		}
	}
	if c := got["cancelled"].Task; c.TaskID != toCancel.Task.TaskID || c.Status != "cancelled" {
		t.Errorf("tasks/cancel = %+v; want the task cancelled", got["cancelled"])
	}
	if r := got["result"]; !r.Result.IsError || !strings.Contains(text(r), "cancelled") {
		t.Errorf("the cancelled task's result = %+v; want a tool error saying it was cancelled", r)
	}
	if s := e.get("/sagacity/sagas/ts-tasks").json(t); s["status"] != "RUNNING" {
		t.Errorf("the saga once a request was cancelled = %v; want it running", s)
	}
	if audit := e.get("/sagacity/audit/ts-tasks").body; !strings.Contains(audit, `cancelled-by=anonymous`) {
		t.Errorf("the journal once a request was cancelled = %s; want the cancellation, by its requester", audit)
	}
	send("cancel " + toCancel.Task.TaskID)
	if r := next("refused"); !strings.HasPrefix(r.Error, "-32602: ") || !strings.Contains(r.Error, "cancelled") {
		t.Errorf("tasks/cancel of a cancelled task = %+v; want -32602 saying it was cancelled", r)
	}

	// Rejected: the reason, as a tool error.
	send(`task sendWireTransfer {"amount":"900","to":"mallory"}`)
	next("taskCreated")
	next("taskStatus")
	want(t, "alice rejects", e.post("/sagacity/reject/ts-tasks/"+pending("ts-tasks"), `{"approver":"alice","reason":"not to mallory"}`), 200)
	if r := next("result"); !r.Result.IsError || !strings.Contains(text(r), "not to mallory") {
		t.Errorf("the task's result once rejected = %+v; want a tool error with the reason", r)
	}
	send("end")
}

// rpcSession is an MCP session spoken by hand, JSON-RPC over HTTP, in
// the saga "replicated".
type rpcSession struct {
	t       *testing.T
	e       *apiEnv
	id      string
	headers []string // sent with every request, as name, value
}

// rpcOpen opens a session on e's /mcp at protocol 2025-11-25, sending
// headers with every request.
func rpcOpen(t *testing.T, e *apiEnv, headers ...string) *rpcSession {
	t.Helper()
	s := &rpcSession{t: t, e: e, headers: headers}
	r := s.post(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},` +
		`"clientInfo":{"name":"by-hand","version":"1"}}}`)
	if s.id = r.header.Get("Mcp-Session-Id"); s.id == "" {
		t.Fatalf("initialize = %d %s", r.code, r.body)
	}
	want(t, "notifications/initialized", s.post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`), http.StatusAccepted)
	return s
}

func (s *rpcSession) post(body string) response {
	s.t.Helper()
	h := append([]string{"Accept", "application/json, text/event-stream", "Sagacity-Saga-Id", "replicated"}, s.headers...)
	if s.id != "" {
		h = append(h, "Mcp-Session-Id", s.id, "Mcp-Protocol-Version", "2025-11-25")
	}
	return s.e.do("POST", "/mcp", "application/json", body, h...)
}

// call sends a request and returns its JSON-RPC answer's result, failing
// the test on an error.
func (s *rpcSession) call(method, params string) map[string]any {
	s.t.Helper()
	res, err := s.try(method, params)
	if err != nil {
		s.t.Fatalf("%s %s: %s", method, params, err)
	}
	return res
}

// try sends a request and returns its JSON-RPC answer: its result, or
// its error as JSON.
func (s *rpcSession) try(method, params string) (map[string]any, error) {
	s.t.Helper()
	r := s.post(`{"jsonrpc":"2.0","id":2,"method":"` + method + `","params":` + params + `}`)
	_, data, _ := strings.Cut(r.body, "data: ")
	var got struct {
		Result map[string]any
		Error  json.RawMessage
	}
	if err := json.Unmarshal([]byte(cmp.Or(data, r.body)), &got); err != nil {
		return nil, fmt.Errorf("%d %s: %w", r.code, r.body, err)
	}
	if got.Error != nil {
		return nil, errors.New(string(got.Error))
	}
	return got.Result, nil
}

// TestMCPTaskReplicas: a task is its request, not a server's memory: one
// created on a server is read on another sharing its database (as after
// a restart), whose tasks/result is woken by an approval on the first
// (LISTEN/NOTIFY) and answers the tool's result, run once; and a call
// held on one server is answered the tool's result once approved on the
// other.
func TestMCPTaskReplicas(t *testing.T) {
	t.Parallel()
	db := testkit.PostgresURL(t)
	a, b := newAPI(t, db, envOptions{}), newAPI(t, db, envOptions{mcpHold: time.Minute})
	first := rpcOpen(t, a)
	// A tool that is not gated runs as it would without a task asked for
	// (its listing says it does not become one).
	if got := rpcOpen(t, a, "Sagacity-Saga-Id", "another").call("tools/call", `{"name":"reserveInventory","arguments":{"item":"desk"},"task":{}}`); got["task"] != nil ||
		fmt.Sprint(got["content"]) != `[map[text:{"reserved":1} type:text]]` {
		t.Errorf("a call of a tool that is not gated, asking for a task = %v; want its result", got)
	}
	created := first.call("tools/call", `{"name":"sendWireTransfer","arguments":`+transfer+`,"task":{"ttl":60000}}`)
	task, _ := created["task"].(map[string]any)
	id, _ := task["taskId"].(string)
	if id == "" || task["status"] != "input_required" {
		t.Fatalf("a gated call that asks for a task = %v; want a task, input_required", created)
	}
	other := rpcOpen(t, b)
	if got := other.call("tasks/get", `{"taskId":"`+id+`"}`); got["taskId"] != id || got["status"] != "input_required" ||
		!strings.HasPrefix(fmt.Sprint(got["statusMessage"]), "0 of 1 approval") {
		t.Errorf("tasks/get on the other server = %v; want the task, input_required", got)
	}
	go func() {
		time.Sleep(200 * time.Millisecond) // tasks/result holds first
		want(t, "approve on the first server", a.post("/sagacity/approve/replicated/1", `{"approver":"alice"}`), 200)
	}()
	got := other.call("tasks/result", `{"taskId":"`+id+`"}`)
	if b, _ := json.Marshal(got); got["isError"] == true || !strings.Contains(string(b), `"text":"transfer-ok"`) ||
		!strings.Contains(string(b), `"io.modelcontextprotocol/related-task":{"taskId":"`+id+`"}`) {
		t.Errorf("tasks/result on the other server = %s; want the tool's result, naming its task", b)
	}
	if n := strings.Count(strings.Join(append(a.tools.paths(), b.tools.paths()...), " "), "/wire"); n != 1 {
		t.Errorf("the tool ran %d times, want once", n)
	}
	if got := other.call("tasks/get", `{"taskId":"`+id+`"}`); got["status"] != "completed" {
		t.Errorf("tasks/get once executed = %v; want completed", got)
	}

	go func() {
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			if strings.Contains(a.get("/sagacity/approvals/held").body, `"journalSeq":1`) {
				want(t, "approve the held call on the first server", a.post("/sagacity/approve/held/1", `{"approver":"alice"}`), 200)
				return
			}
		}
		t.Error("the held call's request never showed on the first server")
	}()
	cs := mcpSession(t, b, "held-agent", http.Header{mcpgw.SagaHeader: {"held"}}, nil)
	r, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "sendWireTransfer", Arguments: json.RawMessage(transfer)})
	if err != nil || r.IsError || text(r) != "transfer-ok" {
		t.Errorf("a call held on the second server, approved on the first = %v, %v; want the tool's result", r, err)
	}
}
