package app_test

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sagacity-go/sagacity/internal/auth"
	"github.com/sagacity-go/sagacity/internal/engine"
	"github.com/sagacity-go/sagacity/internal/testkit"
)

// token makes a static API token with roles, as `sagacity token` does.
func token(name string, roles ...engine.Role) (auth.Token, string) {
	value := "sgc_test_" + name + "_0123456789abcdefghij"
	credential(value)
	return auth.Token{Name: name, SHA256: engine.PayloadHash(value), Roles: roles}, value
}

func bearer(tok string) []string { return []string{"Authorization", "Bearer " + tok} }

// TestTokenGroups: in tokens mode, "2 from finance" (a rule whose
// approvers are [finance], quorum 2) is met by two tokens in group
// finance, as two OIDC users in it would, and a token with the approver
// role alone is not eligible. A token's groups live in the configuration
// and reach the engine on its principal, whose votes the store journals
// as any other: one store is enough.
func TestTokenGroups(t *testing.T) {
	t.Parallel()
	policy, err := engine.CompilePolicy(engine.PolicySpec{Default: engine.DefaultPolicy.Default, Tools: map[string][]engine.RuleSpec{
		"sendWireTransfer": {{Name: "two-from-finance", Approvers: []string{"finance"}, Quorum: 2}}}})
	if err != nil {
		t.Fatal(err)
	}
	agentT, agentTok := token("agent", engine.RoleAgent)
	aliceT, aliceTok := token("alice", engine.RoleApprover)
	bobT, bobTok := token("bob", engine.RoleApprover)
	carolT, carolTok := token("carol", engine.RoleApprover)
	aliceT.Groups, bobT.Groups, carolT.Groups = []string{"finance"}, []string{"ops", "finance"}, []string{"ops"}
	e := newAPI(t, testkit.SQLiteURL(t), envOptions{tokens: []auth.Token{agentT, aliceT, bobT, carolT}, approvals: policy})
	js := "application/json"
	want(t, "agent reserves", e.do("POST", "/sagacity/sagas/s/calls", js, `{"tool":"reserveInventory","input":"{}"}`, bearer(agentTok)...), 200)
	want(t, "agent gates", e.do("POST", "/sagacity/sagas/s/calls", js, callJSON("sendWireTransfer", transfer), bearer(agentTok)...), 202)
	r := e.do("POST", "/sagacity/approve/s/3", js, `{}`, bearer(carolTok)...)
	want(t, "an approver outside finance approves", r, 403)
	want(t, "alice (finance) approves", e.do("POST", "/sagacity/approve/s/3", js, `{}`, bearer(aliceTok)...), 200)
	if r := e.do("POST", "/sagacity/resume/s/3", js, e.payload(transfer), bearer(agentTok)...); r.code != 409 || !strings.Contains(r.body, "UNDECIDED") {
		t.Errorf("resume with one of finance's two votes = %d %s; want 409 UNDECIDED", r.code, r.body)
	}
	want(t, "bob (ops, finance) approves", e.do("POST", "/sagacity/approve/s/3", js, `{}`, bearer(bobTok)...), 200)
	if r := e.do("POST", "/sagacity/resume/s/3", js, e.payload(transfer), bearer(agentTok)...); r.code != 200 || !strings.Contains(r.body, `"outcome":"EXECUTED"`) {
		t.Errorf("resume with two votes from finance = %d %s; want 200 EXECUTED", r.code, r.body)
	}
}

