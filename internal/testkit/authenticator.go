package testkit

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/fxamacker/cbor/v2"
)

// Authenticator is a software WebAuthn authenticator for tests that run
// no browser: it answers a registration's and an assertion's options as
// a platform authenticator would (ES256, "none" attestation, the user
// present and verified), from origin. Its knobs make the answers a
// tampered or faulty authenticator would give.
type Authenticator struct {
	Origin string // the page the browser would be on

	mu    sync.Mutex
	keys  map[string]*ecdsa.PrivateKey // by credential id, base64url
	count uint32

	// NoUV leaves the user-verified flag out; BadSignature signs other
	// bytes; Counter, when set, is the counter the next assertion says.
	NoUV, BadSignature bool
	Counter            *uint32
}

// NewAuthenticator makes an authenticator on the page of origin.
func NewAuthenticator(origin string) *Authenticator {
	return &Authenticator{Origin: origin, keys: map[string]*ecdsa.PrivateKey{}}
}

var b64 = base64.RawURLEncoding

// Register answers navigator.credentials.create's options (the JSON a
// server hands the browser) with a new credential, as the browser's
// PublicKeyCredential JSON.
func (a *Authenticator) Register(options []byte) ([]byte, error) {
	var o struct {
		PublicKey struct {
			Challenge string `json:"challenge"`
			RP        struct {
				ID string `json:"id"`
			} `json:"rp"`
		} `json:"publicKey"`
	}
	if err := json.Unmarshal(options, &o); err != nil {
		return nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	id := make([]byte, 16)
	rand.Read(id)
	a.mu.Lock()
	a.keys[b64.EncodeToString(id)] = key
	a.mu.Unlock()
	// The uncompressed point: 0x04, then X and Y of 32 bytes each.
	point, err := key.PublicKey.Bytes()
	if err != nil {
		return nil, err
	}
	x, y := point[1:33], point[33:]
	cose, err := cbor.Marshal(map[int]any{1: 2, 3: -7, -1: 1, -2: x, -3: y})
	if err != nil {
		return nil, err
	}
	auth := a.authData(o.PublicKey.RP.ID, 0x41|a.uv())
	auth = append(auth, make([]byte, 16)...) // AAGUID
	auth = binary.BigEndian.AppendUint16(auth, uint16(len(id)))
	auth = append(append(auth, id...), cose...)
	att, err := cbor.Marshal(map[string]any{"fmt": "none", "attStmt": map[string]any{}, "authData": auth})
	if err != nil {
		return nil, err
	}
	client := a.clientData("webauthn.create", o.PublicKey.Challenge)
	return json.Marshal(map[string]any{"id": b64.EncodeToString(id), "rawId": b64.EncodeToString(id), "type": "public-key",
		"response": map[string]string{"clientDataJSON": b64.EncodeToString(client), "attestationObject": b64.EncodeToString(att)}})
}

// Assert answers navigator.credentials.get's options with the first
// allowed credential it holds.
func (a *Authenticator) Assert(options []byte) ([]byte, error) {
	var o struct {
		PublicKey struct {
			Challenge string `json:"challenge"`
			RPID      string `json:"rpId"`
			Allow     []struct {
				ID string `json:"id"`
			} `json:"allowCredentials"`
		} `json:"publicKey"`
	}
	if err := json.Unmarshal(options, &o); err != nil {
		return nil, err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	var id string
	var key *ecdsa.PrivateKey
	for _, c := range o.PublicKey.Allow {
		if k := a.keys[c.ID]; k != nil {
			id, key = c.ID, k
			break
		}
	}
	if key == nil {
		return nil, fmt.Errorf("the authenticator holds none of the credentials allowed")
	}
	a.count++
	if a.Counter != nil {
		a.count = *a.Counter
	}
	auth := a.authData(o.PublicKey.RPID, 0x01|a.uv())
	client := a.clientData("webauthn.get", o.PublicKey.Challenge)
	sum := sha256.Sum256(client)
	signed := append(append([]byte{}, auth...), sum[:]...)
	if a.BadSignature {
		signed = append(signed, 0)
	}
	digest := sha256.Sum256(signed)
	sig, err := ecdsa.SignASN1(rand.Reader, key, digest[:])
	if err != nil {
		return nil, err
	}
	return json.Marshal(map[string]any{"id": id, "rawId": id, "type": "public-key",
		"response": map[string]string{"authenticatorData": b64.EncodeToString(auth), "clientDataJSON": b64.EncodeToString(client),
			"signature": b64.EncodeToString(sig)}})
}

func (a *Authenticator) uv() byte {
	if a.NoUV {
		return 0
	}
	return 0x04
}

// authData is the authenticator data's start: the RP ID's hash, the
// flags and the counter.
func (a *Authenticator) authData(rpID string, flags byte) []byte {
	h := sha256.Sum256([]byte(rpID))
	out := append(h[:], flags)
	return binary.BigEndian.AppendUint32(out, a.count)
}

func (a *Authenticator) clientData(typ, challenge string) []byte {
	b, _ := json.Marshal(map[string]any{"type": typ, "challenge": challenge, "origin": a.Origin, "crossOrigin": false})
	return b
}
