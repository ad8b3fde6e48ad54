package auth

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/sagacity-go/sagacity/evidence"
	"github.com/sagacity-go/sagacity/internal/engine"
	"golang.org/x/oauth2"
)

// SigningAlgs are the only ID token algorithms accepted
// (evidence.SigningAlgs): go-oidc at the callback accepts those the
// evidence is checked under.
var SigningAlgs = evidence.SigningAlgs

// loginTTL is how long a sign-in may take at the provider.
const loginTTL = 10 * time.Minute

// CallbackPath is where the provider sends the browser back.
const CallbackPath = "/auth/callback"

// SignedOutPath is the page a person lands on after signing out, back
// from the provider when it ended its session too.
const SignedOutPath = "/signed-out"

// signedOutCookie marks a browser that signed out: its next sign-in asks
// the provider for its login form (prompt=login), whatever session the
// provider kept.
const signedOutCookie = "sagacity-signed-out"

// maxAge is the max_age every sign-in asks for: a provider must then say
// when the person authenticated (auth_time, which receipts carry), and
// authenticate again a person whose sign-in there is older than a
// session here may last.
const maxAge = AbsoluteTimeout

// OIDC signs people in to the console with the authorisation code flow,
// PKCE (S256), state and nonce, all kept server-side and bound to the
// browser that started the sign-in.
type OIDC struct {
	Provider *oidc.Provider
	OAuth    oauth2.Config
	Verifier *oidc.IDTokenVerifier
	Issuer   string
	Roles    RoleMap
	Sessions *Sessions
	// EndSession is the provider's end_session_endpoint (RP-initiated
	// logout), "" when it offers none.
	EndSession string
	// keys find the provider's key that verified an ID token.
	keys *providerKeys
	// PublicURL is the console's external base URL.
	PublicURL string
}

// OIDCConfig is what NewOIDC needs.
type OIDCConfig struct {
	Issuer, ClientID, ClientSecret string
	PublicURL                      string // the console's external base URL
	APIAudience                    string
	Roles                          RoleMap
	Sessions                       *Sessions
}

// NewOIDC discovers the provider. The issuer must match exactly.
func NewOIDC(ctx context.Context, c OIDCConfig) (*OIDC, error) {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	p, err := oidc.NewProvider(ctx, c.Issuer)
	if err != nil {
		return nil, fmt.Errorf("discovering the OIDC provider: %w", err)
	}
	// Some providers (Dex, Okta) put the roles' claim in the ID token only
	// when a scope of its name is asked for; others refuse scopes they do
	// not know. Ask for it where the provider says it has it.
	scopes := []string{oidc.ScopeOpenID, "profile", "email"}
	var meta struct {
		Scopes     []string `json:"scopes_supported"`
		EndSession string   `json:"end_session_endpoint"`
		JWKS       string   `json:"jwks_uri"`
	}
	if p.Claims(&meta) == nil && c.Roles.Claim != "" && slices.Contains(meta.Scopes, c.Roles.Claim) {
		scopes = append(scopes, c.Roles.Claim)
	}
	return &OIDC{
		Provider: p,
		Issuer:   c.Issuer,
		OAuth: oauth2.Config{ClientID: c.ClientID, ClientSecret: c.ClientSecret, Endpoint: p.Endpoint(),
			RedirectURL: c.PublicURL + CallbackPath, Scopes: scopes},
		Verifier:   p.Verifier(&oidc.Config{ClientID: c.ClientID, SupportedSigningAlgs: SigningAlgs}),
		Roles:      c.Roles,
		Sessions:   c.Sessions,
		EndSession: meta.EndSession,
		PublicURL:  c.PublicURL,
		keys:       &providerKeys{uri: meta.JWKS, client: &http.Client{Timeout: 15 * time.Second}},
	}, nil
}

// APIVerifier verifies JWT bearer tokens issued for audience.
func (o *OIDC) APIVerifier(audience string) *oidc.IDTokenVerifier {
	return o.Provider.Verifier(&oidc.Config{ClientID: audience, SupportedSigningAlgs: SigningAlgs})
}

func invalid(format string, args ...any) error { return engine.Errorf(engine.Invalid, format, args...) }

