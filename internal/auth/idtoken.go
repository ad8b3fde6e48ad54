package auth

import (
	"context"
	"crypto"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/sagacity-go/sagacity/evidence"
	"github.com/sagacity-go/sagacity/internal/engine"
)

// The identity provider's word on a sign-in is its signed ID token; what
// checks that word offline is the provider's public key. go-oidc verifies
// the token at the callback with keys it keeps to itself, so the key that
// verifies it is found again here, from the provider's jwks_uri, to be
// journaled with the sign-in (engine.SignIn).

// jwtAlgs are SigningAlgs as go-jose names them.
var jwtAlgs = func() []jose.SignatureAlgorithm {
	out := make([]jose.SignatureAlgorithm, len(SigningAlgs))
	for i, a := range SigningAlgs {
		out[i] = jose.SignatureAlgorithm(a)
	}
	return out
}()

// maxJWKS bounds a provider's key set as read.
const maxJWKS = 1 << 20

// providerKeys finds the provider's public key that verifies an ID token,
// reading the provider's key set from its jwks_uri, again when it has
// rotated its keys.
type providerKeys struct {
	uri    string
	client *http.Client
	mu     sync.Mutex
	set    jose.JSONWebKeySet
}

// keyFor returns the public key of the provider's set that verifies raw
// (as JSON) and its RFC 7638 thumbprint. Unavailable when the set cannot
// be read, Invalid when no key of it verifies raw.
func (k *providerKeys) keyFor(ctx context.Context, raw string) (jwk, thumbprint string, err error) {
	jws, err := jose.ParseSigned(raw, jwtAlgs)
	if err != nil || len(jws.Signatures) != 1 {
		return "", "", invalid("the ID token is no compact JWS of one signature")
	}
	kid := jws.Signatures[0].Header.KeyID
	k.mu.Lock()
	defer k.mu.Unlock()
	for fresh := range 2 {
		if fresh == 1 || len(k.set.Keys) == 0 {
			if err := k.fetch(ctx); err != nil {
				return "", "", err
			}
		}
		for _, key := range k.set.Keys {
			if (kid != "" && key.KeyID != kid) || (key.Use != "" && key.Use != "sig") || !key.Valid() {
				continue
			}
			pub := key.Public()
			if _, err := jws.Verify(pub); err != nil {
				continue
			}
			b, err := pub.MarshalJSON()
			if err != nil {
				return "", "", err
			}
			tp, err := pub.Thumbprint(crypto.SHA256)
			if err != nil {
				return "", "", err
			}
			return string(b), base64.RawURLEncoding.EncodeToString(tp), nil
		}
	}
	return "", "", invalid("no key of the identity provider's key set verifies the ID token")
}

// fetch reads the provider's key set.
func (k *providerKeys) fetch(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	unavailable := func(err error) error {
		return &engine.Error{Kind: engine.Unavailable, Msg: "the identity provider's key set (jwks_uri) could not be read", Err: err}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, k.uri, nil)
	if err != nil {
		return unavailable(err)
	}
	resp, err := k.client.Do(req)
	if err != nil {
		return unavailable(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return unavailable(fmt.Errorf("GET %s: %s", k.uri, resp.Status))
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxJWKS))
	if err != nil {
		return unavailable(err)
	}
	var set jose.JSONWebKeySet
	if err := json.Unmarshal(b, &set); err != nil {
		return unavailable(fmt.Errorf("GET %s: %w", k.uri, err))
	}
	k.set = set
	return nil
}

// CheckIDToken checks that an ID token's signature verifies with key, a
// public JWK as JSON, under one of SigningAlgs, and returns what the
// token says of the sign-in (engine.CheckIDToken). It checks no lifetime:
// the token is evidence of when it was issued, long after it expired.
// An *evidence.Error when the key or the token cannot be read, or the
// signature does not verify.
func CheckIDToken(token string, key []byte) (engine.SignInClaims, error) {
	var k jose.JSONWebKey
	if err := k.UnmarshalJSON(key); err != nil || !k.Valid() || !k.IsPublic() {
		return engine.SignInClaims{}, notSigned("the provider key is no public JWK")
	}
	jws, err := jose.ParseSigned(token, jwtAlgs)
	if err != nil || len(jws.Signatures) != 1 {
		return engine.SignInClaims{}, notSigned("the ID token is no compact JWS of one signature under %v", SigningAlgs)
	}
	payload, err := jws.Verify(k.Key)
	if err != nil {
		return engine.SignInClaims{}, notSigned("the provider key does not verify the ID token's signature")
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
		return engine.SignInClaims{}, notSigned("the ID token's claims cannot be read")
	}
	var aud []string
	if err := json.Unmarshal(c.Audience, &aud); err != nil {
		var one string
		if json.Unmarshal(c.Audience, &one) != nil {
			return engine.SignInClaims{}, notSigned("the ID token's audience cannot be read")
		}
		aud = []string{one}
	}
	tp, err := k.Thumbprint(crypto.SHA256)
	if err != nil {
		return engine.SignInClaims{}, notSigned("the provider key has no thumbprint")
	}
	at := func(f float64) time.Time {
		if f <= 0 {
			return time.Time{}
		}
		return time.Unix(int64(f), 0).UTC()
	}
	return engine.SignInClaims{Issuer: c.Issuer, Subject: c.Subject, Audience: aud, AuthTime: at(c.AuthTime), IssuedAt: at(c.IssuedAt),
		Expiry: at(c.Expiry), Key: base64.RawURLEncoding.EncodeToString(tp)}, nil
}

// notSigned is CheckIDToken's refusal: evidence that does not hold.
func notSigned(format string, args ...any) error {
	return &evidence.Error{Msg: fmt.Sprintf(format, args...)}
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
		if !k.Valid() || (k.Use != "" && k.Use != "sig") || !slices.Contains(jwtAlgs, jose.SignatureAlgorithm(k.Algorithm)) && k.Algorithm != "" {
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
