package evidence

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"golang.org/x/mod/sumdb/note"
)

// A receipt is the server's word that a person voted, and who they are
// is its word too: the database can no longer forge a session, but the
// server's key could sign a vote of anyone. So each console sign-in's
// evidence from the identity provider, the ID token it signed for this
// server (whose nonce the server sent), is journaled with the provider's
// public key that verifies it, in the server's own saga SignInSaga, when
// the session first votes, decides or enrols a passkey; the receipt names
// the sign-in by its token's SHA-256. Offline, `sagacity verify` checks
// that the provider signed that subject's sign-in, at that auth_time,
// before the decision, without trusting the server or its database.

// SignInSaga is the saga whose journal holds the sign-ins that decided
// or enrolled a passkey, and the provider keys that verify them.
const SignInSaga = "sagacity:sign-ins"

// The tools of SignInSaga's entries.
const (
	SignedInTool    = "signed-in"
	ProviderKeyTool = "provider-key"
)

// SignInByAccessToken is a receipt's sign-in for a decision made with an
// OIDC access token: the provider signed it, but it is a credential, so
// the server keeps nothing of it.
const SignInByAccessToken = "access-token"

// SignInClaims are what an ID token says of a sign-in, and the
// thumbprint of the key that verified its signature.
type SignInClaims struct {
	Issuer, Subject            string
	Audience                   []string
	AuthTime, IssuedAt, Expiry time.Time
	Key                        string // RFC 7638 thumbprint, base64url
}

// CheckIDToken checks that an ID token's signature verifies with key (a
// public JWK, as JSON) under an algorithm an ID token may use, and returns
// its claims; an *Error when it does not. OpenIDToken is one.
type CheckIDToken func(token string, key []byte) (SignInClaims, error)

// SignInRecord is a signed-in entry's input.
type SignInRecord struct {
	Identity string `json:"identity"`
	Issuer   string `json:"issuer"`
	Subject  string `json:"subject"`
	ClientID string `json:"clientId"`
	AuthTime string `json:"authTime"` // as receipts write it
	Reauth   bool   `json:"reauth,omitempty"`
	Key      string `json:"key"` // the provider key's RFC 7638 thumbprint
	IDToken  string `json:"idToken"`
}

// ProviderKeyRecord is a provider-key entry's input.
type ProviderKeyRecord struct {
	Issuer string          `json:"issuer"`
	Key    json.RawMessage `json:"key"` // the JWK, as the server read it
}

// SignInNotes are what the server signs of SignInSaga's entries
// (Form.EntryNote).
var SignInNotes = Form{Header: "sagacity sign-in v1", Keys: []string{SignedInTool, ProviderKeyTool}}

// SignInEntry is a sign-in as SignInSaga journals it, checked.
type SignInEntry struct {
	Identity, Issuer, Subject, ClientID string
	AuthTime                            time.Time
	Reauth                              bool
	Seq                                 int64 // its entry in SignInSaga
	// Claims are what its ID token says, signed by the provider key
	// KeyID names; Problem says why it does not hold, "" when it does.
	Claims  SignInClaims
	KeyID   string
	Problem string
}

// SignIns are SignInSaga's sign-ins, checked, by their ID token's hash.
type SignIns map[string]SignInEntry

// ReadSignIns reads SignInSaga's entries (ordered by seq, or any part of
// them an export carries): each must be a record the key v signed. Each
// sign-in's ID token is checked with check against the provider key its
// record names by thumbprint, which must be among the entries, journaled
// before it (or, when trusted is not nil, among trusted, by thumbprint:
// the provider's own keys, as an auditor fetched them); a sign-in that
// does not hold is kept with its Problem. An *Error naming the first
// entry that is no signed record.
func ReadSignIns(entries []Entry, v note.Verifier, check CheckIDToken, trusted map[string][]byte) (SignIns, error) {
	keys, out := map[string]ProviderKeyRecord{}, SignIns{}
	for _, en := range entries {
		bad := func(why string) (SignIns, error) {
			return nil, errorf("seq=%d of %s is no sign-in record the key signed: %s", en.Seq, SignInSaga, why)
		}
		if en.Phase != PhaseExecuted || (en.ToolName != SignedInTool && en.ToolName != ProviderKeyTool) {
			return bad("it is a " + string(en.Phase) + " entry of " + en.ToolName)
		}
		if why := SignInNotes.Unsigned(en, v); why != "" {
			return bad(why)
		}
		if en.ToolName == ProviderKeyTool {
			var k ProviderKeyRecord
			if json.Unmarshal([]byte(en.Input), &k) != nil || len(k.Key) == 0 || en.Field(KeySignIn) == "" {
				return bad("its key cannot be read")
			}
			keys[en.Field(KeySignIn)] = k
			continue
		}
		var r SignInRecord
		if json.Unmarshal([]byte(en.Input), &r) != nil || r.IDToken == "" || en.Field(KeySignIn) != PayloadHash(r.IDToken) {
			return bad("its record cannot be read, or is not the sign-in it names")
		}
		at, err := time.Parse(time.RFC3339, r.AuthTime)
		if err != nil {
			return bad("its sign-in time cannot be read")
		}
		s := SignInEntry{Identity: r.Identity, Issuer: r.Issuer, Subject: r.Subject, ClientID: r.ClientID, AuthTime: at, Reauth: r.Reauth,
			Seq: en.Seq, KeyID: r.Key}
		s.Claims, s.Problem = checkSignIn(r, keys, check, trusted)
		out[PayloadHash(r.IDToken)] = s
	}
	return out, nil
}

