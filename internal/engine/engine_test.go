package engine

import (
	"strings"
	"testing"
)

// TestNewRefuses: the names the journal's decisions and the MCP gateway
// use are no tool's, nor a name twice, nor a tool without an executor; a
// policy that counts only passkey votes needs a server with passkeys.
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
	signed, err := CompilePolicy(PolicySpec{Tools: map[string][]RuleSpec{"a": {{Name: "signed", Passkey: PasskeyRequired}}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name  string
		tools []Tool
		want  string
		opts  []Option
	}{
		{"the gate's name", []Tool{{Name: GateTool, Executor: ok}}, `tool name "approval-gate" is reserved`, nil},
		{"the gateway's resume", []Tool{{Name: "sagacity_resume", Reversibility: Irreversible, Executor: ok}}, `tool name "sagacity_resume" is reserved`, nil},
		{"any sagacity_ name", []Tool{{Name: "sagacity_pay", Executor: ok}}, `tool name "sagacity_pay" is reserved`, nil},
		{"twice", []Tool{{Name: "a", Executor: ok}, {Name: "a", Executor: ok}}, `tool "a" is declared twice`, nil},
		{"no executor", []Tool{{Name: "a"}}, `tool "a" has no executor`, nil},
		{"passkeys without passkeys", []Tool{{Name: "a", Reversibility: Irreversible, Executor: ok}},
			"the approval policy's tool a, rule signed: passkey can never be met here: this server has no passkeys", []Option{WithApprovals(signed)}},
	} {
		_, err := New(nil, tt.tools, append([]Option{WithKeys(keys)}, tt.opts...)...)
		if !IsKind(err, Invalid) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: New = %v, want Invalid naming %q", tt.name, err, tt.want)
		}
	}
}
