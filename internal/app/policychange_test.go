package app_test

import (
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/sagacity-go/sagacity/internal/engine"
	"github.com/sagacity-go/sagacity/internal/testkit"
)

// TestConsolePolicyChange: a server restarted with a laxer policy than
// one whose change needs treasury says on the policy page that the new
// one waits, and who can approve it (team health: nobody known is in
// treasury); its request page shows the rule and the diff against the
// policy in force. Every page passes axe.
func TestConsolePolicyChange(t *testing.T) {
	t.Parallel()
	url := testkit.SQLiteURL(t)
	newAPI(t, url, envOptions{approvals: compile(t, engine.PolicySpec{
		Tools:        map[string][]engine.RuleSpec{"sendWireTransfer": {{Name: "two", Quorum: 2}}},
		PolicyChange: []engine.RuleSpec{{Name: "change", Approvers: []string{"treasury"}}},
	})})
	lax := compile(t, engine.PolicySpec{Tools: map[string][]engine.RuleSpec{"sendWireTransfer": {{Name: "one"}}}})
	e := newAPI(t, url, envOptions{approvals: lax})
	p := newTab(t, e)
	p.signIn("alice@example.com")
	p.open("/policy")
	main := p.text("main")
	for _, want := range []string{"A new policy, " + lax.Hash[:12], "waits for approval under the policyChange rules of the one in force",
		"cannot be met"} {
		if !strings.Contains(main, want) {
			t.Errorf("the policy page = %q; want %q", main, want)
		}
	}
	p.accessible("the policy page with a proposal waiting")
	p.do("opening the proposal", chromedp.Click(chromedp.CSS(`main .flash.warn a`)), chromedp.WaitVisible(chromedp.ID("ruling")))
	p.ready()
	if got := p.text("#ruling"); !strings.Contains(got, "Decided by rule change") {
		t.Errorf("the proposal's rule = %q; want change", got)
	}
	if got := p.text("section.diff"); !strings.Contains(got, "approval-policy") || !strings.Contains(got, `"two"`) || !strings.Contains(got, `"one"`) {
		t.Errorf("the proposal's diff = %q; want the rule two of the policy in force against one", got)
	}
	p.accessible("a proposed policy's request page")
	p.noErrors()
}
