package auth

import (
	"context"
	"crypto"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
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
	jws, err := evidence.ParseIDToken(raw)
	if err != nil {
		return "", "", invalid("%s", evidence.Message(err))
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
