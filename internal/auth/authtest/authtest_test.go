package authtest

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"html"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"
)

var alice = User{
	ID:       "alice-id",
	Username: "alice",
	Password: "correct horse",
	Email:    "alice@example.test",
	Name:     "Alice Liddell",
	Groups:   []string{"approvers", "finance"},
}

// testRP is a minimal relying party built the way a real one is: go-oidc
// discovery, x/oauth2 with PKCE, state and nonce per sign-in.
type testRP struct {
	URL      string // base URL; sign-ins start at URL+"/login"
	callback string
	provider *oidc.Provider
	config   oauth2.Config
	verifier *oidc.IDTokenVerifier

	mu    sync.Mutex
	flows map[string]rpFlow // by state
}

type rpFlow struct {
	nonce, verifier string
}

// rpResult is what a completed sign-in gave the relying party.
type rpResult struct {
	raw   string
	token *oauth2.Token
	id    *oidc.IDToken
	nonce string // the nonce the RP sent
}

// newRP starts a relying party. register is called with the callback URL and
// returns the client credentials.
func newRP(t *testing.T, issuer string, register func(redirectURI string) (id, secret string)) *testRP {
	t.Helper()
	rp := &testRP{flows: map[string]rpFlow{}}
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	rp.URL = srv.URL
	rp.callback = srv.URL + "/callback"

	provider, err := oidc.NewProvider(t.Context(), issuer)
	if err != nil {
		t.Fatalf("oidc.NewProvider(%q): %v", issuer, err)
	}
	id, secret := register(rp.callback)
	rp.provider = provider
	rp.config = oauth2.Config{
		ClientID:     id,
		ClientSecret: secret,
		Endpoint:     provider.Endpoint(),
		RedirectURL:  rp.callback,
		Scopes:       []string{oidc.ScopeOpenID, "email", "profile"},
	}
	rp.verifier = provider.Verifier(&oidc.Config{ClientID: id})

	mux.HandleFunc("GET /login", func(w http.ResponseWriter, r *http.Request) {
		state, f := rand.Text(), rpFlow{nonce: rand.Text(), verifier: oauth2.GenerateVerifier()}
		rp.mu.Lock()
		rp.flows[state] = f
		rp.mu.Unlock()
		http.Redirect(w, r, rp.config.AuthCodeURL(state, oidc.Nonce(f.nonce), oauth2.S256ChallengeOption(f.verifier)), http.StatusFound)
	})
	mux.HandleFunc("GET /callback", func(w http.ResponseWriter, r *http.Request) {
		res, err := rp.complete(r.Context(), r.URL.String())
		if err != nil {
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		if res.id.Nonce != res.nonce {
			http.Error(w, "nonce mismatch", http.StatusUnauthorized)
			return
		}
		fmt.Fprintf(w, "<!doctype html><title>signed in</title><p id=sub>%s</p>", html.EscapeString(res.id.Subject))
	})
	// Chromium reports a missing favicon as a console error.
	mux.HandleFunc("GET /favicon.ico", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) })
	return rp
}

// complete finishes a sign-in from the callback URL: state lookup, code
// exchange with the PKCE verifier, ID token verification. Checking the nonce
// is left to the caller.
func (rp *testRP) complete(ctx context.Context, callbackURL string) (rpResult, error) {
	u, err := url.Parse(callbackURL)
	if err != nil {
		return rpResult{}, err
	}
	q := u.Query()
	f, ok := rp.take(q.Get("state"))
	if !ok {
		return rpResult{}, fmt.Errorf("unknown state %q", q.Get("state"))
	}
	tok, err := rp.config.Exchange(ctx, q.Get("code"), oauth2.VerifierOption(f.verifier))
	if err != nil {
		return rpResult{}, fmt.Errorf("exchange: %w", err)
	}
	raw, _ := tok.Extra("id_token").(string)
	res := rpResult{raw: raw, token: tok, nonce: f.nonce}
	if res.id, err = rp.verifier.Verify(ctx, raw); err != nil {
		return res, fmt.Errorf("verify: %w", err)
	}
	return res, nil
}

// take returns and forgets the sign-in that state belongs to.
func (rp *testRP) take(state string) (rpFlow, bool) {
	rp.mu.Lock()
	defer rp.mu.Unlock()
	f, ok := rp.flows[state]
	delete(rp.flows, state)
	return f, ok
}

