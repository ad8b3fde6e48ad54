package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/sagacity-go/sagacity/internal/api"
	"github.com/sagacity-go/sagacity/internal/engine"
	"github.com/sagacity-go/sagacity/internal/tlog"
	"golang.org/x/mod/sumdb/note"
)

// verify checks a journal export offline and prints the verify result as
// JSON: the hash chain; with -key, every decision's receipt; with
// -checkpoint too, the checkpoint's signature and every entry's proof of
// inclusion in the log it signed. Exit status: 0 valid, 1 broken, 2
// unreadable.
func verify(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("verify", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	key := fs.String("key", "", "the public key (GET /sagacity/keys): check every decision's receipt")
	cpFile := fs.String("checkpoint", "", "a signed checkpoint (GET /sagacity/checkpoints/latest): check every entry's inclusion proof against it")
	usage := "usage: sagacity verify [-key PUBLIC_KEY [-checkpoint CHECKPOINT]] FILE (- reads standard input)"
	if err := fs.Parse(args); err != nil {
		return exitError{2, fmt.Errorf("verify: %w (%s)", err, usage)}
	}
	if fs.NArg() != 1 || (*cpFile != "" && *key == "") {
		return exitError{2, fmt.Errorf("verify: %s", usage)}
	}
	var v note.Verifier
	if *key != "" {
		var err error
		if v, err = note.NewVerifier(*key); err != nil {
			return exitError{2, fmt.Errorf("verify: -key is not a public key: %w", err)}
		}
	}
	var cp engine.Checkpoint
	if *cpFile != "" {
		signed, err := os.ReadFile(*cpFile)
		if err != nil {
			return exitError{2, err}
		}
		if cp, err = tlog.OpenCheckpoint(string(signed), v); err != nil {
			return printVerification(stdout, engine.Verification{BreakAtIndex: -1, Message: *cpFile + ": " + err.(*engine.Error).Msg})
		}
	}
	name := fs.Arg(0)
	in := io.Reader(os.Stdin)
	if name != "-" {
		f, err := os.Open(name)
		if err != nil {
			return exitError{2, err}
		}
		defer f.Close()
		in = f
	}
	entries, proofs, err := engine.ReadNDJSON(in)
	if err != nil {
		return exitError{2, fmt.Errorf("%s: %w", name, err)}
	}
	if len(entries) == 0 {
		return exitError{2, fmt.Errorf("%s: holds no journal entries; export a saga with GET /sagacity/audit/{sagaId}", name)}
	}
	for _, e := range entries {
		if e.SagaID != entries[0].SagaID {
			return exitError{2, fmt.Errorf("%s: the export holds entries of sagas %q and %q; verify one saga at a time",
				name, entries[0].SagaID, e.SagaID)}
		}
	}
	if *cpFile != "" {
		switch {
		case proofs == nil:
			return exitError{2, fmt.Errorf("%s: carries no proofs; export it with GET /sagacity/audit/{sagaId}?proofs=%d", name, cp.Size)}
		case proofs.TreeSize != cp.Size:
			return exitError{2, fmt.Errorf("%s: its proofs are against the log at size %d, the checkpoint is of size %d; export it again with ?proofs=%d",
				name, proofs.TreeSize, cp.Size, cp.Size)}
		}
	}
	res := engine.VerifyJournal(entries)
	if res.Valid && v != nil {
		res = engine.VerifyReceipts(entries, v)
	}
	if res.Valid && *cpFile != "" {
		bad, proved := tlog.VerifyProofs(entries, proofs, cp.Root)
		if bad >= 0 {
			res = engine.Verification{EntryCount: len(entries), BreakAtIndex: bad,
				Message: fmt.Sprintf("seq=%d (entry %d) is not in the log the checkpoint of size %d signed", entries[bad].Seq, bad, cp.Size)}
		} else {
			res.Message += fmt.Sprintf("; %d in the log the checkpoint of size %d signed", proved, cp.Size)
			if n := len(entries) - proved; n > 0 {
				res.Message += fmt.Sprintf(" (%d newer than it)", n)
			}
		}
	}
	return printVerification(stdout, res)
}

// printVerification prints a result as JSON; exit status 1 when it is not
// valid.
func printVerification(stdout io.Writer, v engine.Verification) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if _, err := fmt.Fprintf(stdout, "%s\n", b); err != nil {
		return err
	}
	if !v.Valid {
		return exitError{code: 1}
	}
	return nil
}

// logCheck is what verify-log prints.
type logCheck struct {
	Valid   bool   `json:"valid"`
	Message string `json:"message"`
}

// verifyLog checks offline that the log a newer checkpoint signed extends
// the log an older one signed, with the consistency proof between their
// sizes (GET /sagacity/checkpoints/consistency?from=&to=): nothing the
// older one covered was removed or rewritten. Exit status: 0 consistent,
// 1 not, 2 unreadable.
func verifyLog(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("verify-log", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	key := fs.String("key", "", "the public key (GET /sagacity/keys)")
	proofFile := fs.String("proof", "", "the consistency proof, as GET /sagacity/checkpoints/consistency serves it")
	usage := "usage: sagacity verify-log -key PUBLIC_KEY -proof PROOF OLD_CHECKPOINT NEW_CHECKPOINT"
	if err := fs.Parse(args); err != nil {
		return exitError{2, fmt.Errorf("verify-log: %w (%s)", err, usage)}
	}
	if fs.NArg() != 2 || *key == "" || *proofFile == "" {
		return exitError{2, fmt.Errorf("verify-log: %s", usage)}
	}
	v, err := note.NewVerifier(*key)
	if err != nil {
		return exitError{2, fmt.Errorf("verify-log: -key is not a public key: %w", err)}
	}
	var p api.ConsistencyJSON
	b, err := os.ReadFile(*proofFile)
	if err != nil {
		return exitError{2, err}
	}
	if err := json.Unmarshal(b, &p); err != nil {
		return exitError{2, fmt.Errorf("%s: not a consistency proof: %w", *proofFile, err)}
	}
	out := func(valid bool, msg string) error {
		b, _ := json.Marshal(logCheck{Valid: valid, Message: msg})
		if _, err := fmt.Fprintf(stdout, "%s\n", b); err != nil {
			return err
		}
		if !valid {
			return exitError{code: 1}
		}
		return nil
	}
	var cps [2]engine.Checkpoint
	for i, name := range fs.Args() {
		signed, err := os.ReadFile(name)
		if err != nil {
			return exitError{2, err}
		}
		if cps[i], err = tlog.OpenCheckpoint(string(signed), v); err != nil {
			return out(false, name+": "+err.(*engine.Error).Msg)
		}
	}
	if p.From != cps[0].Size || p.To != cps[1].Size {
		return exitError{2, fmt.Errorf("%s: proves sizes %d to %d, the checkpoints are of sizes %d and %d; fetch ?from=%d&to=%d",
			*proofFile, p.From, p.To, cps[0].Size, cps[1].Size, cps[0].Size, cps[1].Size)}
	}
	if err := tlog.VerifyConsistency(cps[0], cps[1], p.Proof); err != nil {
		return out(false, err.(*engine.Error).Msg)
	}
	return out(true, fmt.Sprintf("the log at size %d extends the log at size %d: nothing the older checkpoint covered was removed or rewritten", cps[1].Size, cps[0].Size))
}