// TestTokensMode runs the seed's flow with bearer tokens, and refuses
// everything the roles and four-eyes forbid.
func TestTokensMode(t *testing.T) {
	t.Parallel()
	stores(t, func(t *testing.T, dbURL string) {
		agentT, agentTok := token("agent", engine.RoleAgent)
		apprT, apprTok := token("approver", engine.RoleApprover)
		audT, audTok := token("auditor", engine.RoleAuditor)
		bothT, bothTok := token("both", engine.RoleAgent, engine.RoleApprover)
		e := newAPI(t, dbURL, envOptions{tokens: []auth.Token{agentT, apprT, audT, bothT}})
		js := "application/json"
		callBody := `{"tool":"sendWireTransfer","input":"{\"amount\":\"100\",\"to\":\"alice\"}"}`

		r := e.do("POST", "/sagacity/sagas/s/calls", js, callBody)
		want(t, "no token", r, 401)
		if r.header.Get("WWW-Authenticate") == "" {
			t.Errorf("401 without WWW-Authenticate")
		}
		want(t, "wrong token", e.do("POST", "/sagacity/sagas/s/calls", js, callBody, bearer("sgc_not_a_token_at_all_000")...), 401)
		want(t, "basic auth", e.do("GET", "/sagacity/approvals", "", "", "Authorization", "Basic YWxpY2U6c2VjcmV0"), 401)
		want(t, "no anonymous reads", e.get("/sagacity/approvals"), 401)

		want(t, "agent reserves", e.do("POST", "/sagacity/sagas/s/calls", js, `{"tool":"reserveInventory","input":"{}"}`, bearer(agentTok)...), 200)
		want(t, "agent gates", e.do("POST", "/sagacity/sagas/s/calls", js, callBody, bearer(agentTok)...), 202)
		want(t, "agent approves", e.do("POST", "/sagacity/approve/s/3", js, `{}`, bearer(agentTok)...), 403)
		want(t, "auditor approves", e.do("POST", "/sagacity/approve/s/3", js, `{}`, bearer(audTok)...), 403)
		want(t, "auditor calls", e.do("POST", "/sagacity/sagas/s/calls", js, callBody, bearer(audTok)...), 403)
		r = e.do("POST", "/sagacity/approve/s/3", js, `{"approver":"manager@company.com"}`, bearer(apprTok)...)
		want(t, "approver names someone else", r, 403)
		if !strings.Contains(r.body, "is not the authenticated principal") {
			t.Errorf("naming someone else = %s", r.body)
		}

		want(t, "both starts a saga", e.do("POST", "/sagacity/sagas/own/calls", js, callBody, bearer(bothTok)...), 202)
		r = e.do("POST", "/sagacity/approve/own/1", js, `{}`, bearer(bothTok)...)
		want(t, "initiator approves own saga", r, 403)
		want(t, "initiator rejects own saga", e.do("POST", "/sagacity/reject/own/1", js, `{}`, bearer(bothTok)...), 403)

		r = e.do("POST", "/sagacity/approve/s/3", js, `{"approver":"token:approver"}`, bearer(apprTok)...)
		want(t, "approver approves", r, 200)
		if m := r.json(t); m["approverIdentity"] != "token:approver" {
			t.Errorf("approve = %s, want approverIdentity token:approver", r.body)
		}
		want(t, "agent ends", e.do("POST", "/sagacity/sagas/s/end", "", "", bearer(agentTok)...), 200)
		r = e.do("POST", "/sagacity/resume/s/3", js, e.payload(transfer), bearer(agentTok)...)
		if r.code != 200 || !strings.Contains(r.body, `"status":"COMPLETED"`) {
			t.Errorf("agent resumes = %d %s, want 200 COMPLETED", r.code, r.body)
		}
		r = e.do("GET", "/sagacity/audit/s", "", "", bearer(audTok)...)
		if r.code != 200 || !strings.Contains(r.body, `"payload":"approver=token:approver\nauth=token\nreceipt=`) {
			t.Errorf("audit = %d %s, want the APPROVED entry naming token:approver with auth=token", r.code, r.body)
		}
		if r := e.do("GET", "/sagacity/audit/s/verify", "", "", bearer(audTok)...); !strings.Contains(r.body, `"valid":true`) {
			t.Errorf("verify = %s", r.body)
		}
		want(t, "agent verifies", e.do("GET", "/sagacity/audit/s/verify", "", "", bearer(agentTok)...), 403)

		r = e.get("/")
		if r.code != 303 || !strings.HasPrefix(r.header.Get("Location"), "/login") {
			t.Errorf("GET / in tokens mode = %d %s, want a redirect to /login", r.code, r.header.Get("Location"))
		}
		if r := e.get("/login"); r.code != 200 || !strings.Contains(r.body, "needs sign-in through OpenID Connect") {
			t.Errorf("GET /login in tokens mode = %d, want the page that says sign-in needs OIDC", r.code)
		}
		want(t, "no dev sign-in in tokens mode", e.do("POST", "/login", "application/x-www-form-urlencoded", "name=mallory"), 405)
	})
}

// everyRole is the dev sign-in form's roles as the page first checks
// them: all of them.
var everyRole = func() string {
	var b strings.Builder
	for _, r := range engine.Roles {
		b.WriteString("&role=" + string(r))
	}
	return b.String()
}()

