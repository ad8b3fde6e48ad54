package app_test

import (
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/sagacity-go/sagacity/internal/engine"
	"github.com/sagacity-go/sagacity/internal/testkit"
)

// TestConsoleBreakGlass: a person of the policy's breakGlass (auditors,
// here) sees Break glass on a pending request, types why, is told what it
// does (executed at once without its quorum, told to every endpoint,
// shown everywhere until ratified, flagged otherwise), and confirms: the
// request is executed, its status says by whom and that it awaits
// ratification, and every page shows the banner. The two approvals of
// its rule ratify it, never the one who broke the glass; then the banner
// is gone. Every page passes axe.
func TestConsoleBreakGlass(t *testing.T) {
	t.Parallel()
	policy := compile(t, engine.PolicySpec{Tools: map[string][]engine.RuleSpec{"sendWireTransfer": {
		{Name: "two", Approvers: []string{"approver"}, Quorum: 2},
	}}, BreakGlass: &engine.BreakGlassSpec{Approvers: []string{"auditor"}, RatifyWithin: engine.Duration(time.Hour)}})
	e := newAPI(t, testkit.SQLiteURL(t), envOptions{approvals: policy})
	e.seedScenario("q") // the wire at 3
	alice := newTab(t, e)
	alice.signIn("alice@example.com")
	const page = "/request?saga=q&seq=3"
	alice.open(page)
	alice.accessible("a request she may break the glass on")
	alice.do("typing why", chromedp.SendKeys(chromedp.ID("glass-reason"), "payroll is due"))
	alice.click(`#actions form.break-glass button`)
	alice.waitText("#actions", "Break the glass: execute, without its quorum, sendWireTransfer in saga q, seq 3?", 10*time.Second)
	if got := alice.text("#actions"); !strings.Contains(got, "without its quorum") || !strings.Contains(got, "told to every notification endpoint") ||
		!strings.Contains(got, "within 1h0m0s") {
		t.Errorf("the confirmation = %q; want it to name the consequences", got)
	}
	alice.accessible("the break-glass confirmation")
	alice.click(`#actions button[autofocus]`)
	alice.waitText("#status", "by break-glass (alice@example.com), without its quorum; to be ratified by its rule's quorum", 10*time.Second)
	alice.open("/")
	if got := alice.text("section.glass"); !strings.Contains(got, "sendWireTransfer in saga q, seq 3") || !strings.Contains(got, "by alice@example.com") ||
		!strings.Contains(got, "payroll is due") {
		t.Errorf("the banner = %q; want the unratified execution, by alice, with her reason", got)
	}
	alice.accessible("a page with the break-glass banner")
	alice.open(page)
	if got := alice.text("#actions"); strings.Contains(got, "Ratify") {
		t.Errorf("alice's actions = %q; want no Ratify for who broke the glass", got)
	}
	for i, tt := range []struct{ name, then string }{
		{"bob@example.com", "1 of 2 approvals (bob@example.com)"}, {"carol@example.com", "ratified by bob@example.com, carol@example.com"},
	} {
		p := alice.another()
		p.signIn(tt.name)
		p.open(page)
		if i == 0 {
			p.accessible("a break-glass execution to ratify")
		}
		p.do("typing a reason", chromedp.SendKeys(chromedp.ID("ratify-reason"), "fine"))
		p.click(`#actions form.ratify button`)
		p.waitText("#actions", "Ratify the break-glass execution of sendWireTransfer in saga q, seq 3?", 10*time.Second)
		p.click(`#actions button[autofocus]`)
		p.waitText("#status", tt.then, 10*time.Second)
		p.noErrors()
	}
	alice.open(page)
	if got := alice.text("#status"); !strings.Contains(got, "ratified by bob@example.com, carol@example.com") {
		t.Errorf("the status once ratified = %q; want it ratified by bob and carol", got)
	}
	alice.open("/")
	if alice.eval(`document.querySelector("section.glass") !== null`) {
		t.Errorf("the banner once ratified is still shown")
	}
	alice.noErrors()
}
