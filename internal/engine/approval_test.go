package engine

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// wirePolicy tells large or external transfers from small ones, and
// refuses transfers whose amount it cannot read; tools without rules of
// their own go by the default.
var wirePolicy = PolicySpec{
	Default: []RuleSpec{{Approvers: []string{"approver"}}},
	Tools: map[string][]RuleSpec{
		"sendWireTransfer": {
			{Name: "large", When: `double(payload.amount) >= 10000.0 || payload.to.startsWith("ext-")`},
			{Name: "small", When: `double(payload.amount) < 10000.0`},
		},
	},
}

func TestPolicyMatch(t *testing.T) {
	a, err := CompilePolicy(wirePolicy)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		tool, input string
		want        string // the rule's name; "" for none
	}{
		{"sendWireTransfer", `{"amount":"250000","to":"bob"}`, "large"},
		{"sendWireTransfer", `{"amount":25000,"to":"bob"}`, "large"},
		{"sendWireTransfer", `{"amount":"100","to":"ext-bank"}`, "large"},
		{"sendWireTransfer", `{"amount":"100","to":"bob"}`, "small"},
		{"sendWireTransfer", `{"amount":"9999.99","to":"bob"}`, "small"},
		// No amount: "large" fails to evaluate (no match), so does "small".
		{"sendWireTransfer", `{"to":"bob"}`, ""},
		{"sendWireTransfer", `{"amount":"lots","to":"bob"}`, ""},
		// Not a JSON object: only rules without a condition match.
		{"sendWireTransfer", `"250000 to bob"`, ""},
		{"sendWireTransfer", `[1,2]`, ""},
		{"sendWireTransfer", `not json`, ""},
		{"deleteAccount", `not json`, "default#1"},
		{"deleteAccount", `{"id":1}`, "default#1"},
	} {
		r, ok := a.Match(tt.tool, "s", "agent", tt.input)
		if got := map[bool]string{true: r.Name}[ok]; got != tt.want {
			t.Errorf("Match(%s, %s) = %q; want %q", tt.tool, tt.input, got, tt.want)
		}
	}
	if r, _ := a.Match("deleteAccount", "s", "agent", `{}`); r.Approvers[0] != "approver" {
		t.Errorf("default = %+v; want one approver", r)
	}
}

