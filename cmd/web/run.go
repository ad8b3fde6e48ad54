package main

import (
	"context"
	"fmt"
	"io"
	"strings"
)

// exitError sets the process's exit status. Without err, whatever needed
// saying was already printed.
type exitError struct {
	code int
	err  error
}

func (e exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit status %d", e.code)
	}
	return e.err.Error()
}

const usage = `usage: sagacity [command]

commands:
  serve          serve the console, the JSON API and the agent gateway (the default)
  verify [-key PUBLIC_KEY [-checkpoint CHECKPOINT]] FILE
                 verify a journal export (NDJSON; - reads standard input): its chain;
                 with -key, every decision's receipt; with -checkpoint, every entry's
                 proof of inclusion in the log the checkpoint signed
                 exit status 0: valid, 1: broken, 2: unreadable
  token [-name NAME] [-roles agent,approver,auditor]
                 print a new API token and the lines that declare it in SAGACITY_CONFIG
  keygen [-name NAME]
                 print a new signing key (for SAGACITY_SIGNING_KEY) and its public key
  verify-receipt -key PUBLIC_KEY RECEIPT PAYLOAD
                 check a decision's receipt and that it is about the bytes in PAYLOAD
                 exit status 0: valid, 1: not, 2: unreadable
  verify-log -key PUBLIC_KEY -proof PROOF OLD_CHECKPOINT NEW_CHECKPOINT
                 check that the newer checkpoint's log extends the older one's
                 (PROOF: GET /sagacity/checkpoints/consistency?from=OLD&to=NEW)
                 exit status 0: consistent, 1: not, 2: unreadable

configuration is read from SAGACITY_* environment variables; see the README.
`

// run is the whole program; main only calls it. Tests call it too.
func run(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	cmd := "serve"
	if len(args) > 0 {
		cmd, args = args[0], args[1:]
	}
	switch cmd {
	case "serve":
		if len(args) > 0 {
			return fmt.Errorf("serve takes no arguments (got %s)", strings.Join(args, " "))
		}
		return serve(ctx, getenv, stdout)
	case "verify":
		return verify(args, stdout)
	case "token":
		return token(args, stdout)
	case "keygen":
		return keygen(args, stdout)
	case "verify-receipt":
		return verifyReceipt(args, stdout)
	case "verify-log":
		return verifyLog(args, stdout)
	case "help", "-h", "-help", "--help":
		_, err := io.WriteString(stdout, usage)
		return err
	}
	return fmt.Errorf("unknown command %q\n\n%s", cmd, usage)
}
