package engine

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"time"

	"github.com/sagacity-go/sagacity/evidence"
	"github.com/sagacity-go/sagacity/wire"
)

// People enrol passkeys and vote with them here, each enrolment, removal
// and vote's counter journaled, signed, in PasskeySaga; what a passkey
// signs for a vote, and the check of a vote against that journal, on the
// server and offline, are package evidence's.

// CeremonyTTL is how long a browser has to answer a ceremony.
const CeremonyTTL = 2 * time.Minute

// WebAuthn is the protocol, which the engine asks but does not speak
// (internal/passkey does).
type WebAuthn interface {
	// BeginRegistration makes a browser's options to register a passkey
	// for p, not one of enrolled, and the state to finish with.
	BeginRegistration(p Principal, enrolled []string) (options, state []byte, err error)
	// FinishRegistration checks the browser's answer (user verified).
	// Invalid when it does not hold.
	FinishRegistration(p Principal, state, response []byte) (Passkey, error)
	// AssertionOptions makes a browser's options to sign challenge with
	// the credential, verifying the user.
	AssertionOptions(challenge []byte, credential string) ([]byte, error)
	// ParseAssertion reads a browser's answer to them. Invalid otherwise.
	ParseAssertion(response []byte) (Assertion, error)
	// Origin is where the console's pages must be for passkeys to work:
	// https://host[:port], or http://localhost[:port].
	Origin() string
}

// WithPasskeys lets people enrol passkeys and vote with them, through w,
// whose assertions check checks.
func WithPasskeys(w WebAuthn, check CheckAssertion) Option {
	return func(e *Engine) { e.webauthn, e.checkAssertion = w, check }
}

// Ceremony is a WebAuthn ceremony under way: a passkey being enrolled,
// or a vote being signed. It is taken once.
type Ceremony struct {
	ID       string // its nonce, base64url
	Identity string // who began it
	Kind     string // "enrol" or "vote"
	Data     string // the registration's state, or the ballot (JSON)
	Expires  time.Time
}

// passkeyOrigin is the origin the console's passkeys are bound to, ""
// when the server has none.
func (e *Engine) passkeyOrigin() string {
	if e.webauthn == nil {
		return ""
	}
	return e.webauthn.Origin()
}

// passkeysOn refuses what needs passkeys on an engine without them.
func (e *Engine) passkeysOn() error {
	if e.webauthn == nil {
		return Errorf(Unavailable, "passkeys are not set up on this server (it needs its public URL)")
	}
	return nil
}

// MayEnrol says whether p may enrol passkeys now: nil, or why not; and
// the origin the console's passkeys are bound to, "" when the server
// has none.
// Unavailable when the server has no passkeys; Forbidden without the
// approver role, or (code STEP_UP) from a sign-in older than
// EnrolWithin, or, for an OIDC identity, from any sign-in but one of its
// own, in which the provider authenticated the person again (Reauth):
// the provider's signature on that sign-in is what binds the key to the
// person, offline.
func (e *Engine) MayEnrol(p Principal) (origin string, err error) {
	return e.passkeyOrigin(), e.mayEnrol(p)
}

// mayEnrol is MayEnrol's answer, without the origin.
func (e *Engine) mayEnrol(p Principal) error {
	if err := e.passkeysOn(); err != nil {
		return err
	}
	if err := e.Can(p, ActEnrol, Subject{}); err != nil {
		return err
	}
	if err := e.freshSignIn(p); err != nil {
		return err
	}
	if p.Auth == AuthOIDC && (p.SignIn == nil || !p.SignIn.Reauth) {
		return &Error{Kind: Forbidden, Code: wire.CodeStepUp, Msg: "enrolling a passkey takes a sign-in of its own, " +
			"in which your identity provider asks for your password again: sign in again"}
	}
	return nil
}

// freshSignIn refuses an enrolment or removal from a sign-in older than
// EnrolWithin (Forbidden, code STEP_UP).
func (e *Engine) freshSignIn(p Principal) error {
	now := e.now()
	if err := signedInBy(p, now); err != nil {
		return err
	}
	if p.AuthTime.IsZero() || now.Sub(p.AuthTime) > EnrolWithin+time.Minute/2 {
		return &Error{Kind: Forbidden, Code: wire.CodeStepUp, Msg: fmt.Sprintf("changing your passkeys takes a sign-in of the last %s: "+
			"sign in again", EnrolWithin)}
	}
	return nil
}

