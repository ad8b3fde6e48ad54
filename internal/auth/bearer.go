package auth

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/sagacity-go/sagacity/internal/engine"
)

// Token is a static API token, known by the SHA-256 of its value.
type Token struct {
	Name   string
	SHA256 string // lowercase hex
	Roles  []engine.Role
	// Groups make its holder eligible for the approval rules that name
	// them, as an OIDC user's groups do.
	Groups []string
}

// MaxJWTLifetime is the longest a JWT bearer token may be valid for,
// from when it was issued.
const MaxJWTLifetime = 24 * time.Hour

// Bearer authenticates API requests: a static token from the
// configuration, or a JWT from the OIDC issuer for the API audience.
type Bearer struct {
	Tokens []Token
	// JWT verifies tokens from the issuer (issuer, audience, expiry,
	// signature, pinned algorithms); nil accepts no JWT.
	JWT   *oidc.IDTokenVerifier
	Roles RoleMap
	// Claims name the claims of a JWT that its principal keeps, for the
	// approval policy's conditions (engine.Approvals.Claims): no other.
	Claims []string
	// Issuer prefixes the subject of JWT principals.
	Issuer string
	// Anonymous lets requests without a token in as the Anonymous
	// principal, as in dev mode.
	Anonymous bool
}

func unauthenticated(msg string) error {
	return &engine.Error{Kind: engine.Unauthenticated, Msg: msg}
}

// Principal returns who is calling. Unauthenticated for a missing,
// malformed, unknown or expired token.
func (b *Bearer) Principal(r *http.Request) (engine.Principal, error) {
	h := r.Header.Get("Authorization")
	if h == "" {
		if b.Anonymous {
			return Anonymous, nil
		}
		return engine.Principal{}, unauthenticated("send Authorization: Bearer <token>")
	}
	scheme, tok, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || tok == "" {
		return engine.Principal{}, unauthenticated("the Authorization header must be Bearer <token>")
	}
	if t, ok := b.static(tok); ok {
		return engine.Principal{ID: "token:" + t.Name, Name: t.Name, Auth: engine.AuthToken, Roles: t.Roles, Groups: t.Groups}, nil
	}
	if b.JWT != nil && strings.Count(tok, ".") == 2 {
		if !accessToken(tok) {
			// An ID token says who signed in to some client, not that
			// this API may be called: where the API's audience is also a
			// client's id (Dex), it would pass every other check.
			return engine.Principal{}, unauthenticated(`the token is not an access token (its JWT "typ" must be "at+jwt"); ID tokens are refused`)
		}
		idt, err := b.JWT.Verify(r.Context(), tok)
		if err != nil {
			return engine.Principal{}, &engine.Error{Kind: engine.Unauthenticated, Msg: "invalid or expired token", Err: err}
		}
		// A token that lives for years is a password nobody rotates.
		issued := idt.IssuedAt
		if issued.IsZero() || issued.After(time.Now()) {
			issued = time.Now()
		}
		if idt.Expiry.Sub(issued) > MaxJWTLifetime {
			return engine.Principal{}, unauthenticated(fmt.Sprintf("the token is valid for longer than %s: use one that expires sooner", MaxJWTLifetime))
		}
		var claims map[string]any
		if err := idt.Claims(&claims); err != nil {
			return engine.Principal{}, unauthenticated("invalid token claims")
		}
		at, err := signedInAt(claims, time.Now())
		if err != nil {
			return engine.Principal{}, unauthenticated(err.Error())
		}
		p := oidcPrincipal(b.Issuer, idt.Subject, claims, b.Roles, at)
		p.Claims = kept(claims, b.Claims)
		return p, nil
	}
	return engine.Principal{}, unauthenticated("invalid or expired token")
}

// accessToken reports whether a compact JWT's header types it as an
// OAuth access token (RFC 9068 §2.1: "at+jwt", "application/" optional,
// case-insensitive). Its signature is checked after.
func accessToken(tok string) bool {
	h, err := base64.RawURLEncoding.DecodeString(tok[:strings.IndexByte(tok, '.')])
	var header struct {
		Typ string `json:"typ"`
	}
	if err != nil || json.Unmarshal(h, &header) != nil {
		return false
	}
	typ := strings.ToLower(header.Typ)
	return typ == "at+jwt" || typ == "application/at+jwt"
}

