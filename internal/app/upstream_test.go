package app_test

import (
	"encoding/json"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/sagacity-go/sagacity/internal/config"
	"github.com/sagacity-go/sagacity/internal/engine"
	"github.com/sagacity-go/sagacity/internal/mcpgw"
	"github.com/sagacity-go/sagacity/internal/mcpproxy"
	"github.com/sagacity-go/sagacity/internal/mcpproxy/upstreamtest"
	"github.com/sagacity-go/sagacity/internal/testkit"
	"github.com/sagacity-go/sagacity/wire"
)

// filesConfig puts the files server behind the gate: write_file runs at
// once and is undone by delete_file with its result, list and fail are
// read-only, send_email is IRREVERSIBLE by name, and delete_file and
// purge are named nowhere.
func filesConfig(name string) config.Upstream {
	return config.Upstream{Name: name, Prefix: "files_", Timeout: 10 * time.Second, Default: engine.Irreversible,
		Tools: map[string]config.UpstreamTool{
			"write_file": {Reversibility: engine.Compensatable, Compensate: &config.UpstreamUndo{Tool: "delete_file", Arguments: "result"}},
			"list":       {ReadOnly: true},
			"fail":       {ReadOnly: true},
			"send_email": {Reversibility: engine.Irreversible},
		}}
}

// TestUpstream: an MCP server that knows nothing of Sagacity, in the test
// process over streamable HTTP and as a program over stdio, is put behind
// the gate. An agent on the official client sees its tools as Sagacity's;
// its compensatable tool is undone by its compensating tool when the saga
// fails; its irreversible tool waits for a person and, approved, runs
// once with the approved bytes; a tool the configuration does not name
// waits for a person too; and the program does not inherit Sagacity's
// environment.
func TestUpstream(t *testing.T) {
	t.Setenv("SAGACITY_SIGNING_KEY_PROBE", "not for upstreams")
	for _, transport := range []string{"http", "stdio"} {
		t.Run(transport, func(t *testing.T) {
			cfg := filesConfig("files-" + transport)
			if transport == "http" {
				h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return upstreamtest.New() }, nil)
				srv := httptest.NewServer(h)
				t.Cleanup(srv.Close)
				cfg.URL = srv.URL
			} else {
				exe, err := os.Executable()
				if err != nil {
					t.Fatal(err)
				}
				cfg.Command, cfg.Env = []string{exe}, map[string]string{upstreamtest.StdioEnv: "1"}
			}
			up, tools, err := mcpproxy.Open(t.Context(), cfg, 1<<20, "test", slog.New(slog.DiscardHandler))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { up.Close() })
			e := newAPI(t, testkit.SQLiteURL(t), envOptions{upstream: tools})
			ctx := t.Context()
			listed := map[string]*mcp.Tool{}
			cs := mcpSession(t, e, "agent", http.Header{mcpgw.SagaHeader: {"upstream-1"}}, nil)
			for tool, err := range cs.Tools(ctx, nil) {
				if err != nil {
					t.Fatal(err)
				}
				listed[tool.Name] = tool
			}
			for name, destructive := range map[string]bool{"files_write_file": false, "files_list": false, "files_send_email": true,
				"files_delete_file": true, "files_purge": true} {
				if listed[name] == nil || *listed[name].Annotations.DestructiveHint != destructive {
					t.Fatalf("tools/list lacks %s or lists it as destructive=%v (want %v): %v", name, listed[name] != nil, destructive, slices.Collect(maps.Keys(listed)))
				}
			}
			if schema, _ := json.Marshal(listed["files_write_file"].InputSchema); !strings.Contains(string(schema), `"content"`) {
				t.Errorf("files_write_file's schema = %s, want the upstream's", schema)
			}

			call := func(cs *mcp.ClientSession, name string, args any) *mcp.CallToolResult {
				t.Helper()
				r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
				if err != nil {
					t.Fatalf("tools/call %s: %v", name, err)
				}
				return r
			}
			// The saga fails: the file written is deleted by the upstream's
			// own compensating tool, given the write's result.
			if r := call(cs, "files_write_file", map[string]string{"path": "a.txt", "content": "hello"}); r.IsError || text(r) != `{"path":"a.txt"}` {
				t.Fatalf("files_write_file = %q (error %v), want the upstream's result", text(r), r.IsError)
			}
			if r := call(cs, "files_fail", map[string]any{}); !r.IsError || !strings.Contains(text(r), "disk full") {
				t.Fatalf("files_fail = %q (error %v), want the upstream's failure", text(r), r.IsError)
			}
			var s struct{ Status engine.Status }
			_ = json.Unmarshal([]byte(e.get("/sagacity/sagas/upstream-1").body), &s)
			if s.Status != wire.Compensated {
				t.Errorf("saga after the failure = %s, want COMPENSATED", s.Status)
			}

			// Another saga: the email waits for a person, so does purge,
			// which the configuration never named.
			cs2 := mcpSession(t, e, "agent", http.Header{mcpgw.SagaHeader: {"upstream-2"}}, nil)
			list := func() (l struct{ Files, Sent, Calls, Env []string }) {
				t.Helper()
				r := call(cs2, "files_list", map[string]any{})
				if r.IsError {
					t.Fatalf("files_list = %q", text(r))
				}
				_ = json.Unmarshal([]byte(text(r)), &l)
				return l
			}
			if l := list(); len(l.Files) != 0 || !slices.Contains(l.Calls, "delete_file upstream-1/1/compensate") {
				t.Errorf("upstream after the failed saga: files %q, calls %q; want a.txt deleted by the compensation of upstream-1/1", l.Files, l.Calls)
			}
			for _, name := range []string{"files_send_email", "files_purge"} {
				args := map[string]any{}
				if name == "files_send_email" {
					args = map[string]any{"to": "cfo@example.com", "body": "wire 1M"}
				}
				r := call(cs2, name, args)
				if r.IsError || !strings.HasPrefix(text(r), "[AWAITING_APPROVAL] Tool '"+name+"' requires human approval before execution.") {
					t.Errorf("%s = %q (error %v), want it gated", name, text(r), r.IsError)
				}
			}
			l := list()
			if len(l.Sent) != 0 || slices.ContainsFunc(l.Calls, func(c string) bool { return strings.HasPrefix(c, "purge") || strings.HasPrefix(c, "send_email") }) {
				t.Errorf("upstream before any approval: sent %q, calls %q; want nothing gated run", l.Sent, l.Calls)
			}
			if transport == "stdio" && slices.ContainsFunc(l.Env, func(k string) bool { return strings.HasPrefix(k, "SAGACITY_") }) {
				t.Errorf("the upstream program's environment has %q, want none of Sagacity's", l.Env)
			}
			want(t, "approve the email", e.post("/sagacity/approve/upstream-2/3", `{"approver":"manager@company.com"}`), 200)
			if r := call(cs2, "sagacity_resume", map[string]any{"seq": 3}); r.IsError {
				t.Fatalf("resume = %q, want the email sent", text(r))
			}
			sends := func(c string) bool { return strings.HasPrefix(c, "send_email upstream-2/") }
			if l := list(); !slices.Equal(l.Sent, []string{"cfo@example.com: wire 1M"}) ||
				len(slices.DeleteFunc(l.Calls, func(c string) bool { return !sends(c) })) != 1 {
				t.Errorf("upstream after the approval: sent %q, calls %q; want the approved email sent once", l.Sent, l.Calls)
			}
			if v := e.get("/sagacity/audit/upstream-2/verify").body; !strings.Contains(v, `"valid":true`) {
				t.Errorf("verify = %s, want the journal valid", v)
			}
		})
	}
}
