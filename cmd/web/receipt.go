package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/sagacity-go/sagacity/evidence"
	"github.com/sagacity-go/sagacity/evidence/assertion"
	"golang.org/x/mod/sumdb/note"
)

// receiptCheck is what verify-receipt prints.
type receiptCheck struct {
	Valid   bool         `json:"valid"`
	Message string       `json:"message"`
	Receipt *receiptJSON `json:"receipt,omitempty"`
}

// receiptJSON is a receipt as verify-receipt prints it: in the API's
// camelCase, a field for each line of the receipt's text, and only the
// lines it has (the text leaves out what a decision does not carry).
type receiptJSON struct {
	SagaID         string       `json:"sagaId"`
	Seq            int64        `json:"seq"`
	Entry          string       `json:"entry"`
	PayloadSHA256  string       `json:"payloadSha256"`
	Decision       string       `json:"decision"`
	Decider        string       `json:"decider"`
	Issuer         string       `json:"issuer,omitempty"`
	Subject        string       `json:"subject,omitempty"`
	AuthTime       *time.Time   `json:"authTime,omitempty"`
	Auth           string       `json:"auth"`
	Time           time.Time    `json:"time"`
	Policy         string       `json:"policy"`
	ApprovalPolicy string       `json:"approvalPolicy,omitempty"`
	Rule           string       `json:"rule,omitempty"`
	EligibleAs     string       `json:"eligibleAs,omitempty"`
	OnBehalfOf     string       `json:"onBehalfOf,omitempty"`
	Delegation     int64        `json:"delegation,omitempty"`
	Vote           int          `json:"vote,omitempty"`
	Quorum         int          `json:"quorum,omitempty"`
	Meets          string       `json:"meets,omitempty"`
	Reason         string       `json:"reason,omitempty"`
	ResultSHA256   string       `json:"resultSha256,omitempty"`
	Passkey        *passkeyJSON `json:"passkey,omitempty"`
}

// passkeyJSON is a vote's passkey assertion as verify-receipt prints it.
type passkeyJSON struct {
	Credential        string    `json:"credential"`
	Time              time.Time `json:"time"`
	Nonce             string    `json:"nonce"`
	AuthenticatorData string    `json:"authenticatorData"`
	ClientData        string    `json:"clientData"`
	Signature         string    `json:"signature"`
}

// printed is receipt r as verify-receipt prints it.
func printed(r evidence.Receipt) *receiptJSON {
	out := &receiptJSON{SagaID: r.SagaID, Seq: r.Seq, Entry: r.Entry, PayloadSHA256: r.PayloadSHA256, Decision: string(r.Decision),
		Decider: r.Decider, Issuer: r.Issuer, Subject: r.Subject, Auth: string(r.Auth), Time: r.Time.UTC(), Policy: r.Policy,
		ApprovalPolicy: r.ApprovalPolicy, Rule: r.Rule, EligibleAs: r.EligibleAs, OnBehalfOf: r.OnBehalfOf, Delegation: r.Delegation, Vote: r.Vote, Quorum: r.Quorum, Meets: evidence.MeetsText(r.Meets),
		Reason: r.Reason, ResultSHA256: r.ResultSHA256}
	if !r.AuthTime.IsZero() {
		t := r.AuthTime.UTC()
		out.AuthTime = &t
	}
	if pp := r.Passkey; pp != nil {
		out.Passkey = &passkeyJSON{Credential: pp.Credential, Time: pp.Time.UTC(), Nonce: pp.Nonce,
			AuthenticatorData: pp.AuthenticatorData, ClientData: pp.ClientData, Signature: pp.Signature}
	}
	return out
}

// otherBytes says why payload, read from file, is not the bytes receipt
// r was signed about, naming a line break at the end as all that differs
// when it is (an editor, echo or a copy and paste adds one, or drops it).
func otherBytes(r evidence.Receipt, payload []byte, file string) string {
	msg := "the receipt is about other bytes than " + file
	about := func(b []byte) bool { return evidence.PayloadHash(string(b)) == r.PayloadSHA256 }
	for _, nl := range []string{"\r\n", "\n"} {
		if cut, ok := bytes.CutSuffix(payload, []byte(nl)); ok && about(cut) {
			return fmt.Sprintf("%s: it ends with a line break (%q) that the decided bytes do not have; without it they are the same "+
				"(download the decided bytes from the console's verification page, and do not open them in an editor)", msg, nl)
		}
		if about(append(payload[:len(payload):len(payload)], nl...)) {
			return fmt.Sprintf("%s: the decided bytes end with a line break (%q) that it lacks; with it they are the same", msg, nl)
		}
	}
	return msg
}

// verifyReceiptArgs is what verify-receipt takes.
const verifyReceiptArgs = "-key PUBLIC_KEY [-allow-dev] [-passkeys EXPORT [-checkpoint CHECKPOINT]] RECEIPT PAYLOAD"

// verifyReceiptFlags are verify-receipt's flags, declared once for
// parsing and help.
type verifyReceiptFlags struct {
	key, passkeys, checkpoint string
	allowDev                  bool
}

func (f *verifyReceiptFlags) declare(fs *flag.FlagSet) {
	fs.StringVar(&f.key, "key", "", "the public key (GET /sagacity/keys, or what sagacity keygen printed)")
	fs.BoolVar(&f.allowDev, "allow-dev", false, "accept a decision signed in dev mode, whose decider's name was typed, not verified")
	fs.StringVar(&f.passkeys, "passkeys", "", "an export with proofs of the saga (GET /sagacity/audit/{sagaId}?proofs=N): check a passkey vote against its passkey's enrolment there")
	fs.StringVar(&f.checkpoint, "checkpoint", "", "with -passkeys: a signed checkpoint (GET /sagacity/checkpoints/N): check the enrolment is in the log it signed")
}

