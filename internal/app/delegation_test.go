package app_test

import (
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/sagacity-go/sagacity/internal/engine"
	"github.com/sagacity-go/sagacity/internal/testkit"
)

// TestConsoleDelegation: an approver delegates a rule to a colleague on
// the delegations page; the colleague's vote for them (over the API)
// shows on the request page as theirs for the delegator; the delegator
// revokes it, and the page says so. Every page passes axe and fits a
// 400 px screen.
func TestConsoleDelegation(t *testing.T) {
	t.Parallel()
	policy := compile(t, engine.PolicySpec{Tools: map[string][]engine.RuleSpec{"sendWireTransfer": {
		{Name: "pair", Approvers: []string{"approver"}, Quorum: 2},
	}}})
	e := newAPI(t, testkit.SQLiteURL(t), envOptions{approvals: policy})
	e.seedScenario("q") // the wire at 3
	alice := newTab(t, e)
	alice.signIn("alice@example.com")
	alice.open("/delegations")
	if got := alice.text("main"); !strings.Contains(got, "Nobody has delegated.") {
		t.Errorf("the delegations page before any = %q; want it to say nobody has", got)
	}
	alice.do("delegating rule pair to carol", chromedp.SendKeys(chromedp.ID("to"), "carol@example.com"),
		chromedp.Click(chromedp.CSS(`#delegate input[name="rule"][value="pair"]`)),
		chromedp.SendKeys(chromedp.ID("delegation-reason"), "on holiday"),
		chromedp.Click(chromedp.CSS(`#delegate button[type="submit"]`)))
	alice.waitText("#delegations", "carol@example.com for alice@example.com", 10*time.Second)
	if got := alice.text("#delegations tbody tr"); !strings.Contains(got, "pair") || !strings.Contains(got, "standing") ||
		!strings.Contains(got, "on holiday") {
		t.Errorf("the delegation's row = %q; want rule pair, standing, with its reason", got)
	}
	alice.accessible("the delegations page with a delegation")

	want(t, "carol's approval for alice", e.post("/sagacity/approve/q/3", `{"approver":"carol@example.com","onBehalfOf":"alice@example.com"}`), 200)
	alice.open("/request?saga=q&seq=3")
	if got := alice.text("#status"); strings.Count(got, "carol@example.com for alice@example.com") < 2 {
		t.Errorf("the request's status = %q; want carol's vote said to be for alice, in its progress and its decisions", got)
	}

	alice.open("/delegations")
	alice.click(`#delegations button[aria-label="Revoke delegation 1"]`)
	alice.waitText("#delegations", "revoked", 10*time.Second)
	if got := alice.text("#delegations tbody tr"); !strings.Contains(got, "by alice@example.com") {
		t.Errorf("the revoked delegation's row = %q; want it revoked by alice", got)
	}
	alice.accessible("the delegations page with a revoked delegation")
	alice.do("resizing", chromedp.EmulateViewport(400, 900))
	alice.open("/delegations")
	if !alice.eval(`document.documentElement.scrollWidth <= window.innerWidth + 1`) {
		t.Errorf("/delegations is wider than a 400 px screen")
	}
	alice.noErrors()
}
