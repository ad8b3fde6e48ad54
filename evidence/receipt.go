package evidence

import (
	"encoding/base64"
	"fmt"
	"slices"
	"strconv"
	"time"

	"golang.org/x/mod/sumdb/note"
)

// A person's decision (approve, reject, what a call in doubt came to) is
// journaled with a receipt: a signed note (golang.org/x/mod/sumdb/note)
// over what was decided, by whom, about which bytes, signed with a key the
// database never sees. A row written into the database by hand has no
// valid receipt, so it never makes anything execute, and verification
// reports it.

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
	DecidedCancelled   Decided = "cancelled"         // its requester took the request back, the saga going on
	DecidedExpired     Decided = "expired"           // the server: no quorum was reached in time
	// DecidedBreakGlass: a person the policy's breakGlass names had the
	// request executed without its quorum.
	DecidedBreakGlass Decided = "break-glass"
	// DecidedRatified: an approval, under the request's rule, of its
	// break-glass execution, afterwards.
	DecidedRatified Decided = "ratified"
)

// ServerDecider is who the receipts of the server's own decisions (a
// request that expired) name.
const ServerDecider = "server"

// AuthServer is how the server "signs in" on its own decisions.
const AuthServer AuthMethod = "server"

// Decideds lists every decision.
var Decideds = []Decided{DecidedApproved, DecidedRejected, DecidedDismissed, DecidedWithdrawn, DecidedChanges, DecidedExpired,
	DecidedHappened, DecidedNotHappened, DecidedUndone, DecidedNotUndone, DecidedBreakGlass, DecidedRatified}

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
	// Policy is the access rules in force (who may act on whose sagas,
	// as the engine's Access names them): the receipt's policy= line,
	// named so since receipts began. The approval policy is ApprovalPolicy.
	Policy string
	// ApprovalPolicy and Rule are the approval policy's hash and the
	// rule a decision on a request was made under, as its
	// AWAITING_APPROVAL entry records them; "" for a call in doubt.
	ApprovalPolicy, Rule string
	// EligibleAs is which of the rule's approvers (a role or a group)
	// the decider voted as; "" for a decision that is no vote.
	EligibleAs string
	// OnBehalfOf is the delegator a delegate voted for, and Delegation
	// the delegation's entry in DelegationSaga; "" and 0 for a vote of
	// the decider's own.
	OnBehalfOf string
	Delegation int64
	// Vote and Quorum place an approval: it made Vote standing approvals
	// of the Quorum the rule asks for. 0 for any other decision.
	Vote, Quorum int
	// Meets places an approval under a rule's thresholds (Vote.Meets);
	// nil otherwise.
	Meets []int
	// Passkey is the voter's passkey's assertion over the vote's ballot,
	// for a vote cast with one; nil otherwise.
	Passkey *PasskeyProof
	Reason  string // why, as they said; "" when they gave none
	// ResultSHA256 is the hash of the result a person reports for a call
	// in doubt that happened; "" for any other decision.
	ResultSHA256 string
}

// receiptForm is the grammar of a receipt's text.
var receiptForm = Form{Header: "sagacity decision receipt v1",
	Keys: []string{"saga", "seq", "entry", "payload-sha256", "decision", "decider", "issuer", "subject", "auth-time", "auth", "sign-in",
		"time", "policy", "approval-policy", "rule", "eligible-as", "on-behalf-of", "delegation", "vote", "meets", "reason", "result-sha256",
		"passkey", "passkey-time", "passkey-nonce", "passkey-authenticator-data", "passkey-client-data", "passkey-signature"},
	Required: []string{"saga", "seq", "entry", "payload-sha256", "decision", "decider", "auth", "time", "policy"}}

// passkeyKeys are a receipt's lines of its passkey proof: all of them or
// none.
var passkeyKeys = []string{"passkey", "passkey-time", "passkey-nonce", "passkey-authenticator-data", "passkey-client-data", "passkey-signature"}

// Text is the receipt as a note's text (receiptForm): the lines of what
// a decision carries, in order.
func (r Receipt) Text() string {
	fs := Fields{{"saga", r.SagaID}, {"seq", strconv.FormatInt(r.Seq, 10)}, {"entry", r.Entry}, {"payload-sha256", r.PayloadSHA256},
		{"decision", string(r.Decision)}, {"decider", r.Decider}}
	if r.Issuer != "" {
		fs = append(fs, Field{"issuer", r.Issuer}, Field{"subject", r.Subject})
	}
	if !r.AuthTime.IsZero() {
		fs = append(fs, Field{"auth-time", r.AuthTime.UTC().Format(time.RFC3339)})
	}
	fs = append(fs, Field{"auth", string(r.Auth)})
	if r.SignIn != "" {
		fs = append(fs, Field{"sign-in", r.SignIn})
	}
	fs = append(fs, Field{"time", r.Time.UTC().Format(TimeLayout)}, Field{"policy", r.Policy})
	if r.ApprovalPolicy != "" {
		fs = append(fs, Field{"approval-policy", r.ApprovalPolicy}, Field{"rule", r.Rule})
	}
	if r.EligibleAs != "" {
		fs = append(fs, Field{"eligible-as", r.EligibleAs})
	}
	if r.OnBehalfOf != "" {
		fs = append(fs, Field{"on-behalf-of", r.OnBehalfOf}, Field{"delegation", strconv.FormatInt(r.Delegation, 10)})
	}
	if r.Quorum > 0 {
		fs = append(fs, Field{"vote", fmt.Sprintf("%d of %d", r.Vote, r.Quorum)})
	}
	if r.Meets != nil {
		fs = append(fs, Field{"meets", MeetsText(r.Meets)})
	}
	if r.Reason != "" {
		fs = append(fs, Field{"reason", r.Reason})
	}
	if r.ResultSHA256 != "" {
		fs = append(fs, Field{"result-sha256", r.ResultSHA256})
	}
	if pp := r.Passkey; pp != nil {
		fs = append(fs, Field{"passkey", pp.Credential}, Field{"passkey-time", pp.Time.UTC().Format(TimeLayout)}, Field{"passkey-nonce", pp.Nonce},
			Field{"passkey-authenticator-data", pp.AuthenticatorData}, Field{"passkey-client-data", pp.ClientData},
			Field{"passkey-signature", pp.Signature})
	}
	return receiptForm.Encode(fs...)
}

