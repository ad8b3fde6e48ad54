package evidence

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"golang.org/x/mod/sumdb/note"
)

// A receipt is the server's word that a person voted: whoever holds the
// server's key could mint one. Under a rule that asks for it (passkey:
// required), a vote is the person's own word too: their passkey signs a
// ballot that names the request's bytes, the decision, the rule and
// policy, the voter and the credential, and the vote counts only with
// that assertion, which its receipt carries. A server compromise can
// then withhold a vote, never make one.
//
// Passkeys are enrolled, and removed, by their owners from the console;
// each enrolment (credential id, public key, the person's issuer and
// subject) and each removal is journaled, signed, in the server's own saga
// PasskeySaga, so in the global log: an auditor binds a key to a person
// from the log alone. So is each vote's signature counter. A vote is
// checked against that journal, never against the passkeys table, which
// only indexes it: whoever can write the database cannot revive a
// removed key, write in one of their own, move a key to another person
// or reset its counter (so that a cloned key's vote counts).

// PasskeySaga is the saga whose journal holds every passkey enrolled and
// removed, and the signature counter of each vote.
const PasskeySaga = "sagacity:passkeys"

// The tools of PasskeySaga's entries.
const (
	PasskeyEnrolled = "passkey-enrolled"
	PasskeyRemoved  = "passkey-removed"
	// PasskeyUsed records the counter of a vote's assertion, journaled
	// with the vote when it is not zero: the floor the next one must
	// pass.
	PasskeyUsed = "passkey-used"
)

// EnrolWithin is how recent a sign-in enrolling or removing a passkey
// must be.
const EnrolWithin = 5 * time.Minute

// Passkey is a credential a person enrolled to vote with.
type Passkey struct {
	ID              string // the credential id, base64url
	Identity        string // whose: the identity votes are journaled under
	Issuer, Subject string // of an OIDC identity
	PublicKey       string // its COSE public key, base64url
	// RPID and Origin are the relying party it was made for and the
	// page it was made in: its assertions must come from there.
	RPID, Origin string
	// SignCount is its newest signature counter: a later assertion's
	// must be higher, unless both are zero (a key that keeps none).
	SignCount   uint32
	Enrolled    time.Time
	EnrolledSeq int64     // its entry in PasskeySaga
	Removed     time.Time // zero while it counts
	// SignIn names the sign-in it was enrolled from (its ID token's
	// SHA-256, in SignInSaga); "" when its owner has no OIDC identity.
	SignIn string
}

// Assertion is what a passkey answered a ballot's challenge with, each
// part base64url, as the browser handed it.
type Assertion struct {
	Credential        string
	AuthenticatorData string
	ClientData        string // the client data JSON
	Signature         string
}

// CheckAssertion checks that an assertion is the signature, by the
// credential whose COSE public key is key, over challenge, from one of
// origins for rpID, the user present and verified, and returns the
// signature counter; an *Error when it does not hold. passkey.Check is
// one.
type CheckAssertion func(a Assertion, challenge, key []byte, rpID string, origins []string) (uint32, error)

// PasskeyBallot is what a passkey signs for a vote.
type PasskeyBallot struct {
	SagaID               string
	Seq                  int64
	Entry                string // the request's AWAITING_APPROVAL entry hash
	PayloadSHA256        string
	Decision             Decided
	Reason               string
	ApprovalPolicy, Rule string
	Voter                string
	Credential           string
	Time                 time.Time // when the ceremony began
}

// ballotForm is the grammar of a ballot's text. docs/configuration.md gives it;
// testdata/passkey-ballots.json its vectors.
var ballotForm = Form{Header: "sagacity passkey ballot v1",
	Keys:     []string{"saga", "seq", "entry", "payload-sha256", "decision", "reason", "approval-policy", "rule", "voter", "credential", "time"},
	Required: []string{"saga", "seq", "entry", "payload-sha256", "decision", "approval-policy", "rule", "voter", "credential", "time"}}

// Text is the ballot as signed (ballotForm): reason only when given.
func (b PasskeyBallot) Text() string {
	fs := Fields{{"saga", b.SagaID}, {"seq", strconv.FormatInt(b.Seq, 10)}, {"entry", b.Entry}, {"payload-sha256", b.PayloadSHA256},
		{"decision", string(b.Decision)}}
	if b.Reason != "" {
		fs = append(fs, Field{"reason", b.Reason})
	}
	fs = append(fs, Field{"approval-policy", b.ApprovalPolicy}, Field{"rule", b.Rule}, Field{"voter", b.Voter},
		Field{"credential", b.Credential}, Field{"time", b.Time.UTC().Format(TimeLayout)})
	return ballotForm.Encode(fs...)
}

// Challenge is what the passkey signs: the ceremony's single-use nonce,
// then the SHA-256 of the ballot's text.
func (b PasskeyBallot) Challenge(nonce []byte) []byte {
	sum := sha256.Sum256([]byte(b.Text()))
	return append(append([]byte{}, nonce...), sum[:]...)
}

// PasskeyNotes are what the server signs of PasskeySaga's entries
// (Form.EntryNote).
var PasskeyNotes = Form{Header: "sagacity passkey v1", Keys: []string{PasskeyEnrolled, PasskeyRemoved, PasskeyUsed}}