// session signs name in through the dev sign-in page, with every role,
// and returns the session cookie.
func (e *apiEnv) session(t testing.TB, name string) *http.Cookie {
	t.Helper()
	r := e.do("POST", "/login", "application/x-www-form-urlencoded", "name="+url.QueryEscape(name)+"&return_to=%2F"+everyRole)
	if r.code != 303 || r.header.Get("Location") != "/" {
		t.Fatalf("dev sign-in = %d %s, want 303 to /", r.code, r.body)
	}
	c := cookie(r, "sagacity")
	if c == nil {
		t.Fatalf("dev sign-in set no session cookie: %v", r.header["Set-Cookie"])
	}
	credential(c.Value)
	return c
}

func cookie(r response, name string) *http.Cookie {
	for _, c := range (&http.Response{Header: r.header}).Cookies() {
		if c.Name == name {
			return c
		}
	}
	return nil
}

func form(vals ...string) string {
	v := url.Values{}
	for i := 0; i+1 < len(vals); i += 2 {
		v.Set(vals[i], vals[i+1])
	}
	return v.Encode()
}

const formType = "application/x-www-form-urlencoded"

func TestConsoleDevSession(t *testing.T) {
	t.Parallel()
	stores(t, func(t *testing.T, dbURL string) {
		e := newAPI(t, dbURL, envOptions{})
		e.seedScenario("transfer-77")
		e.seedScenario("other")

		r := e.get("/")
		if r.code != 303 || r.header.Get("Location") != "/login?return_to=%2F" {
			t.Fatalf("GET / signed out = %d %q, want 303 to the sign-in page", r.code, r.header.Get("Location"))
		}
		planted := &http.Cookie{Name: "sagacity", Value: "planted-by-an-attacker-0123456789"}
		r = e.do("POST", "/login", formType, form("name", "alice@example.com", "return_to", "/")+everyRole, "Cookie", planted.String())
		c := cookie(r, "sagacity")
		if r.code != 303 || c == nil || c.Value == planted.Value || !c.HttpOnly || c.SameSite != http.SameSiteLaxMode || c.Path != "/" {
			t.Fatalf("sign-in = %d, cookie %+v; want a new HttpOnly, SameSite=Lax session cookie", r.code, c)
		}
		credential(c.Value)
		// A call a crash left between INTENT and its outcome is shown, not re-run.
		testkit.Exec(t, dbURL, "INSERT INTO calls (saga_id, seq, tool_name, input, state, started_at, updated_at)"+
			" VALUES ('transfer-77', 99, 'chargeCard', '{}', 'RUNNING', $1, $1)", time.Now().Add(-time.Hour))
		page := e.do("GET", "/", "", "", "Cookie", c.String())
		if !strings.Contains(page.body, `<a href="/in-doubt">1 call(s) in doubt</a>`) {
			t.Errorf("console does not point to the call in doubt:\n%s", page.body)
		}
		if page.code != 200 || !strings.Contains(page.body, "alice@example.com") || !strings.Contains(page.body, "transfer-77") {
			t.Fatalf("console = %d, want the pending requests and who is signed in", page.code)
		}
		h := page.header
		if csp := h.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'self'") || !strings.Contains(csp, "frame-ancestors 'none'") ||
			!strings.Contains(csp, "base-uri 'none'") || !strings.Contains(csp, "form-action 'self'") || strings.Contains(csp, "unsafe") {
			t.Errorf("CSP = %q", csp)
		}
		if h.Get("X-Content-Type-Options") != "nosniff" || h.Get("Referrer-Policy") != "same-origin" || h.Get("Cache-Control") != "no-store" {
			t.Errorf("headers = %v, want nosniff, same-origin referrer and no-store", h)
		}

		hash := engine.PayloadHash(transfer)
		ask := form("saga", "transfer-77", "seq", "3", "hash", hash, "decision", "approve", "reason", "looks right")
		decide := ask + "&confirm=yes"
		for _, attack := range [][]string{
			{"Sec-Fetch-Site", "cross-site"},
			{"Sec-Fetch-Site", "same-site"},
			{"Origin", "https://evil.example"},
		} {
			r = e.do("POST", "/request/decide", formType, decide, "Cookie", c.String(), attack[0], attack[1])
			want(t, "cross-origin decision "+attack[1], r, 403)
		}
		if strings.Contains(e.get("/sagacity/audit/transfer-77").body, "APPROVED") {
			t.Fatalf("a cross-origin POST was journaled")
		}

		// Without confirm=yes the first step only asks for confirmation.
		r = e.do("POST", "/request/decide", formType, ask, "Cookie", c.String(), "Sec-Fetch-Site", "same-origin")
		if r.code != 200 || !strings.Contains(r.body, "Approve <code>sendWireTransfer</code> in saga <code>transfer-77</code>, seq 3?") ||
			strings.Contains(e.get("/sagacity/audit/transfer-77").body, "APPROVED") {
			t.Fatalf("decide without confirming = %d, want a confirmation that repeats the tool, and nothing journaled:\n%s", r.code, r.body)
		}
		r = e.do("POST", "/request/decide", formType, decide, "Cookie", c.String(), "Sec-Fetch-Site", "same-origin")
		if r.code != 303 || r.header.Get("Location") != "/request?saga=transfer-77&seq=3#status-h" {
			t.Fatalf("decide = %d %s (Location %q), want 303 back to the request", r.code, r.body, r.header.Get("Location"))
		}
		if page := e.do("GET", "/request?saga=transfer-77&seq=3", "", "", "Cookie", c.String()).body; !strings.Contains(page,
			"Approved by alice@example.com, awaiting execution") {
			t.Errorf("request page after the decision = %s, want its status from the journal", page)
		}
		if audit := e.get("/sagacity/audit/transfer-77").body; !strings.Contains(audit, `"payload":"approver=alice@example.com\nreason=looks right\nauth=dev\nreceipt=`) {
			t.Errorf("journal = %s, want APPROVED by alice@example.com with auth=dev", audit)
		}
		// Execute goes to its own route, never through decide.
		execute := form("saga", "transfer-77", "seq", "3", "hash", hash, "decision", "execute", "confirm", "yes")
		r = e.do("POST", "/request/decide", formType, execute, "Cookie", c.String(), "Sec-Fetch-Site", "same-origin")
		if r.code != 400 || !strings.Contains(r.body, "decision must be approve or dismiss or reject or request-changes or withdraw or break-glass or ratify here") || slices.Contains(e.tools.paths(), "/wire") {
			t.Errorf("execute posted to decide = %d %s (tool calls %v), want 400 and nothing done", r.code, r.body, e.tools.paths())
		}
		reject := form("saga", "other", "seq", "3", "hash", hash, "decision", "reject", "confirm", "yes")
		r = e.do("POST", "/request/decide", formType, reject, "Cookie", c.String(), "HX-Request", "true")
		if r.code != 200 || !strings.Contains(r.body, "Rejected by alice@example.com") {
			t.Errorf("htmx reject = %d %s, want the request's new status", r.code, r.body)
		}
		// A stale form gets the request as it is now, not a bare error.
		r = e.do("POST", "/request/decide", formType, strings.Replace(reject, "reject", "approve", 1), "Cookie", c.String(), "HX-Request", "true")
		if r.code != 409 || !strings.Contains(r.body, "Your form was out of date") || !strings.Contains(r.body, "Rejected by alice@example.com") {
			t.Errorf("htmx decision on a decided request = %d %s, want 409 with its current state", r.code, r.body)
		}

		r = e.do("POST", "/logout", "", "", "Cookie", c.String())
		if r.code != 303 || cookie(r, "sagacity") == nil || cookie(r, "sagacity").MaxAge >= 0 {
			t.Errorf("logout = %d, want a redirect that deletes the cookie", r.code)
		}
		if r := e.do("GET", "/", "", "", "Cookie", c.String()); r.code != 303 {
			t.Errorf("GET / with the signed-out cookie = %d, want a redirect to sign in", r.code)
		}
		r = e.do("POST", "/request/decide", formType, decide, "Cookie", c.String())
		want(t, "decision with the signed-out cookie", r, 401)
	})
}