// ParseReceipt reads a receipt's text. An *Error for anything Text would
// not write.
func ParseReceipt(text string) (Receipt, error) {
	bad := func(why string) (Receipt, error) { return Receipt{}, errorf("not a receipt: %s", why) }
	fs, err := receiptForm.Decode(text)
	if err != nil {
		return bad(Message(err))
	}
	var r Receipt
	var pp PasskeyProof
	proof := 0 // lines of a passkey proof
	into := map[string]*string{"saga": &r.SagaID, "entry": &r.Entry, "payload-sha256": &r.PayloadSHA256, "decider": &r.Decider,
		"issuer": &r.Issuer, "subject": &r.Subject, "sign-in": &r.SignIn, "policy": &r.Policy, "approval-policy": &r.ApprovalPolicy,
		"rule": &r.Rule, "eligible-as": &r.EligibleAs, "on-behalf-of": &r.OnBehalfOf, "reason": &r.Reason, "result-sha256": &r.ResultSHA256,
		"passkey": &pp.Credential, "passkey-nonce": &pp.Nonce, "passkey-authenticator-data": &pp.AuthenticatorData,
		"passkey-client-data": &pp.ClientData, "passkey-signature": &pp.Signature}
	for _, f := range fs {
		var err error
		switch k, v := f.Key, f.Value; k {
		case "seq":
			r.Seq, err = strconv.ParseInt(v, 10, 64)
		case "delegation":
			if r.Delegation, err = strconv.ParseInt(v, 10, 64); err == nil && r.Delegation < 1 {
				err = errorf("not a seq")
			}
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
		case "meets":
			r.Meets, err = ParseMeets(v)
			if r.Meets == nil {
				err = errorf("empty")
			}
		case "vote":
			if n, serr := fmt.Sscanf(v, "%d of %d", &r.Vote, &r.Quorum); n != 2 || serr != nil || r.Vote < 1 || r.Quorum < r.Vote ||
				v != fmt.Sprintf("%d of %d", r.Vote, r.Quorum) {
				err = errorf("not <k> of <m>")
			}
		default:
			*into[k] = v
		}
		if err != nil {
			return bad("field " + f.Key)
		}
		if slices.Contains(passkeyKeys, f.Key) {
			proof++
		}
	}
	if (r.OnBehalfOf == "") != (r.Delegation == 0) {
		return bad("on-behalf-of without its delegation, or a delegation without on-behalf-of")
	}
	switch _, has := fs.Get("passkey"); {
	case has && proof < len(passkeyKeys):
		return bad("a passkey proof without all its lines")
	case !has && proof > 0:
		return bad("a passkey proof without its passkey")
	case has:
		r.Passkey = &pp
	}
	return r, nil
}

// OpenReceipt checks a signed receipt against the verifier and reads it.
// An *Error when it is not a note the key signed, or not a receipt.
func OpenReceipt(signed string, v note.Verifier) (Receipt, error) {
	n, err := note.Open([]byte(signed), note.VerifierList(v))
	if err != nil {
		return Receipt{}, &Error{Msg: "the receipt's signature does not verify with " + v.Name(), Err: err}
	}
	return ParseReceipt(n.Text)
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

// Decision reads the decision a person's entry records, and who made it;
// ok is false for entries that are not a person's decision.
func (e Entry) Decision() (decision Decided, decider string, ok bool) {
	if e.ToolName != GateTool {
		return "", "", false
	}
	switch e.Phase {
	case PhaseApproved:
		ls := ParseLines(e.Payload)
		if by := ls.Value(KeyBrokenBy); by != "" {
			return DecidedBreakGlass, by, true
		}
		if by := ls.Value(KeyRatifiedBy); by != "" {
			return DecidedRatified, by, true
		}
		return DecidedApproved, ls.Value(KeyApprover), true
	case PhaseRejected:
		ls := ParseLines(e.Payload)
		for _, d := range []struct {
			k Key
			d Decided
		}{{KeyDismissedBy, DecidedDismissed}, {KeyWithdrawnBy, DecidedWithdrawn}, {KeyChangesBy, DecidedChanges}, {KeyCancelledBy, DecidedCancelled}} {
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
			return Broken(n, i, fmt.Sprintf("receipt of seq=%d (entry %d) does not hold: %s", d.Seq, i, d.Problem))
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
		decision, decider, ok := e.Decision()
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
		return Message(err), ""
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
	case r.OnBehalfOf != e.Field(KeyOnBehalfOf):
		return "it was signed on behalf of another person than the entry names", r.Auth
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
