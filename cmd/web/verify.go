package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/sagacity-go/sagacity/evidence"
	"github.com/sagacity-go/sagacity/evidence/assertion"
	"github.com/sagacity-go/sagacity/wire"
	"golang.org/x/mod/sumdb/note"
)

// verifyArgs is what verify takes, as its usage line says.
const verifyArgs = "[-key PUBLIC_KEY [-allow-dev] [-allow-unproved-sign-in] [-provider-keys JWKS] [-checkpoint CHECKPOINT [-allow-unproved]]] FILE"

// verifyFlags are verify's flags: declare declares them once, for verify
// to parse and its help to list.
type verifyFlags struct {
	key, checkpoint, providerKeys                string
	allowUnproved, allowDev, allowUnprovedSignIn bool
}

func (f *verifyFlags) declare(fs *flag.FlagSet) {
	fs.StringVar(&f.key, "key", "", "the public key (GET /sagacity/keys): check every decision's receipt, and in an export with proofs every vote against its rule and every passkey vote against its enrolment")
	fs.StringVar(&f.checkpoint, "checkpoint", "", "with -key: a signed checkpoint (GET /sagacity/checkpoints/latest): check the export's signed head and every entry's inclusion proof against it")
	fs.BoolVar(&f.allowUnproved, "allow-unproved", false, "with -checkpoint: accept entries the checkpoint is older than (they come last, without proofs)")
	fs.BoolVar(&f.allowDev, "allow-dev", false, "with -key: accept decisions signed in dev mode, whose decider's name was typed, not verified")
	fs.BoolVar(&f.allowUnprovedSignIn, "allow-unproved-sign-in", false, "with -key: accept decisions by OIDC identities whose receipts name no sign-in the identity provider signed (made before sign-ins were kept)")
	fs.StringVar(&f.providerKeys, "provider-keys", "", "with -key: a JSON Web Key Set of the identity provider's (its jwks_uri, fetched by you): check each sign-in against these keys instead of those the log journals")
}

