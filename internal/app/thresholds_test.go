package app_test

import (
	"strings"
	"testing"
	"time"

	"github.com/sagacity-go/sagacity/internal/engine"
	"github.com/sagacity-go/sagacity/internal/testkit"
)

// TestConsoleThresholds: a request whose rule asks one from approver and
// one from auditor shows each requirement, who met it and what it still
// waits for, as the votes come; the second reviewer's vote meets the
// requirement left, and the policy page says who must approve in words.
// Every page passes axe.
func TestConsoleThresholds(t *testing.T) {
	t.Parallel()
	policy := compile(t, engine.PolicySpec{Tools: map[string][]engine.RuleSpec{"sendWireTransfer": {
		{Name: "both", Thresholds: [][]engine.Requirement{{{From: "approver", Count: 1}, {From: "auditor", Count: 1}}}},
	}}})
	e := newAPI(t, testkit.SQLiteURL(t), envOptions{approvals: policy})
	e.seedScenario("q") // the wire at 3
	alice := newTab(t, e)
	alice.signIn("alice@example.com")
	bob := alice.another()
	bob.signIn("bob@example.com")
	const page = "/request?saga=q&seq=3"
	alice.open(page)
	if got := alice.text("#ruling"); !strings.Contains(got, "Every requirement below must be met, each by people of its own") ||
		!strings.Contains(got, "approver: 0 of 1 waiting for 1 more") || !strings.Contains(got, "auditor: 0 of 1 waiting for 1 more") {
		t.Errorf("the rule's section = %q; want both requirements, neither met", got)
	}
	alice.accessible("a request under thresholds")
	alice.click(`#actions button.approve`)
	alice.waitText("#actions", "Approve sendWireTransfer in saga q, seq 3?", 10*time.Second)
	alice.click(`#actions button[autofocus]`)
	alice.waitText("#status", "1 approval (alice@example.com): approver 1 of 1 (alice@example.com), auditor 0 of 1; waiting for 1 more from auditor", 10*time.Second)
	alice.open(page)
	if got := alice.text("#ruling"); !strings.Contains(got, "approver: 1 of 1 (alice@example.com) ✓ met") {
		t.Errorf("the rule's section after alice = %q; want approver met by her", got)
	}
	if got := alice.text("#status"); !strings.Contains(got, "Anyone in auditor may vote") {
		t.Errorf("the status = %q; want it to say who may still meet the rule", got)
	}
	alice.accessible("a request with one requirement of two met")
	bob.open(page)
	bob.click(`#actions button.approve`)
	bob.waitText("#actions", "Approve sendWireTransfer in saga q, seq 3?", 10*time.Second)
	bob.click(`#actions button[autofocus]`)
	bob.waitText("#status", "Approved by alice@example.com, bob@example.com, awaiting execution", 10*time.Second)
	bob.open(page)
	if got := bob.text("#ruling"); !strings.Contains(got, "auditor: 1 of 1 (bob@example.com) ✓ met") {
		t.Errorf("the rule's section after bob = %q; want auditor met by him", got)
	}
	bob.open("/policy")
	if got := bob.text("main"); !strings.Contains(got, "1 from approver and 1 from auditor") {
		t.Errorf("the policy page = %q; want the thresholds in words", got)
	}
	bob.accessible("the policy page with thresholds")
	alice.noErrors()
	bob.noErrors()
}
