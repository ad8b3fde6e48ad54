package testkit

import (
	"crypto"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/sagacity-go/sagacity/internal/engine"
)

// IDTokens signs ID tokens as an OpenID provider does, with a key of its
// own, for tests of what checks a sign-in offline without running a
// provider: the sign-ins a console session would carry (engine.SignIn).
type IDTokens struct {
	Issuer, ClientID string
	JWK, KeyID       string // the public key, as JSON, and its RFC 7638 thumbprint
	key              ed25519.PrivateKey
}

// NewIDTokens makes a provider of issuer that signs for clientID.
func NewIDTokens(t testing.TB, issuer, clientID string) *IDTokens {
	t.Helper()
	pub, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	jwk := jose.JSONWebKey{Key: pub, Algorithm: string(jose.EdDSA), Use: "sig"}
	tp, err := jwk.Thumbprint(crypto.SHA256)
	if err != nil {
		t.Fatal(err)
	}
	jwk.KeyID = base64.RawURLEncoding.EncodeToString(tp)
	b, err := jwk.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	return &IDTokens{Issuer: issuer, ClientID: clientID, JWK: string(b), KeyID: jwk.KeyID, key: key}
}

// Sign signs claims as an ID token (a compact JWS, EdDSA, typed JWT).
func (x *IDTokens) Sign(t testing.TB, claims map[string]any) string {
	t.Helper()
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.EdDSA, Key: x.key},
		(&jose.SignerOptions{}).WithType("JWT").WithHeader("kid", x.KeyID))
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(claims)
	if err != nil {
		t.Fatal(err)
	}
	jws, err := s.Sign(b)
	if err != nil {
		t.Fatal(err)
	}
	out, err := jws.CompactSerialize()
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// Claims are the claims of p's sign-in at p.AuthTime, issued then.
func (x *IDTokens) Claims(p engine.Principal) map[string]any {
	return map[string]any{"iss": x.Issuer, "sub": p.Subject, "aud": x.ClientID, "nonce": "n-" + p.Subject,
		"auth_time": p.AuthTime.Unix(), "iat": p.AuthTime.Unix(), "exp": p.AuthTime.Add(time.Hour).Unix()}
}

// SignIn is the sign-in a console session of p carries: p's ID token,
// signed, and the key that verifies it; reauth when the provider
// authenticated p again for it.
func (x *IDTokens) SignIn(t testing.TB, p engine.Principal, reauth bool) *engine.SignIn {
	return &engine.SignIn{Token: x.Sign(t, x.Claims(p)), ClientID: x.ClientID, Key: x.JWK, KeyID: x.KeyID, Reauth: reauth}
}

// JWKS is the provider's key set, as its jwks_uri serves it.
func (x *IDTokens) JWKS() string { return `{"keys":[` + x.JWK + `]}` }
