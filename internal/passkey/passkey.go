// Package passkey is WebAuthn for the engine (go-webauthn): the
// registration ceremony that enrols a person's passkey, the options a
// browser signs a vote's challenge with; the check of the assertion a
// vote carries is package assertion's, run on the server and offline.
// It implements engine.WebAuthn; the engine never sees the protocol.
package passkey

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"net/url"
	"time"

	"github.com/go-webauthn/webauthn/protocol"
	"github.com/go-webauthn/webauthn/webauthn"
	"github.com/sagacity-go/sagacity/evidence/assertion"
	"github.com/sagacity-go/sagacity/internal/engine"
)

// Timeout is how long a browser has for a ceremony.
const Timeout = 2 * time.Minute

// RP is this server as a WebAuthn relying party: its RP ID (the public
// URL's host) and the origins its pages are served from.
type RP struct {
	ID      string
	Origins []string
	wa      *webauthn.WebAuthn
}

// New makes the relying party of the public URL base (http only on
// loopback: browsers refuse WebAuthn on an insecure origin, and an IP
// address is no RP ID, so a loopback server's passkeys work on
// http://localhost:<port>). Invalid for a URL that cannot be one.
func New(base string) (*RP, error) {
	u, err := url.Parse(base)
	if err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") {
		return nil, engine.Errorf(engine.Invalid, "passkeys need the console's public URL, as https://host[:port] (got %q)", base)
	}
	host := u.Hostname()
	origin := u.Scheme + "://" + u.Host
	if host == "127.0.0.1" || host == "::1" {
		host, origin = "localhost", u.Scheme+"://localhost"
		if u.Port() != "" {
			origin += ":" + u.Port()
		}
	}
	if u.Scheme == "http" && host != "localhost" {
		return nil, engine.Errorf(engine.Invalid, "passkeys need the console's public URL to be https (browsers refuse them on %s)", base)
	}
	wa, err := webauthn.New(&webauthn.Config{RPID: host, RPDisplayName: "Sagacity", RPOrigins: []string{origin},
		AuthenticatorSelection: protocol.AuthenticatorSelection{UserVerification: protocol.VerificationRequired,
			ResidentKey: protocol.ResidentKeyRequirementPreferred},
		Timeouts: webauthn.TimeoutsConfig{
			Login:        webauthn.TimeoutConfig{Enforce: true, Timeout: Timeout, TimeoutUVD: Timeout},
			Registration: webauthn.TimeoutConfig{Enforce: true, Timeout: Timeout, TimeoutUVD: Timeout},
		}})
	if err != nil {
		return nil, engine.Errorf(engine.Invalid, "passkeys: %v", err)
	}
	return &RP{ID: host, Origins: []string{origin}, wa: wa}, nil
}

// Origin is the origin passkeys work from.
func (rp *RP) Origin() string { return rp.Origins[0] }

// user is a principal as WebAuthn names a user.
type user struct {
	p     engine.Principal
	creds []webauthn.Credential
}

// handle is the user handle of an identity: its SHA-256, which says
// nothing of it to an authenticator.
func handle(identity string) []byte {
	sum := sha256.Sum256([]byte(identity))
	return sum[:]
}

func (u user) WebAuthnID() []byte                         { return handle(u.p.ID) }
func (u user) WebAuthnName() string                       { return u.p.ID }
func (u user) WebAuthnDisplayName() string                { return u.p.Name }
func (u user) WebAuthnCredentials() []webauthn.Credential { return u.creds }

