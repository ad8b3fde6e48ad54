package engine

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"golang.org/x/mod/sumdb/note"
)

// A person's decision (approve, reject, what a call in doubt came to) is
// journaled with a receipt: a signed note (golang.org/x/mod/sumdb/note)
// over what was decided, by whom, about which bytes, signed with a key the
// database never sees. A row written into the database by hand has no
// valid receipt, so it never makes anything execute, and verification
// reports it.

// Keys sign receipts and verify them. The signer key is a secret kept out
// of the database; the verifier key is public.
type Keys struct {
	signer   note.Signer
	verifier note.Verifier
	vkey     string
	// outbox seals the outbox's rows (seal.go): derived from the
	// signer's seed, so never stored.
	outbox []byte
}

// GenerateKeys makes a new Ed25519 key pair named name (a host or
// host/path, without spaces or '+'), encoded as note signer and verifier
// keys.
func GenerateKeys(name string) (skey, vkey string, err error) {
	if name == "" || !utf8.ValidString(name) || strings.ContainsFunc(name, func(r rune) bool { return r == '+' || unicode.IsSpace(r) }) {
		return "", "", Errorf(Invalid, "key name %q must be non-empty, without spaces or '+'", name)
	}
	return note.GenerateKey(rand.Reader, name)
}

// NewKeys reads an encoded signer key ("PRIVATE+KEY+<name>+<hash>+<key>")
// and derives its verifier key. Invalid for anything else; the message
// never repeats the key.
func NewKeys(skey string) (*Keys, error) {
	skey = strings.TrimSpace(skey)
	signer, err := note.NewSigner(skey)
	if err != nil {
		return nil, Errorf(Invalid, "not a signing key: want PRIVATE+KEY+<name>+<hash>+<key>, as sagacity keygen prints")
	}
	parts := strings.SplitN(skey, "+", 5) // the key data is base64 and may hold '+'
	data, err := base64.StdEncoding.DecodeString(parts[len(parts)-1])
	if err != nil || len(data) != 1+ed25519.SeedSize || data[0] != 1 {
		return nil, Errorf(Invalid, "not an Ed25519 signing key")
	}
	pub := ed25519.NewKeyFromSeed(data[1:]).Public().(ed25519.PublicKey)
	vkey := signer.Name() + "+" + parts[len(parts)-2] + "+" + base64.StdEncoding.EncodeToString(append([]byte{1}, pub...))
	verifier, err := note.NewVerifier(vkey)
	if err != nil {
		return nil, &Error{Kind: Invalid, Msg: "signing key does not derive a verifier key", Err: err}
	}
	return &Keys{signer: signer, verifier: verifier, vkey: vkey, outbox: outboxKey(data[1:])}, nil
}

// VerifierKey is the public key receipts and checkpoints verify with, in
// note's "<name>+<hash>+<key>" form.
func (k *Keys) VerifierKey() string { return k.vkey }

// Name is the key's name: the origin of the log it signs.
func (k *Keys) Name() string { return k.signer.Name() }

// Verifier is the public half, for checking what the key signed.
func (k *Keys) Verifier() note.Verifier { return k.verifier }

// Sign signs text as a note and returns the signed note.
func (k *Keys) Sign(text string) (string, error) {
	b, err := note.Sign(&note.Note{Text: text}, k.signer)
	return string(b), err
}

// signed makes the receipt line of decision r (its decision, reason and,
// on a request, ballot filled in) on entry g (a request's
// AWAITING_APPROVAL entry or a call's INTENT), decided by p at at.
func (e *Engine) signed(p Principal, g Entry, r Receipt, result *string, at time.Time) (string, error) {
	if err := signedInBy(p, at); err != nil {
		return "", err
	}
	r.SagaID, r.Seq, r.Entry, r.PayloadSHA256 = g.SagaID, g.Seq, g.Hash, PayloadHash(g.Input)
	r.Decider, r.Issuer, r.Subject, r.AuthTime, r.Auth, r.SignIn, r.Time = p.ID, p.Issuer, p.Subject, p.AuthTime, p.Auth, signInOf(p), at
	r.Policy = e.access.String()
	if result != nil {
		r.ResultSHA256 = PayloadHash(*result)
	}
	n, err := e.keys.Sign(r.Text())
	if err != nil {
		return "", fmt.Errorf("signing a receipt: %w", err)
	}
	return base64.StdEncoding.EncodeToString([]byte(n)), nil
}

// signedInBy refuses (Forbidden) a principal who, it says, signed in
// after at: whoever established it (internal/auth) holds a provider's
// sign-in time to this server's clock, and a later one would meet any
// step-up.
func signedInBy(p Principal, at time.Time) error {
	if p.AuthTime.After(at) {
		return Errorf(Forbidden, "%s's sign-in time (%s) is after this server's clock (%s): sign in again",
			p.ID, p.AuthTime.UTC().Format(time.RFC3339), at.UTC().Format(time.RFC3339))
	}
	return nil
}

// VerifierKey is the public key that checks receipts and checkpoints.
func (e *Engine) VerifierKey() string { return e.keys.VerifierKey() }

// Receipt returns the signed receipt of the decision journaled at seq of
// saga sagaID. NotFound when that entry is not a person's decision or
// carries no receipt; other errors as Journal.
func (e *Engine) Receipt(ctx context.Context, p Principal, sagaID string, seq int64) (string, error) {
	entries, err := e.Journal(ctx, p, sagaID)
	if err != nil {
		return "", err
	}
	if seq >= 1 && seq <= int64(len(entries)) {
		if _, _, ok := entries[seq-1].Decision(); ok {
			if r := ReceiptOf(entries[seq-1]); r != "" {
				return r, nil
			}
		}
	}
	return "", &Error{Kind: NotFound, Msg: fmt.Sprintf("no decision with a receipt at saga=%s seq=%d", sagaID, seq), SagaID: sagaID, Seq: seq}
}

// Decided returns the exact bytes the decision journaled at seq of saga
// sagaID was made on: the input of the entry its receipt names (a
// request's AWAITING_APPROVAL entry, a call's INTENT), which is what
// verify-receipt checks a receipt against. NotFound when that entry is
// not a person's decision on an earlier entry; other errors as Journal.
func (e *Engine) Decided(ctx context.Context, p Principal, sagaID string, seq int64) (string, error) {
	entries, err := e.Journal(ctx, p, sagaID)
	if err != nil {
		return "", err
	}
	if seq >= 1 && seq <= int64(len(entries)) {
		en := entries[seq-1]
		if _, _, ok := en.Decision(); ok {
			if g := en.Refers(); g >= 1 && g < seq {
				return entries[g-1].Input, nil
			}
		}
	}
	return "", &Error{Kind: NotFound, Msg: fmt.Sprintf("no decision at saga=%s seq=%d", sagaID, seq), SagaID: sagaID, Seq: seq}
}