// verify checks a journal export offline and prints the verify result as
// JSON: the hash chain and the rules of its requests; with -key, every
// decision's receipt (and no decision signed in dev mode, unless
// -allow-dev), and, in an export with proofs, that every request met the
// approval rule of the policy it pinned, as its policy lines hold it;
// with -checkpoint too, the checkpoint's signature, the export's signed
// head, and every entry's and policy line's proof of inclusion in the log
// it signed (entries newer than the checkpoint only with -allow-unproved,
// and only after the proved ones); and, with -key and proofs, that the
// identity provider signed the sign-in of each OIDC decider (unless
// -allow-unproved-sign-in, for receipts that name none), with the keys
// the log journals or those -provider-keys gives. Exit status: 0 valid, 1
// broken, 2 unreadable.
func verify(args []string, stdout io.Writer) error {
	var f verifyFlags
	fs := newFlags("verify", f.declare)
	usage := "usage: sagacity verify " + verifyArgs + " (- reads standard input)"
	if err := fs.Parse(args); err != nil {
		return exitError{2, fmt.Errorf("verify: %w (%s)", err, usage)}
	}
	if fs.NArg() != 1 || (f.checkpoint != "" && f.key == "") || (f.allowUnproved && f.checkpoint == "") || (f.allowDev && f.key == "") ||
		((f.allowUnprovedSignIn || f.providerKeys != "") && f.key == "") {
		return exitError{2, fmt.Errorf("verify: %s", usage)}
	}
	var trusted map[string][]byte
	if f.providerKeys != "" {
		b, err := os.ReadFile(f.providerKeys)
		if err != nil {
			return exitError{2, err}
		}
		if trusted, err = evidence.ProviderKeys(b); err != nil {
			return exitError{2, fmt.Errorf("verify: -provider-keys %s: %w", f.providerKeys, err)}
		}
	}
	t := evidence.Trust{AllowUnproved: f.allowUnproved, AllowDev: f.allowDev, AllowUnprovedSignIn: f.allowUnprovedSignIn,
		ProviderKeys: trusted, CheckAssertion: assertion.Check, CheckIDToken: evidence.OpenIDToken, Now: time.Now()}
	if f.key != "" {
		var err error
		if t.Key, err = note.NewVerifier(f.key); err != nil {
			return exitError{2, fmt.Errorf("verify: -key is not a public key: %w", err)}
		}
	}
	if f.checkpoint != "" {
		signed, err := os.ReadFile(f.checkpoint)
		if err != nil {
			return exitError{2, err}
		}
		cp, err := evidence.OpenCheckpoint(string(signed), t.Key)
		if err != nil {
			return printVerification(stdout, evidence.Broken(0, -1, f.checkpoint+": "+evidence.Message(err)))
		}
		t.Checkpoint = &cp
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
	entries, proofs, err := evidence.ReadNDJSON(in)
	if err != nil {
		return exitError{2, fmt.Errorf("%s: %w", name, err)}
	}
	res, ids, err := evidence.VerifyExport(entries, proofs, t)
	if err != nil {
		return exitError{2, fmt.Errorf("%s: %w", name, err)}
	}
	return printVerification(stdout, res, ids...)
}

// verified is what verify prints: the result, and what vouches for each
// decider when the identities were checked.
type verified struct {
	evidence.Verification
	Identities []identity `json:"identities,omitempty"`
}

// identity is what vouches for one decision's decider.
type identity struct {
	Seq     int64  `json:"seq"`
	Decider string `json:"decider"`
	Proved  bool   `json:"proved"` // the identity provider's signature vouches for them
	Proof   string `json:"proof"`
}

// printVerification prints a result as JSON, with the identities of its
// deciders; exit status 1 when it is not valid.
func printVerification(stdout io.Writer, v evidence.Verification, ids ...evidence.Identity) error {
	out := verified{Verification: v}
	for _, id := range ids {
		out.Identities = append(out.Identities, identity{Seq: id.Seq, Decider: id.Decider, Proved: id.Proved, Proof: id.Proof})
	}
	b, err := json.Marshal(out)
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

// verifyLogArgs is what verify-log takes.
const verifyLogArgs = "-key PUBLIC_KEY -proof PROOF OLD_CHECKPOINT NEW_CHECKPOINT"

// verifyLogFlags are verify-log's flags, declared once for parsing and
// help.
type verifyLogFlags struct{ key, proof string }

func (f *verifyLogFlags) declare(fs *flag.FlagSet) {
	fs.StringVar(&f.key, "key", "", "the public key (GET /sagacity/keys)")
	fs.StringVar(&f.proof, "proof", "", "the consistency proof, as GET /sagacity/checkpoints/consistency serves it")
}

// verifyLog checks offline that the log a newer checkpoint signed extends
// the log an older one signed, with the consistency proof between their
// sizes (GET /sagacity/checkpoints/consistency?from=&to=): nothing the
// older one covered was removed or rewritten. Exit status: 0 consistent,
// 1 not, 2 unreadable.
func verifyLog(args []string, stdout io.Writer) error {
	var f verifyLogFlags
	fs := newFlags("verify-log", f.declare)
	usage := "usage: sagacity verify-log " + verifyLogArgs
	if err := fs.Parse(args); err != nil {
		return exitError{2, fmt.Errorf("verify-log: %w (%s)", err, usage)}
	}
	if fs.NArg() != 2 || f.key == "" || f.proof == "" {
		return exitError{2, fmt.Errorf("verify-log: %s", usage)}
	}
	v, err := note.NewVerifier(f.key)
	if err != nil {
		return exitError{2, fmt.Errorf("verify-log: -key is not a public key: %w", err)}
	}
	var p wire.ConsistencyProof
	b, err := os.ReadFile(f.proof)
	if err != nil {
		return exitError{2, err}
	}
	if err := json.Unmarshal(b, &p); err != nil {
		return exitError{2, fmt.Errorf("%s: not a consistency proof: %w", f.proof, err)}
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
	var cps [2]evidence.Checkpoint
	for i, name := range fs.Args() {
		signed, err := os.ReadFile(name)
		if err != nil {
			return exitError{2, err}
		}
		if cps[i], err = evidence.OpenCheckpoint(string(signed), v); err != nil {
			return out(false, name+": "+evidence.Message(err))
		}
	}
	if p.From != cps[0].Size || p.To != cps[1].Size {
		return exitError{2, fmt.Errorf("%s: proves sizes %d to %d, the checkpoints are of sizes %d and %d; fetch ?from=%d&to=%d",
			f.proof, p.From, p.To, cps[0].Size, cps[1].Size, cps[0].Size, cps[1].Size)}
	}
	if err := evidence.VerifyConsistency(cps[0], cps[1], p.Proof); err != nil {
		return out(false, evidence.Message(err))
	}
	return out(true, fmt.Sprintf("the log at size %d extends the log at size %d: nothing the older checkpoint covered was removed or rewritten", cps[1].Size, cps[0].Size))
}