func newClient(t *testing.T) *http.Client {
	t.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &http.Client{Jar: jar, Timeout: 10 * time.Second}
}

type groupClaims struct {
	Email  string   `json:"email"`
	Groups []string `json:"groups"`
	Name   string   `json:"name"`
}

func TestProviderLoginHTTP(t *testing.T) {
	t.Parallel()
	p := NewProvider(t, alice, User{ID: "bob-id", Username: "bob", Password: "pw", Email: "bob@example.test"})
	if !strings.HasPrefix(p.Issuer, "http://127.0.0.1:") || !strings.HasSuffix(p.Issuer, "/") {
		t.Errorf("Issuer = %q, want http://127.0.0.1:PORT/", p.Issuer)
	}
	rp := newRP(t, p.Issuer, func(uri string) (string, string) { return p.WebClient(t, uri) })

	target := LoginHTTP(t, newClient(t), rp.URL+"/login", rp.callback, "alice", alice.Password)
	if !strings.HasPrefix(target, rp.callback+"?") {
		t.Fatalf("LoginHTTP returned %q, want the callback %s with a query", target, rp.callback)
	}
	res, err := rp.complete(t.Context(), target)
	if err != nil {
		t.Fatalf("completing the sign-in from %s: %v", target, err)
	}
	if got, want := res.id.Subject, alice.ID; got != want {
		t.Errorf("ID token sub = %q, want %q", got, want)
	}
	if got, want := res.id.Issuer, p.Issuer; got != want {
		t.Errorf("ID token iss = %q, want %q", got, want)
	}
	if res.id.Nonce != res.nonce {
		t.Errorf("ID token nonce = %q, want the RP's %q", res.id.Nonce, res.nonce)
	}
	var idc groupClaims
	if err := res.id.Claims(&idc); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(idc.Groups, alice.Groups) {
		t.Errorf("ID token groups = %q, want %q", idc.Groups, alice.Groups)
	}

	info, err := rp.provider.UserInfo(t.Context(), oauth2.StaticTokenSource(res.token))
	if err != nil {
		t.Fatalf("UserInfo: %v", err)
	}
	if info.Subject != alice.ID || info.Email != alice.Email || !info.EmailVerified {
		t.Errorf("userinfo sub, email, email_verified = %q, %q, %v; want %q, %q, true", info.Subject, info.Email, info.EmailVerified, alice.ID, alice.Email)
	}
	var uic groupClaims
	if err := info.Claims(&uic); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(uic.Groups, alice.Groups) || uic.Name != alice.Name {
		t.Errorf("userinfo groups, name = %q, %q; want %q, %q", uic.Groups, uic.Name, alice.Groups, alice.Name)
	}

	t.Run("user without groups gets an empty array", func(t *testing.T) {
		target := LoginHTTP(t, newClient(t), rp.URL+"/login", rp.callback, "bob", "pw")
		res, err := rp.complete(t.Context(), target)
		if err != nil {
			t.Fatal(err)
		}
		var c map[string]any
		if err := res.id.Claims(&c); err != nil {
			t.Fatal(err)
		}
		if g, ok := c["groups"].([]any); !ok || len(g) != 0 {
			t.Errorf("ID token groups claim = %#v, want []", c["groups"])
		}
	})

	t.Run("code is single use", func(t *testing.T) {
		target := LoginHTTP(t, newClient(t), rp.URL+"/login", rp.callback, "alice", alice.Password)
		q := mustQuery(t, target)
		f, ok := rp.take(q.Get("state"))
		if !ok {
			t.Fatalf("callback %s carries an unknown state", target)
		}
		if _, err := rp.config.Exchange(t.Context(), q.Get("code"), oauth2.VerifierOption(f.verifier)); err != nil {
			t.Fatalf("first exchange: %v", err)
		}
		if _, err := rp.config.Exchange(t.Context(), q.Get("code"), oauth2.VerifierOption(f.verifier)); err == nil {
			t.Error("second exchange of the same code succeeded, want an error")
		}
	})

	t.Run("wrong client secret", func(t *testing.T) {
		target := LoginHTTP(t, newClient(t), rp.URL+"/login", rp.callback, "alice", alice.Password)
		q := mustQuery(t, target)
		f, ok := rp.take(q.Get("state"))
		if !ok {
			t.Fatalf("callback %s carries an unknown state", target)
		}
		bad := rp.config
		bad.ClientSecret = "not-the-secret"
		_, err := bad.Exchange(t.Context(), q.Get("code"), oauth2.VerifierOption(f.verifier))
		var re *oauth2.RetrieveError
		if !errors.As(err, &re) || re.ErrorCode != "invalid_client" {
			t.Errorf("Exchange with a wrong client secret: %v, want invalid_client", err)
		}
	})

	t.Run("client ids are unique", func(t *testing.T) {
		seen := map[string]bool{}
		for range 20 {
			id, secret := p.WebClient(t, rp.callback)
			if seen[id] || id == "" || secret == "" {
				t.Fatalf("WebClient gave id %q (seen before: %v), secret %q", id, seen[id], secret)
			}
			seen[id] = true
		}
	})
}

