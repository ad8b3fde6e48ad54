package server_test

import (
	"context"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/sagacity-go/sagacity/internal/auth"
	"github.com/sagacity-go/sagacity/internal/auth/authtest"
	"github.com/sagacity-go/sagacity/internal/engine"
	"github.com/sagacity-go/sagacity/internal/testkit"
)

var people = []authtest.User{
	{ID: "alice-id", Username: "alice", Password: "alice-password-1", Email: "alice@example.test", Groups: []string{"approvers"}},
	{ID: "bob-id", Username: "bob", Password: "bob-password-1", Email: "bob@example.test", Groups: []string{"agents"}},
	{ID: "carol-id", Username: "carol", Password: "carol-password-1", Email: "carol@example.test", Groups: []string{"auditors"}},
}

var groupRoles = map[string][]engine.Role{
	"approvers": {engine.RoleApprover}, "agents": {engine.RoleAgent}, "auditors": {engine.RoleAuditor},
}

// oidcAPI runs the server in oidc mode against the test provider p; the
// API also takes the static tokens given.
func oidcAPI(t *testing.T, dbURL string, p *authtest.Provider, tokens ...auth.Token) *apiEnv {
	return newAPI(t, dbURL, envOptions{roles: groupRoles, tokens: tokens, oidc: func(redirect string) (string, string, string) {
		id, sec := p.WebClient(t, redirect)
		credential(sec)
		return p.Issuer, id, sec
	}})
}

