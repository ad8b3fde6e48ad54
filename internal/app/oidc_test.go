package app_test

import (
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/sagacity-go/sagacity/evidence"
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
		id, sec := p.WebClient(t, redirect, strings.TrimSuffix(redirect, auth.CallbackPath)+auth.SignedOutPath)
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
	t.Parallel()
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
	t.Parallel()
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

// TestOIDCSignOutPrompt: against a provider with no end-session endpoint,
// every sign-in asks for max_age, sign-out lands on the signed-out page,
// and the next sign-in asks the provider for its login form
// (prompt=login), once.
func TestOIDCSignOutPrompt(t *testing.T) {
	t.Parallel()
	r := authtest.NewRogue(t)
	e := newAPI(t, testkit.SQLiteURL(t), envOptions{roles: groupRoles,
		oidc: func(string) (string, string, string) { return r.Issuer, "sagacity-console", "rogue-secret" }})
	c := jar(t)
	signIn := func() {
		t.Helper()
		u := authtest.LoginHTTP(t, c, e.url+"/login", e.url+auth.CallbackPath, "", "")
		if code, _ := visit(t, c, u); code != 302 || !signedIn(t, e, c) {
			t.Fatalf("sign-in: callback %d; want a session", code)
		}
	}
	signIn()
	req, _ := http.NewRequest("POST", e.url+"/logout", nil)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 303 || resp.Header.Get("Location") != auth.SignedOutPath || signedIn(t, e, c) {
		t.Fatalf("POST /logout = %d to %q; want 303 to %s and no session", resp.StatusCode, resp.Header.Get("Location"), auth.SignedOutPath)
	}
	if code, _ := visit(t, c, e.url+auth.SignedOutPath); code != 200 {
		t.Errorf("the signed-out page = %d; want 200", code)
	}
	signIn()
	signIn()
	got := r.Authorized()
	if len(got) != 3 {
		t.Fatalf("the provider was asked %d times; want 3", len(got))
	}
	for i, q := range got {
		if q.Get("max_age") != "43200" {
			t.Errorf("sign-in %d asked max_age %q; want 43200, the session's longest life", i+1, q.Get("max_age"))
		}
		if wantPrompt := map[int]string{1: "login"}[i]; q.Get("prompt") != wantPrompt {
			t.Errorf("sign-in %d asked prompt %q; want %q", i+1, q.Get("prompt"), wantPrompt)
		}
	}
}

// TestOIDCBadIDTokens signs in against a provider that issues bad ID tokens.
func TestOIDCBadIDTokens(t *testing.T) {
	t.Parallel()
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
		// Asked for max_age, a provider must say when the person
		// authenticated, and must have authenticated them since.
		{"no auth_time", func(c map[string]any) (map[string]any, string) { delete(c, "auth_time"); return c, "RS256" }},
		{"auth_time older than max_age", func(c map[string]any) (map[string]any, string) {
			c["auth_time"] = time.Now().Add(-13 * time.Hour).Unix()
			return c, "RS256"
		}},
		// A sign-in time in the future would meet any step-up.
		{"auth_time in the future", func(c map[string]any) (map[string]any, string) {
			c["auth_time"] = time.Now().Add(auth.MaxClockSkew + time.Minute).Unix()
			return c, "RS256"
		}},
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
	t.Parallel()
	r := authtest.NewRogue(t)
	e := newAPI(t, testkit.SQLiteURL(t), envOptions{roles: groupRoles, apiAudience: "sagacity-api",
		oidc: func(string) (string, string, string) { return r.Issuer, "sagacity-console", "rogue-secret" }})
	jwtOf := func(typ string, mut func(map[string]any), alg string) string {
		c := map[string]any{"iss": r.Issuer, "aud": "sagacity-api", "sub": "svc-7", "exp": time.Now().Add(time.Hour).Unix(),
			"iat": time.Now().Unix(), "groups": []string{"agents"}}
		if mut != nil {
			mut(c)
		}
		tok := r.Sign(t, typ, c, alg)
		credential(tok)
		return tok
	}
	jwt := func(mut func(map[string]any), alg string) string { return jwtOf("at+jwt", mut, alg) }
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
		// Signed by the issuer for the audience, but not access tokens:
		// an ID token (typ JWT, a nonce and auth_time), a JWT of no type,
		// one of another type.
		"an ID token":                       jwtOf("JWT", func(c map[string]any) { c["nonce"], c["auth_time"] = "n-1", time.Now().Unix() }, "RS256"),
		"a JWT of no type":                  jwtOf("", nil, "RS256"),
		"a logout token (typ logout+jwt)":   jwtOf("logout+jwt", nil, "RS256"),
		"an access token typed in a prefix": jwtOf("at+jwt+x", nil, "RS256"),
	} {
		want(t, name, e.do("POST", "/sagacity/sagas/j2/calls", "application/json", call, bearer(tok)...), 401)
	}
	// A sign-in time in the future would meet any step-up; one within
	// the clocks' skew counts as now.
	future := jwt(func(c map[string]any) {
		c["sub"], c["groups"], c["auth_time"] = "boss-2", []string{"approvers"}, time.Now().Add(auth.MaxClockSkew+time.Minute).Unix()
	}, "RS256")
	want(t, "auth_time in the future", e.do("POST", "/sagacity/approve/j/1", "application/json", `{}`, bearer(future)...), 401)
	approver := jwt(func(c map[string]any) {
		c["sub"], c["groups"], c["auth_time"] = "boss-1", []string{"approvers"}, time.Now().Add(auth.MaxClockSkew/2).Unix()
	}, "RS256")
	resp := e.do("POST", "/sagacity/approve/j/1", "application/json", `{}`, bearer(approver)...)
	if resp.code != 200 || !strings.Contains(resp.body, `"approverIdentity":"`+auth.Identity(r.Issuer, "boss-1")+`"`) {
		t.Errorf("approver JWT = %d %s, want approved by issuer#boss-1", resp.code, resp.body)
	}
}