// The condition sees the tool, the saga and the requester too.
func TestPolicyVariables(t *testing.T) {
	a, err := CompilePolicy(PolicySpec{Default: []RuleSpec{
		{Name: "prod", When: `saga.startsWith("prod-") && requester != "token:ci" && tool == "drop"`},
		{Name: "rest"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	for saga, want := range map[string]string{"prod-1": "prod", "test-1": "rest"} {
		if r, ok := a.Match("drop", saga, "oidc#alice", `{}`); !ok || r.Name != want {
			t.Errorf("saga %s: rule %q; want %q", saga, r.Name, want)
		}
	}
	if r, _ := a.Match("drop", "prod-1", "token:ci", `{}`); r.Name != "rest" {
		t.Errorf("requester token:ci: rule %q; want rest", r.Name)
	}
}

// A policy that does not compile is refused, naming the tool, the rule
// and the column.
func TestPolicyRefused(t *testing.T) {
	for _, tt := range []struct {
		spec PolicySpec
		want string
	}{
		{PolicySpec{Tools: map[string][]RuleSpec{"wire": {{When: `payload.amount >`}}}}, "tool wire, rule 1 (wire#1): condition, column"},
		{PolicySpec{Tools: map[string][]RuleSpec{"wire": {{}, {Name: "x", When: `amount > 5`}}}}, "tool wire, rule 2 (x): condition, column 1: undeclared reference to 'amount'"},
		{PolicySpec{Default: []RuleSpec{{When: `payload.amount`}}}, "default, rule 1 (default#1): condition is a dyn, not a boolean"},
		{PolicySpec{Default: []RuleSpec{{When: `"yes"`}}}, "condition is a string, not a boolean"},
		{PolicySpec{Default: []RuleSpec{{Quorum: -1}}}, "quorum must be from 1 to 50"},
		{PolicySpec{Default: []RuleSpec{{Quorum: 51}}}, "quorum must be from 1 to 50"},
		{PolicySpec{Default: []RuleSpec{{Expires: Duration(30 * time.Second)}}}, "expires must be from 1m0s to 8784h0m0s (got 30s)"},
		{PolicySpec{Default: []RuleSpec{{Grant: Duration(-time.Hour)}}}, "grant must be from 1m0s"},
		{PolicySpec{Default: []RuleSpec{{StepUp: Duration(13 * time.Hour)}}}, "stepUp must be from 1m0s to 12h0m0s (got 13h0m0s)"},
		{PolicySpec{Default: []RuleSpec{{Reason: "optional"}}}, `reason must be "required" or absent (got "optional")`},
		{PolicySpec{Default: []RuleSpec{{Approvers: []string{"finance\nleads"}}}}, "approvers contains control characters"},
		{PolicySpec{Default: []RuleSpec{{Name: "a"}, {Name: "a"}}}, "another rule of default has that name"},
		{PolicySpec{Default: []RuleSpec{{Name: "two words"}}}, "a rule's name must be printable, without spaces"},
	} {
		_, err := CompilePolicy(tt.spec)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("CompilePolicy(%+v) = %v; want an error containing %q", tt.spec, err, tt.want)
		}
	}
}

// The hash is of the canonical document: the same rules give the same
// hash however they are written, any change another.
func TestPolicyHash(t *testing.T) {
	a, _ := CompilePolicy(PolicySpec{Default: []RuleSpec{{}}})
	b, _ := CompilePolicy(PolicySpec{Default: []RuleSpec{{Name: "default#1", Approvers: []string{"approver"}, Quorum: 1}}})
	c, _ := CompilePolicy(PolicySpec{Default: []RuleSpec{{When: "true"}}})
	if a.Hash != b.Hash || a.Text != b.Text {
		t.Errorf("the same rules hash %s and %s (%s, %s)", a.Hash, b.Hash, a.Text, b.Text)
	}
	if a.Hash == c.Hash {
		t.Errorf("a rule with a condition and one without hash the same")
	}
	if d, _ := CompilePolicy(DefaultPolicy); d.Text != `{"default":[{"name":"default","approvers":["approver"],"quorum":1}]}` {
		t.Errorf("the default policy's text = %s", d.Text)
	}
}

// A rule's approvers are roles or groups; holding either is enough.
func TestRuleEligible(t *testing.T) {
	r := Rule{Name: "large", Approvers: []string{"finance-leads", "auditor"}}
	for _, tt := range []struct {
		p    Principal
		want bool
	}{
		{Principal{ID: "a", Roles: []Role{RoleApprover}, Groups: []string{"finance-leads"}}, true},
		{Principal{ID: "b", Roles: []Role{RoleApprover, RoleAuditor}}, true},
		{Principal{ID: "c", Roles: []Role{RoleApprover}, Groups: []string{"finance"}}, false},
		{Principal{ID: "d", Roles: []Role{RoleApprover}, Groups: []string{"Finance-Leads"}}, false},
	} {
		if got := r.Eligible(tt.p); got != tt.want {
			t.Errorf("Eligible(%+v) = %v; want %v", tt.p, got, tt.want)
		}
	}
}

// A request is decided by the rule its policy gives its bytes: an entry
// that records another rule (an insider's row, to pass for a laxer one)
// or another policy decides nothing; one from before policies has one
// approver.
func TestRuleOf(t *testing.T) {
	a, err := CompilePolicy(PolicySpec{Tools: map[string][]RuleSpec{"wire": {
		{Name: "large", When: `double(payload.amount) > 1000.0`, Approvers: []string{"finance-leads"}},
		{Name: "small"},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	e := &Engine{approvals: a}
	e.policies.put(a)
	request := func(input string, lines Lines) Entry {
		return Entry{SagaID: "s", Seq: 3, ToolName: "wire", Phase: PhaseAwaitingApproval, Input: input,
			Payload: Lines{{KeyRequester, "agent"}}.String() + "\n" + lines.String()}
	}
	large := `{"amount":"5000"}`
	if r, err := e.ruleIn(request(large, Lines{{KeyRule, "large"}, {KeyPolicy, a.Hash}})); err != nil || r.Name != "large" {
		t.Errorf("ruleOf(the rule its policy gives) = %+v, %v; want large", r, err)
	}
	for what, lines := range map[string]Lines{
		"a laxer rule than its bytes get": {{KeyRule, "small"}, {KeyPolicy, a.Hash}},
		"no rule":                         {{KeyPolicy, a.Hash}},
	} {
		if _, err := e.ruleIn(request(large, lines)); !IsKind(err, Conflict) {
			t.Errorf("ruleIn(%s) = %v; want Conflict", what, err)
		}
	}
	// Another policy's rules are read before anything is decided.
	if _, err := e.ruleIn(request(large, Lines{{KeyRule, "large"}, {KeyPolicy, PayloadHash("another")}})); !errors.As(err, new(*unloaded)) {
		t.Errorf("ruleIn(another policy) = %v; want it read first", err)
	}
	if r, err := e.ruleIn(request(large, nil)); err != nil || r.Name != "default" || r.Approvers[0] != "approver" {
		t.Errorf("ruleOf(a request from before policies) = %+v, %v; want one approver", r, err)
	}
}
