package engine

import (
	"strings"
	"testing"
)

// TestNewRefuses: the names the journal's decisions and the MCP gateway
// use are no tool's, nor a name twice, nor a tool without an executor.
func TestNewRefuses(t *testing.T) {
	k, _, err := GenerateKeys("t")
	if err != nil {
		t.Fatal(err)
	}
	keys, err := NewKeys(k)
	if err != nil {
		t.Fatal(err)
	}
	ok := Funcs{Exec: nil}
	for _, tt := range []struct {
		name  string
		tools []Tool
		want  string
	}{
		{"the gate's name", []Tool{{Name: GateTool, Executor: ok}}, `tool name "approval-gate" is reserved`},
		{"the gateway's resume", []Tool{{Name: "sagacity_resume", Reversibility: Irreversible, Executor: ok}}, `tool name "sagacity_resume" is reserved`},
		{"any sagacity_ name", []Tool{{Name: "sagacity_pay", Executor: ok}}, `tool name "sagacity_pay" is reserved`},
		{"twice", []Tool{{Name: "a", Executor: ok}, {Name: "a", Executor: ok}}, `tool "a" is declared twice`},
		{"no executor", []Tool{{Name: "a"}}, `tool "a" has no executor`},
	} {
		_, err := New(nil, tt.tools, WithKeys(keys))
		if !IsKind(err, Invalid) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: New = %v, want Invalid naming %q", tt.name, err, tt.want)
		}
	}
}