// TestBrowserApproval: a person signs in through the test provider in
// Chromium and approves a pending request in the console; the journal
// carries their identity and auth=oidc, and the pages break no CSP rule.
func TestBrowserApproval(t *testing.T) {
	t.Parallel()
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
	entries, _, err := evidence.ReadNDJSON(strings.NewReader(audit.body))
	if err != nil {
		t.Fatal(err)
	}
	r, err := engine.OpenReceipt(engine.ReceiptOf(entries[len(entries)-1]), testkit.Keys(t).Verifier())
	if err != nil || r.Issuer != p.Issuer || r.Subject != "alice-id" || r.Auth != "oidc" || r.Decision != engine.DecidedApproved {
		t.Errorf("receipt = %+v, %v; want approved by issuer %s, subject alice-id, through oidc", r, err, p.Issuer)
	}
	// The provider, as its defaults are, said when alice authenticated:
	// the sign-in asked for max_age.
	if r.AuthTime.IsZero() || time.Since(r.AuthTime) > 10*time.Minute {
		t.Errorf("receipt's auth time = %v; want when alice signed in, a moment ago", r.AuthTime)
	}

	// Sign out ends the provider's session too (RP-initiated logout),
	// lands on the signed-out page, and the next visit is the provider's
	// login form, not the console.
	err = chromedp.Do(tctx,
		chromedp.Click(chromedp.CSS(`form[action="/logout"] button`)),
		chromedp.WaitVisible(chromedp.ID("signed-out")),
	)
	if err != nil {
		t.Fatalf("signing out: %v", err)
	}
	if got := p.SignOuts(); len(got) != 1 || got[0] != e.opts.OIDC.OAuth.ClientID {
		t.Errorf("the provider's end-session endpoint took sign-outs %q; want one, of the console's client %s", got, e.opts.OIDC.OAuth.ClientID)
	}
	err = chromedp.Do(tctx, chromedp.Navigate(e.url+"/"), chromedp.WaitVisible(chromedp.ID("username")))
	if err != nil {
		t.Fatalf("the next visit after signing out: %v; want the provider's login form", err)
	}
	if where, _ := chromedp.Run(tctx, chromedp.Location()); !strings.HasPrefix(where, p.Issuer) {
		t.Errorf("the next visit after signing out is at %s; want the provider's login form", where)
	}
	if errs := authtest.ConsoleErrors(b); len(errs) > 0 {
		t.Errorf("signing out, the browser reported errors: %q", errs)
	}
}