// verifyReceipt checks a decision receipt offline: its signature with the
// public key, that it is about the bytes in the payload file, and that it
// was not signed in dev mode (unless -allow-dev); a vote signed with a
// passkey, against the passkey's enrolment in an export (-passkeys),
// proved in the log a checkpoint signed with -checkpoint. Exit status: 0
// valid, 1 not, 2 unreadable.
func verifyReceipt(args []string, stdout io.Writer) error {
	var f verifyReceiptFlags
	fs := newFlags("verify-receipt", f.declare)
	usage := "usage: sagacity verify-receipt " + verifyReceiptArgs
	if err := fs.Parse(args); err != nil {
		return exitError{2, fmt.Errorf("verify-receipt: %w (%s)", err, usage)}
	}
	if fs.NArg() != 2 || f.key == "" || (f.checkpoint != "" && f.passkeys == "") {
		return exitError{2, fmt.Errorf("verify-receipt: %s", usage)}
	}
	v, err := note.NewVerifier(f.key)
	if err != nil {
		return exitError{2, fmt.Errorf("verify-receipt: -key is not a public key: %w", err)}
	}
	signed, err := os.ReadFile(fs.Arg(0))
	if err != nil {
		return exitError{2, err}
	}
	payload, err := os.ReadFile(fs.Arg(1))
	if err != nil {
		return exitError{2, err}
	}
	out := receiptCheck{}
	r, err := evidence.OpenReceipt(string(signed), v)
	switch {
	case err != nil:
		out.Message = evidence.Message(err)
	case r.PayloadSHA256 != evidence.PayloadHash(string(payload)):
		out.Receipt, out.Message = printed(r), otherBytes(r, payload, fs.Arg(1))
	case r.Auth == evidence.AuthDev && !f.allowDev:
		out.Receipt, out.Message = printed(r), "the decision was made in dev mode (auth: dev): "+r.Decider+"'s name was typed, not verified; -allow-dev accepts it"
	default:
		out.Receipt, out.Valid = printed(r), true
		out.Message = fmt.Sprintf("%s %s the request at seq=%d of saga %s, about exactly these bytes",
			evidence.Vote{Voter: r.Decider, OnBehalfOf: r.OnBehalfOf}.Name(), r.Decision, r.Seq, r.SagaID)
		if r.OnBehalfOf != "" {
			out.Message += fmt.Sprintf(", under delegation seq=%d of %s (sagacity verify checks it)", r.Delegation, evidence.DelegationSaga)
		}
	}
	if out.Valid && r.Passkey != nil {
		why, err := signedBy(r, v, f.passkeys, f.checkpoint)
		if err != nil {
			return err
		}
		if why != "" {
			out.Valid, out.Message = false, why
		} else {
			out.Message += fmt.Sprintf(", signed with %s's passkey %s", r.Decider, r.Passkey.Credential)
		}
	}
	b, _ := json.Marshal(out)
	if _, err := fmt.Fprintf(stdout, "%s\n", b); err != nil {
		return err
	}
	if !out.Valid {
		return exitError{code: 1}
	}
	return nil
}

// signedBy says why the passkey vote of receipt r does not hold against
// its passkey's enrolment in the export pkFile, proved in the log the
// checkpoint in cpFile signed when given; "" when it holds. An export or
// checkpoint that cannot be read is an error (exit 2).
func signedBy(r evidence.Receipt, v note.Verifier, pkFile, cpFile string) (string, error) {
	if pkFile == "" {
		return fmt.Sprintf("the vote carries %s's passkey assertion, which only the passkey's enrolment checks: "+
			"give -passkeys an export with proofs of saga %s", r.Decider, r.SagaID), nil
	}
	f, err := os.Open(pkFile)
	if err != nil {
		return "", exitError{2, err}
	}
	defer f.Close()
	_, proofs, err := evidence.ReadNDJSON(f)
	if err != nil {
		return "", exitError{2, fmt.Errorf("%s: %w", pkFile, err)}
	}
	if proofs == nil {
		return "", exitError{2, fmt.Errorf("%s: carries no proofs, so no passkey lines; export it with GET /sagacity/audit/{sagaId}?proofs=N", pkFile)}
	}
	if cpFile != "" {
		signed, err := os.ReadFile(cpFile)
		if err != nil {
			return "", exitError{2, err}
		}
		cp, err := evidence.OpenCheckpoint(string(signed), v)
		if err != nil {
			return cpFile + ": " + evidence.Message(err), nil
		}
		if proofs.TreeSize != cp.Size {
			return "", exitError{2, fmt.Errorf("%s: its proofs are against the log at size %d, the checkpoint is of size %d", pkFile, proofs.TreeSize, cp.Size)}
		}
		if bad, why := proofs.Passkeys.Unproved(evidence.PasskeySaga, cp); bad >= 0 {
			return why, nil
		}
	}
	keys, err := evidence.ReadPasskeys(proofs.Passkeys.Entries, v)
	if err != nil {
		return evidence.Message(err), nil
	}
	if why := evidence.VerifyPasskey(r, keys, assertion.Check); why != "" {
		return "the vote is not " + r.Decider + "'s own: " + why, nil
	}
	return "", nil
}