func mustQuery(t *testing.T, rawURL string) url.Values {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	return u.Query()
}

// fatalRecorder is a testing.TB whose Fatal stops only the goroutine calling
// it, so that a test can check that a helper fails its test.
type fatalRecorder struct {
	testing.TB
	msg string
}

func (f *fatalRecorder) Helper() {}

func (f *fatalRecorder) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func (f *fatalRecorder) Fatal(args ...any) {
	f.msg = fmt.Sprint(args...)
	runtime.Goexit()
}

// failsWith runs fn with a recorder and returns the message it failed with,
// or "" if it did not fail.
func failsWith(t *testing.T, fn func(tb testing.TB)) string {
	rec := &fatalRecorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn(rec)
	}()
	<-done
	return rec.msg
}

func TestLoginHTTPWrongPassword(t *testing.T) {
	t.Parallel()
	p := NewProvider(t, alice)
	rp := newRP(t, p.Issuer, func(uri string) (string, string) { return p.WebClient(t, uri) })
	client := newClient(t)

	var target string
	msg := failsWith(t, func(tb testing.TB) {
		target = LoginHTTP(tb, client, rp.URL+"/login", rp.callback, "alice", "wrong")
	})
	if !strings.Contains(msg, "username or password wrong") {
		t.Errorf("LoginHTTP with a wrong password failed with %q (returned %q), want the provider's rejection", msg, target)
	}

	msg = failsWith(t, func(tb testing.TB) {
		LoginHTTP(tb, client, rp.URL+"/login", rp.callback, "mallory", alice.Password)
	})
	if !strings.Contains(msg, "username or password wrong") {
		t.Errorf("LoginHTTP with an unknown user failed with %q, want the provider's rejection", msg)
	}

	msg = failsWith(t, func(tb testing.TB) {
		LoginHTTP(tb, &http.Client{}, rp.URL+"/login", rp.callback, "alice", alice.Password)
	})
	if !strings.Contains(msg, "cookie jar") {
		t.Errorf("LoginHTTP without a cookie jar failed with %q, want a complaint about the jar", msg)
	}
}