// TestApproverGroups: a rule's approvers may name a group the provider's
// roles claim lists, whether or not it maps to a role: an approver in it
// may approve, one outside it is refused, saying which rule asks for what.
func TestApproverGroups(t *testing.T) {
	t.Parallel()
	policy, err := engine.CompilePolicy(engine.PolicySpec{Tools: map[string][]engine.RuleSpec{
		"sendWireTransfer": {{Name: "finance", Approvers: []string{"finance-leads"}}}}})
	if err != nil {
		t.Fatal(err)
	}
	r := authtest.NewRogue(t)
	e := newAPI(t, testkit.SQLiteURL(t), envOptions{roles: groupRoles, apiAudience: "sagacity-api", approvals: policy,
		oidc: func(string) (string, string, string) { return r.Issuer, "sagacity-console", "rogue-secret" }})
	jwt := func(sub string, groups ...string) []string {
		tok := r.Sign(t, "at+jwt", map[string]any{"iss": r.Issuer, "aud": "sagacity-api", "sub": sub, "iat": time.Now().Unix(),
			"exp": time.Now().Add(time.Hour).Unix(), "groups": groups}, "RS256")
		credential(tok)
		return bearer(tok)
	}
	want(t, "gate", e.do("POST", "/sagacity/sagas/g/calls", "application/json", `{"tool":"sendWireTransfer","input":"{}"}`, jwt("bot", "agents")...), 202)
	refused := e.do("POST", "/sagacity/approve/g/1", "application/json", `{}`, jwt("ann", "approvers")...)
	if refused.code != 403 || !strings.Contains(refused.body, "takes one of finance-leads (approval rule finance)") {
		t.Errorf("approval by an approver outside finance-leads = %d %s; want 403 naming the rule", refused.code, refused.body)
	}
	want(t, "approval by a finance lead", e.do("POST", "/sagacity/approve/g/1", "application/json", `{}`, jwt("fin", "approvers", "finance-leads")...), 200)
}

// TestReauthToEnrol: enrolling a passkey takes a sign-in of its own, in
// which the provider authenticated the person again: a session from an
// ordinary sign-in, however recent, is sent to sign in with max_age=0
// and prompt=login, and a provider that answers with a sign-in from
// before that one began is refused; the provider's ID token and the key
// that verifies it are kept with the session.
func TestReauthToEnrol(t *testing.T) {
	t.Parallel()
	r := authtest.NewRogue(t)
	e := newAPI(t, testkit.SQLiteURL(t), envOptions{roles: groupRoles,
		oidc: func(string) (string, string, string) { return r.Issuer, "sagacity-console", "rogue-secret" }})
	signedInAgo := func(ago time.Duration) {
		r.IDToken = func(claims map[string]any) (map[string]any, string) {
			claims["auth_time"] = time.Now().Add(-ago).Unix()
			return claims, "RS256"
		}
	}
	c := jar(t)
	signedInAgo(0)
	if code, _ := visit(t, c, authtest.LoginHTTP(t, c, e.url+"/login", e.url+auth.CallbackPath, "", "")); code != 302 || !signedIn(t, e, c) {
		t.Fatalf("signing in: %d; want a session", code)
	}
	begin := func() (int, string) {
		t.Helper()
		req, _ := http.NewRequest("POST", e.url+"/me/passkeys/begin", strings.NewReader("{}"))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Sec-Fetch-Site", "same-origin")
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := begin(); code != 403 || !strings.Contains(body, `"code":"STEP_UP"`) || !strings.Contains(body, "a sign-in of its own") {
		t.Errorf("enrolling from an ordinary sign-in of just now = %d %s; want 403 STEP_UP, a sign-in of its own", code, body)
	}
	me := e.do("GET", "/me", "", "", "Cookie", cookieHeader(c, e.url))
	if !strings.Contains(me.body, "max_age=0") {
		t.Errorf("/me = %d; want a link to sign in again with max_age=0:\n%s", me.code, me.body)
	}
	again := "/login?" + url.Values{"return_to": {"/me"}, auth.MaxAgeParam: {"0"}}.Encode()
	// The provider answers with the sign-in it had: refused.
	signedInAgo(2 * time.Minute)
	u := authtest.LoginHTTP(t, c, e.url+again, e.url+auth.CallbackPath, "", "")
	if q := r.Authorized(); q[len(q)-1].Get("max_age") != "0" || q[len(q)-1].Get("prompt") != "login" {
		t.Errorf("the re-authentication asked the provider %v; want max_age=0 and prompt=login", q[len(q)-1])
	}
	if code, _ := visit(t, c, u); code != 400 {
		t.Errorf("a re-authentication answered with a sign-in from before it = %d; want 400", code)
	}
	signedInAgo(0)
	u = authtest.LoginHTTP(t, c, e.url+again, e.url+auth.CallbackPath, "", "")
	if code, loc := visit(t, c, u); code != 302 || loc != "/me" {
		t.Fatalf("the re-authentication's callback = %d %q; want 302 to /me", code, loc)
	}
	if code, body := begin(); code != 200 || !strings.Contains(body, `"ceremony"`) {
		t.Errorf("enrolling from a sign-in of its own = %d %s; want the ceremony's options", code, body)
	}
}

// cookieHeader is the Cookie header c's jar sends to base.
func cookieHeader(c *http.Client, base string) string {
	u, _ := url.Parse(base)
	var parts []string
	for _, ck := range c.Jar.Cookies(u) {
		parts = append(parts, ck.Name+"="+ck.Value)
	}
	return strings.Join(parts, "; ")
}