// BeginRegistration makes the options of a registration for p, which
// must verify the user, excluding the credentials p has enrolled, and
// the state FinishRegistration takes.
func (rp *RP) BeginRegistration(p engine.Principal, enrolled []string) (options, state []byte, err error) {
	var exclude []protocol.CredentialDescriptor
	for _, id := range enrolled {
		raw, err := decode(id)
		if err != nil {
			return nil, nil, err
		}
		exclude = append(exclude, protocol.CredentialDescriptor{Type: protocol.PublicKeyCredentialType, CredentialID: raw})
	}
	creation, session, err := rp.wa.BeginRegistration(user{p: p}, webauthn.WithExclusions(exclude),
		webauthn.WithAuthenticatorSelection(protocol.AuthenticatorSelection{UserVerification: protocol.VerificationRequired,
			ResidentKey: protocol.ResidentKeyRequirementPreferred}))
	if err != nil {
		return nil, nil, err
	}
	if options, err = json.Marshal(creation); err != nil {
		return nil, nil, err
	}
	state, err = json.Marshal(session)
	return options, state, err
}

// FinishRegistration checks the browser's answer to a registration begun
// for p with state: the challenge, the origin, the RP ID and user
// verification. Invalid otherwise.
func (rp *RP) FinishRegistration(p engine.Principal, state, response []byte) (engine.Passkey, error) {
	var session webauthn.SessionData
	if err := json.Unmarshal(state, &session); err != nil {
		return engine.Passkey{}, err
	}
	parsed, err := protocol.ParseCredentialCreationResponseBytes(response)
	if err != nil {
		return engine.Passkey{}, refused("the browser's answer is no passkey registration", err)
	}
	cred, err := rp.wa.CreateCredential(user{p: p}, session, parsed)
	if err != nil {
		return engine.Passkey{}, refused("the passkey registration does not verify", err)
	}
	if !cred.Flags.UserVerified {
		return engine.Passkey{}, engine.Errorf(engine.Invalid, "the authenticator did not verify you (a PIN or biometric is required)")
	}
	return engine.Passkey{ID: encode(cred.ID), PublicKey: encode(cred.PublicKey), SignCount: cred.Authenticator.SignCount,
		RPID: rp.ID, Origin: rp.Origins[0]}, nil
}

// AssertionOptions makes the options with which a browser signs
// challenge with the one credential given, verifying the user.
func (rp *RP) AssertionOptions(challenge []byte, credential string) ([]byte, error) {
	raw, err := decode(credential)
	if err != nil {
		return nil, err
	}
	assertion, _, err := rp.wa.BeginDiscoverableLogin(webauthn.WithChallenge(challenge),
		webauthn.WithAllowedCredentials([]protocol.CredentialDescriptor{{Type: protocol.PublicKeyCredentialType, CredentialID: raw}}),
		webauthn.WithUserVerification(protocol.VerificationRequired))
	if err != nil {
		return nil, err
	}
	return json.Marshal(assertion)
}

// ParseAssertion reads a browser's answer to AssertionOptions (a
// PublicKeyCredential as JSON). Invalid for anything else.
func (rp *RP) ParseAssertion(response []byte) (engine.Assertion, error) {
	parsed, err := protocol.ParseCredentialRequestResponseBytes(response)
	if err != nil {
		return engine.Assertion{}, refused("the browser's answer is no passkey assertion", err)
	}
	r := parsed.Raw.AssertionResponse
	return engine.Assertion{Credential: encode(parsed.RawID), AuthenticatorData: encode(r.AuthenticatorData),
		ClientData: encode(r.ClientDataJSON), Signature: encode(r.Signature)}, nil
}

// Check is assertion.Check: the engine checks a vote's assertion with it.
func Check(a engine.Assertion, challenge, publicKey []byte, rpID string, origins []string) (uint32, error) {
	return assertion.Check(a, challenge, publicKey, rpID, origins)
}

// refused is an Invalid error saying what failed, with go-webauthn's
// detail.
func refused(what string, err error) error {
	return &engine.Error{Kind: engine.Invalid, Msg: assertion.Why(what, err), Err: err}
}

func encode(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

func decode(s string) ([]byte, error) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return nil, engine.Errorf(engine.Invalid, "not base64url: %q", s)
	}
	return b, nil
}

var _ engine.WebAuthn = (*RP)(nil)
var _ engine.CheckAssertion = Check