func jar(t *testing.T) *http.Client {
	j, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &http.Client{Jar: j, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// callback signs username in at the provider and returns the callback URL
// the provider sent the browser to, not yet visited.
func callback(t *testing.T, e *apiEnv, c *http.Client, username, password string) string {
	t.Helper()
	u := authtest.LoginHTTP(t, c, e.url+"/login?return_to=%2F", e.url+auth.CallbackPath, username, password)
	q, _ := url.Parse(u)
	credential(q.Query().Get("code"))
	credential(q.Query().Get("state"))
	return u
}

func visit(t *testing.T, c *http.Client, u string) (int, string) {
	t.Helper()
	resp, err := c.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	for _, ck := range resp.Cookies() {
		credential(ck.Value)
	}
	return resp.StatusCode, resp.Header.Get("Location")
}

// signedIn reports whether c's session reaches the console.
func signedIn(t *testing.T, e *apiEnv, c *http.Client) bool {
	code, _ := visit(t, c, e.url+"/")
	return code == 200
}

func TestOIDCSignIn(t *testing.T) {
	p := authtest.NewProvider(t, people...)
	stores(t, func(t *testing.T, dbURL string) {
		e := oidcAPI(t, dbURL, p)
		c := jar(t)
		if code, loc := visit(t, c, callback(t, e, c, "alice", "alice-password-1")); code != 302 || loc != "/" {
			t.Fatalf("callback = %d %q, want 302 to /", code, loc)
		}
		resp, err := c.Get(e.url + "/")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("console after sign-in = %d", resp.StatusCode)
		}
		// Replaying the provider's answer starts nothing.
		u := callback(t, e, c, "alice", "alice-password-1")
		visit(t, c, u)
		if code, _ := visit(t, c, u); code != 400 {
			t.Errorf("replayed callback = %d, want 400", code)
		}
	})
}

func TestOIDCCallbackRefusals(t *testing.T) {
	p := authtest.NewProvider(t, people...)
	e := oidcAPI(t, testkit.SQLiteURL(t), p)
	withQuery := func(u string, f func(url.Values)) string {
		pu, _ := url.Parse(u)
		q := pu.Query()
		f(q)
		pu.RawQuery = q.Encode()
		return pu.String()
	}
	tests := []struct {
		name string
		run  func(t *testing.T) (*http.Client, string)
	}{
		{"missing state", func(t *testing.T) (*http.Client, string) {
			c := jar(t)
			return c, withQuery(callback(t, e, c, "alice", "alice-password-1"), func(q url.Values) { q.Del("state") })
		}},
		{"foreign state", func(t *testing.T) (*http.Client, string) {
			mine, theirs := jar(t), jar(t)
			callback(t, e, mine, "alice", "alice-password-1")
			return mine, callback(t, e, theirs, "bob", "bob-password-1") // my cookie, their code and state
		}},
		{"no sign-in started in this browser", func(t *testing.T) (*http.Client, string) {
			return jar(t), callback(t, e, jar(t), "alice", "alice-password-1")
		}},
		{"provider error", func(t *testing.T) (*http.Client, string) {
			c := jar(t)
			return c, withQuery(callback(t, e, c, "alice", "alice-password-1"), func(q url.Values) { q.Del("code"); q.Set("error", "access_denied") })
		}},
		{"wrong PKCE verifier", func(t *testing.T) (*http.Client, string) {
			c := jar(t)
			u := callback(t, e, c, "alice", "alice-password-1")
			testkit.Exec(t, e.dbURL, "UPDATE logins SET verifier = $1", strings.Repeat("x", 43))
			return c, u
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, u := tt.run(t)
			if code, _ := visit(t, c, u); code != 400 {
				t.Errorf("callback = %d, want 400", code)
			}
			if signedIn(t, e, c) {
				t.Errorf("a refused callback started a session")
			}
		})
	}
}

// TestOIDCBadIDTokens signs in against a provider that issues bad ID tokens.
func TestOIDCBadIDTokens(t *testing.T) {
	tests := []struct {
		name string
		hook func(map[string]any) (map[string]any, string)
	}{
		{"wrong nonce", func(c map[string]any) (map[string]any, string) { c["nonce"] = "replayed"; return c, "RS256" }},
		{"wrong issuer", func(c map[string]any) (map[string]any, string) { c["iss"] = "https://evil.example"; return c, "RS256" }},
		{"wrong audience", func(c map[string]any) (map[string]any, string) { c["aud"] = "someone-else"; return c, "RS256" }},
		{"expired", func(c map[string]any) (map[string]any, string) {
			c["exp"] = time.Now().Add(-time.Hour).Unix()
			return c, "RS256"
		}},
		{"alg none", func(c map[string]any) (map[string]any, string) { return c, "none" }},
		{"HS256 with the public key", func(c map[string]any) (map[string]any, string) { return c, "HS256" }},
	}
	for _, tt := range append(tests, struct {
		name string
		hook func(map[string]any) (map[string]any, string)
	}{"valid", nil}) {
		t.Run(tt.name, func(t *testing.T) {
			r := authtest.NewRogue(t)
			r.IDToken = tt.hook
			e := newAPI(t, testkit.SQLiteURL(t), envOptions{roles: groupRoles,
				oidc: func(string) (string, string, string) { return r.Issuer, "sagacity-console", "rogue-secret" }})
			c := jar(t)
			u := authtest.LoginHTTP(t, c, e.url+"/login", e.url+auth.CallbackPath, "", "")
			code, _ := visit(t, c, u)
			if tt.hook == nil {
				if code != 302 || !signedIn(t, e, c) {
					t.Fatalf("valid ID token: callback %d, want a session", code)
				}
				return
			}
			if code != 400 || signedIn(t, e, c) {
				t.Errorf("callback = %d, want 400 and no session", code)
			}
		})
	}
}

// TestAPIJWT: bearer JWTs from the issuer, for the API audience only.
func TestAPIJWT(t *testing.T) {
	r := authtest.NewRogue(t)
	e := newAPI(t, testkit.SQLiteURL(t), envOptions{roles: groupRoles, apiAudience: "sagacity-api",
		oidc: func(string) (string, string, string) { return r.Issuer, "sagacity-console", "rogue-secret" }})
	jwt := func(mut func(map[string]any), alg string) string {
		c := map[string]any{"iss": r.Issuer, "aud": "sagacity-api", "sub": "svc-7", "exp": time.Now().Add(time.Hour).Unix(),
			"iat": time.Now().Unix(), "groups": []string{"agents"}}
		if mut != nil {
			mut(c)
		}
		tok := r.Sign(t, c, alg)
		credential(tok)
		return tok
	}
	call := `{"tool":"sendWireTransfer","input":"{}"}`
	if r := e.do("POST", "/sagacity/sagas/j/calls", "application/json", call, bearer(jwt(nil, "RS256"))...); r.code != 202 {
		t.Fatalf("agent JWT call = %d %s, want 202", r.code, r.body)
	}
	if s := e.do("GET", "/sagacity/sagas/j", "", "", bearer(jwt(nil, "RS256"))...); !strings.Contains(s.body, `"initiator":"`+auth.Identity(r.Issuer, "svc-7")+`"`) {
		t.Errorf("saga = %s, want the initiator to be the JWT's issuer#subject", s.body)
	}
	for name, tok := range map[string]string{
		"expired":              jwt(func(c map[string]any) { c["exp"] = time.Now().Add(-time.Minute).Unix() }, "RS256"),
		"another audience":     jwt(func(c map[string]any) { c["aud"] = "sagacity-console" }, "RS256"),
		"another issuer":       jwt(func(c map[string]any) { c["iss"] = "https://evil.example" }, "RS256"),
		"unsigned":             jwt(nil, "none"),
		"signed by a stranger": jwt(nil, "RS256-other"),
		"valid for ten years":  jwt(func(c map[string]any) { c["exp"] = time.Now().AddDate(10, 0, 0).Unix() }, "RS256"),
		"valid for 25 hours, issued an hour ago": jwt(func(c map[string]any) {
			c["iat"], c["exp"] = time.Now().Add(-time.Hour).Unix(), time.Now().Add(24*time.Hour).Unix()
		}, "RS256"),
		"valid for two days, with no iat": jwt(func(c map[string]any) { delete(c, "iat"); c["exp"] = time.Now().Add(48 * time.Hour).Unix() }, "RS256"),
	} {
		want(t, name, e.do("POST", "/sagacity/sagas/j2/calls", "application/json", call, bearer(tok)...), 401)
	}
	approver := jwt(func(c map[string]any) { c["sub"] = "boss-1"; c["groups"] = []string{"approvers"} }, "RS256")
	resp := e.do("POST", "/sagacity/approve/j/1", "application/json", `{}`, bearer(approver)...)
	if resp.code != 200 || !strings.Contains(resp.body, `"approverIdentity":"`+auth.Identity(r.Issuer, "boss-1")+`"`) {
		t.Errorf("approver JWT = %d %s, want approved by issuer#boss-1", resp.code, resp.body)
	}
}

// TestBrowserApproval: a person signs in through the test provider in
// Chromium and approves a pending request in the console; the journal
// carries their identity and auth=oidc, and the pages break no CSP rule.
func TestBrowserApproval(t *testing.T) {
	p := authtest.NewProvider(t, people...)
	agentT, agentTok := token("agent", engine.RoleAgent)
	audT, audTok := token("auditor", engine.RoleAuditor)
	e := oidcAPI(t, testkit.SQLiteURL(t), p, agentT, audT)
	js := "application/json"
	want(t, "agent reserves", e.do("POST", "/sagacity/sagas/b/calls", js, `{"tool":"reserveInventory","input":"{}"}`, bearer(agentTok)...), 200)
	want(t, "agent gates", e.do("POST", "/sagacity/sagas/b/calls", js, `{"tool":"sendWireTransfer","input":"<b>100</b> to alice"}`, bearer(agentTok)...), 202)

	b := authtest.Browser(t)
	tctx, cancel := context.WithTimeout(b, 60*time.Second)
	defer cancel()
	err := chromedp.Do(tctx,
		chromedp.Navigate(e.url+"/"),
		chromedp.WaitVisible(chromedp.ID("username")),
		chromedp.SendKeys(chromedp.ID("username"), "alice"),
		chromedp.SendKeys(chromedp.ID("password"), "alice-password-1"),
		chromedp.Click(chromedp.CSS(`button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.CSS("table.list")),
	)
	if err != nil {
		t.Fatalf("signing in through the provider: %v", err)
	}
	// The console must have finished loading, htmx included, before we type:
	// nodes found while the redirects settle can go stale.
	if _, err := chromedp.Run(tctx, chromedp.Poll[bool](`document.readyState === "complete" && typeof htmx !== "undefined"`)); err != nil {
		t.Fatalf("waiting for the console to load: %v", err)
	}
	who, err := chromedp.Run(tctx, chromedp.Text(chromedp.ID("who")))
	if err != nil || !strings.Contains(who, "alice@example.test") || !strings.Contains(who, "approver") {
		t.Errorf("header = %q, %v; want alice@example.test with the approver role", who, err)
	}
	err = chromedp.Do(tctx,
		chromedp.Click(chromedp.CSS(`table.list a[href^="/request"]`)),
		chromedp.WaitVisible(chromedp.ID("reason")),
	)
	if err == nil {
		_, err = chromedp.Run(tctx, chromedp.Poll[bool](`document.readyState === "complete" && typeof htmx !== "undefined"`))
	}
	if err != nil {
		t.Fatalf("opening the request: %v", err)
	}
	err = chromedp.Do(tctx,
		chromedp.SendKeys(chromedp.ID("reason"), "matches the invoice"),
		chromedp.Click(chromedp.CSS(`#actions button.approve`)),
		chromedp.WaitVisible(chromedp.CSS(`#actions button[type="submit"][autofocus]`)), // the confirmation
		chromedp.Click(chromedp.CSS(`#actions button[type="submit"][autofocus]`)),
		chromedp.WaitVisible(chromedp.CSS("section.status.ok")),
	)
	if err != nil {
		t.Fatalf("approving in the console: %v", err)
	}
	if errs := authtest.ConsoleErrors(b); len(errs) > 0 {
		t.Errorf("the browser reported errors: %q", errs)
	}
	audit := e.do("GET", "/sagacity/audit/b", "", "", bearer(audTok)...)
	wantPayload := `"payload":"approver=` + auth.Identity(p.Issuer, "alice-id") + `\nreason=matches the invoice\nauth=oidc\nreceipt=`
	if !strings.Contains(audit.body, wantPayload) {
		t.Errorf("journal = %s\nwant an APPROVED entry with %s", audit.body, wantPayload)
	}
	// Its receipt names the person as the provider does: issuer and subject.
	entries, _, err := engine.ReadNDJSON(strings.NewReader(audit.body))
	if err != nil {
		t.Fatal(err)
	}
	r, err := engine.OpenReceipt(engine.ReceiptOf(entries[len(entries)-1]), testkit.Keys(t).Verifier())
	if err != nil || r.Issuer != p.Issuer || r.Subject != "alice-id" || r.Auth != "oidc" || r.Decision != engine.DecidedApproved {
		t.Errorf("receipt = %+v, %v; want approved by issuer %s, subject alice-id, through oidc", r, err, p.Issuer)
	}
}