// newNonce is a ceremony's id and the start of its challenge.
func newNonce() []byte {
	b := make([]byte, 16)
	rand.Read(b)
	return b
}

// BeginEnrolment starts enrolling a passkey for p: it returns the
// ceremony and the options navigator.credentials.create takes. Errors:
// Forbidden without the approver role (passkeys are for voting), or from
// a sign-in older than EnrolWithin (code STEP_UP); Unavailable when the
// server has no passkeys, or the store is.
func (e *Engine) BeginEnrolment(ctx context.Context, p Principal) (string, json.RawMessage, error) {
	if err := e.mayEnrol(p); err != nil {
		return "", nil, err
	}
	mine, err := e.Passkeys(ctx, p)
	if err != nil {
		return "", nil, err
	}
	var enrolled []string
	for _, k := range mine {
		enrolled = append(enrolled, k.ID)
	}
	options, state, err := e.webauthn.BeginRegistration(p, enrolled)
	if err != nil {
		return "", nil, err
	}
	c := Ceremony{ID: base64.RawURLEncoding.EncodeToString(newNonce()), Identity: p.ID, Kind: "enrol", Data: string(state),
		Expires: e.now().Add(CeremonyTTL)}
	if err := e.store.PutCeremony(ctx, c, e.now()); err != nil {
		return "", nil, err
	}
	return c.ID, options, nil
}

// takeCeremony takes the ceremony id of kind that p began: once, before
// it expires. NotFound otherwise (a replay, an expired or another's
// ceremony).
func (e *Engine) takeCeremony(ctx context.Context, p Principal, id, kind string) (Ceremony, error) {
	c, err := e.store.TakeCeremony(ctx, id)
	if err == nil && (c.Identity != p.ID || c.Kind != kind || e.now().After(c.Expires)) {
		err = Errorf(NotFound, "no such ceremony")
	}
	if IsKind(err, NotFound) {
		return Ceremony{}, Errorf(NotFound, "this passkey prompt was answered already, or it expired: start again")
	}
	return c, err
}

// FinishEnrolment enrols the passkey the browser made in ceremony id:
// journaled, signed, in PasskeySaga. Errors: Invalid when the browser's
// answer does not verify (the challenge, the origin, user verification);
// NotFound for a ceremony taken or expired; as BeginEnrolment otherwise.
func (e *Engine) FinishEnrolment(ctx context.Context, p Principal, id string, response []byte) (Passkey, error) {
	if err := e.passkeysOn(); err != nil {
		return Passkey{}, err
	}
	if err := e.mayEnrol(p); err != nil {
		return Passkey{}, err
	}
	if err := e.recordSignIn(ctx, p); err != nil {
		return Passkey{}, err
	}
	c, err := e.takeCeremony(ctx, p, id, "enrol")
	if err != nil {
		return Passkey{}, err
	}
	k, err := e.webauthn.FinishRegistration(p, []byte(c.Data), response)
	if err != nil {
		return Passkey{}, err
	}
	k.Identity, k.Issuer, k.Subject = p.ID, p.Issuer, p.Subject
	if p.SignIn != nil {
		k.SignIn = signInOf(p)
	}
	rec := evidence.PasskeyRecord{Credential: k.ID, Identity: k.Identity, Issuer: k.Issuer, Subject: k.Subject, PublicKey: k.PublicKey,
		RPID: k.RPID, Origin: k.Origin, SignIn: k.SignIn, Counter: k.SignCount}
	taken := Errorf(Conflict, "the passkey %s is enrolled already", k.ID)
	err = e.journalPasskey(ctx, PasskeyEnrolled, rec, taken, func(tx Tx, en Entry) error {
		k.Enrolled, k.EnrolledSeq = en.Timestamp, en.Seq
		return tx.PutPasskey(k)
	})
	return k, err
}