// checkSignIn checks a sign-in record's ID token against the provider key
// it names, and that the token says what the record does.
func checkSignIn(r SignInRecord, keys map[string]ProviderKeyRecord, check CheckIDToken, trusted map[string][]byte) (SignInClaims, string) {
	k, journaled := keys[r.Key]
	key := []byte(k.Key)
	switch {
	case check == nil:
		return SignInClaims{}, "ID tokens cannot be checked here"
	case trusted != nil:
		if key = trusted[r.Key]; key == nil {
			return SignInClaims{}, "its provider key is not among the provider keys given"
		}
	case !journaled:
		return SignInClaims{}, "its provider key was not journaled before it"
	case k.Issuer != r.Issuer:
		return SignInClaims{}, "its provider key was journaled as " + k.Issuer + "'s"
	}
	c, err := check(r.IDToken, key)
	switch {
	case err != nil:
		return c, "the provider's signature on its ID token does not verify: " + Message(err)
	case c.Key != r.Key:
		return c, "the key journaled as " + r.Key + " is another key, " + c.Key
	}
	at, _ := time.Parse(time.RFC3339, r.AuthTime)
	switch {
	case c.Issuer != r.Issuer:
		return c, fmt.Sprintf("its ID token was issued by %s, not %s", c.Issuer, r.Issuer)
	case c.Subject != r.Subject:
		return c, fmt.Sprintf("its ID token is %s's, not %s's", c.Subject, r.Subject)
	case !slices.Contains(c.Audience, r.ClientID):
		return c, "its ID token was not issued to " + r.ClientID
	case c.AuthTime.IsZero() || at.Before(c.AuthTime.Add(-MaxSignInSkew)) || at.After(c.AuthTime):
		// The server counts a provider's auth_time up to the skew after
		// its clock as its clock's now.
		return c, fmt.Sprintf("its ID token says the person signed in at %s, not %s", c.AuthTime.UTC().Format(time.RFC3339), r.AuthTime)
	}
	return c, ""
}

// MaxSignInSkew is how far after the server's clock a provider's
// auth_time may be (auth.MaxClockSkew); the server takes it as its own
// now, so a journaled sign-in's time may be up to this before its ID
// token's.
const MaxSignInSkew = time.Minute

// Proves says of a decision's receipt r whether the provider's word on
// the sign-in it names holds: "" when the provider signed that subject's
// sign-in, at that sign-in time, issued before the decision and at most a
// session's life before it; otherwise why not.
func (ss SignIns) Proves(r Receipt) string {
	s, ok := ss[r.SignIn]
	switch {
	case !ok:
		return "its sign-in is not in the export"
	case s.Problem != "":
		return s.Problem
	case s.Identity != r.Decider || s.Issuer != r.Issuer || s.Subject != r.Subject:
		return fmt.Sprintf("its sign-in is %s's, not %s's", s.Identity, r.Decider)
	case !s.AuthTime.Equal(r.AuthTime):
		return fmt.Sprintf("its sign-in was at %s, the receipt says %s", s.AuthTime.Format(time.RFC3339), r.AuthTime.UTC().Format(time.RFC3339))
	case s.Claims.IssuedAt.After(r.Time.Add(MaxSignInSkew)):
		return "its ID token was issued after the decision"
	case r.Time.After(s.AuthTime.Add(MaxSession)):
		return fmt.Sprintf("the decision came more than %s after the sign-in, longer than any session lasts", MaxSession)
	}
	return ""
}

