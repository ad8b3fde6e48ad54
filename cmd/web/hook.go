package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/sagacity-go/sagacity/client"
	"github.com/sagacity-go/sagacity/internal/hook"
)

// hookArgs is what hook takes.
const hookArgs = "claude-code [-url URL] [-tool MATCHER=TOOL]… [-wait D] [-unmatched deny|ask] [-undecided deny|ask]"

// defaultHookTool is the gated tool every tool use is a call of when no
// -tool is given.
const defaultHookTool = "claudeCode"

// hookFlags are hook's flags, declared once for parsing and help.
type hookFlags struct {
	url                  string
	routes               []hook.Route
	wait                 time.Duration
	unmatched, undecided string
}

func (f *hookFlags) declare(fs *flag.FlagSet) {
	fs.StringVar(&f.url, "url", "", "the server (default $SAGACITY_URL, else http://localhost:8080)")
	fs.Func("tool", "MATCHER=TOOL: tool uses whose name MATCHER matches, as Claude Code matches it (Bash, Write|Edit, mcp__.*),\n"+
		"are calls of the gated tool TOOL; repeated, the first that matches wins (default *="+defaultHookTool+")", func(s string) error {
		i := strings.LastIndex(s, "=")
		if i <= 0 || i == len(s)-1 {
			return fmt.Errorf("%q is not MATCHER=TOOL", s)
		}
		r, err := hook.NewRoute(s[:i], s[i+1:])
		f.routes = append(f.routes, r)
		return err
	})
	fs.DurationVar(&f.wait, "wait", 5*time.Minute, "how long a tool use waits for people to decide it (the server's policy.maxWait caps it)")
	fs.StringVar(&f.unmatched, "unmatched", hook.Deny, "the decision for a tool use no -tool matches: deny or ask")
	fs.StringVar(&f.undecided, "undecided", hook.Deny, "the decision for a tool use nobody decided within -wait: deny or ask")
}

// hookCommand is sagacity hook claude-code: it reads a PreToolUse event
// from standard input and prints Claude Code's permission decision. It
// fails closed: whatever goes wrong, a panic included, is a denial,
// printed with exit status 0 (the only way Claude Code reads one); when
// even that cannot be printed, exit status 2, which blocks the tool use
// too (any other status lets it run).
func hookCommand(ctx context.Context, args []string, environ []string, stdout io.Writer) error {
	// A write to a pipe Claude Code closed fails instead of killing the
	// process by SIGPIPE, which would let the tool run.
	signal.Ignore(syscall.SIGPIPE)
	d := func() (d hook.Decision) {
		defer func() {
			if p := recover(); p != nil {
				d = hook.Denied("the hook failed (%v); the tool use is blocked", p)
			}
		}()
		h, err := newHook(args, environ)
		if err != nil {
			return hook.Denied("hook: %v; the tool use is blocked", err)
		}
		in, err := io.ReadAll(io.LimitReader(os.Stdin, maxHookInput+1))
		switch {
		case err != nil:
			return hook.Denied("reading the hook's input: %v; the tool use is blocked", err)
		case len(in) > maxHookInput:
			return hook.Denied("the hook's input is longer than %d bytes; the tool use is blocked", maxHookInput)
		}
		return h.Decide(ctx, in)
	}()
	b, err := json.Marshal(d)
	if err == nil {
		_, err = fmt.Fprintf(stdout, "%s\n", b)
	}
	if err != nil {
		return exitError{2, fmt.Errorf("hook claude-code: the decision (%s) could not be printed: %w; the tool use is blocked", d.HookSpecificOutput.Reason, err)}
	}
	return nil
}

// maxHookInput bounds the event read: a Write's content is in it.
const maxHookInput = 64 << 20

// newHook is the hook args and environ configure.
func newHook(args []string, environ []string) (*hook.Hook, error) {
	if len(args) == 0 || args[0] != "claude-code" {
		return nil, errors.New("usage: sagacity hook " + hookArgs)
	}
	var f hookFlags
	fs := newFlags("hook", f.declare)
	if err := fs.Parse(args[1:]); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %q (usage: sagacity hook %s)", fs.Args(), hookArgs)
	}
	for _, d := range []struct{ flag, v string }{{"unmatched", f.unmatched}, {"undecided", f.undecided}} {
		if d.v != hook.Deny && d.v != hook.Ask {
			return nil, fmt.Errorf("-%s is deny or ask, not %q", d.flag, d.v)
		}
	}
	if f.wait < 0 {
		return nil, fmt.Errorf("-wait %s is negative", f.wait)
	}
	getenv := lookup(environ)
	if f.url == "" {
		f.url = getenv("SAGACITY_URL")
	}
	if f.url == "" {
		f.url = "http://localhost:8080"
	}
	if f.routes == nil {
		all, err := hook.NewRoute("*", defaultHookTool)
		if err != nil {
			return nil, err
		}
		f.routes = []hook.Route{all}
	}
	return &hook.Hook{Client: &client.Client{BaseURL: f.url, Token: getenv("SAGACITY_TOKEN")},
		Routes: f.routes, Wait: f.wait, Unmatched: f.unmatched, Undecided: f.undecided}, nil
}
