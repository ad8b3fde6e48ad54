// Package upstreamtest is an MCP server for tests of the proxy: a small
// file store with an outbox, of the kind an operator puts behind the
// gate, written with the official SDK. It runs in the test process
// (served over streamable HTTP) or as a program over stdio: the test
// binary itself, started again with StdioEnv set (see RunIfAsked).
package upstreamtest

import (
	"context"
	"errors"
	"os"
	"slices"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// StdioEnv, set to "1" in a test binary's environment, makes RunIfAsked
// serve the files server over stdio.
const StdioEnv = "UPSTREAMTEST_STDIO"

// files is the server's state.
type files struct {
	mu    sync.Mutex
	files map[string]string
	sent  []string
	calls []string // every tool call, as "tool key", in order
}

type path struct {
	Path string `json:"path" jsonschema:"the file's path"`
}

type file struct {
	Path    string `json:"path" jsonschema:"the file's path"`
	Content string `json:"content" jsonschema:"what the file holds"`
}

type email struct {
	To   string `json:"to" jsonschema:"the recipient"`
	Body string `json:"body" jsonschema:"the message"`
}

type listing struct {
	Files []string `json:"files"`
	Sent  []string `json:"sent"`
	Calls []string `json:"calls"`
	Env   []string `json:"env"` // the names of the program's environment variables
}

type none struct{}

// New is the files server: write_file (undone by delete_file with its
// result), delete_file, list (read-only: the files, the outbox, the calls
// made and the environment's names), send_email, fail (always fails) and
// purge (deletes everything).
func New() *mcp.Server {
	f := &files{files: map[string]string{}}
	s := mcp.NewServer(&mcp.Implementation{Name: "files", Version: "1.0"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "write_file", Description: "Writes a file."},
		func(_ context.Context, req *mcp.CallToolRequest, in file) (*mcp.CallToolResult, path, error) {
			defer f.lock(req)()
			f.files[in.Path] = in.Content
			return nil, path{in.Path}, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "delete_file", Description: "Deletes a file."},
		func(_ context.Context, req *mcp.CallToolRequest, in path) (*mcp.CallToolResult, none, error) {
			defer f.lock(req)()
			delete(f.files, in.Path)
			return nil, none{}, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "list", Description: "Lists the files, the outbox and the calls made."},
		func(_ context.Context, req *mcp.CallToolRequest, _ none) (*mcp.CallToolResult, listing, error) {
			defer f.lock(req)()
			var l listing
			for p := range f.files {
				l.Files = append(l.Files, p)
			}
			slices.Sort(l.Files)
			l.Sent, l.Calls = slices.Clone(f.sent), slices.Clone(f.calls)
			for _, kv := range os.Environ() {
				k, _, _ := strings.Cut(kv, "=")
				l.Env = append(l.Env, k)
			}
			return nil, l, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "send_email", Description: "Sends an email."},
		func(_ context.Context, req *mcp.CallToolRequest, in email) (*mcp.CallToolResult, none, error) {
			defer f.lock(req)()
			f.sent = append(f.sent, in.To+": "+in.Body)
			return nil, none{}, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "fail", Description: "Always fails."},
		func(_ context.Context, req *mcp.CallToolRequest, _ none) (*mcp.CallToolResult, none, error) {
			defer f.lock(req)()
			return nil, none{}, errors.New("disk full")
		})
	mcp.AddTool(s, &mcp.Tool{Name: "purge", Description: "Deletes every file."},
		func(_ context.Context, req *mcp.CallToolRequest, _ none) (*mcp.CallToolResult, none, error) {
			defer f.lock(req)()
			clear(f.files)
			return nil, none{}, nil
		})
	return s
}

// lock takes the server's lock and records the call; it returns the
// unlock.
func (f *files) lock(req *mcp.CallToolRequest) func() {
	f.mu.Lock()
	key, _ := req.Params.Meta["sagacity/idempotency-key"].(string)
	f.calls = append(f.calls, req.Params.Name+" "+key)
	return f.mu.Unlock
}

// RunIfAsked serves the files server over stdio and exits when StdioEnv
// is set; a test binary's TestMain calls it first.
func RunIfAsked() {
	if os.Getenv(StdioEnv) != "1" {
		return
	}
	if err := New().Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		os.Exit(1)
	}
	os.Exit(0)
}