func TestProviderBrowserLogin(t *testing.T) {
	t.Parallel()
	p := NewProvider(t, alice)
	rp := newRP(t, p.Issuer, func(uri string) (string, string) { return p.WebClient(t, uri) })
	ctx := Browser(t)
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()

	err := chromedp.Do(ctx,
		chromedp.Navigate(rp.URL+"/login"),
		chromedp.SendKeys(chromedp.ID("username"), alice.Username),
		chromedp.SendKeys(chromedp.ID("password"), alice.Password),
		chromedp.Click(chromedp.CSS(`button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.ID("sub")),
	)
	if err != nil {
		t.Fatalf("signing in through the browser: %v", err)
	}
	got, err := chromedp.Run(ctx, chromedp.Text(chromedp.ID("sub")))
	if err != nil {
		t.Fatal(err)
	}
	if got != alice.ID {
		t.Errorf("callback page shows subject %q, want %q", got, alice.ID)
	}
	if errs := ConsoleErrors(ctx); len(errs) != 0 {
		t.Errorf("console errors during sign-in: %q", errs)
	}
}

func TestConsoleErrors(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Security-Policy", "default-src 'none'; script-src 'nonce-n0nce'")
		fmt.Fprint(w, `<!doctype html><title>csp</title>
<script nonce="n0nce">console.log("just-a-log"); console.error("from-page", 42);</script>
<script>console.log("inline ran")</script>
<script nonce="n0nce">throw new Error("kaboom")</script>
<p id="done">done</p>`)
	}))
	t.Cleanup(srv.Close)
	ctx := Browser(t)
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, chromedp.Navigate(srv.URL), chromedp.WaitVisible(chromedp.ID("done"))); err != nil {
		t.Fatal(err)
	}

	want := []string{
		"from-page 42",
		"inline script violates the following Content Security Policy directive",
		"Uncaught Error: kaboom",
	}
	var got []string
	// The browser reports a CSP violation on its own schedule; give it a
	// moment rather than assuming it precedes the load event.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		got = ConsoleErrors(ctx)
		if containsAll(got, want) || time.Now().After(deadline) {
			break
		}
	}
	if !containsAll(got, want) {
		t.Errorf("ConsoleErrors = %q, want entries containing each of %q", got, want)
	}
	for _, e := range got {
		if strings.Contains(e, "just-a-log") || strings.Contains(e, "inline ran") {
			t.Errorf("ConsoleErrors has %q, which is not an error", e)
		}
	}
}

func containsAll(got, want []string) bool {
	for _, w := range want {
		if !slices.ContainsFunc(got, func(g string) bool { return strings.Contains(g, w) }) {
			return false
		}
	}
	return true
}

func TestConsoleErrorsNeedsBrowserContext(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("ConsoleErrors(context.Background()) did not panic, want a panic")
		}
	}()
	ConsoleErrors(context.Background())
}

func TestRogueFlow(t *testing.T) {
	t.Parallel()
	r := NewRogue(t)
	rp := newRP(t, r.Issuer, func(string) (string, string) { return "rp-client", "rp-secret" })

	target := LoginHTTP(t, newClient(t), rp.URL+"/login", rp.callback, "", "")
	res, err := rp.complete(t.Context(), target)
	if err != nil {
		t.Fatalf("completing the rogue sign-in: %v", err)
	}
	if res.id.Subject != "rogue-1" || res.id.Nonce != res.nonce {
		t.Errorf("ID token sub, nonce = %q, %q; want rogue-1, %q", res.id.Subject, res.id.Nonce, res.nonce)
	}
	var idc groupClaims
	if err := res.id.Claims(&idc); err != nil {
		t.Fatal(err)
	}
	if idc.Email != "rogue@example.test" || !slices.Equal(idc.Groups, []string{"approvers"}) {
		t.Errorf("ID token email, groups = %q, %q; want rogue@example.test, [approvers]", idc.Email, idc.Groups)
	}
	info, err := rp.provider.UserInfo(t.Context(), oauth2.StaticTokenSource(res.token))
	if err != nil {
		t.Fatalf("UserInfo: %v", err)
	}
	var uic groupClaims
	if err := info.Claims(&uic); err != nil {
		t.Fatal(err)
	}
	if info.Subject != "rogue-1" || info.Email != "rogue@example.test" || !slices.Equal(uic.Groups, []string{"approvers"}) {
		t.Errorf("userinfo sub, email, groups = %q, %q, %q; want rogue-1, rogue@example.test, [approvers]", info.Subject, info.Email, uic.Groups)
	}
}

func TestRogueIDTokenHooks(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		hook func(c map[string]any) (map[string]any, string)
		// wantErr is part of go-oidc's verification error; "" means the
		// token verifies and only the RP's nonce check can catch it.
		wantErr string
	}{
		{"nonce changed", func(c map[string]any) (map[string]any, string) { c["nonce"] = "other"; return c, "RS256" }, ""},
		{"iss changed", func(c map[string]any) (map[string]any, string) { c["iss"] = "http://evil.test"; return c, "RS256" }, "issued by a different provider"},
		{"aud changed", func(c map[string]any) (map[string]any, string) { c["aud"] = "someone-else"; return c, "RS256" }, "audience"},
		{"expired", func(c map[string]any) (map[string]any, string) {
			c["exp"] = time.Now().Add(-time.Hour).Unix()
			return c, "RS256"
		}, "expired"},
		{"alg none", func(c map[string]any) (map[string]any, string) { return c, "none" }, "malformed"},
		{"HS256 key confusion", func(c map[string]any) (map[string]any, string) { return c, "HS256" }, "unexpected signature algorithm"},
		{"signed by another key", func(c map[string]any) (map[string]any, string) { return c, "RS256-other" }, "failed to verify signature"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := NewRogue(t)
			r.IDToken = tt.hook
			rp := newRP(t, r.Issuer, func(string) (string, string) { return "rp-client", "rp-secret" })
			target := LoginHTTP(t, newClient(t), rp.URL+"/login", rp.callback, "", "")
			res, err := rp.complete(t.Context(), target)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("complete: %v, want the token to verify", err)
				}
				if res.id.Nonce == res.nonce {
					t.Errorf("ID token nonce = %q, the RP's own; want it changed", res.id.Nonce)
				}
				return
			}
			if err == nil {
				t.Fatalf("go-oidc accepted the ID token %s, want an error containing %q", res.raw, tt.wantErr)
			}
			if !strings.HasPrefix(err.Error(), "verify: ") || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("complete: %v, want a verification error containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestRogueRejectsWrongCodeVerifier(t *testing.T) {
	t.Parallel()
	r := NewRogue(t)
	rp := newRP(t, r.Issuer, func(string) (string, string) { return "rp-client", "rp-secret" })
	target := LoginHTTP(t, newClient(t), rp.URL+"/login", rp.callback, "", "")
	_, err := rp.config.Exchange(t.Context(), mustQuery(t, target).Get("code"), oauth2.VerifierOption(oauth2.GenerateVerifier()))
	var re *oauth2.RetrieveError
	if !errors.As(err, &re) || re.ErrorCode != "invalid_grant" || re.Response.StatusCode != http.StatusBadRequest {
		t.Errorf("Exchange with a wrong code_verifier: %v, want 400 invalid_grant", err)
	}
}

func TestRogueSign(t *testing.T) {
	t.Parallel()
	r := NewRogue(t)
	provider, err := oidc.NewProvider(t.Context(), r.Issuer)
	if err != nil {
		t.Fatal(err)
	}
	verifier := provider.Verifier(&oidc.Config{ClientID: "api"})
	claims := func(edit func(map[string]any)) map[string]any {
		c := map[string]any{
			"iss": r.Issuer,
			"sub": "agent-7",
			"aud": "api",
			"exp": time.Now().Add(5 * time.Minute).Unix(),
			"iat": time.Now().Unix(),
		}
		if edit != nil {
			edit(c)
		}
		return c
	}
	tests := []struct {
		name    string
		claims  map[string]any
		alg     string
		wantErr string // "" means it verifies
	}{
		{"RS256", claims(nil), "RS256", ""},
		{"RS256 audience list", claims(func(c map[string]any) { c["aud"] = []string{"other", "api"} }), "RS256", ""},
		{"wrong audience", claims(func(c map[string]any) { c["aud"] = "other" }), "RS256", "audience"},
		{"wrong issuer", claims(func(c map[string]any) { c["iss"] = "http://evil.test" }), "RS256", "issued by a different provider"},
		{"expired", claims(func(c map[string]any) { c["exp"] = time.Now().Add(-time.Minute).Unix() }), "RS256", "expired"},
		{"other key", claims(nil), "RS256-other", "failed to verify signature"},
		{"none", claims(nil), "none", "malformed"},
		{"HS256 key confusion", claims(nil), "HS256", "unexpected signature algorithm"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tok := r.Sign(t, "JWT", tt.claims, tt.alg)
			_, err := verifier.Verify(t.Context(), tok)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("Verify(Sign(%v, %q)): %v, want success", tt.claims, tt.alg, err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("Verify(Sign(%v, %q)): %v, want an error containing %q", tt.claims, tt.alg, err, tt.wantErr)
			}
		})
	}

	if msg := failsWith(t, func(tb testing.TB) { r.Sign(tb, "JWT", claims(nil), "ES256") }); !strings.Contains(msg, "unknown alg") {
		t.Errorf("Sign with alg ES256 failed with %q, want an unknown-alg failure", msg)
	}
}
