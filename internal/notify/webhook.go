package notify

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Standard Webhooks (https://www.standardwebhooks.com): a delivery's id,
// timestamp and body are signed together, and sent with the signatures
// in these headers.
const (
	headerID        = "webhook-id"
	headerTimestamp = "webhook-timestamp"
	headerSignature = "webhook-signature"
)

// tolerance is how far from now a receiver accepts a delivery's
// timestamp, either way, against replays.
const tolerance = 5 * time.Minute

// ParseSecret reads a symmetric (v1) secret, "whsec_" and the base64 of
// 24 to 64 random bytes. Its errors never show the secret.
func ParseSecret(s string) ([]byte, error) {
	b, err := decodeKey(s, "whsec_")
	if err != nil {
		return nil, err
	}
	if len(b) < 24 || len(b) > 64 {
		return nil, fmt.Errorf("whsec_ secret: %d bytes, want 24 to 64", len(b))
	}
	return b, nil
}

// ParseSigningKey reads an asymmetric (v1a) signing key, "whsk_" and the
// base64 of an Ed25519 private key as Svix encodes it: the 32-byte seed
// and then the 32-byte public key. Its errors never show the key.
func ParseSigningKey(s string) (ed25519.PrivateKey, error) {
	b, err := decodeKey(s, "whsk_")
	if err != nil {
		return nil, err
	}
	if len(b) != ed25519.PrivateKeySize {
		return nil, fmt.Errorf("whsk_ key: %d bytes, want %d", len(b), ed25519.PrivateKeySize)
	}
	// A public half that is not the seed's would sign what no one can
	// verify.
	if key := ed25519.NewKeyFromSeed(b[:ed25519.SeedSize]); !bytes.Equal(key, b) {
		return nil, errors.New("whsk_ key: its public key is not its seed's")
	}
	return b, nil
}

// ParsePublicKey reads an asymmetric (v1a) public key, "whpk_" and the
// base64 of the 32-byte Ed25519 public key.
func ParsePublicKey(s string) (ed25519.PublicKey, error) {
	b, err := decodeKey(s, "whpk_")
	if err != nil {
		return nil, err
	}
	if len(b) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("whpk_ key: %d bytes, want %d", len(b), ed25519.PublicKeySize)
	}
	return b, nil
}

// decodeKey is the bytes of s, prefix and standard base64.
func decodeKey(s, prefix string) ([]byte, error) {
	b64, ok := strings.CutPrefix(s, prefix)
	if !ok {
		return nil, fmt.Errorf("%s key: does not start with %[1]s", prefix)
	}
	b, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return nil, fmt.Errorf("%s key: not base64", prefix)
	}
	return b, nil
}

// Sign is the webhook-signature header of the delivery of body as id at
// ts: "v1," and the base64 HMAC-SHA256 with secret, when given, and
// "v1a," and the base64 Ed25519 signature with key, when given,
// separated by a space.
func Sign(id string, ts time.Time, body []byte, secret []byte, key ed25519.PrivateKey) string {
	content := signed(id, ts, body)
	var sigs []string
	if len(secret) > 0 {
		sigs = append(sigs, "v1,"+base64.StdEncoding.EncodeToString(mac(secret, content)))
	}
	if len(key) > 0 {
		sigs = append(sigs, "v1a,"+base64.StdEncoding.EncodeToString(ed25519.Sign(key, content)))
	}
	return strings.Join(sigs, " ")
}

// Verify checks a delivery as its receiver does: the three headers are
// there, its timestamp is within 5 minutes of now, and one of its
// signatures is body's, id's and the timestamp's, by secret (v1) or
// pub (v1a); signatures of other schemes, or of a scheme without its
// key, are skipped.
func Verify(h http.Header, body []byte, secret []byte, pub ed25519.PublicKey, now time.Time) error {
	id, ts, sigs := h.Get(headerID), h.Get(headerTimestamp), h.Get(headerSignature)
	if id == "" || ts == "" || sigs == "" {
		return errors.New("webhook: missing webhook-id, webhook-timestamp or webhook-signature")
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return fmt.Errorf("webhook: webhook-timestamp %q is not in unix seconds", ts)
	}
	at := time.Unix(sec, 0)
	if d := now.Sub(at); d > tolerance || d < -tolerance {
		return fmt.Errorf("webhook: webhook-timestamp %d is more than %v from now", sec, tolerance)
	}
	content := signed(id, at, body)
	for _, s := range strings.Fields(sigs) {
		scheme, b64, _ := strings.Cut(s, ",")
		sig, err := base64.StdEncoding.DecodeString(b64)
		switch {
		case err != nil:
		case scheme == "v1" && len(secret) > 0 && hmac.Equal(sig, mac(secret, content)):
			return nil
		case scheme == "v1a" && len(pub) == ed25519.PublicKeySize && ed25519.Verify(pub, content, sig):
			return nil
		}
	}
	return errors.New("webhook: no signature verifies")
}

// signed is what a delivery's signatures sign: its id, timestamp and
// body, separated by full stops.
func signed(id string, ts time.Time, body []byte) []byte {
	return fmt.Appendf(nil, "%s.%d.%s", id, ts.Unix(), body)
}

// mac is content's HMAC-SHA256 with secret.
func mac(secret, content []byte) []byte {
	h := hmac.New(sha256.New, secret)
	h.Write(content)
	return h.Sum(nil)
}

// Webhook delivers events to a URL as Standard Webhooks: the event's
// JSON, signed. Every delivery of one event has its ID as webhook-id,
// for the receiver to de-duplicate on, and the time it is sent as
// webhook-timestamp.
type Webhook struct {
	URL string
	// Secret (ParseSecret) signs with v1, Key (ParseSigningKey) with
	// v1a; one at least.
	Secret []byte
	Key    ed25519.PrivateKey
	// Client sends, without following redirects; nil means one with a
	// 10 s timeout.
	Client *http.Client
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Send posts m's event, never its fields. A 2xx takes it; any other
// answer is a *Failure (HTTPFailure's, a 3xx Permanent: the operator
// must fix the URL), and a delivery that got no answer a plain error.
func (w *Webhook) Send(ctx context.Context, m Message) (string, error) {
	if len(w.Secret) == 0 && len(w.Key) == 0 {
		return "", &Failure{Permanent: true, Err: errors.New("webhook: no secret or signing key")}
	}
	body, err := json.Marshal(m.Event)
	if err != nil {
		return "", &Failure{Permanent: true, Err: err}
	}
	now := clock(w.Now)
	// The spec's header names, as it spells them.
	h := http.Header{
		headerID:        {m.Event.ID},
		headerTimestamp: {strconv.FormatInt(now.Unix(), 10)},
		headerSignature: {Sign(m.Event.ID, now, body, w.Secret, w.Key)},
	}
	return "", postJSON(ctx, w.Client, w.URL, body, h, now)
}