// static finds a configured token in time that does not depend on which
// token, if any, matches.
func (b *Bearer) static(tok string) (Token, bool) {
	sum := sha256.Sum256([]byte(tok))
	var found Token
	ok := 0
	for _, t := range b.Tokens {
		want, err := hex.DecodeString(t.SHA256)
		if err != nil || len(want) != len(sum) {
			continue
		}
		if subtle.ConstantTimeCompare(sum[:], want) == 1 {
			found, ok = t, 1
		}
	}
	return found, ok == 1
}

// oidcPrincipal is the principal an ID token or JWT names: its identity
// from the issuer and subject, a name to show, its roles, and when the
// person last signed in at the provider (signedInAt's reading of its
// auth_time).
func oidcPrincipal(issuer, subject string, claims map[string]any, roles RoleMap, authTime time.Time) engine.Principal {
	return engine.Principal{ID: Identity(issuer, subject), Name: displayName(claims, subject), Auth: engine.AuthOIDC,
		Roles: roles.Of(claims), Groups: roles.values(claims), Issuer: issuer, Subject: subject, AuthTime: authTime}
}

// kept are the claims named keep that the token has, as it has them:
// nil when none is named. What a condition sees of them, within bounds,
// is the policy's to say (engine.Approvals.See).
func kept(claims map[string]any, keep []string) map[string]any {
	if len(keep) == 0 {
		return nil
	}
	out := map[string]any{}
	for _, k := range keep {
		if v, ok := claims[k]; ok && v != nil {
			out[k] = v
		}
	}
	return out
}

// MaxClockSkew is how far after this server's clock a provider may say a
// person signed in (auth_time). A later time is refused, wherever it comes
// from (an ID token, an access token); one within it counts as now, since
// nobody signs in after the request their sign-in authenticates.
const MaxClockSkew = engine.MaxSignInSkew

// signedInAt reads a token's auth_time, in whole seconds: the zero time
// when it has none, now when it is within MaxClockSkew after now, an error
// saying so when it is later.
func signedInAt(claims map[string]any, now time.Time) (time.Time, error) {
	at, ok := claims["auth_time"].(float64)
	if !ok || at <= 0 {
		return time.Time{}, nil
	}
	t := time.Unix(int64(at), 0).UTC()
	if t.After(now.Add(MaxClockSkew)) {
		return time.Time{}, fmt.Errorf("the token's auth_time is %s after this server's clock (more than %s): check the clocks", t.Sub(now).Round(time.Second), MaxClockSkew)
	}
	if now := now.UTC().Truncate(time.Second); t.After(now) {
		return now, nil
	}
	return t, nil
}

// Identity is the journaled identity of an OIDC subject: issuer and
// subject, never a reassignable claim such as an email.
func Identity(issuer, subject string) string { return strings.TrimSuffix(issuer, "/") + "#" + subject }

// RoleMap turns the values of one claim into roles.
type RoleMap struct {
	Claim string
	Map   map[string][]engine.Role
}

// values are the claim's values, each once: the person's groups. A value
// that is empty, long or holds control characters is left out.
func (m RoleMap) values(claims map[string]any) []string {
	var values []string
	add := func(s string) {
		if s != "" && len(s) <= 200 && !strings.ContainsFunc(s, unicode.IsControl) && !slices.Contains(values, s) {
			values = append(values, s)
		}
	}
	switch v := claims[m.Claim].(type) {
	case string:
		add(v)
	case []any:
		for _, x := range v {
			if s, ok := x.(string); ok {
				add(s)
			}
		}
	}
	return values
}

// Of returns the roles the claims map to, each once.
func (m RoleMap) Of(claims map[string]any) []engine.Role {
	var roles []engine.Role
	for _, v := range m.values(claims) {
		for _, r := range m.Map[v] {
			if !slices.Contains(roles, r) {
				roles = append(roles, r)
			}
		}
	}
	return roles
}

// displayName picks a name to show: email, preferred_username or name.
func displayName(claims map[string]any, fallback string) string {
	for _, k := range []string{"email", "preferred_username", "name"} {
		if s, ok := claims[k].(string); ok && s != "" {
			return s
		}
	}
	return fallback
}
