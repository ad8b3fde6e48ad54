package engine

import (
	"errors"
	"strings"
	"testing"
)

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
	e := &Engine{configured: a}
	e.setPolicy(a)
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
	// Bytes that large's condition cannot evaluate get no rule: the
	// laxer one pinned to them decides nothing.
	if _, err := e.ruleIn(request(`{"amount":"lots"}`, Lines{{KeyRule, "small"}, {KeyPolicy, a.Hash}})); !IsKind(err, Conflict) ||
		!strings.Contains(err.Error(), `gives its bytes no rule (rule "large"'s condition cannot be evaluated for them)`) {
		t.Errorf("ruleIn(a laxer rule than a failing condition gives) = %v; want Conflict naming large", err)
	}
	// Another policy's rules are read before anything is decided.
	if _, err := e.ruleIn(request(large, Lines{{KeyRule, "large"}, {KeyPolicy, PayloadHash("another")}})); !errors.As(err, new(*unloaded)) {
		t.Errorf("ruleIn(another policy) = %v; want it read first", err)
	}
	if r, err := e.ruleIn(request(large, nil)); err != nil || r.Name != "default" || r.Approvers[0] != "approver" {
		t.Errorf("ruleOf(a request from before policies) = %+v, %v; want one approver", r, err)
	}
}
