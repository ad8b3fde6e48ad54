package engine

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
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

// Decided is what a person decided, as a receipt records it.
type Decided string

// The decisions.
const (
	DecidedApproved    Decided = "approved"
	DecidedRejected    Decided = "rejected"
	DecidedHappened    Decided = "happened"          // a call in doubt had taken effect
	DecidedNotHappened Decided = "not-happened"      // it had not
	DecidedUndone      Decided = "undone"            // an undo in doubt had taken effect, or a person undid a step by hand
	DecidedNotUndone   Decided = "not-undone"        // it had not
	DecidedDismissed   Decided = "dismissed"         // a superseded request dropped, the saga going on
	DecidedWithdrawn   Decided = "withdrawn"         // a voter took back their approval
	DecidedChanges     Decided = "changes-requested" // a request sent back to the agent, the saga going on
	DecidedExpired     Decided = "expired"           // the server: no quorum was reached in time
)

// ServerDecider is who the receipts of the server's own decisions (a
// request that expired) name.
const ServerDecider = "server"

// AuthServer is how the server "signs in" on its own decisions.
const AuthServer AuthMethod = "server"

// Decideds lists every decision.
var Decideds = []Decided{DecidedApproved, DecidedRejected, DecidedDismissed, DecidedWithdrawn, DecidedChanges, DecidedExpired,
	DecidedHappened, DecidedNotHappened, DecidedUndone, DecidedNotUndone}

// Receipt is what a person decided, as signed.
type Receipt struct {
	SagaID string
	Seq    int64  // the request's AWAITING_APPROVAL entry, or the call's INTENT
	Entry  string // that entry's hash
	// PayloadSHA256 is the hash of that entry's input: the bytes decided on.
	PayloadSHA256 string
	Decision      Decided
	Decider       string     // the identity journaled
	Issuer        string     // for an OIDC identity, its issuer
	Subject       string     // and subject
	AuthTime      time.Time  // when they last signed in at the provider, when it says
	Auth          AuthMethod // how they signed in here
	// SignIn names the provider's word on an OIDC decider's sign-in:
	// the SHA-256 of the ID token SignInSaga journals, or
	// SignInByAccessToken; "" for any other decider.
	SignIn string
	Time   time.Time
	Policy string // the policy in force
	// ApprovalPolicy and Rule are the approval policy's hash and the
	// rule a decision on a request was made under, as its
	// AWAITING_APPROVAL entry records them; "" for a call in doubt.
	ApprovalPolicy, Rule string
	// EligibleAs is which of the rule's approvers (a role or a group)
	// the decider voted as; "" for a decision that is no vote.
	EligibleAs string
	// Vote and Quorum place an approval: it made Vote standing approvals
	// of the Quorum the rule asks for. 0 for any other decision.
	Vote, Quorum int
	// Passkey is the voter's passkey's assertion over the vote's ballot,
	// for a vote cast with one; nil otherwise.
	Passkey *PasskeyProof
	Reason  string // why, as they said; "" when they gave none
	// ResultSHA256 is the hash of the result a person reports for a call
	// in doubt that happened; "" for any other decision.
	ResultSHA256 string
}

// receiptHeader opens every receipt's text.
const receiptHeader = "sagacity decision receipt v1"

// Text is the receipt as a note's text: a header line, then one
// "key: value" line a field. No value holds a line break (ids and names
// never hold control characters).
func (r Receipt) Text() string {
	var b strings.Builder
	b.WriteString(receiptHeader + "\n")
	line := func(k, v string) { b.WriteString(k + ": " + v + "\n") }
	line("saga", r.SagaID)
	line("seq", strconv.FormatInt(r.Seq, 10))
	line("entry", r.Entry)
	line("payload-sha256", r.PayloadSHA256)
	line("decision", string(r.Decision))
	line("decider", r.Decider)
	if r.Issuer != "" {
		line("issuer", r.Issuer)
		line("subject", r.Subject)
	}
	if !r.AuthTime.IsZero() {
		line("auth-time", r.AuthTime.UTC().Format(time.RFC3339))
	}
	line("auth", string(r.Auth))
	if r.SignIn != "" {
		line("sign-in", r.SignIn)
	}
	line("time", r.Time.UTC().Format(TimeLayout))
	line("policy", r.Policy)
	if r.ApprovalPolicy != "" {
		line("approval-policy", r.ApprovalPolicy)
		line("rule", r.Rule)
	}
	if r.EligibleAs != "" {
		line("eligible-as", r.EligibleAs)
	}
	if r.Quorum > 0 {
		line("vote", fmt.Sprintf("%d of %d", r.Vote, r.Quorum))
	}
	if r.Reason != "" {
		line("reason", r.Reason)
	}
	if r.ResultSHA256 != "" {
		line("result-sha256", r.ResultSHA256)
	}
	if pp := r.Passkey; pp != nil {
		line("passkey", pp.Credential)
		line("passkey-time", pp.Time.UTC().Format(TimeLayout))
		line("passkey-nonce", pp.Nonce)
		line("passkey-authenticator-data", pp.AuthenticatorData)
		line("passkey-client-data", pp.ClientData)
		line("passkey-signature", pp.Signature)
	}
	return b.String()
}

