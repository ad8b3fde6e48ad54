package app_test

import (
	"strings"
	"testing"
	"time"

	"github.com/sagacity-go/sagacity/internal/engine"
	"github.com/sagacity-go/sagacity/internal/testkit"
)

// TestConsoleContextAndWait: a request under a policy whose conditions
// read who asks says on its page what they saw, as journaled; approved
// under a wait timer, it says when it may run, and offers no Execute
// until then. Every page passes axe.
func TestConsoleContextAndWait(t *testing.T) {
	t.Parallel()
	policy := compile(t, engine.PolicySpec{Tools: map[string][]engine.RuleSpec{"sendWireTransfer": {
		{Name: "finance", When: `sameGroup(who, "finance")`},
		{Name: "cooling", NotBefore: engine.Duration(time.Hour)},
	}}})
	e := newAPI(t, testkit.SQLiteURL(t), envOptions{approvals: policy})
	e.seedScenario("q") // the wire at 3, asked by an agent in no group
	p := newTab(t, e)
	p.signIn("alice@example.com")
	const page = "/request?saga=q&seq=3"
	p.open(page)
	if got := p.text("#ruling"); !strings.Contains(got, "Decided by rule cooling") {
		t.Errorf("the rule = %q; want cooling, the requester being in no group", got)
	}
	if got := p.text("#saw"); !strings.Contains(got, "The rule's conditions saw who asked and when") || !strings.Contains(got, "groups none") {
		t.Errorf("what the conditions saw = %q; want the requester in no group", got)
	}
	p.accessible("a request whose rule read who asked")
	p.click(`#actions button.approve`)
	p.waitText("#actions", "Approve sendWireTransfer in saga q, seq 3?", 10*time.Second)
	p.click(`#actions button[autofocus]`)
	p.waitText("#status", "may run in 59m", 10*time.Second)
	p.open(page)
	if p.eval(`document.querySelector('#actions input[name="decision"][value="execute"]') !== null`) {
		t.Errorf("Execute is offered while the wait timer runs: %q", p.text("#actions"))
	}
	p.accessible("an approved request waiting for its timer")
	p.noErrors()
}