// RemovePasskey removes p's passkey credential: journaled, signed, in
// PasskeySaga; its later votes do not count. Errors: NotFound for no
// passkey of p's; Forbidden from a sign-in older than EnrolWithin (code
// STEP_UP).
func (e *Engine) RemovePasskey(ctx context.Context, p Principal, credential string) error {
	if err := e.Can(p, ActEnrol, Subject{}); err != nil {
		return err
	}
	if err := e.freshSignIn(p); err != nil {
		return err
	}
	rec := evidence.PasskeyRecord{Credential: credential, Identity: p.ID}
	none := Errorf(NotFound, "you have no passkey %s", credential)
	return e.journalPasskey(ctx, PasskeyRemoved, rec, none, func(tx Tx, en Entry) error {
		k, err := tx.Passkey(credential)
		if IsKind(err, NotFound) || (err == nil && (k.Identity != p.ID || !k.Removed.IsZero())) {
			return none
		}
		if err != nil {
			return err
		}
		return tx.RemovePasskey(credential, en.Timestamp)
	})
}

// journalPasskey appends an entry of tool for rec to PasskeySaga, signed,
// and runs fn with it in the same transaction; refused, and nothing
// kept, when the journal with it would not read (see ReadPasskeys): votes
// are checked against that journal, so the server never signs an entry
// it would refuse, such as the removal of a key the passkeys table, but
// not the journal, says is p's. Conflict when the journal before it does
// not read.
func (e *Engine) journalPasskey(ctx context.Context, tool string, rec evidence.PasskeyRecord, refused *Error, fn func(tx Tx, en Entry) error) error {
	return e.journalOwn(ctx, PasskeySaga, PasskeyEnrolled, func(tx Tx, s *Saga) error {
		en, err := e.passkeyEntry(tx, s, tool, rec)
		if err != nil {
			return err
		}
		entries, err := tx.Entries(PasskeySaga)
		if err != nil {
			return err
		}
		if _, err := ReadPasskeys(entries, e.keys.Verifier()); err != nil {
			if _, before := ReadPasskeys(entries[:len(entries)-1], e.keys.Verifier()); before != nil {
				return &Error{Kind: Conflict, Msg: msgOf(before) + ": no passkey is enrolled or removed on it", Err: before}
			}
			return refused
		}
		return fn(tx, en)
	})
}

// passkeyEntry appends to PasskeySaga, s, locked, an entry of tool for
// rec, signed.
func (e *Engine) passkeyEntry(tx Tx, s *Saga, tool string, rec evidence.PasskeyRecord) (Entry, error) {
	b, err := json.Marshal(rec)
	if err != nil {
		return Entry{}, err
	}
	return e.signedEntry(tx, s, evidence.PasskeyNotes, tool, string(b), Lines{{KeyPasskey, rec.Credential}})
}

// enrolled locks PasskeySaga and reads, from its journal, once that
// verifies against its row, the passkeys enrolled and removed, each with
// its newest counter: what a vote is checked against. None before the
// first enrolment. Conflict when the journal does not verify.
func (e *Engine) enrolled(tx Tx) (*Saga, Passkeys, error) {
	s, err := tx.LockSaga(PasskeySaga)
	if IsKind(err, NotFound) {
		return nil, Passkeys{}, nil
	}
	if err != nil {
		return nil, nil, err
	}
	entries, err := tx.Entries(PasskeySaga)
	if err != nil {
		return nil, nil, err
	}
	if v := VerifySaga(entries, s, nil); !v.Valid {
		e.obs.VerifyFailed(CheckedJournal)
		return nil, nil, Errorf(Conflict, "journal of saga %s does not verify (%s): no passkey vote counts on it", PasskeySaga, v.Message)
	}
	keys, err := ReadPasskeys(entries, e.keys.Verifier())
	if err != nil {
		return nil, nil, &Error{Kind: Conflict, Msg: msgOf(err) + ": no passkey vote counts on it", Err: err}
	}
	return &s, keys, nil
}

// Passkeys lists p's own passkeys, removed ones too. Errors: Unavailable
// when the store is.
func (e *Engine) Passkeys(ctx context.Context, p Principal) ([]Passkey, error) {
	if err := validName("principal", p.ID); err != nil {
		return nil, &Error{Kind: Unauthenticated, Msg: "no authenticated principal", Err: err}
	}
	return e.store.Passkeys(ctx, p.ID)
}
