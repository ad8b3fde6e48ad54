package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/sagacity-go/sagacity/internal/engine"
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
// was not signed in dev mode (unless -allow-dev). Exit status: 0 valid, 1
// not, 2 unreadable.
func verifyReceipt(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("verify-receipt", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	key := fs.String("key", "", "the public key (GET /sagacity/keys, or what sagacity keygen printed)")
	allowDev := fs.Bool("allow-dev", false, "accept a decision signed in dev mode, whose decider's name was typed, not verified")
	usage := "usage: sagacity verify-receipt -key PUBLIC_KEY [-allow-dev] RECEIPT_FILE PAYLOAD_FILE"
	if err := fs.Parse(args); err != nil {
		return exitError{2, fmt.Errorf("verify-receipt: %w (%s)", err, usage)}
	}
	if fs.NArg() != 2 || *key == "" {
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
	b, _ := json.Marshal(out)
	if _, err := fmt.Fprintf(stdout, "%s\n", b); err != nil {
		return err
	}
	if !out.Valid {
		return exitError{code: 1}
	}
	return nil
}
