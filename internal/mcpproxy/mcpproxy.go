// Package mcpproxy puts an existing MCP server behind the gate: it
// connects to the server (streamable HTTP, or a program over stdio) as an
// MCP client with the official SDK, and turns each of its tools into an
// engine.Tool, so a call of it is journaled, gated and compensated like
// any other, without changing a line of the server.
//
// How each tool runs comes from the configuration (config.Upstream): a
// tool it does not name gets the upstream's default, IRREVERSIBLE unless
// said otherwise, so a tool the server adds waits for a person. A tool
// that runs at once is undone by calling another of the server's tools
// with the call's arguments or its result; a read-only one has nothing to
// undo.
package mcpproxy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/sagacity-go/sagacity/internal/config"
	"github.com/sagacity-go/sagacity/internal/engine"
)

// KeyMeta is the key, in each call's _meta, of the call's idempotency
// key, engine.Invocation.Key: "<saga>/<seq>" to execute,
// "<saga>/<seq>/compensate" to undo, as HTTP tools get it. An upstream that keeps it can tell a retry from a new
// call.
const KeyMeta = "sagacity/idempotency-key"

// Upstream is a connection to one MCP server. It reconnects when the
// connection is lost: the next call dials again (and starts the program
// again, for stdio). Safe for concurrent use.
type Upstream struct {
	cfg       config.Upstream
	maxResult int
	client    *mcp.Client
	log       *slog.Logger

	mu sync.Mutex
	cs *mcp.ClientSession // nil until connected, and after the connection is lost
}

// Open connects to the upstream, lists its tools (all of it within the
// upstream's call timeout), and returns them as engine tools: named with the upstream's prefix, with its descriptions
// and input schemas, and running as the configuration says. Results
// longer than maxResult bytes are failures. It fails when the upstream
// cannot be reached, when the configuration names a tool the upstream
// does not have, and when a tool that runs at once has no undo. version
// is Sagacity's, sent to the upstream as the client's.
func Open(ctx context.Context, cfg config.Upstream, maxResult int64, version string, log *slog.Logger) (*Upstream, []engine.Tool, error) {
	u := &Upstream{cfg: cfg, maxResult: int(maxResult), log: log.With("upstream", cfg.Name),
		client: mcp.NewClient(&mcp.Implementation{Name: "sagacity", Version: version}, nil)}
	u.log.Info("connecting to the upstream MCP server and listing its tools", "within", cfg.Timeout)
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	tools, err := u.tools(ctx)
	if err != nil {
		u.Close()
		return nil, nil, fmt.Errorf("upstream %q: %w", cfg.Name, err)
	}
	return u, tools, nil
}

// Close ends the connection (and the program, for stdio).
func (u *Upstream) Close() error {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.cs == nil {
		return nil
	}
	err := u.cs.Close()
	u.cs = nil
	return err
}

func (u *Upstream) tools(ctx context.Context) ([]engine.Tool, error) {
	cs, err := u.session(ctx)
	if err != nil {
		return nil, err
	}
	listed := map[string]*mcp.Tool{}
	for t, err := range cs.Tools(ctx, nil) {
		if err != nil {
			return nil, fmt.Errorf("listing its tools: %w", err)
		}
		listed[t.Name] = t
	}
	for _, name := range slices.Sorted(maps.Keys(u.cfg.Tools)) {
		if listed[name] == nil {
			return nil, fmt.Errorf("tools[%q] is configured, but the upstream has no tool of that name (it has %s)", name, names(listed))
		}
	}
	var out []engine.Tool
	for _, name := range slices.Sorted(maps.Keys(listed)) {
		r, how := u.cfg.Resolve(name)
		if r != engine.Irreversible && !how.ReadOnly {
			switch {
			case how.Compensate == nil:
				return nil, fmt.Errorf("tool %q runs at once (%s) but has no compensate block saying how to undo it; "+
					"give it one, mark it readOnly, or make it IRREVERSIBLE", name, r)
			case listed[how.Compensate.Tool] == nil:
				return nil, fmt.Errorf("tool %q is undone by %q, which the upstream does not have", name, how.Compensate.Tool)
			}
		}
		schema, err := json.Marshal(listed[name].InputSchema)
		if err != nil || listed[name].InputSchema == nil {
			schema = []byte(`{"type":"object"}`)
		}
		out = append(out, engine.Tool{Name: u.cfg.Prefix + name, Reversibility: r, Description: listed[name].Description,
			InputSchema: schema, Executor: &tool{up: u, name: name, how: how}})
	}
	return out, nil
}

// exchangeSlack is how much longer than a call one HTTP exchange with an
// upstream may take: the call's own timeout ends it first.
const exchangeSlack = 5 * time.Second

