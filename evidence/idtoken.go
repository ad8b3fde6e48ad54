package evidence

import (
	"crypto"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

// The identity provider's word on a sign-in is the ID token it signed;
// what checks that word, on the server and offline, is the provider's
// public key (go-jose).

// SigningAlgs are the only algorithms an ID token is accepted signed
// with, at sign-in and offline; "none" and HMAC never are.
var SigningAlgs = []string{"RS256", "ES256", "PS256", "EdDSA"}

// jwsAlgs are SigningAlgs as go-jose names them.
var jwsAlgs = func() []jose.SignatureAlgorithm {
	out := make([]jose.SignatureAlgorithm, len(SigningAlgs))
	for i, a := range SigningAlgs {
		out[i] = jose.SignatureAlgorithm(a)
	}
	return out
}()

// ParseIDToken reads an ID token: a compact JWS of one signature under
// one of SigningAlgs. An *Error otherwise.
func ParseIDToken(token string) (*jose.JSONWebSignature, error) {
	jws, err := jose.ParseSignedCompact(token, jwsAlgs)
	if err != nil || len(jws.Signatures) != 1 {
		return nil, errorf("the ID token is no compact JWS of one signature under %v", SigningAlgs)
	}
	return jws, nil
}

// OpenIDToken checks that an ID token's signature verifies with key, a
// public JWK as JSON, under one of SigningAlgs, and returns what the
// token says of the sign-in: it is the CheckIDToken the server and
// offline verification run. It checks no lifetime: the token is evidence
// of when it was issued, long after it expired. An *Error when the key
// or the token cannot be read, or the signature does not verify.
func OpenIDToken(token string, key []byte) (SignInClaims, error) {
	var k jose.JSONWebKey
	if err := k.UnmarshalJSON(key); err != nil || !k.Valid() || !k.IsPublic() {
		return SignInClaims{}, errorf("the provider key is no public JWK")
	}
	jws, err := ParseIDToken(token)
	if err != nil {
		return SignInClaims{}, err
	}
	payload, err := jws.Verify(k.Key)
	if err != nil {
		return SignInClaims{}, errorf("the provider key does not verify the ID token's signature")
	}
	var c struct {
		Issuer   string          `json:"iss"`
		Subject  string          `json:"sub"`
		Audience json.RawMessage `json:"aud"`
		AuthTime float64         `json:"auth_time"`
		IssuedAt float64         `json:"iat"`
		Expiry   float64         `json:"exp"`
	}
	if err := json.Unmarshal(payload, &c); err != nil {
		return SignInClaims{}, errorf("the ID token's claims cannot be read")
	}
	var aud []string
	if err := json.Unmarshal(c.Audience, &aud); err != nil {
		var one string
		if json.Unmarshal(c.Audience, &one) != nil {
			return SignInClaims{}, errorf("the ID token's audience cannot be read")
		}
		aud = []string{one}
	}
	tp, err := k.Thumbprint(crypto.SHA256)
	if err != nil {
		return SignInClaims{}, errorf("the provider key has no thumbprint")
	}
	at := func(f float64) time.Time {
		if f <= 0 {
			return time.Time{}
		}
		return time.Unix(int64(f), 0).UTC()
	}
	return SignInClaims{Issuer: c.Issuer, Subject: c.Subject, Audience: aud, AuthTime: at(c.AuthTime), IssuedAt: at(c.IssuedAt),
		Expiry: at(c.Expiry), Key: base64.RawURLEncoding.EncodeToString(tp)}, nil
}

// ProviderKeys reads a JSON Web Key Set, as a provider serves it at its
// jwks_uri, into its public signing keys by RFC 7638 thumbprint: the keys
// an auditor trusts instead of those the log journals. An error when it
// is no key set, or holds no signing key.
func ProviderKeys(jwks []byte) (map[string][]byte, error) {
	var set jose.JSONWebKeySet
	if err := json.Unmarshal(jwks, &set); err != nil {
		return nil, fmt.Errorf("not a JSON Web Key Set: %w", err)
	}
	out := map[string][]byte{}
	for _, k := range set.Keys {
		if !k.Valid() || (k.Use != "" && k.Use != "sig") || !slices.Contains(jwsAlgs, jose.SignatureAlgorithm(k.Algorithm)) && k.Algorithm != "" {
			continue
		}
		pub := k.Public()
		tp, err1 := pub.Thumbprint(crypto.SHA256)
		b, err2 := pub.MarshalJSON()
		if err := errors.Join(err1, err2); err != nil {
			return nil, err
		}
		out[base64.RawURLEncoding.EncodeToString(tp)] = b
	}
	if len(out) == 0 {
		return nil, errors.New("it holds no signing key")
	}
	return out, nil
}
