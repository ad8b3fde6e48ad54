package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/sagacity-go/sagacity/internal/engine"
)

// The HTTP tools the file declares, and the gated tool of a Claude Code
// hook: their endpoints, schemas and names, checked.

// Tool is an HTTP tool: Execute runs it, Compensate undoes it. Or, with
// Hook set, the gated tool a Claude Code hook calls (IRREVERSIBLE, with
// neither endpoint): its execution is the hook's permission to run the
// tool use it was approved for.
type Tool struct {
	Name          string
	Reversibility engine.Reversibility // COMPENSATABLE when the file says nothing
	Hook          string               // HookClaudeCode, or "" for an HTTP tool
	Execute       Endpoint
	Compensate    *Endpoint // nil for an IRREVERSIBLE tool, set for every other
	// Description and InputSchema tell agents what the tool does and
	// what input it takes (a JSON Schema of an object, as JSON; none when
	// empty); every input is checked against the schema.
	Description string
	InputSchema json.RawMessage
}

// Endpoint is where an HTTP tool is called.
type Endpoint struct {
	URL     string        // absolute http or https URL with a host
	Timeout time.Duration // default 10s, at most 5m
}

// HookClaudeCode is a tool's hook: for sagacity hook claude-code.
const HookClaudeCode = "claude-code"

type yamlTool struct {
	Name          string         `yaml:"name"`
	Hook          string         `yaml:"hook"`
	Reversibility string         `yaml:"reversibility"`
	Description   string         `yaml:"description"`
	InputSchema   map[string]any `yaml:"inputSchema"`
	Execute       yamlEndpoint   `yaml:"execute"`
	Compensate    *yamlEndpoint  `yaml:"compensate"`
}

type yamlEndpoint struct {
	URL     string `yaml:"url"`
	Timeout string `yaml:"timeout"`
}

func checkTools(ys []yamlTool) ([]Tool, error) {
	var tools []Tool
	seen := map[string]int{}
	for i, y := range ys {
		where := fmt.Sprintf("tools[%d]", i)
		if err := checkName(y.Name); err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
		where += fmt.Sprintf(" %q", y.Name)
		if y.Name == engine.GateTool {
			return nil, fmt.Errorf("%s: name is reserved for approval decisions in the journal", where)
		}
		if j, dup := seen[y.Name]; dup {
			return nil, fmt.Errorf("%s: name is already used by tools[%d]", where, j)
		}
		seen[y.Name] = i
		if y.Hook != "" {
			t, err := checkHookTool(y)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", where, err)
			}
			tools = append(tools, t)
			continue
		}
		r, err := engine.ParseReversibility(y.Reversibility)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
		t := Tool{Name: y.Name, Reversibility: r, Description: y.Description}
		if t.InputSchema, err = checkSchema(y.Name, y.InputSchema); err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
		if t.Execute, err = checkEndpoint("execute", y.Execute); err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
		switch {
		case r == engine.Irreversible && y.Compensate != nil:
			return nil, fmt.Errorf("%s: an IRREVERSIBLE tool has no undo, so it cannot have a compensate block; remove it or change the reversibility", where)
		case r != engine.Irreversible && (y.Compensate == nil || y.Compensate.URL == ""):
			return nil, fmt.Errorf("%s: compensate.url is missing: a %s tool is undone by calling it when the saga fails", where, r)
		case y.Compensate != nil:
			c, err := checkEndpoint("compensate", *y.Compensate)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", where, err)
			}
			t.Compensate = &c
		}
		tools = append(tools, t)
	}
	return tools, nil
}

// checkHookTool checks a tool a hook calls: Claude Code runs the tool
// use, so the server has no endpoint to call, nothing to undo, and the
// input is the hook's.
func checkHookTool(y yamlTool) (Tool, error) {
	switch {
	case y.Hook != HookClaudeCode:
		return Tool{}, fmt.Errorf("hook %q is not one of %s", y.Hook, HookClaudeCode)
	case y.Reversibility != "" && y.Reversibility != string(engine.Irreversible):
		return Tool{}, fmt.Errorf("a hook's tool is IRREVERSIBLE (a tool use that ran cannot be undone), not %s", y.Reversibility)
	case y.Execute != (yamlEndpoint{}) || y.Compensate != nil:
		return Tool{}, errors.New("a hook's tool has no execute or compensate block: Claude Code runs the tool use once the hook allows it")
	case y.InputSchema != nil:
		return Tool{}, errors.New("a hook's tool has no inputSchema: its input is the hook's")
	}
	return Tool{Name: y.Name, Reversibility: engine.Irreversible, Hook: y.Hook, Description: y.Description}, nil
}

// checkSchema turns a tool's inputSchema into JSON and checks it as the
// engine will: a JSON Schema of an object (a tool's input, as an MCP
// client sends it, is one).
func checkSchema(tool string, y map[string]any) (json.RawMessage, error) {
	if y == nil {
		return nil, nil
	}
	if y["type"] != "object" {
		return nil, errors.New(`inputSchema: its type must be "object": a tool's input is a JSON object`)
	}
	raw, err := json.Marshal(y)
	if err != nil {
		return nil, fmt.Errorf("inputSchema: %w", err)
	}
	if err := engine.CheckInputSchema(tool, raw); err != nil {
		return nil, errors.New(strings.TrimPrefix(err.Error(), fmt.Sprintf("tool %q: ", tool)))
	}
	return raw, nil
}

func checkEndpoint(field string, y yamlEndpoint) (Endpoint, error) {
	if y.URL == "" {
		return Endpoint{}, fmt.Errorf("%s.url is missing", field)
	}
	if _, err := parseHTTPURL(y.URL); err != nil {
		return Endpoint{}, fmt.Errorf("%s.url: %w", field, err)
	}
	e := Endpoint{URL: y.URL, Timeout: defaultTimeout}
	if y.Timeout != "" {
		d, err := time.ParseDuration(y.Timeout)
		if err != nil {
			return Endpoint{}, fmt.Errorf("%s.timeout: %q is not a duration like 10s or 1m30s", field, y.Timeout)
		}
		if d <= 0 || d > maxTimeout {
			return Endpoint{}, fmt.Errorf("%s.timeout: %s must be more than 0 and at most %s", field, y.Timeout, maxTimeout)
		}
		e.Timeout = d
	}
	return e, nil
}

// checkName applies the engine's rules for tool names and principal ids,
