package mcpproxy_test

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/sagacity-go/sagacity/internal/config"
	"github.com/sagacity-go/sagacity/internal/engine"
	"github.com/sagacity-go/sagacity/internal/mcpproxy"
	"github.com/sagacity-go/sagacity/internal/mcpproxy/upstreamtest"
)

func serveFiles(t *testing.T) *httptest.Server {
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return upstreamtest.New() }, nil))
	t.Cleanup(srv.Close)
	return srv
}

func open(t *testing.T, cfg config.Upstream) ([]engine.Tool, error) {
	up, tools, err := mcpproxy.Open(t.Context(), cfg, 1<<20, "test", slog.New(slog.DiscardHandler))
	if err == nil {
		t.Cleanup(func() { up.Close() })
	}
	return tools, err
}

// TestOpen: the upstream's tools become engine tools, named with the
// prefix, IRREVERSIBLE unless the configuration says otherwise.
func TestOpen(t *testing.T) {
	cfg := config.Upstream{Name: "files", URL: serveFiles(t).URL, Prefix: "f.", Timeout: time.Second, Default: engine.Irreversible,
		Tools: map[string]config.UpstreamTool{
			"write_file": {Reversibility: engine.Compensatable, Compensate: &config.UpstreamUndo{Tool: "delete_file", Arguments: "result"}},
			"list":       {ReadOnly: true},
		}}
	tools, err := open(t, cfg)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]engine.Reversibility{}
	for _, tl := range tools {
		got[tl.Name] = tl.Reversibility
		if tl.Description == "" || !strings.Contains(string(tl.InputSchema), `"type":"object"`) {
			t.Errorf("%s: description %q, schema %s; want the upstream's", tl.Name, tl.Description, tl.InputSchema)
		}
	}
	want := map[string]engine.Reversibility{"f.write_file": engine.Compensatable, "f.list": engine.Reversible,
		"f.delete_file": engine.Irreversible, "f.send_email": engine.Irreversible, "f.fail": engine.Irreversible, "f.purge": engine.Irreversible}
	if len(got) != len(want) {
		t.Errorf("tools = %v, want %v", got, want)
	}
	for name, r := range want {
		if got[name] != r {
			t.Errorf("%s = %q, want %q", name, got[name], r)
		}
	}
}

// TestOpenRefuses: a configuration that does not fit the upstream, or an
// upstream that cannot be reached, stops the start with a message that
// says what to change.
func TestOpenRefuses(t *testing.T) {
	url := serveFiles(t).URL
	compensatable := config.UpstreamTool{Reversibility: engine.Compensatable}
	for _, tc := range []struct {
		name  string
		cfg   config.Upstream
		wants string
	}{
		{"a tool it does not have", config.Upstream{Tools: map[string]config.UpstreamTool{"write_flie": {ReadOnly: true}}},
			`tools["write_flie"] is configured, but the upstream has no tool of that name (it has delete_file, fail, list, purge, send_email, write_file)`},
		{"runs at once with no undo", config.Upstream{Tools: map[string]config.UpstreamTool{"write_file": compensatable}},
			`tool "write_file" runs at once (COMPENSATABLE) but has no compensate block`},
		{"a default that runs at once", config.Upstream{Default: engine.Compensatable},
			`runs at once (COMPENSATABLE) but has no compensate block`},
		{"undone by a tool it does not have", config.Upstream{Tools: map[string]config.UpstreamTool{
			"write_file": {Reversibility: engine.Compensatable, Compensate: &config.UpstreamUndo{Tool: "unwrite", Arguments: "input"}}}},
			`tool "write_file" is undone by "unwrite", which the upstream does not have`},
		{"unreachable", config.Upstream{URL: "http://127.0.0.1:1/mcp"}, `upstream "files": connecting:`},
		{"a program that is not there", config.Upstream{Command: []string{"/nonexistent/mcp-server"}}, `upstream "files": connecting:`},
		{"a server that never answers the handshake", config.Upstream{URL: silent(t)},
			`upstream "files": connecting: no answer to the MCP handshake within 1s`},
		{"a program that never answers the handshake", config.Upstream{Command: []string{"sleep", "60"}},
			`upstream "files": connecting: no answer to the MCP handshake within 1s`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg := tc.cfg
			cfg.Name, cfg.Timeout = "files", time.Second
			if cfg.Default == "" {
				cfg.Default = engine.Irreversible
			}
			if cfg.URL == "" && cfg.Command == nil {
				cfg.URL = url
			}
			_, err := open(t, cfg)
			if err == nil || !strings.Contains(err.Error(), tc.wants) {
				t.Errorf("Open = %v, want an error containing %q", err, tc.wants)
			}
		})
	}
}

// TestUpstreamGone: when the upstream goes away, a call fails with a
// message that names the tool and not the upstream's address, and the
// proxy connects again once it is back.
func TestUpstreamGone(t *testing.T) {
	var h http.Handler = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return upstreamtest.New() }, nil)
	var down atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if down.Load() {
			http.Error(w, "gone", http.StatusBadGateway)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	cfg := config.Upstream{Name: "files", URL: srv.URL, Timeout: time.Second, Default: engine.Irreversible,
		Tools: map[string]config.UpstreamTool{"list": {ReadOnly: true}}}
	tools, err := open(t, cfg)
	if err != nil {
		t.Fatal(err)
	}
	var list engine.Tool
	for _, tl := range tools {
		if tl.Name == "list" {
			list = tl
		}
	}
	inv := engine.Invocation{SagaID: "s", Seq: 1, Tool: "list", Input: "{}"}
	if _, err := list.Executor.Execute(t.Context(), inv); err != nil {
		t.Fatalf("list = %v", err)
	}
	down.Store(true)
	_, err = list.Executor.Execute(t.Context(), inv)
	if err == nil || strings.Contains(err.Error(), srv.URL) || !strings.Contains(err.Error(), "tool list") {
		t.Errorf("list with the upstream down = %v, want a failure naming the tool, not the address", err)
	}
	down.Store(false)
	if _, err := list.Executor.Execute(t.Context(), inv); err != nil {
		t.Errorf("list with the upstream back = %v, want it to connect again", err)
	}
}

// silent is the URL of a server that takes every request and never
// answers it.
func silent(t *testing.T) string {
	done := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-done:
		}
	}))
	t.Cleanup(func() { close(done); srv.Close() })
	return srv.URL
}
