package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/sagacity-go/sagacity/internal/engine"
	"github.com/sagacity-go/sagacity/internal/passkey"
	"github.com/sagacity-go/sagacity/internal/tlog"
	"golang.org/x/mod/sumdb/note"
)

// receiptCheck is what verify-receipt prints.
type receiptCheck struct {
	Valid   bool            `json:"valid"`
	Message string          `json:"message"`
	Receipt *engine.Receipt `json:"receipt,omitempty"`
}

// verifyReceipt checks a decision receipt offline: its signature with the
// public key, that it is about the bytes in the payload file, and that it
// was not signed in dev mode (unless -allow-dev); a vote signed with a
// passkey, against the passkey's enrolment in an export (-passkeys),
// proved in the log a checkpoint signed with -checkpoint. Exit status: 0
// valid, 1 not, 2 unreadable.
func verifyReceipt(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("verify-receipt", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	key := fs.String("key", "", "the public key (GET /sagacity/keys, or what sagacity keygen printed)")
	allowDev := fs.Bool("allow-dev", false, "accept a decision signed in dev mode, whose decider's name was typed, not verified")
	pkFile := fs.String("passkeys", "", "an export with proofs of the saga (GET /sagacity/audit/{sagaId}?proofs=N): check a passkey vote against its passkey's enrolment there")
	cpFile := fs.String("checkpoint", "", "with -passkeys: a signed checkpoint (GET /sagacity/checkpoints/N): check the enrolment is in the log it signed")
	usage := "usage: sagacity verify-receipt -key PUBLIC_KEY [-allow-dev] [-passkeys EXPORT [-checkpoint CHECKPOINT]] RECEIPT_FILE PAYLOAD_FILE"
	if err := fs.Parse(args); err != nil {
		return exitError{2, fmt.Errorf("verify-receipt: %w (%s)", err, usage)}
	}
	if fs.NArg() != 2 || *key == "" || (*cpFile != "" && *pkFile == "") {
		return exitError{2, fmt.Errorf("verify-receipt: %s", usage)}
	}
	v, err := note.NewVerifier(*key)
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
	r, err := engine.OpenReceipt(string(signed), v)
	switch {
	case err != nil:
		out.Message = err.(*engine.Error).Msg
	case r.PayloadSHA256 != engine.PayloadHash(string(payload)):
		out.Receipt, out.Message = &r, "the receipt is about other bytes than "+fs.Arg(1)
	case r.Auth == engine.AuthDev && !*allowDev:
		out.Receipt, out.Message = &r, "the decision was made in dev mode (auth: dev): "+r.Decider+"'s name was typed, not verified; -allow-dev accepts it"
	default:
		out.Receipt, out.Valid = &r, true
		out.Message = fmt.Sprintf("%s %s the request at seq=%d of saga %s, about exactly these bytes", r.Decider, r.Decision, r.Seq, r.SagaID)
	}
	if out.Valid && r.Passkey != nil {
		why, err := signedBy(r, v, *pkFile, *cpFile)
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
func signedBy(r engine.Receipt, v note.Verifier, pkFile, cpFile string) (string, error) {
	if pkFile == "" {
		return fmt.Sprintf("the vote carries %s's passkey assertion, which only the passkey's enrolment checks: "+
			"give -passkeys an export with proofs of saga %s", r.Decider, r.SagaID), nil
	}
	f, err := os.Open(pkFile)
	if err != nil {
		return "", exitError{2, err}
	}
	defer f.Close()
	_, proofs, err := engine.ReadNDJSON(f)
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
		cp, err := tlog.OpenCheckpoint(string(signed), v)
		if err != nil {
			return cpFile + ": " + err.(*engine.Error).Msg, nil
		}
		if proofs.TreeSize != cp.Size {
			return "", exitError{2, fmt.Errorf("%s: its proofs are against the log at size %d, the checkpoint is of size %d", pkFile, proofs.TreeSize, cp.Size)}
		}
		if bad, why := unproved(proofs.Passkeys, engine.PasskeySaga, cp); bad >= 0 {
			return why, nil
		}
	}
	keys, err := engine.ReadPasskeys(proofs.Passkeys.Entries, v)
	if err != nil {
		return err.(*engine.Error).Msg, nil
	}
	if why := engine.VerifyPasskey(r, keys, passkey.Check); why != "" {
		return "the vote is not " + r.Decider + "'s own: " + why, nil
	}
	return "", nil
}
