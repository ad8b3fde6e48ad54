package app_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/sagacity-go/sagacity/internal/engine"
	"github.com/sagacity-go/sagacity/internal/notify"
	"github.com/sagacity-go/sagacity/internal/testkit"
	"github.com/sagacity-go/sagacity/wire"
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
		"cannot be met", "The first document on this database: it took effect with no policy before it to approve it."} {
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

// TestTeamHealthNotified: once someone is known, a rule the people known
// cannot meet is told to an endpoint that hears everything, as
// policy.unmeetable with a link to the policy page, once.
func TestTeamHealthNotified(t *testing.T) {
	t.Parallel()
	secret, err := notify.ParseSecret("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	if err != nil {
		t.Fatal(err)
	}
	hook := newReceiver(t, func(h http.Header, b []byte) error { return notify.Verify(h, b, secret, nil, time.Now()) }, http.StatusNoContent)
	e := newAPI(t, testkit.SQLiteURL(t), envOptions{
		approvals: compile(t, engine.PolicySpec{Default: []engine.RuleSpec{{Name: "two-finance", Approvers: []string{"finance"}, Quorum: 2}}}),
		targets:   []notify.Target{{Name: "hook", Kind: "webhook", Channel: &notify.Webhook{URL: hook.URL, Secret: secret}}},
		endpoints: []engine.Endpoint{{Name: "hook"}},
	})
	p := newTab(t, e)
	p.signIn("alice@example.com") // an approver in no group: known, and not in finance
	eventually(t, "policy.unmeetable reaching the webhook", func() bool {
		for _, ev := range hook.events(t) {
			if ev.Type == wire.EventUnmeetable {
				return true
			}
		}
		return false
	}, func() string {
		return fmt.Sprintf("the webhook got %q; the server logged:\n%s", hook.got(), e.logs.String())
	})
	var told []wire.Event
	for _, ev := range hook.events(t) {
		if ev.Type == wire.EventUnmeetable {
			told = append(told, ev)
		}
	}
	if len(told) != 1 || told[0].Rule != "two-finance" || !strings.Contains(told[0].Message, "cannot be met") ||
		!strings.HasSuffix(told[0].Link, "/policy") {
		t.Errorf("policy.unmeetable as told = %+v; want rule two-finance once, cannot be met, linking the policy page", told)
	}
}

// TestPolicyProposalAPI: POST /sagacity/policies proposes a policy under
// one whose change needs an approver: listed as a proposal, not in force
// until another person approves it; a document that does not compile is
// 400, and the same one proposed again answers the pending proposal.
func TestPolicyProposalAPI(t *testing.T) {
	t.Parallel()
	gated := compile(t, engine.PolicySpec{Tools: map[string][]engine.RuleSpec{"sendWireTransfer": {{Name: "two", Quorum: 2}}},
		PolicyChange: []engine.RuleSpec{{Name: "change"}}})
	lax := compile(t, engine.PolicySpec{Tools: map[string][]engine.RuleSpec{"sendWireTransfer": {{Name: "one"}}}})
	e := newAPI(t, testkit.SQLiteURL(t), envOptions{approvals: gated})
	want(t, "a document that does not compile", e.post("/sagacity/policies", `{"document":{"default":[{"quorum":99}]}}`), 400)
	r := e.post("/sagacity/policies", `{"document":`+lax.Text+`}`)
	want(t, "the proposal", r, 201)
	var p wire.PolicyProposal
	if err := json.Unmarshal([]byte(r.body), &p); err != nil || p.SHA256 != lax.Hash || p.Text != lax.Text {
		t.Fatalf("the proposal = %s, %v; want the lax policy's document", r.body, err)
	}
	again := e.post("/sagacity/policies", `{"document":`+lax.Text+`}`)
	if want(t, "the same proposal again", again, 201); !strings.Contains(again.body, fmt.Sprintf(`"request":%d`, p.Request)) {
		t.Errorf("the same proposal again = %s; want request %d", again.body, p.Request)
	}
	var ps wire.Policies
	if err := json.Unmarshal([]byte(e.get("/sagacity/policies").body), &ps); err != nil || ps.InForce != gated.Hash || len(ps.Proposals) != 1 {
		t.Fatalf("GET /sagacity/policies = %+v, %v; want the gated policy in force, one proposal", ps, err)
	}
	want(t, "the approval of the proposal", e.post(fmt.Sprintf("/sagacity/approve/%s/%d", engine.PolicySaga, p.Request),
		`{"approver":"manager@company.com"}`), 200)
	if err := json.Unmarshal([]byte(e.get("/sagacity/policies").body), &ps); err != nil || ps.InForce != lax.Hash || len(ps.Proposals) != 0 {
		t.Errorf("GET /sagacity/policies after the approval = %+v, %v; want the lax policy in force", ps, err)
	}
	page := e.do("GET", "/policy", "", "", "Cookie", e.session(t, "auditor@example.com").String()).body
	if !strings.Contains(page, "Approved under the policyChange rules of the policy before it.") ||
		!strings.Contains(page, fmt.Sprintf(`href="/request?saga=sagacity%%3Apolicies&amp;seq=%d"`, p.Request)) {
		t.Errorf("the policy page after the approval does not say the lax policy was approved, linking its request:\n%s", page)
	}
}