// ParseReceipt reads a receipt's text. Invalid for anything Text would
// not write.
func ParseReceipt(text string) (Receipt, error) {
	bad := func(why string) (Receipt, error) { return Receipt{}, Errorf(Invalid, "not a receipt: %s", why) }
	lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	if len(lines) == 0 || lines[0] != receiptHeader {
		return bad("no " + receiptHeader + " header")
	}
	var r Receipt
	var pp PasskeyProof
	fields := map[string]*string{"passkey": &pp.Credential, "passkey-nonce": &pp.Nonce, "passkey-authenticator-data": &pp.AuthenticatorData,
		"passkey-client-data": &pp.ClientData, "passkey-signature": &pp.Signature, "saga": &r.SagaID, "entry": &r.Entry, "payload-sha256": &r.PayloadSHA256, "decider": &r.Decider,
		"issuer": &r.Issuer, "subject": &r.Subject, "policy": &r.Policy, "approval-policy": &r.ApprovalPolicy, "rule": &r.Rule,
		"eligible-as": &r.EligibleAs, "reason": &r.Reason, "result-sha256": &r.ResultSHA256, "sign-in": &r.SignIn}
	seen := map[string]bool{}
	for _, l := range lines[1:] {
		k, v, ok := strings.Cut(l, ": ")
		if !ok || seen[k] {
			return bad("line " + strconv.Quote(l))
		}
		seen[k] = true
		var err error
		switch k {
		case "seq":
			r.Seq, err = strconv.ParseInt(v, 10, 64)
		case "decision":
			r.Decision = Decided(v)
		case "auth":
			r.Auth = AuthMethod(v)
		case "auth-time":
			r.AuthTime, err = time.Parse(time.RFC3339, v)
		case "time":
			r.Time, err = time.Parse(time.RFC3339Nano, v)
		case "passkey-time":
			pp.Time, err = time.Parse(time.RFC3339Nano, v)
		case "vote":
			if n, serr := fmt.Sscanf(v, "%d of %d", &r.Vote, &r.Quorum); n != 2 || serr != nil || r.Vote < 1 || r.Quorum < r.Vote ||
				v != fmt.Sprintf("%d of %d", r.Vote, r.Quorum) {
				err = errors.New("not <k> of <m>")
			}
		default:
			to, ok := fields[k]
			if !ok {
				return bad("unknown field " + strconv.Quote(k))
			}
			*to = v
		}
		if err != nil {
			return bad("field " + k)
		}
	}
	for _, k := range []string{"saga", "seq", "entry", "payload-sha256", "decision", "decider", "auth", "time", "policy"} {
		if !seen[k] {
			return bad("no " + k)
		}
	}
	if seen["passkey"] {
		for _, k := range []string{"passkey-time", "passkey-nonce", "passkey-authenticator-data", "passkey-client-data", "passkey-signature"} {
			if !seen[k] {
				return bad("no " + k)
			}
		}
		r.Passkey = &pp
	} else if seen["passkey-time"] || seen["passkey-nonce"] || seen["passkey-signature"] {
		return bad("a passkey proof without its passkey")
	}
	return r, nil
}

