// Package assertion checks a passkey's WebAuthn assertion over a vote's
// ballot (go-webauthn): the check the server runs when a vote is cast and
// sagacity verify, verify-receipt and the Go client run offline. It is
// apart from package evidence, whose CheckAssertion it is, because
// go-webauthn brings net/http, which evidence does not import.
package assertion

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/go-webauthn/webauthn/protocol"
	"github.com/sagacity-go/sagacity/evidence"
)

// Check verifies that assertion a is the signature, by the credential
// whose COSE public key is publicKey, over challenge, made in a page of
// one of origins for RP ID rpID, with the user present and verified; it
// returns the authenticator's signature counter. It runs the same on the
// server and offline: it is the evidence.CheckAssertion both run. An
// *evidence.Error when it does not hold.
func Check(a evidence.Assertion, challenge, publicKey []byte, rpID string, origins []string) (uint32, error) {
	b, err := json.Marshal(map[string]any{"id": a.Credential, "rawId": a.Credential, "type": "public-key",
		"response": map[string]string{"authenticatorData": a.AuthenticatorData, "clientDataJSON": a.ClientData, "signature": a.Signature}})
	if err != nil {
		return 0, err
	}
	parsed, err := protocol.ParseCredentialRequestResponseBytes(b)
	if err != nil {
		return 0, &evidence.Error{Msg: Why("the assertion cannot be read", err), Err: err}
	}
	if err := parsed.Verify(base64.RawURLEncoding.EncodeToString(challenge), rpID, "", origins, nil, nil, protocol.TopOriginImplicitVerificationMode, false,
		true, true, publicKey, protocol.SignaturePolicy{}); err != nil {
		return 0, &evidence.Error{Msg: Why("the passkey's assertion does not verify", err), Err: err}
	}
	return parsed.Response.AuthenticatorData.Counter, nil
}

// Why says what failed, with go-webauthn's detail.
func Why(what string, err error) string {
	detail := err.Error()
	if pe, ok := errors.AsType[*protocol.Error](err); ok && pe.DevInfo != "" {
		detail = pe.Details + ": " + pe.DevInfo
	} else if ok {
		detail = pe.Details
	}
	return fmt.Sprintf("%s: %s", what, strings.TrimSuffix(detail, ": <nil>"))
}
