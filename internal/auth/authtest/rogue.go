package authtest

import (
	"crypto"
	"crypto/hmac"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// Rogue is a minimal OpenID provider whose tokens can be made wrong on
// purpose, for negative tests of a relying party.
//
// It serves discovery at /.well-known/openid-configuration, its RSA-2048
// public key at /jwks (with a kid), /authorize, which signs User in at once
// and redirects (302) to redirect_uri with a random code and the state,
// /token, and /userinfo. /token accepts client credentials by HTTP Basic or
// in the form without checking the secret, requires the code to exist (codes
// are single-use) and S256(code_verifier) to equal the code_challenge sent to
// /authorize, and answers {"error":"invalid_grant"} (400) otherwise; so a
// relying party that skips PKCE cannot sign in.
//
// Set User and IDToken before the flow they should affect starts.
type Rogue struct {
	Issuer string // "http://127.0.0.1:PORT", as discovery reports it

	// User is who signs in. The default is sub "rogue-1",
	// email "rogue@example.test", groups ["approvers"].
	User User

	// IDToken, when set, shapes the ID token that /token returns. It gets
	// the default claims (iss, sub, aud = client_id, exp = now+5m, iat = now,
	// nonce from /authorize, email, email_verified, groups, name when
	// User has one, and auth_time = now when /authorize had max_age, as
	// OpenID Connect requires) and returns the claims to sign and the alg: "RS256"
	// (normal), "none" (unsigned), "HS256" (key confusion, see Sign) or
	// "RS256-other".
	IDToken func(claims map[string]any) (map[string]any, string)

	key *rsa.PrivateKey
	kid string

	otherOnce sync.Once
	other     *rsa.PrivateKey

	mu         sync.Mutex
	grants     map[string]rogueGrant // by code
	tokens     map[string]User       // by access token
	authorized []url.Values          // every /authorize request's query
}

// Authorized lists the queries of the /authorize requests the rogue got,
// in order.
func (r *Rogue) Authorized() []url.Values {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.authorized)
}

// rogueGrant is what /authorize remembers for /token.
type rogueGrant struct {
	clientID, nonce, challenge, redirectURI string
	maxAge                                  bool // the request asked for max_age
}

// NewRogue starts a Rogue on 127.0.0.1; it is stopped at t's cleanup.
func NewRogue(t testing.TB) *Rogue {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatalf("NewRogue: generating the RSA key: %v", err)
	}
	r := &Rogue{
		User: User{
			ID:     "rogue-1",
			Email:  "rogue@example.test",
			Groups: []string{"approvers"},
		},
		key:    key,
		kid:    "rogue-" + rand.Text()[:8],
		grants: map[string]rogueGrant{},
		tokens: map[string]User{},
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/openid-configuration", r.discovery)
	mux.HandleFunc("GET /jwks", r.jwks)
	mux.HandleFunc("GET /authorize", r.authorize)
	mux.HandleFunc("POST /token", r.token)
	mux.HandleFunc("GET /userinfo", r.userinfo)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	r.Issuer = srv.URL
	return r
}

// Sign returns a compact JWT over claims. alg is "RS256" (the rogue's key,
// its kid in the header), "none" (no signature), "HS256" (an HMAC keyed with
// the DER (PKIX) encoding of the rogue's RSA public key: the classic
// key-confusion attack on verifiers that let the token pick the algorithm),
// or "RS256-other" (RS256 with the rogue's kid but signed by another RSA key
// that is not in the JWKS, so only a real signature check rejects it).
// typ is the header's type: "at+jwt" for an access token (RFC 9068),
// "JWT" as ID tokens have it, or "" for none.
func (r *Rogue) Sign(t testing.TB, typ string, claims map[string]any, alg string) string {
	t.Helper()
	tok, err := r.sign(typ, claims, alg)
	if err != nil {
		t.Fatalf("Rogue.Sign(alg %q): %v", alg, err)
	}
	return tok
}

func (r *Rogue) sign(typ string, claims map[string]any, alg string) (string, error) {
	header := map[string]any{"typ": typ, "alg": alg, "kid": r.kid}
	if typ == "" {
		delete(header, "typ")
	}
	switch alg {
	case "none":
		delete(header, "kid")
	case "RS256-other":
		header["alg"] = "RS256"
	case "RS256", "HS256":
	default:
		return "", fmt.Errorf("unknown alg %q; want RS256, none, HS256 or RS256-other", alg)
	}
	h, err := json.Marshal(header)
	if err != nil {
		return "", err
	}
	p, err := json.Marshal(claims)
	if err != nil {
		return "", fmt.Errorf("encoding the claims: %w", err)
	}
	input := b64(h) + "." + b64(p)
	digest := sha256.Sum256([]byte(input))
	var sig []byte
	switch alg {
	case "none":
	case "RS256":
		sig, err = rsa.SignPKCS1v15(nil, r.key, crypto.SHA256, digest[:])
	case "RS256-other":
		r.otherOnce.Do(func() { r.other, _ = rsa.GenerateKey(rand.Reader, 2048) })
		if r.other == nil {
			return "", errors.New("generating the other RSA key failed")
		}
		sig, err = rsa.SignPKCS1v15(nil, r.other, crypto.SHA256, digest[:])
	case "HS256":
		var der []byte
		if der, err = x509.MarshalPKIXPublicKey(&r.key.PublicKey); err == nil {
			mac := hmac.New(sha256.New, der)
			mac.Write([]byte(input))
			sig = mac.Sum(nil)
		}
	}
	if err != nil {
		return "", err
	}
	return input + "." + b64(sig), nil
}

