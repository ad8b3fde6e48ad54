package hook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/sagacity-go/sagacity/client"
)

// Event is what Claude Code writes to a command hook's standard input
// (the fields the hook reads; the rest are ignored).
type Event struct {
	SessionID     string          `json:"session_id"`
	Cwd           string          `json:"cwd"`
	HookEventName string          `json:"hook_event_name"`
	ToolName      string          `json:"tool_name"`
	ToolInput     json.RawMessage `json:"tool_input"`
	ToolUseID     string          `json:"tool_use_id"`
}

// Use is the input of a call of the gated tool: the tool use as people
// decide it, in the names Claude Code gives it, so that an approval
// rule's condition reads payload.tool_name and payload.tool_input.
type Use struct {
	ToolName  string          `json:"tool_name"`
	ToolInput json.RawMessage `json:"tool_input"`
	Cwd       string          `json:"cwd"`
}

// Permission decisions, as Claude Code reads them.
const (
	Allow = "allow"
	Deny  = "deny"
	Ask   = "ask"
)

// Decision is a PreToolUse hook's answer on standard output.
type Decision struct {
	HookSpecificOutput Permission `json:"hookSpecificOutput"`
}

// Permission is the permission a PreToolUse hook decides, and why: the
// reason Claude's model reads for a denial, the person for "ask".
type Permission struct {
	HookEventName string `json:"hookEventName"`
	Decision      string `json:"permissionDecision"`
	Reason        string `json:"permissionDecisionReason"`
}

func decide(decision, format string, args ...any) Decision {
	return Decision{Permission{HookEventName: "PreToolUse", Decision: decision, Reason: "Sagacity: " + fmt.Sprintf(format, args...)}}
}

// Denied is a denial saying why.
func Denied(format string, args ...any) Decision { return decide(Deny, format, args...) }

// Route sends the tool uses whose name matches Match to the gated tool
// Tool.
type Route struct {
	Match *regexp.Regexp
	Tool  string
}

// NewRoute is the route of matcher to tool, matcher read as Claude
// Code reads a hook's: a regular expression the whole tool name must
// match ("Bash", "Write|Edit", "mcp__github__.*"), or "*" for every
// tool.
func NewRoute(matcher, tool string) (Route, error) {
	if matcher == "*" {
		matcher = ".*"
	}
	re, err := regexp.Compile("^(?:" + matcher + ")$")
	if err != nil {
		return Route{}, fmt.Errorf("matcher %q: %w", matcher, err)
	}
	return Route{Match: re, Tool: tool}, nil
}

// SagaPrefix starts the saga of each Claude Code session: one saga per
// session, initiated by the hook's token.
const SagaPrefix = "claude-code/"

// Hook decides Claude Code's tool uses with a Sagacity server.
type Hook struct {
	// Client calls the server, with the hook's token (an agent's).
	Client *client.Client
	// Routes are tried in order; the first that matches a tool use
	// names its gated tool.
	Routes []Route
	// Wait is how long a tool use waits for people to decide it.
	Wait time.Duration
	// Unmatched and Undecided are the decisions (Deny or Ask) for a tool
	// use no route matches, and for one nobody decided in time.
	Unmatched, Undecided string
}

// Margin is how much longer than its wait the hook may take to answer:
// the server's held answer, then the resume that executes the request.
// Claude Code's timeout of the hook must be longer than Wait and Margin,
// or it kills the hook, and a killed hook lets the tool run.
const Margin = 20 * time.Second

// Retry is how long the hook sends a call again while the server cannot
// be reached (a restart), besides the time it held the call.
const Retry = 5 * time.Second

// Decide decides the PreToolUse event in, as Claude Code wrote it. Every
// failure is a denial saying why: only an execution of the approved
// request of these exact bytes, for this tool use, allows it.
func (h *Hook) Decide(ctx context.Context, in []byte) Decision {
	var ev Event
	if err := json.Unmarshal(in, &ev); err != nil {
		return Denied("the hook's input is not Claude Code's JSON (%v); the tool use is blocked", err)
	}
	switch {
	case ev.HookEventName != "PreToolUse":
		return Denied("the hook handles PreToolUse, not %q; the tool use is blocked", ev.HookEventName)
	case ev.SessionID == "" || ev.ToolName == "":
		return Denied("the hook's input has no session_id or tool_name; the tool use is blocked")
	case len(ev.ToolInput) == 0 || ev.ToolInput[0] != '{':
		return Denied("the hook's input has no tool_input object; the tool use is blocked")
	}
	var route *Route
	for i := range h.Routes {
		if h.Routes[i].Match.MatchString(ev.ToolName) {
			route = &h.Routes[i]
			break
		}
	}
	if route == nil {
		return decide(h.Unmatched, "no gated tool is configured for %s (sagacity hook claude-code -tool)", ev.ToolName)
	}
	input, err := json.Marshal(Use{ToolName: ev.ToolName, ToolInput: ev.ToolInput, Cwd: ev.Cwd})
	if err != nil {
		return Denied("the tool use's input is not JSON (%v); the tool use is blocked", err)
	}
	ctx, cancel := context.WithTimeout(ctx, h.Wait+Margin)
	defer cancel()
	saga := SagaPrefix + ev.SessionID
	held := *h.Client
	held.Wait, held.RetryFor = h.Wait, Retry
	// The tool use's id is the call's key: the hook sent again for it
	// answers the same request, and the key sent with other bytes is
	// refused.
	call, err := held.Ask(ctx, saga, client.Ask{Tool: route.Tool, Input: string(input), Key: ev.ToolUseID})
	if err != nil {
		return refused(ctx, err)
	}
	allowed := decide(Allow, "approved, and executed as request seq %d of saga %s", call.JournalSeq, saga)
	switch call.Outcome {
	case client.Executed: // under a rule that executes on approval
		return allowed
	case client.Gated:
	default:
		return Denied("the call of %s was %s: %s", route.Tool, call.Outcome, call.Error)
	}
	// Decided or not, asking costs nothing: a resume before the quorum
	// changes nothing, and one of other bytes cannot come from here.
	now := *h.Client
	now.Wait = 0
	res, err := now.Resume(ctx, saga, call.JournalSeq, string(input))
	if ce, ok := errors.AsType[*client.Error](err); ok && ce.Code == client.CodeUndecided {
		return decide(h.Undecided, "nobody decided request seq %d of saga %s within %s; it stays pending, and the tool use asked again makes a new one",
			call.JournalSeq, saga, h.Wait)
	}
	if err != nil {
		return refused(ctx, err)
	}
	if res.Outcome != client.Executed {
		return Denied("the approved request seq %d of saga %s was %s: %s", call.JournalSeq, saga, res.Outcome, res.Reason)
	}
	return allowed
}

// refused is the denial of an error from the server, or from getting to
// it.
func refused(ctx context.Context, err error) Decision {
	ce, ok := errors.AsType[*client.Error](err)
	switch {
	case !ok && ctx.Err() != nil:
		return Denied("no decision in time (%v); the tool use is blocked", err)
	case !ok:
		return Denied("the server could not be reached (%v); the tool use is blocked", err)
	case ce.Code == client.CodeKeyReused:
		return Denied("this tool use was sent with other bytes before, and what was asked about is not what would run: %s", ce.Message)
	}
	return Denied("%s", ce.Message)
}