// PasskeyRecord is a PasskeySaga entry's input: an enrolment's whole
// record (with the registration's counter), a removal's credential and
// identity, a use's credential, identity, counter and the request voted
// on.
type PasskeyRecord struct {
	Credential string `json:"credential"`
	Identity   string `json:"identity"`
	Issuer     string `json:"issuer,omitempty"`
	Subject    string `json:"subject,omitempty"`
	PublicKey  string `json:"publicKey,omitempty"`
	RPID       string `json:"rpId,omitempty"`
	Origin     string `json:"origin,omitempty"`
	SignIn     string `json:"signIn,omitempty"`
	Counter    uint32 `json:"counter,omitempty"`
	Saga       string `json:"saga,omitempty"`
	Seq        int64  `json:"seq,omitempty"`
}

// Passkeys are the enrolments and removals of PasskeySaga's journal, as
// the server signed them, by credential, each with the newest counter
// journaled for it.
type Passkeys map[string]Passkey

// ReadPasskeys reads PasskeySaga's entries (ordered by seq, or a part of
// them, such as an export's, that holds each credential's enrolment): each
// must be an enrolment, a removal or a use the key v signed, a use of a
// credential that counted then, its counter higher than the last. An
// *Error naming the first that is not.
func ReadPasskeys(entries []Entry, v note.Verifier) (Passkeys, error) {
	keys := Passkeys{}
	for _, en := range entries {
		bad := func(why string) (Passkeys, error) {
			return nil, errorf("seq=%d of %s is no passkey entry the key signed: %s", en.Seq, PasskeySaga, why)
		}
		if en.Phase != PhaseExecuted || (en.ToolName != PasskeyEnrolled && en.ToolName != PasskeyRemoved && en.ToolName != PasskeyUsed) {
			return bad("it is a " + string(en.Phase) + " entry of " + en.ToolName)
		}
		if why := PasskeyNotes.Unsigned(en, v); why != "" {
			return bad(why)
		}
		var r PasskeyRecord
		if err := json.Unmarshal([]byte(en.Input), &r); err != nil || r.Credential == "" {
			return bad("its record cannot be read")
		}
		k, known := keys[r.Credential]
		switch {
		case en.ToolName == PasskeyEnrolled && known:
			return bad("the credential was enrolled before")
		case en.ToolName == PasskeyEnrolled:
			keys[r.Credential] = Passkey{ID: r.Credential, Identity: r.Identity, Issuer: r.Issuer, Subject: r.Subject,
				PublicKey: r.PublicKey, RPID: r.RPID, Origin: r.Origin, SignCount: r.Counter, Enrolled: en.Timestamp, EnrolledSeq: en.Seq,
				SignIn: r.SignIn}
		case !known || k.Identity != r.Identity || !k.Removed.IsZero():
			return bad("it names no enrolled credential of " + r.Identity)
		case en.ToolName == PasskeyUsed && r.Counter <= k.SignCount:
			return bad(fmt.Sprintf("its counter %d does not go past the last, %d", r.Counter, k.SignCount))
		case en.ToolName == PasskeyUsed:
			k.SignCount = r.Counter
			keys[r.Credential] = k
		default:
			k.Removed = en.Timestamp
			keys[r.Credential] = k
		}
	}
	return keys, nil
}

// CountsAt reports whether the passkey counted at t: enrolled by then,
// not removed yet.
func (k Passkey) CountsAt(t time.Time) bool {
	return !t.Before(k.Enrolled) && (k.Removed.IsZero() || t.Before(k.Removed))
}

// PasskeyProof is the part of a receipt that makes a vote the voter's own
// word: the credential, the ballot's time and nonce, and the assertion.
type PasskeyProof struct {
	Credential        string
	Time              time.Time
	Nonce             string
	AuthenticatorData string
	ClientData        string
	Signature         string
}

// Ballot is the ballot a vote's receipt r says the passkey signed.
func (pp PasskeyProof) Ballot(r Receipt) PasskeyBallot {
	return PasskeyBallot{SagaID: r.SagaID, Seq: r.Seq, Entry: r.Entry, PayloadSHA256: r.PayloadSHA256, Decision: r.Decision,
		Reason: r.Reason, ApprovalPolicy: r.ApprovalPolicy, Rule: r.Rule, Voter: r.Decider, Credential: pp.Credential, Time: pp.Time}
}

// VerifyPasskey checks, of a vote whose receipt r carries a passkey
// proof, that the credential enrolled in keys signed its ballot,
// counting at the vote's time: what the server, sagacity verify and
// sagacity verify-receipt check. It says why not, or "".
func VerifyPasskey(r Receipt, keys Passkeys, check CheckAssertion) string {
	pp := r.Passkey
	if pp == nil {
		return "it carries no passkey assertion, which its rule requires"
	}
	k, ok := keys[pp.Credential]
	switch {
	case !ok:
		return "its passkey " + pp.Credential + " was never enrolled"
	case k.Identity != r.Decider:
		return "its passkey is " + k.Identity + "'s, not " + r.Decider + "'s"
	case !k.CountsAt(r.Time):
		return "its passkey was removed before the vote, or enrolled after it"
	}
	nonce, err1 := base64.RawURLEncoding.DecodeString(pp.Nonce)
	key, err2 := base64.RawURLEncoding.DecodeString(k.PublicKey)
	if err1 != nil || err2 != nil {
		return "its passkey proof cannot be read"
	}
	a := Assertion{Credential: pp.Credential, AuthenticatorData: pp.AuthenticatorData, ClientData: pp.ClientData, Signature: pp.Signature}
	if _, err := check(a, pp.Ballot(r).Challenge(nonce), key, k.RPID, []string{k.Origin}); err != nil {
		return Message(err)
	}
	return ""
}