func b64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

func (r *Rogue) discovery(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{
		"issuer":                                r.Issuer,
		"authorization_endpoint":                r.Issuer + "/authorize",
		"token_endpoint":                        r.Issuer + "/token",
		"userinfo_endpoint":                     r.Issuer + "/userinfo",
		"jwks_uri":                              r.Issuer + "/jwks",
		"id_token_signing_alg_values_supported": []string{"RS256"},
		"code_challenge_methods_supported":      []string{"S256"},
		"response_types_supported":              []string{"code"},
		"subject_types_supported":               []string{"public"},
	})
}

func (r *Rogue) jwks(w http.ResponseWriter, _ *http.Request) {
	pub := r.key.PublicKey
	writeJSON(w, http.StatusOK, map[string]any{"keys": []map[string]string{{
		"kty": "RSA",
		"use": "sig",
		"alg": "RS256",
		"kid": r.kid,
		"n":   b64(pub.N.Bytes()),
		"e":   b64(big.NewInt(int64(pub.E)).Bytes()),
	}}})
}

func (r *Rogue) authorize(w http.ResponseWriter, req *http.Request) {
	q := req.URL.Query()
	redirect, err := url.Parse(q.Get("redirect_uri"))
	if err != nil || !redirect.IsAbs() {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "invalid_request", "error_description": "redirect_uri must be an absolute URL"})
		return
	}
	if m := q.Get("code_challenge_method"); m != "" && m != "S256" {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "invalid_request", "error_description": "only S256 is supported"})
		return
	}
	code := rand.Text()
	r.mu.Lock()
	r.authorized = append(r.authorized, q)
	r.grants[code] = rogueGrant{
		clientID:    q.Get("client_id"),
		nonce:       q.Get("nonce"),
		challenge:   q.Get("code_challenge"),
		redirectURI: redirect.String(),
		maxAge:      q.Has("max_age"),
	}
	r.mu.Unlock()
	back := redirect.Query()
	back.Set("code", code)
	if s := q.Get("state"); s != "" {
		back.Set("state", s)
	}
	redirect.RawQuery = back.Encode()
	http.Redirect(w, req, redirect.String(), http.StatusFound)
}

func (r *Rogue) token(w http.ResponseWriter, req *http.Request) {
	if err := req.ParseForm(); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "invalid_request"})
		return
	}
	if req.PostForm.Get("grant_type") != "authorization_code" {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "unsupported_grant_type"})
		return
	}
	clientID := req.PostForm.Get("client_id")
	if id, _, ok := req.BasicAuth(); ok {
		// oauth2 clients form-encode the Basic credentials (RFC 6749 2.3.1).
		clientID = id
		if u, err := url.QueryUnescape(id); err == nil {
			clientID = u
		}
	}
	code := req.PostForm.Get("code")
	r.mu.Lock()
	g, ok := r.grants[code]
	delete(r.grants, code)
	r.mu.Unlock()
	verifier := sha256.Sum256([]byte(req.PostForm.Get("code_verifier")))
	if !ok || b64(verifier[:]) != g.challenge || (clientID != "" && clientID != g.clientID) {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "invalid_grant"})
		return
	}

	user := r.User
	now := time.Now()
	claims := map[string]any{
		"iss":            r.Issuer,
		"sub":            user.ID,
		"aud":            g.clientID,
		"exp":            now.Add(5 * time.Minute).Unix(),
		"iat":            now.Unix(),
		"email":          user.Email,
		"email_verified": true,
		"groups":         nonNil(user.Groups),
	}
	if g.nonce != "" {
		claims["nonce"] = g.nonce
	}
	if g.maxAge {
		claims["auth_time"] = now.Unix()
	}
	if user.Name != "" {
		claims["name"] = user.Name
	}
	alg := "RS256"
	if r.IDToken != nil {
		claims, alg = r.IDToken(claims)
	}
	idToken, err := r.sign("JWT", claims, alg)
	if err != nil {
		writeJSON(w, http.StatusInternalServerError, map[string]string{"error": "server_error", "error_description": err.Error()})
		return
	}
	access := rand.Text()
	r.mu.Lock()
	r.tokens[access] = user
	r.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{
		"access_token": access,
		"token_type":   "Bearer",
		"expires_in":   300,
		"id_token":     idToken,
	})
}

func (r *Rogue) userinfo(w http.ResponseWriter, req *http.Request) {
	access, ok := strings.CutPrefix(req.Header.Get("Authorization"), "Bearer ")
	r.mu.Lock()
	user, known := r.tokens[access]
	r.mu.Unlock()
	if !ok || !known {
		w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token"`)
		writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "invalid_token"})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"sub":            user.ID,
		"email":          user.Email,
		"email_verified": true,
		"groups":         nonNil(user.Groups),
	})
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
