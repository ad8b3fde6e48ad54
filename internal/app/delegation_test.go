package app_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/sagacity-go/sagacity/internal/auth"
	"github.com/sagacity-go/sagacity/internal/engine"
	"github.com/sagacity-go/sagacity/internal/testkit"
	"github.com/sagacity-go/sagacity/wire"
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

// TestDelegationAPI: over the JSON API, with tokens, alice of finance
// delegates rule pair to carol (in no group of it); the list shows it;
// carol's approval for alice counts and says so; a second one for her,
// and an agent's delegation or list, are refused; carol revokes it, once.
// Every answer holds to the OpenAPI document.
func TestDelegationAPI(t *testing.T) {
	t.Parallel()
	policy := compile(t, engine.PolicySpec{Default: engine.DefaultPolicy.Default, Tools: map[string][]engine.RuleSpec{"sendWireTransfer": {
		{Name: "pair", Approvers: []string{"finance"}, Quorum: 2},
	}}})
	agentT, agentTok := token("agent", engine.RoleAgent)
	aliceT, aliceTok := token("alice", engine.RoleApprover)
	carolT, carolTok := token("carol", engine.RoleApprover)
	aliceT.Groups = []string{"finance"}
	e := newAPI(t, testkit.SQLiteURL(t), envOptions{tokens: []auth.Token{agentT, aliceT, carolT}, approvals: policy})
	js := "application/json"
	until := time.Now().UTC().Add(24 * time.Hour).Format(time.RFC3339)
	want(t, "a delegation of a rule the policy lacks", e.do("POST", "/sagacity/delegations", js,
		`{"to":"token:carol","rules":["huge"],"until":"`+until+`"}`, bearer(aliceTok)...), 400)
	want(t, "an agent's delegation", e.do("POST", "/sagacity/delegations", js,
		`{"to":"token:carol","rules":["pair"],"until":"`+until+`"}`, bearer(agentTok)...), 403)
	r := e.do("POST", "/sagacity/delegations", js, `{"to":"token:carol","rules":["pair"],"until":"`+until+`","reason":"away"}`, bearer(aliceTok)...)
	want(t, "alice's delegation to carol", r, 201)
	var d wire.Delegation
	if err := json.Unmarshal([]byte(r.body), &d); err != nil || d.Seq != 1 || d.From != "token:alice" || !slices.Equal(d.Groups, []string{"finance"}) {
		t.Fatalf("POST /sagacity/delegations = %s, %v; want seq 1 from token:alice, lending finance", r.body, err)
	}
	want(t, "a list without a token", e.get("/sagacity/delegations"), 401)
	want(t, "an agent's list", e.do("GET", "/sagacity/delegations", "", "", bearer(agentTok)...), 403)
	if r := e.do("GET", "/sagacity/delegations", "", "", bearer(carolTok)...); r.code != 200 || strings.Count(r.body, `"seq":1`) != 1 {
		t.Errorf("GET /sagacity/delegations = %d %s; want the one delegation", r.code, r.body)
	}

	want(t, "agent reserves", e.do("POST", "/sagacity/sagas/s/calls", js, `{"tool":"reserveInventory","input":"{}"}`, bearer(agentTok)...), 200)
	want(t, "agent gates", e.do("POST", "/sagacity/sagas/s/calls", js, callJSON("sendWireTransfer", transfer), bearer(agentTok)...), 202)
	want(t, "carol's own approval", e.do("POST", "/sagacity/approve/s/3", js, `{}`, bearer(carolTok)...), 403)
	r = e.do("POST", "/sagacity/approve/s/3", js, `{"onBehalfOf":"token:alice"}`, bearer(carolTok)...)
	if r.code != 200 || !strings.Contains(r.body, `"onBehalfOf":"token:alice"`) || !strings.Contains(r.body, `"votes":1`) {
		t.Errorf("carol's approval for alice = %d %s; want vote 1, on behalf of alice", r.code, r.body)
	}
	want(t, "alice's own approval after it", e.do("POST", "/sagacity/approve/s/3", js, `{}`, bearer(aliceTok)...), 409)
	want(t, "revoking by an agent", e.do("POST", "/sagacity/delegations/1/revoke", js, ``, bearer(agentTok)...), 403)
	if r := e.do("POST", "/sagacity/delegations/1/revoke", js, ``, bearer(carolTok)...); r.code != 200 || !strings.Contains(r.body, `"revokedBy":"token:carol"`) {
		t.Errorf("carol revoking = %d %s; want it revoked by her", r.code, r.body)
	}
	want(t, "revoking again", e.do("POST", "/sagacity/delegations/1/revoke", js, ``, bearer(aliceTok)...), 409)
	want(t, "revoking none", e.do("POST", "/sagacity/delegations/9/revoke", js, ``, bearer(aliceTok)...), 404)
}