func TestSessionTimeouts(t *testing.T) {
	t.Parallel()
	var now atomic.Int64
	now.Store(time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC).UnixNano())
	clock := func() time.Time { return time.Unix(0, now.Load()).UTC() }
	advance := func(d time.Duration) { now.Add(int64(d)) }
	e := newAPI(t, testkit.SQLiteURL(t), envOptions{now: clock})
	c := e.session(t, "alice")
	page := func() int { return e.do("GET", "/", "", "", "Cookie", c.String()).code }
	for range 30 { // active every 25 minutes for 12.5 hours
		if page() != 200 {
			break
		}
		advance(25 * time.Minute)
	}
	if code := page(); code != 303 {
		t.Errorf("after 12.5 hours of activity GET / = %d, want a redirect: the absolute timeout is 12h", code)
	}
	c = e.session(t, "bob")
	advance(29 * time.Minute)
	if code := page(); code != 200 {
		t.Errorf("after 29 idle minutes GET / = %d, want 200", code)
	}
	advance(31 * time.Minute)
	if code := page(); code != 303 {
		t.Errorf("after 31 idle minutes GET / = %d, want a redirect: the idle timeout is 30m", code)
	}
}

func TestReturnTo(t *testing.T) {
	t.Parallel()
	e := newAPI(t, testkit.SQLiteURL(t), envOptions{})
	for _, to := range []string{"https://evil.example/", "//evil.example/x", `/\evil.example`, "javascript:alert(1)", "evil"} {
		r := e.get("/login?return_to=" + url.QueryEscape(to))
		want(t, "return_to="+to, r, 400)
		r = e.do("POST", "/login", formType, form("name", "alice", "return_to", to))
		want(t, "sign-in with return_to="+to, r, 400)
	}
	if r := e.get("/login?return_to=%2F%3Fdecided%3Dapproved"); r.code != 200 || !strings.Contains(r.body, `value="/?decided=approved"`) {
		t.Errorf("a local return_to = %d, want the page to carry it", r.code)
	}
}

