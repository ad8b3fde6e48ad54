package app_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/sagacity-go/sagacity/internal/auth"
	"github.com/sagacity-go/sagacity/internal/auth/authtest"
	"github.com/sagacity-go/sagacity/internal/engine"
	"github.com/sagacity-go/sagacity/internal/mcpgw"
	"github.com/sagacity-go/sagacity/internal/testkit"
)

// compile compiles an approval policy for a test.
func compile(t testing.TB, spec engine.PolicySpec) *engine.Approvals {
	t.Helper()
	a, err := engine.CompilePolicy(spec)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// TestConsoleVotes: two reviewers each approve a request whose rule asks
// for two; each page shows the other's vote as it comes, without a
// reload; the first may not approve twice and may withdraw; a reviewer
// sends another request back, its agent reads what to change, re-plans,
// and the new request shows its diff against the one sent back. The
// policy page lists the rules; every page passes axe.
func TestConsoleVotes(t *testing.T) {
	t.Parallel()
	policy := compile(t, engine.PolicySpec{Tools: map[string][]engine.RuleSpec{"sendWireTransfer": {
		{Name: "two", Quorum: 2, Reason: engine.ReasonRequired, Expires: engine.Duration(24 * time.Hour)},
	}}})
	e := newAPI(t, testkit.SQLiteURL(t), envOptions{approvals: policy})
	e.seedScenario("q") // reserveInventory 1-2, the wire at 3
	alice := newTab(t, e)
	alice.signIn("alice@example.com")
	bob := alice.another()
	bob.signIn("bob@example.com")
	const page = "/request?saga=q&seq=3"
	alice.open(page)
	bob.open(page)
	for _, p := range []*tab{alice, bob} {
		if got := p.text("#ruling"); !strings.Contains(got, "Decided by rule two") || !strings.Contains(got, "2 distinct people of approver must approve") ||
			!strings.Contains(got, "Every vote must say why") {
			t.Errorf("the rule's section = %q; want rule two, a quorum of 2 and reasons required", got)
		}
		if got := p.text("#status"); !strings.Contains(got, "0 of 2 approvals") || !strings.Contains(got, "Expires in 23h59m") {
			t.Errorf("the status = %q; want no vote yet and the time left", got)
		}
	}

	// Without the reason the rule requires, the form does not go.
	alice.click(`#actions button.approve`)
	if !alice.eval(`document.getElementById("reason").validity.valueMissing`) || alice.eval(`document.querySelector("#actions button[autofocus]") !== null`) {
		t.Errorf("approving without the reason the rule requires went on to the confirmation")
	}
	alice.do("typing a reason", chromedp.SendKeys(chromedp.ID("reason"), "matches invoice 77"))
	alice.click(`#actions button.approve`)
	alice.waitText("#actions", "Approve sendWireTransfer in saga q, seq 3?", 10*time.Second)
	alice.click(`#actions button[autofocus]`)
	alice.waitText("#status", "1 of 2 approvals (alice@example.com); waiting for 1 more from approver", 10*time.Second)
	if alice.eval(`document.querySelector("#actions button.approve") !== null`) || !alice.eval(`document.querySelector('#actions button[value="withdraw"], #actions input[value="withdraw"]') !== null`) {
		t.Errorf("after her vote alice is offered a second approval, or no withdrawal: %q", alice.text("#actions"))
	}
	alice.accessible("a request with one vote of two")
	// bob's page learns of it without a reload.
	bob.waitText("#status", "1 of 2 approvals (alice@example.com)", 15*time.Second)
	if got := bob.text("#status"); !strings.Contains(got, "matches invoice 77") || !strings.Contains(got, "receipt") {
		t.Errorf("bob's status = %q; want alice's vote with its reason and receipt", got)
	}
	bob.open(page)
	bob.do("typing a reason", chromedp.SendKeys(chromedp.ID("reason"), "PO 4411 checked"))
	bob.click(`#actions button.approve`)
	bob.waitText("#actions", "Approve sendWireTransfer in saga q, seq 3?", 10*time.Second)
	bob.click(`#actions button[autofocus]`)
	bob.waitText("#status", "Approved by alice@example.com, bob@example.com, awaiting execution", 10*time.Second)
	alice.waitText("#status", "Approved by alice@example.com, bob@example.com", 15*time.Second)
	if r := e.get("/sagacity/audit/q"); strings.Count(r.body, `"phase":"APPROVED"`) != 2 {
		t.Errorf("journal = %s; want two approvals", r.body)
	}

	// alice withdraws: the request waits for one more again.
	alice.open(page)
	alice.click(`#actions form.withdraw button`)
	alice.waitText("#actions", "Withdraw your approval of sendWireTransfer in saga q, seq 3?", 10*time.Second)
	alice.click(`#actions button[autofocus]`)
	alice.waitText("#status", "1 of 2 approvals (bob@example.com)", 10*time.Second)

	// Sent back: the saga goes on, the agent is told, and its next try
	// shows what changed against the one sent back.
	want(t, "a second wire", e.call("q2", "sendWireTransfer", `{"amount":"25000","to":"bob"}`), 202)
	bob.open("/request?saga=q2&seq=1")
	bob.do("typing what to change", chromedp.SendKeys(chromedp.ID("reason"), "split it: at most 10000 a transfer"))
	bob.click(`#actions button[value="request-changes"]`)
	bob.waitText("#actions", "Send back sendWireTransfer in saga q2, seq 1?", 10*time.Second)
	if got := bob.text("#actions"); !strings.Contains(got, "nothing is compensated and the saga keeps running") {
		t.Errorf("the confirmation = %q; want it to say the saga keeps running", got)
	}
	bob.click(`#actions button[autofocus]`)
	bob.waitText("#status", "Sent back by bob@example.com", 10*time.Second)
	var st struct {
		Status   string
		Requests []struct{ State, Message string }
	}
	if err := json.Unmarshal([]byte(e.get("/sagacity/sagas/q2/requests").body), &st); err != nil {
		t.Fatal(err)
	}
	if len(st.Requests) != 1 || st.Status != "RUNNING" || st.Requests[0].State != "changes-requested" ||
		st.Requests[0].Message != "[CHANGES_REQUESTED] Tool 'sendWireTransfer': split it: at most 10000 a transfer" {
		t.Errorf("the saga's requests = %+v; want it running, the request sent back with what to change", st)
	}
	want(t, "the agent re-plans", e.call("q2", "sendWireTransfer", `{"amount":"10000","to":"bob"}`), 202) // seq 3
	bob.open("/request?saga=q2&seq=3")
	if got := bob.text("section.diff"); !strings.Contains(got, "which bob@example.com sent back") || !strings.Contains(got, `"25000"`) ||
		!strings.Contains(got, `"10000"`) {
		t.Errorf("the re-planned request's diff = %q; want it against the request sent back", got)
	}
	bob.open("/policy")
	if got := bob.text("main"); !strings.Contains(got, "In force since") || !strings.Contains(got, policy.Hash) ||
		!strings.Contains(got, "2 of approver") || !strings.Contains(got, "expires after 24h0m0s") {
		t.Errorf("the policy page = %q; want the rule in force with its hash", got)
	}
	bob.open("/?state=mine")
	if got := bob.text("#rows"); !strings.Contains(got, "q2") || strings.Contains(got, "q\n") {
		t.Errorf("waiting for bob's vote = %q; want q2's new request and not q, which he approved", got)
	}
	alice.noErrors()
	bob.noErrors()
}

// TestStepUp: a rule that counts votes only from a sign-in within 15
// minutes sends a person whose sign-in is older to the provider again,
// with that max_age and its login form, and back to the request with the
// reason they typed; a provider that answers with the old sign-in is
// refused; the same identity through its access token and its session
// votes once.
func TestStepUp(t *testing.T) {
	t.Parallel()
	policy := compile(t, engine.PolicySpec{Default: []engine.RuleSpec{{Name: "fresh", Quorum: 2, StepUp: engine.Duration(15 * time.Minute)}}})
	r := authtest.NewRogue(t)
	agentT, agentTok := token("agent", engine.RoleAgent)
	audT, audTok := token("auditor", engine.RoleAuditor)
	e := newAPI(t, testkit.SQLiteURL(t), envOptions{roles: groupRoles, apiAudience: "sagacity-api", approvals: policy, tokens: []auth.Token{agentT, audT},
		oidc: func(string) (string, string, string) { return r.Issuer, "sagacity-console", "rogue-secret" }})
	want(t, "gate", e.do("POST", "/sagacity/sagas/s/calls", "application/json", `{"tool":"sendWireTransfer","input":"{}"}`, bearer(agentTok)...), 202)
	signedInAgo := func(ago time.Duration) {
		r.IDToken = func(claims map[string]any) (map[string]any, string) {
			if _, ok := claims["auth_time"]; ok {
				claims["auth_time"] = time.Now().Add(-ago).Unix()
			}
			return claims, "RS256"
		}
	}
	c := jar(t)
	signedInAgo(20 * time.Minute)
	if code, _ := visit(t, c, authtest.LoginHTTP(t, c, e.url+"/login", e.url+auth.CallbackPath, "", "")); code != 302 || !signedIn(t, e, c) {
		t.Fatalf("signing in: %d; want a session", code)
	}
	post := func(body string, headers ...string) (int, http.Header, string) {
		t.Helper()
		req, _ := http.NewRequest("POST", e.url+"/request/decide", strings.NewReader(body))
		req.Header.Set("Content-Type", formType)
		req.Header.Set("Sec-Fetch-Site", "same-origin")
		for i := 0; i+1 < len(headers); i += 2 {
			req.Header.Set(headers[i], headers[i+1])
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header, string(b)
	}
	hash := engine.PayloadHash("{}")
	approve := form("saga", "s", "seq", "1", "hash", hash, "decision", "approve", "reason", "checked the payee")
	code, h, _ := post(approve)
	loc, _ := url.Parse(h.Get("Location"))
	if code != 303 || loc.Path != "/login" || loc.Query().Get("max_age") != "900" ||
		loc.Query().Get("return_to") != "/request?saga=s&seq=1&reason=checked+the+payee" {
		t.Fatalf("approving from a 20-minute-old sign-in = %d to %q; want 303 to sign in again within 900s, back to the request with the reason", code, h.Get("Location"))
	}
	if _, hx, _ := post(approve, "HX-Request", "true"); hx.Get("HX-Redirect") != h.Get("Location") {
		t.Errorf("the same from htmx: HX-Redirect %q; want %q", hx.Get("HX-Redirect"), h.Get("Location"))
	}
	// The provider keeps answering with the old sign-in: refused.
	u := authtest.LoginHTTP(t, c, e.url+h.Get("Location"), e.url+auth.CallbackPath, "", "")
	if q := r.Authorized(); q[len(q)-1].Get("max_age") != "900" || q[len(q)-1].Get("prompt") != "login" {
		t.Errorf("the step-up asked the provider %v; want max_age=900 and prompt=login", q[len(q)-1])
	}
	if resp, err := c.Get(u); err != nil || resp.StatusCode != 400 {
		t.Errorf("a step-up answered with the old sign-in = %v, %v; want 400", resp, err)
	} else {
		b := make([]byte, 1<<16)
		n, _ := resp.Body.Read(b)
		resp.Body.Close()
		if !strings.Contains(string(b[:n]), "did not authenticate the person again") {
			t.Errorf("a step-up answered with the old sign-in: %s; want it said", b[:n])
		}
	}
	// A fresh sign-in goes back to the request, the reason in its form.
	signedInAgo(0)
	code, back := visit(t, c, authtest.LoginHTTP(t, c, e.url+h.Get("Location"), e.url+auth.CallbackPath, "", ""))
	if code != 302 || back != "/request?saga=s&seq=1&reason=checked+the+payee" {
		t.Fatalf("the fresh sign-in's callback = %d to %q; want back to the request", code, back)
	}
	if resp, err := c.Get(e.url + back); err != nil {
		t.Fatal(err)
	} else {
		b := make([]byte, 1<<20)
		n, _ := io.ReadFull(resp.Body, b)
		resp.Body.Close()
		if !strings.Contains(string(b[:n]), `value="checked the payee"`) {
			t.Errorf("the request page after signing in again lacks the reason typed before")
		}
	}
	if code, _, body := post(approve + "&confirm=yes"); code != 303 {
		t.Fatalf("approving from the fresh sign-in = %d %s; want it recorded", code, body)
	}
	// The same person through an access token is the same identity: a
	// second vote of theirs is refused.
	tok := r.Sign(t, "at+jwt", map[string]any{"iss": r.Issuer, "aud": "sagacity-api", "sub": "rogue-1", "iat": time.Now().Unix(),
		"exp": time.Now().Add(time.Hour).Unix(), "groups": []string{"approvers"}, "auth_time": time.Now().Unix()}, "RS256")
	credential(tok)
	again := e.do("POST", "/sagacity/approve/s/1", "application/json", `{"reason":"me again"}`, bearer(tok)...)
	if again.code != 409 || !strings.Contains(again.body, "one person counts once") {
		t.Errorf("the same identity's access token voting again = %d %s; want 409", again.code, again.body)
	}
	if r := e.do("GET", "/sagacity/audit/s", "", "", bearer(audTok)...); strings.Count(r.body, `"phase":"APPROVED"`) != 1 {
		t.Errorf("journal = %s; want one approval", r.body)
	}
}

// TestConsoleStepUp: in the browser, against a real OpenID provider, a
// reviewer whose sign-in is older than the rule's step-up types a
// reason, is taken through the provider's login again and lands back on
// the request with the reason kept; the vote then counts.
func TestConsoleStepUp(t *testing.T) {
	t.Parallel()
	policy := compile(t, engine.PolicySpec{Default: []engine.RuleSpec{{Name: "fresh", StepUp: engine.Duration(15 * time.Minute)}}})
	pr := authtest.NewProvider(t, people...)
	agentT, agentTok := token("agent", engine.RoleAgent)
	audT, audTok := token("auditor", engine.RoleAuditor)
	e := newAPI(t, testkit.SQLiteURL(t), envOptions{roles: groupRoles, approvals: policy, tokens: []auth.Token{agentT, audT},
		oidc: func(redirect string) (string, string, string) {
			id, sec := pr.WebClient(t, redirect, strings.TrimSuffix(redirect, auth.CallbackPath)+auth.SignedOutPath)
			credential(sec)
			return pr.Issuer, id, sec
		}})
	want(t, "gate", e.do("POST", "/sagacity/sagas/up/calls", "application/json", `{"tool":"sendWireTransfer","input":"{\"amount\":\"7\"}"}`, bearer(agentTok)...), 202)
	pr.AuthenticatedAgo(20 * time.Minute)
	p := newTab(t, e)
	p.signInOIDC("alice", "alice-password-1")
	p.open("/request?saga=up&seq=1")
	if got := p.text("#actions"); !strings.Contains(got, "counts a vote only from a sign-in within the last 15m0s, and yours is older") {
		t.Errorf("the actions = %q; want to be told that voting takes a fresh sign-in", got)
	}
	p.do("typing a reason", chromedp.SendKeys(chromedp.ID("reason"), "amount and payee match the invoice"))
	pr.AuthenticatedAgo(0)
	p.click(`#actions button.approve`)
	p.do("signing in again at the provider", chromedp.WaitVisible(chromedp.ID("username")),
		chromedp.SendKeys(chromedp.ID("username"), "alice"), chromedp.SendKeys(chromedp.ID("password"), "alice-password-1"),
		chromedp.Click(chromedp.CSS(`button[type="submit"]`)), chromedp.WaitVisible(chromedp.ID("reason")))
	p.ready()
	p.accessible("the request after signing in again")
	if !p.eval(`document.getElementById("reason").value === "amount and payee match the invoice"`) {
		t.Errorf("the reason typed before signing in again is gone")
	}
	p.click(`#actions button.approve`)
	p.waitText("#actions", "Approve sendWireTransfer in saga up, seq 1?", 10*time.Second)
	p.click(`#actions button[autofocus]`)
	p.waitText("#status", "Approved by", 10*time.Second)
	audit := e.do("GET", "/sagacity/audit/up", "", "", bearer(audTok)...)
	if !strings.Contains(audit.body, `reason=amount and payee match the invoice`) {
		t.Errorf("journal = %s; want the approval with the reason kept through the sign-in", audit.body)
	}
	p.noErrors()
}

// TestMCPChangesRequested: an MCP agent gives a reason with its call
// (_meta "sagacity/reason"), which reviewers read; a reviewer sends the
// request back, and the agent is told what to change, in the words it
// acts on, by sagacity_status and sagacity_resume; the saga goes on.
func TestMCPChangesRequested(t *testing.T) {
	t.Parallel()
	e := newAPI(t, testkit.SQLiteURL(t), envOptions{})
	ctx := t.Context()
	cs := mcpSession(t, e, "test-agent", http.Header{mcpgw.SagaHeader: {"mcp-back"}}, nil)
	call := func(name string, args any, meta mcp.Meta) *mcp.CallToolResult {
		t.Helper()
		r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args, Meta: meta})
		if err != nil {
			t.Fatalf("tools/call %s: %v", name, err)
		}
		return r
	}
	r := call("sendWireTransfer", map[string]any{"amount": "25000", "to": "bob"}, mcp.Meta{"sagacity/reason": "supplier invoice 9, due today"})
	if r.IsError || !strings.HasPrefix(text(r), "[AWAITING_APPROVAL]") {
		t.Fatalf("the gated call = %q (error %v)", text(r), r.IsError)
	}
	var pending []struct{ Reason string }
	if err := json.Unmarshal([]byte(e.get("/sagacity/approvals/mcp-back").body), &pending); err != nil {
		t.Fatal(err)
	}
	if len(pending) != 1 || pending[0].Reason != "supplier invoice 9, due today" {
		t.Errorf("the pending request = %+v; want the agent's reason", pending)
	}
	if r := call("sendWireTransfer", map[string]any{"amount": "1"}, mcp.Meta{"sagacity/reason": 7}); !r.IsError {
		t.Errorf("a reason that is no string = %q; want a tool error", text(r))
	}
	d := e.post("/sagacity/request-changes/mcp-back/1", `{"approver":"reviewer@example.com","reason":"split it in two"}`)
	want(t, "request changes", d, 200)
	const told = "[CHANGES_REQUESTED] Tool 'sendWireTransfer': split it in two"
	st := call("sagacity_status", map[string]any{}, nil)
	if st.IsError || !strings.HasPrefix(text(st), told+"\n") {
		t.Errorf("sagacity_status = %q; want it to start with %q", text(st), told)
	}
	res := call("sagacity_resume", map[string]any{"seq": 1}, nil)
	if !res.IsError || text(res) != told {
		t.Errorf("sagacity_resume = %q (error %v); want the tool error %q", text(res), res.IsError, told)
	}
	if r := call("sendWireTransfer", map[string]any{"amount": "12500", "to": "bob"}, nil); r.IsError {
		t.Errorf("the call again, changed = %q; want it gated in the same saga", text(r))
	}
}
