// Package hook puts Claude Code's own tools behind the gate. Claude
// Code runs a command hook before each tool use (PreToolUse); sagacity
// hook claude-code hands the tool use to the server as a call of a gated
// tool, waits for people to decide it, and answers Claude Code's
// permission decision: allow only once the server executed the approved
// request of those exact bytes, deny otherwise, always with why.
//
// The server's side is Tool: Claude Code, not the server, runs the tool
// use, so executing the gated tool does nothing but journal that this
// tool use, these bytes, was let through, once. That execution is what
// the hook waits for: the approval of other bytes, an approval not yet
// executed, or one executed for another tool use allows nothing.
package hook

import (
	"context"
	"fmt"

	"github.com/sagacity-go/sagacity/internal/engine"
)

// Allowed is the result the gated tool's execution journals: the
// permission it grants, consumed by the hook that executed it.
const Allowed = "allowed: Claude Code runs this tool use"

// schema is the gated tool's input: a tool use as Use writes it.
const schema = `{"type":"object","required":["tool_name","tool_input","cwd"],"additionalProperties":false,` +
	`"properties":{"tool_name":{"type":"string","minLength":1},"tool_input":{"type":"object"},"cwd":{"type":"string"}}}`

// Tool is the gated tool named name that sagacity hook claude-code
// calls: IRREVERSIBLE, its input a tool use (see Use), its execution the
// permission to run it.
func Tool(name, description string) engine.Tool {
	if description == "" {
		description = "A Claude Code tool use, let through once people approve it (sagacity hook claude-code)."
	}
	return engine.Tool{Name: name, Reversibility: engine.Irreversible, Executor: permission{},
		Description: description, InputSchema: []byte(schema)}
}

// permission executes a hook's gated tool.
type permission struct{}

func (permission) Execute(context.Context, engine.Invocation) (string, error) { return Allowed, nil }

// Compensate is never called for an IRREVERSIBLE tool.
func (permission) Compensate(_ context.Context, inv engine.Invocation, _ string) error {
	return fmt.Errorf("tool %s: a tool use Claude Code ran cannot be undone", inv.Tool)
}