func TestRateLimits(t *testing.T) {
	t.Parallel()
	e := newAPI(t, testkit.SQLiteURL(t), envOptions{})
	var last response
	for i := range 25 {
		last = e.do("POST", "/login", formType, form("name", fmt.Sprint("user", i))+everyRole)
		if last.code == 429 {
			break
		}
	}
	if last.code != 429 || last.header.Get("Retry-After") == "" {
		t.Errorf("25 sign-ins in a row: last = %d %v, want 429 with Retry-After", last.code, last.header)
	}
	apprT, apprTok := token("hasty", engine.RoleApprover)
	e = newAPI(t, testkit.SQLiteURL(t), envOptions{tokens: []auth.Token{apprT}})
	for i := range 70 {
		last = e.do("POST", "/sagacity/approve/s/1", "application/json", "{}", bearer(apprTok)...)
		if last.code == 429 {
			if i < 60 {
				t.Errorf("rate limited after %d decisions, want 60 a minute", i)
			}
			break
		}
	}
	if last.code != 429 || last.header.Get("Retry-After") == "" || !strings.Contains(last.body, "too many requests") {
		t.Errorf("70 decisions in a row: last = %d %s, want 429 with Retry-After", last.code, last.body)
	}
}

// TestRequestLog: a request's line names its route's pattern, who asked,
// and the saga and seq it was about; a line logged while serving it
// (a refusal) says the same.
func TestRequestLog(t *testing.T) {
	t.Parallel()
	agentT, agentTok := token("bot", engine.RoleAgent)
	approverT, approverTok := token("boss", engine.RoleApprover)
	e := newAPI(t, testkit.SQLiteURL(t), envOptions{tokens: []auth.Token{agentT, approverT}})
	call := `{"tool":"sendWireTransfer","input":"{\"amount\":\"1\"}"}`
	want(t, "call", e.do("POST", "/sagacity/sagas/log-1/calls", "application/json", call, "Authorization", "Bearer "+agentTok), 202)
	want(t, "approve", e.do("POST", "/sagacity/approve/log-1/1", "application/json", `{}`, "Authorization", "Bearer "+approverTok), 200)
	want(t, "approve again", e.do("POST", "/sagacity/approve/log-1/1", "application/json", `{}`, "Authorization", "Bearer "+approverTok), 409)
	logs := e.logs.String()
	for _, line := range []string{
		`msg=request method=POST route=/sagacity/sagas/{sagaId}/calls path=/sagacity/sagas/log-1/calls status=202`,
		`msg=request method=POST route=/sagacity/approve/{sagaId}/{seq} path=/sagacity/approve/log-1/1 status=200`,
		`msg="request failed" method=POST path=/sagacity/approve/log-1/1 status=409`,
	} {
		i := strings.Index(logs, line)
		if i < 0 {
			t.Errorf("no log line with %s in:\n%s", line, logs)
			continue
		}
		rest, _, _ := strings.Cut(logs[i:], "\n")
		for _, attr := range []string{"request=", "principal=token:", " saga=log-1"} {
			if !strings.Contains(rest, attr) {
				t.Errorf("log line %q lacks %s", rest, attr)
			}
		}
		if strings.Contains(line, "approve") && !strings.Contains(rest, " seq=1") {
			t.Errorf("log line %q lacks the seq", rest)
		}
	}
}