// OpenReceipt checks a signed receipt against the verifier and reads it.
// Invalid when it is not a note the key signed, or not a receipt.
func OpenReceipt(signed string, v note.Verifier) (Receipt, error) {
	n, err := note.Open([]byte(signed), note.VerifierList(v))
	if err != nil {
		return Receipt{}, &Error{Kind: Invalid, Msg: "the receipt's signature does not verify with " + v.Name(), Err: err}
	}
	return ParseReceipt(n.Text)
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
	r.Policy = e.policy.String()
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

// ReceiptOf returns the signed receipt a decision entry carries, "" when
// it carries none.
func ReceiptOf(e Entry) string {
	b, err := base64.StdEncoding.DecodeString(e.Field(KeyReceipt))
	if err != nil {
		return ""
	}
	return string(b)
}

// personal reads the decision a person's entry records, and who made it;
// ok is false for entries that are not a person's decision.
func personal(e Entry) (decision Decided, decider string, ok bool) {
	if e.ToolName != GateTool {
		return "", "", false
	}
	switch e.Phase {
	case PhaseApproved:
		return DecidedApproved, e.Field(KeyApprover), true
	case PhaseRejected:
		ls := ParseLines(e.Payload)
		for _, d := range []struct {
			k Key
			d Decided
		}{{KeyDismissedBy, DecidedDismissed}, {KeyWithdrawnBy, DecidedWithdrawn}, {KeyChangesBy, DecidedChanges}} {
			if by := ls.Value(d.k); by != "" {
				return d.d, by, true
			}
		}
		if _, ok := ls.Get(KeyExpired); ok {
			return DecidedExpired, ServerDecider, true
		}
		return DecidedRejected, ls.Value(KeyApprover), true
	case PhaseExecuted:
		return DecidedHappened, e.Field(KeyResolvedBy), true
	case PhaseFailed:
		return DecidedNotHappened, e.Field(KeyResolvedBy), true
	case PhaseCompensated:
		return DecidedUndone, e.Field(KeyResolvedBy), true
	case PhaseCompensationFailed:
		return DecidedNotUndone, e.Field(KeyResolvedBy), true
	}
	return "", "", false
}

// VerifyReceipts checks, for every decision a person made in a saga's
// journal (entries ordered by seq, whose chain already verifies), that it
// carries a receipt signed by v that names this saga, the entry decided
// on, the hash of its bytes, this decision and this decider, at this
// time. The first that does not breaks the journal. VerifyReceipts is
// pure.
func VerifyReceipts(entries []Entry, v note.Verifier) Verification {
	n := len(entries)
	for _, d := range Decisions(entries, v) {
		if d.Problem != "" {
			i := int(d.Seq - 1)
			return broken(n, i, fmt.Sprintf("receipt of seq=%d (entry %d) does not hold: %s", d.Seq, i, d.Problem))
		}
	}
	return Verification{Valid: true, EntryCount: n, BreakAtIndex: -1, Message: fmt.Sprintf("all %d entries verified", n)}
}

// DecisionReceipt is a person's decision in a journal and whether its
// receipt holds.
type DecisionReceipt struct {
	Seq      int64   // of the decision's entry
	Decision Decided // as the entry records it
	Decider  string
	Problem  string     // why the receipt does not hold; "" when it does
	Auth     AuthMethod // how the decider signed in, as the receipt says
}

// Decisions lists every decision a person made in a saga's journal
// (entries ordered by seq, whose chain verifies), each with what is wrong
// with its receipt, if anything (see VerifyReceipts). Decisions is pure.
func Decisions(entries []Entry, v note.Verifier) []DecisionReceipt {
	var out []DecisionReceipt
	for _, e := range entries {
		decision, decider, ok := personal(e)
		if !ok {
			continue
		}
		problem, auth := receiptProblem(entries, e, decision, decider, v)
		out = append(out, DecisionReceipt{Seq: e.Seq, Decision: decision, Decider: decider, Problem: problem, Auth: auth})
	}
	return out
}

// receiptProblem says why decision entry e's receipt does not hold, or
// "", and how the decider signed in, as the receipt says.
func receiptProblem(entries []Entry, e Entry, decision Decided, decider string, v note.Verifier) (problem string, auth AuthMethod) {
	signed := ReceiptOf(e)
	if signed == "" {
		return "the decision carries no receipt", ""
	}
	r, err := OpenReceipt(signed, v)
	if err != nil {
		return err.(*Error).Msg, ""
	}
	seq := e.Refers()
	if seq < 1 || seq >= e.Seq || seq > int64(len(entries)) {
		return "it decides no earlier entry", r.Auth
	}
	g := entries[seq-1]
	switch {
	case r.SagaID != e.SagaID || r.Seq != seq:
		return fmt.Sprintf("it was signed for saga %q seq=%d", r.SagaID, r.Seq), r.Auth
	case r.Entry != g.Hash:
		return fmt.Sprintf("it was signed for another entry at seq=%d", seq), r.Auth
	case r.PayloadSHA256 != PayloadHash(g.Input):
		return "it was signed for other bytes", r.Auth
	case r.Decision != decision || r.Decider != decider:
		return fmt.Sprintf("it records %s by %s", r.Decision, r.Decider), r.Auth
	case !r.Time.Equal(e.Timestamp):
		return "it was signed at another time", r.Auth
	case r.AuthTime.After(r.Time):
		return fmt.Sprintf("it names a sign-in at %s, after the decision", r.AuthTime.UTC().Format(time.RFC3339)), r.Auth
	case r.Reason != e.Field(KeyReason):
		return "it was signed for another reason", r.Auth
	case r.ApprovalPolicy != "" && (r.ApprovalPolicy != g.Field(KeyPolicy) || r.Rule != g.Field(KeyRule)):
		return "it was signed under another approval rule than the request records", r.Auth
	case decision == DecidedExpired && r.Auth != AuthServer:
		return "an expiry is the server's own decision", r.Auth
	}
	if result, ok := ParseLines(e.Payload).Get(KeyResult); ok && r.ResultSHA256 != PayloadHash(result) {
		return "it was signed for another result", r.Auth
	} else if !ok && r.ResultSHA256 != "" {
		return "it was signed for a result the entry does not report", r.Auth
	}
	return "", r.Auth
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
		if _, _, ok := personal(entries[seq-1]); ok {
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
		if _, _, ok := personal(en); ok {
			if g := en.Refers(); g >= 1 && g < seq {
				return entries[g-1].Input, nil
			}
		}
	}
	return "", &Error{Kind: NotFound, Msg: fmt.Sprintf("no decision at saga=%s seq=%d", sagaID, seq), SagaID: sagaID, Seq: seq}
}