// MaxSession is the longest a console session lasts
// (auth.AbsoluteTimeout): no decision comes later after its sign-in.
const MaxSession = 12 * time.Hour

// Identity is what proves who made a decision of a journal.
type Identity struct {
	Seq     int64 // the decision's entry
	Decider string
	// Proof says in words what vouches for the decider: the provider's
	// signature on their sign-in, or why only the server's word does.
	Proof string
	// Proved: the identity provider's signature vouches for it.
	Proved bool
}

// VerifyIdentities checks who made each decision of a journal (ordered by
// seq, whose chain and receipts verify with v) against the identity
// provider's word: a decision whose receipt names a sign-in holds only if
// signIns prove it (SignIns.Proves), and a passkey vote only if its
// passkey (in keys) was enrolled from a sign-in of its own that signIns
// prove, at most EnrolWithin before the enrolment. A decision by an OIDC
// identity whose receipt names no sign-in (one signed before sign-ins were
// kept, or one the server made up) breaks the journal unless unproved.
// It returns what vouches for each decision; the first that does not hold
// breaks the journal. VerifyIdentities is pure.
func VerifyIdentities(entries []Entry, v note.Verifier, signIns SignIns, keys Passkeys, unproved bool) (Verification, []Identity) {
	n := len(entries)
	var out []Identity
	for _, d := range Decisions(entries, v) {
		r, err := OpenReceipt(ReceiptOf(entries[d.Seq-1]), v)
		if err != nil {
			continue // VerifyReceipts reports it
		}
		id := Identity{Seq: d.Seq, Decider: d.Decider}
		bad := func(format string, args ...any) (Verification, []Identity) {
			i := int(d.Seq - 1)
			return Broken(n, i, fmt.Sprintf("seq=%d (entry %d) was decided by %s, but ", d.Seq, i, d.Decider)+fmt.Sprintf(format, args...)), out
		}
		switch {
		case r.Auth == AuthServer:
			continue
		case r.Auth == AuthToken:
			id.Proof = "a static token: the server's word"
		case r.Auth == AuthDev:
			id.Proof = "dev mode: a name typed, not verified"
		case r.SignIn == SignInByAccessToken:
			id.Proof = "an access token: the provider signed it, the server keeps nothing of it"
		case r.SignIn == "" && !unproved:
			return bad("its receipt names no sign-in the provider signed (signed before sign-ins were kept, or not from one); " +
				"-allow-unproved-sign-in accepts it")
		case r.SignIn == "":
			id.Proof = "no sign-in named: the server's word"
		default:
			if why := signIns.Proves(r); why != "" {
				return bad("%s", why)
			}
			s := signIns[r.SignIn]
			id.Proved, id.Proof = true, fmt.Sprintf("%s signed their sign-in at %s (seq=%d of %s)", s.Issuer,
				s.AuthTime.UTC().Format(time.RFC3339), s.Seq, SignInSaga)
		}
		if pp := r.Passkey; pp != nil {
			k, ok := keys[pp.Credential]
			switch {
			case !ok:
				return bad("its passkey %s was never enrolled", pp.Credential)
			case k.Issuer == "":
				// Enrolled by a dev-mode or token identity: the vote's
				// own identity says what vouches for it.
			case k.SignIn == "" && !unproved:
				return bad("its passkey was enrolled from no sign-in the provider signed; -allow-unproved-sign-in accepts it")
			case k.SignIn != "":
				s, ok := signIns[k.SignIn]
				switch {
				case !ok:
					return bad("the sign-in its passkey was enrolled from is not in the export")
				case s.Problem != "":
					return bad("the sign-in its passkey was enrolled from does not hold: %s", s.Problem)
				case s.Identity != k.Identity:
					return bad("its passkey was enrolled from %s's sign-in, not %s's", s.Identity, k.Identity)
				case !s.Reauth:
					return bad("its passkey was enrolled from a sign-in that did not authenticate the person again")
				case s.AuthTime.After(k.Enrolled) || k.Enrolled.Sub(s.AuthTime) > EnrolWithin+time.Minute/2:
					return bad("its passkey was enrolled %s after the sign-in it names, more than %s", k.Enrolled.Sub(s.AuthTime).Round(time.Second), EnrolWithin)
				}
				id.Proof += "; its passkey was enrolled from a sign-in the provider signed"
			}
		}
		out = append(out, id)
	}
	return Verification{Valid: true, EntryCount: n, BreakAtIndex: -1, Message: fmt.Sprintf("all %d entries verified", n)}, out
}
