package config

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/sagacity-go/sagacity/internal/engine"
)

// The upstreams: MCP servers whose tools are served behind the gate.

// Upstream is an MCP server whose tools Sagacity lists as its own and runs
// through the engine: journaled, gated and compensated. Exactly one of URL
// and Command is set.
type Upstream struct {
	Name    string            // unique; names the upstream in messages
	URL     string            // a streamable HTTP endpoint, or
	Command []string          // a program and its arguments, spoken to over stdio
	Env     map[string]string // the program's environment besides PATH
	Timeout time.Duration     // for each call, default 30s, at most 5m
	Prefix  string            // put before each tool's name, to keep names apart
	// Default is the reversibility of every tool Tools does not name:
	// IRREVERSIBLE when the file says nothing, so a tool the upstream
	// adds later waits for a person.
	Default engine.Reversibility
	Tools   map[string]UpstreamTool // by the upstream's tool name
}

// UpstreamTool is how one upstream tool runs.
type UpstreamTool struct {
	// Reversibility is the tool's; the upstream's default when empty.
	Reversibility engine.Reversibility
	// ReadOnly marks a tool with no effect: it runs at once, and undoing
	// it does nothing.
	ReadOnly bool
	// Compensate undoes the tool; every tool that runs at once and is not
	// read-only has one.
	Compensate *UpstreamUndo
}

// UpstreamUndo is the upstream tool that undoes another, and what it is
// given: the call's own arguments ("input") or its result, a JSON object
// ("result").
type UpstreamUndo struct {
	Tool      string
	Arguments string // "input" (the default) or "result"
}

type yamlUpstream struct {
	Name    string                      `yaml:"name"`
	URL     string                      `yaml:"url"`
	Command []string                    `yaml:"command"`
	Env     map[string]string           `yaml:"env"`
	Timeout string                      `yaml:"timeout"`
	Prefix  string                      `yaml:"prefix"`
	Default string                      `yaml:"default"`
	Tools   map[string]yamlUpstreamTool `yaml:"tools"`
}

type yamlUpstreamTool struct {
	Reversibility string `yaml:"reversibility"`
	ReadOnly      bool   `yaml:"readOnly"`
	Compensate    *struct {
		Tool      string `yaml:"tool"`
		Arguments string `yaml:"arguments"`
	} `yaml:"compensate"`
}

func checkUpstreams(ys []yamlUpstream) ([]Upstream, error) {
	var ups []Upstream
	seen := map[string]int{}
	for i, y := range ys {
		where := fmt.Sprintf("upstreams[%d]", i)
		if err := checkName(y.Name); err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
		where += fmt.Sprintf(" %q", y.Name)
		if j, dup := seen[y.Name]; dup {
			return nil, fmt.Errorf("%s: name is already used by upstreams[%d]", where, j)
		}
		seen[y.Name] = i
		u, err := checkUpstream(y)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
		ups = append(ups, u)
	}
	return ups, nil
}

func checkUpstream(y yamlUpstream) (Upstream, error) {
	u := Upstream{Name: y.Name, URL: y.URL, Command: y.Command, Env: y.Env, Timeout: defaultUpstreamTimeout,
		Prefix: y.Prefix, Default: engine.Irreversible, Tools: map[string]UpstreamTool{}}
	switch {
	case (y.URL == "") == (len(y.Command) == 0):
		return Upstream{}, errors.New("give either url (an MCP server's streamable HTTP endpoint) or command (a program spoken to over stdio), not both")
	case y.URL != "":
		if _, err := parseHTTPURL(y.URL); err != nil {
			return Upstream{}, fmt.Errorf("url: %w", err)
		}
	case y.Command[0] == "":
		return Upstream{}, errors.New("command: the program's name is empty")
	}
	for k := range y.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return Upstream{}, fmt.Errorf("env: %q is not a variable name", k)
		}
	}
	if y.Timeout != "" {
		d, err := time.ParseDuration(y.Timeout)
		if err != nil || d <= 0 || d > maxTimeout {
			return Upstream{}, fmt.Errorf("timeout: %q must be a duration like 30s, more than 0 and at most %s", y.Timeout, maxTimeout)
		}
		u.Timeout = d
	}
	if y.Prefix != "" {
		if err := checkName(y.Prefix); err != nil {
			return Upstream{}, fmt.Errorf("prefix: %w", err)
		}
	}
	if y.Default != "" {
		r, err := engine.ParseReversibility(y.Default)
		if err != nil {
			return Upstream{}, fmt.Errorf("default: %w", err)
		}
		u.Default = r
	}
	// Sorted, so that the same file always reports the same problem.
	for _, name := range slices.Sorted(maps.Keys(y.Tools)) {
		t, err := checkUpstreamTool(y.Tools[name])
		if err != nil {
			return Upstream{}, fmt.Errorf("tools[%q]: %w", name, err)
		}
		u.Tools[name] = t
	}
	return u, nil
}

func checkUpstreamTool(y yamlUpstreamTool) (UpstreamTool, error) {
	var t UpstreamTool
	if y.Reversibility != "" {
		r, err := engine.ParseReversibility(y.Reversibility)
		if err != nil {
			return t, err
		}
		t.Reversibility = r
	}
	t.ReadOnly = y.ReadOnly
	switch {
	case y.ReadOnly && y.Reversibility != "":
		return t, errors.New("a readOnly tool runs at once and has nothing to undo; remove its reversibility")
	case y.ReadOnly && y.Compensate != nil:
		return t, errors.New("a readOnly tool has nothing to undo; remove its compensate block")
	case t.Reversibility == engine.Irreversible && y.Compensate != nil:
		return t, errors.New("an IRREVERSIBLE tool has no undo, so it cannot have a compensate block; remove it or change the reversibility")
	case y.Compensate == nil:
		return t, nil
	}
	t.Compensate = &UpstreamUndo{Tool: y.Compensate.Tool, Arguments: or(y.Compensate.Arguments, "input")}
	if t.Compensate.Tool == "" {
		return t, errors.New("compensate.tool is missing: the upstream tool that undoes this one")
	}
	if a := t.Compensate.Arguments; a != "input" && a != "result" {
		return t, fmt.Errorf("compensate.arguments: %q is not input (the call's own arguments) or result (its result, a JSON object)", a)
	}
	return t, nil
}

// Resolve is how the upstream's tool name runs: its reversibility, and
// whether it is read-only (which runs at once with nothing to undo).
// Whether a tool that runs at once has its undo is the caller's to check,
// once the upstream's tools are known.
func (u Upstream) Resolve(name string) (engine.Reversibility, UpstreamTool) {
	t, ok := u.Tools[name]
	switch {
	case !ok:
		return u.Default, UpstreamTool{Reversibility: u.Default}
	case t.ReadOnly:
		return engine.Reversible, t
	case t.Reversibility == "":
		return u.Default, t
	}
	return t.Reversibility, t
}