// ReturnTo checks where to send the browser after sign-in: a path on this
// site, never another origin. Invalid otherwise.
func ReturnTo(s string) (string, error) {
	if s == "" {
		return "/", nil
	}
	u, err := url.Parse(s)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil || !strings.HasPrefix(s, "/") ||
		strings.HasPrefix(s, "//") || strings.HasPrefix(s, `/\`) || strings.ContainsAny(s, "\r\n\t\\") {
		return "", invalid("return_to must be a path on this site")
	}
	return s, nil
}

// MaxAgeParam names how recent a sign-in a step-up asks for, in seconds:
// GET /login?return_to=…&max_age=900; max_age=0 asks the provider to
// authenticate the person again, as enrolling a passkey takes.
const MaxAgeParam = "max_age"

// StepUp reads a sign-in's max_age parameter: 0 when absent, else whole
// seconds from one minute to a session's life; reauth for "0". Invalid
// otherwise.
func StepUp(v string) (d time.Duration, reauth bool, err error) {
	switch v {
	case "":
		return 0, false, nil
	case "0":
		return 0, true, nil
	}
	n, err := strconv.Atoi(v)
	if d := time.Duration(n) * time.Second; err == nil && d >= time.Minute && d <= maxAge {
		return d, false, nil
	}
	return 0, false, invalid("max_age must be 0 (authenticate again) or whole seconds from 60 to %d", int(maxAge.Seconds()))
}

// Start begins a sign-in: GET /login?return_to=/path redirects to the
// provider with a fresh state, nonce and PKCE challenge. With max_age
// (a step-up: a rule that counts votes only from a recent sign-in) the
// provider is asked for that max_age and its login form (prompt=login),
// and the callback holds its auth_time to it.
func (o *OIDC) Start(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	returnTo, err := ReturnTo(q.Get("return_to"))
	if err != nil {
		return err
	}
	fresh, reauth, err := StepUp(q.Get(MaxAgeParam))
	if err != nil {
		return err
	}
	s := o.Sessions
	id := newID()
	l := Login{IDHash: s.loginHash(id), State: newID(), Nonce: newID(), Verifier: oauth2.GenerateVerifier(),
		ReturnTo: returnTo, MaxAge: fresh, Reauth: reauth, CreatedAt: engine.Truncate(s.Now())}
	l.Seal = s.sealLogin(l)
	if err := s.Store.PutLogin(r.Context(), l, s.Now().Add(-loginTTL)); err != nil {
		return err
	}
	s.set(w, "sagacity-login", id, int(loginTTL.Seconds()))
	opts := []oauth2.AuthCodeOption{oidc.Nonce(l.Nonce), oauth2.S256ChallengeOption(l.Verifier),
		oauth2.SetAuthURLParam("max_age", strconv.Itoa(int(l.maxAge().Seconds())))}
	if _, err := r.Cookie(s.cookie(signedOutCookie)); err == nil || fresh > 0 || reauth {
		opts = append(opts, oauth2.SetAuthURLParam("prompt", "login"))
	}
	http.Redirect(w, r, o.OAuth.AuthCodeURL(l.State, opts...), http.StatusFound)
	return nil
}

// maxAge is the max_age the sign-in asks the provider for.
func (l Login) maxAge() time.Duration {
	switch {
	case l.Reauth:
		return 0
	case l.MaxAge > 0:
		return l.MaxAge
	}
	return maxAge
}

// skew is how far the provider's clock may be from ours when its
// auth_time is held to max_age: a step-up allows a minute, since the vote
// it is for is held to the same window by the engine.
func skew(l Login) time.Duration {
	if l.MaxAge > 0 || l.Reauth {
		return time.Minute
	}
	return 5 * time.Minute
}

// Logout ends the session here and, where the provider offers
// RP-initiated logout, there too: POST /logout sends the browser to the
// provider's end_session_endpoint, which sends it back to the signed-out
// page. Either way the next sign-in asks for the provider's login form.
func (o *OIDC) Logout(w http.ResponseWriter, r *http.Request) error {
	s := o.Sessions
	if err := s.SignOut(w, r); err != nil {
		return err
	}
	s.set(w, signedOutCookie, "1", int(AbsoluteTimeout.Seconds()))
	if o.EndSession == "" {
		http.Redirect(w, r, SignedOutPath, http.StatusSeeOther)
		return nil
	}
	u, err := url.Parse(o.EndSession)
	if err != nil {
		return fmt.Errorf("the provider's end_session_endpoint: %w", err)
	}
	q := u.Query()
	q.Set("client_id", o.OAuth.ClientID)
	q.Set("post_logout_redirect_uri", o.PublicURL+SignedOutPath)
	u.RawQuery = q.Encode()
	http.Redirect(w, r, u.String(), http.StatusSeeOther)
	return nil
}

// Callback completes a sign-in: GET /auth/callback?code&state. It checks
// the state against the one this browser's sign-in stored, redeems the code
// with the PKCE verifier, verifies the ID token (issuer, audience, expiry,
// signature, algorithm) and its nonce, then starts a session. Every
// failure is Invalid and starts nothing.
func (o *OIDC) Callback(w http.ResponseWriter, r *http.Request) error {
	s := o.Sessions
	c, err := r.Cookie(s.cookie("sagacity-login"))
	s.set(w, "sagacity-login", "", -1)
	if err != nil || c.Value == "" {
		return invalid("this sign-in was not started in this browser, or took too long; sign in again")
	}
	h := s.loginHash(c.Value)
	l, err := s.Store.TakeLogin(r.Context(), h)
	if engine.IsKind(err, engine.NotFound) {
		return invalid("this sign-in was already used or has expired; sign in again")
	}
	if err != nil {
		return err
	}
	if l.IDHash != h || !sealed(l.Seal, s.sealLogin(l)) {
		return &engine.Error{Kind: engine.Invalid, Msg: "this sign-in was already used or has expired; sign in again",
			Err: errors.New("the sign-in's row is not sealed as the server wrote it: written or edited outside the server")}
	}
	// Sealed, it is the path Start checked; checked again all the same,
	// as where a browser is sent must never rest on one check.
	if l.ReturnTo, err = ReturnTo(l.ReturnTo); err != nil {
		return err
	}
	q := r.URL.Query()
	if e := q.Get("error"); e != "" {
		return invalid("the identity provider refused the sign-in (%s)", clean(e))
	}
	if subtle.ConstantTimeCompare([]byte(q.Get("state")), []byte(l.State)) != 1 {
		return invalid("the sign-in's state does not match; sign in again")
	}
	if s.Now().Sub(l.CreatedAt) > loginTTL {
		return invalid("the sign-in took too long; sign in again")
	}
	ctx, cancel := context.WithTimeout(r.Context(), 15*time.Second)
	defer cancel()
	tok, err := o.OAuth.Exchange(ctx, q.Get("code"), oauth2.VerifierOption(l.Verifier))
	if err != nil {
		return &engine.Error{Kind: engine.Invalid, Msg: "the identity provider did not redeem the sign-in code", Err: err}
	}
	raw, _ := tok.Extra("id_token").(string)
	if raw == "" {
		return invalid("the identity provider sent no ID token")
	}
	idt, err := o.Verifier.Verify(ctx, raw)
	if err != nil {
		return &engine.Error{Kind: engine.Invalid, Msg: "the ID token is not valid", Err: err}
	}
	// go-oidc checks issuer, audience, expiry and signature, not the nonce.
	if subtle.ConstantTimeCompare([]byte(idt.Nonce), []byte(l.Nonce)) != 1 {
		return invalid("the ID token's nonce does not match this sign-in")
	}
	claims := map[string]any{}
	if err := idt.Claims(&claims); err != nil {
		return invalid("the ID token's claims are unreadable")
	}
	// Asked with max_age, a provider must say when the person
	// authenticated; receipts carry it.
	now := s.Now()
	at, err := signedInAt(claims, now)
	switch {
	case err != nil:
		return invalid("the identity provider's sign-in time is in the future: %s", err.Error())
	case at.IsZero():
		return invalid("the identity provider sent no auth_time although the sign-in asked for max_age; it must say when the person authenticated")
	case now.Sub(at) > l.maxAge()+skew(l),
		l.Reauth && at.Before(l.CreatedAt.Add(-MaxClockSkew)):
		return invalid("the identity provider did not authenticate the person again although their sign-in there is older than max_age")
	}
	if _, hasRoles := claims[o.Roles.Claim]; !hasRoles || displayName(claims, "") == "" {
		// Some providers put email and groups in userinfo only.
		ui, err := o.Provider.UserInfo(ctx, oauth2.StaticTokenSource(tok))
		if err != nil {
			return &engine.Error{Kind: engine.Unavailable, Msg: "the identity provider's userinfo endpoint failed", Err: err}
		}
		if ui.Subject != idt.Subject {
			return invalid("userinfo is for another subject")
		}
		extra := map[string]any{}
		if err := ui.Claims(&extra); err == nil {
			for k, v := range extra {
				if _, ok := claims[k]; !ok {
					claims[k] = v
				}
			}
		}
	}
	// The provider's own word on the sign-in, which the session's first
	// decision journals: the token, and the key of its that verifies it.
	key, thumbprint, err := o.keys.keyFor(ctx, raw)
	if err != nil {
		return err
	}
	p := oidcPrincipal(o.Issuer, idt.Subject, claims, o.Roles, at)
	p.SignIn = &engine.SignIn{Token: raw, ClientID: o.OAuth.ClientID, Key: key, KeyID: thumbprint, Reauth: l.Reauth}
	if err := s.SignIn(w, r, p); err != nil {
		return err
	}
	s.set(w, signedOutCookie, "", -1)
	http.Redirect(w, r, l.ReturnTo, http.StatusFound)
	return nil
}

// clean keeps provider-supplied text short and printable.
func clean(s string) string {
	if len(s) > 100 {
		s = s[:100]
	}
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, s)
}