// session is the connection, made when there is none.
func (u *Upstream) session(ctx context.Context) (*mcp.ClientSession, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.cs != nil {
		return u.cs, nil
	}
	var t mcp.Transport
	if u.cfg.URL != "" {
		// Never retried: a POST that may have reached the upstream is
		// not sent again (the call is then failed, and compensated).
		// Every exchange is bounded, the handshake's and the end of a
		// session's included: a server that stops answering holds no
		// connection for ever.
		t = &mcp.StreamableClientTransport{Endpoint: u.cfg.URL, MaxRetries: -1, DisableStandaloneSSE: true,
			HTTPClient: &http.Client{Timeout: u.cfg.Timeout + exchangeSlack,
				CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
	} else {
		cmd := exec.Command(u.cfg.Command[0], u.cfg.Command[1:]...)
		// Not Sagacity's environment: it holds the signing key.
		cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
		for k, v := range u.cfg.Env {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
		cmd.Stderr = &stderrLog{log: u.log}
		t = &mcp.CommandTransport{Command: cmd}
	}
	// An upstream that never answers the handshake holds nothing up
	// longer than a call may take.
	cctx, cancel := context.WithTimeout(ctx, u.cfg.Timeout)
	defer cancel()
	cs, err := u.client.Connect(cctx, t, nil)
	if cctx.Err() != nil && err != nil {
		return nil, fmt.Errorf("connecting: no answer to the MCP handshake within %s", u.cfg.Timeout)
	}
	if err != nil {
		return nil, fmt.Errorf("connecting: %w", err)
	}
	u.cs = cs
	return cs, nil
}

// lost forgets a connection that failed, so the next call makes another.
func (u *Upstream) lost(cs *mcp.ClientSession) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.cs == cs {
		u.cs.Close()
		u.cs = nil
	}
}

// call calls one of the upstream's tools with args, a JSON object. An
// error is what the engine journals: it names the tool, never the
// upstream's address.
func (u *Upstream) call(ctx context.Context, name string, args json.RawMessage, key string) (string, error) {
	cs, err := u.session(ctx)
	if err != nil {
		u.log.Warn("upstream unreachable", "err", err)
		return "", fmt.Errorf("upstream %s is unreachable", u.cfg.Name)
	}
	ctx, cancel := context.WithTimeout(ctx, u.cfg.Timeout)
	defer cancel()
	r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args, Meta: mcp.Meta{KeyMeta: key}})
	if err != nil {
		u.log.Warn("upstream call failed", "tool", name, "key", key, "err", err)
		// An answer that is a JSON-RPC error leaves the connection
		// working, and its message is the upstream's to show; anything
		// else may have broken the connection, and its message may
		// name the upstream's address.
		var rpcErr *jsonrpc.Error
		if errors.As(err, &rpcErr) {
			return "", fmt.Errorf("upstream %s: tool %s refused the call: %s", u.cfg.Name, name, short(rpcErr.Message))
		}
		u.lost(cs)
		if ctx.Err() != nil {
			return "", fmt.Errorf("upstream %s: tool %s did not answer within %s", u.cfg.Name, name, u.cfg.Timeout)
		}
		return "", fmt.Errorf("upstream %s: the connection failed while calling tool %s", u.cfg.Name, name)
	}
	out, err := resultOf(r)
	switch {
	case err != nil:
		return "", fmt.Errorf("upstream %s: tool %s: %w", u.cfg.Name, name, err)
	case r.IsError:
		return "", fmt.Errorf("upstream %s: tool %s failed: %s", u.cfg.Name, name, short(out))
	case len(out) > u.maxResult:
		return "", fmt.Errorf("upstream %s: tool %s answered %d bytes, more than the %d allowed", u.cfg.Name, name, len(out), u.maxResult)
	}
	return out, nil
}

// resultOf is what a tool result journals: its structured content as
// JSON when it has some, else its text; content of other kinds (images,
// resources) as the JSON of the whole content.
func resultOf(r *mcp.CallToolResult) (string, error) {
	if r.StructuredContent != nil {
		b, err := json.Marshal(r.StructuredContent)
		return string(b), err
	}
	var text strings.Builder
	for _, c := range r.Content {
		t, ok := c.(*mcp.TextContent)
		if !ok {
			b, err := json.Marshal(r.Content)
			return string(b), err
		}
		text.WriteString(t.Text)
	}
	return text.String(), nil
}

// tool is one upstream tool, as the engine runs it.
type tool struct {
	up   *Upstream
	name string // the upstream's
	how  config.UpstreamTool
}

// Execute calls the tool with the call's input, byte for byte, as its
// arguments.
func (t *tool) Execute(ctx context.Context, inv engine.Invocation) (string, error) {
	return t.up.call(ctx, t.name, json.RawMessage(inv.Input), inv.Key(engine.ToolExecute))
}

// Compensate calls the tool's undo with the call's arguments or its
// result; a read-only tool has nothing to undo.
func (t *tool) Compensate(ctx context.Context, inv engine.Invocation, result string) error {
	switch {
	case t.how.ReadOnly:
		return nil
	case t.how.Compensate == nil:
		return fmt.Errorf("tool %s has no undo", t.name)
	}
	args := inv.Input
	if t.how.Compensate.Arguments == "result" {
		args = result
		if !isObject(args) {
			return fmt.Errorf("tool %s is undone with its result, which is not a JSON object", t.name)
		}
	}
	_, err := t.up.call(ctx, t.how.Compensate.Tool, json.RawMessage(args), inv.Key(engine.ToolCompensate))
	return err
}

func isObject(s string) bool {
	var m map[string]json.RawMessage
	return json.Unmarshal([]byte(s), &m) == nil && m != nil
}

// short keeps an upstream's message to one line of a sane length: it is
// journaled and shown.
func short(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 300 {
		s = strings.ToValidUTF8(s[:300], "") + "…"
	}
	return s
}

func names(m map[string]*mcp.Tool) string {
	if len(m) == 0 {
		return "none"
	}
	return strings.Join(slices.Sorted(maps.Keys(m)), ", ")
}

// stderrLog logs what an upstream program writes to its stderr, a line
// at a time.
type stderrLog struct {
	log *slog.Logger
	buf []byte
}

func (w *stderrLog) Write(p []byte) (int, error) {
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			break
		}
		w.log.Info("upstream stderr", "line", short(string(w.buf[:i])))
		w.buf = w.buf[i+1:]
	}
	if len(w.buf) > 4096 {
		w.log.Info("upstream stderr", "line", short(string(w.buf)))
		w.buf = w.buf[:0]
	}
	return len(p), nil
}
