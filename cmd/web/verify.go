package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/sagacity-go/sagacity/internal/auth"
	"github.com/sagacity-go/sagacity/internal/engine"
	"github.com/sagacity-go/sagacity/internal/passkey"
	"github.com/sagacity-go/sagacity/internal/tlog"
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
		if trusted, err = auth.ProviderKeys(b); err != nil {
			return exitError{2, fmt.Errorf("verify: -provider-keys %s: %w", f.providerKeys, err)}
		}
	}
	var v note.Verifier
	if f.key != "" {
		var err error
		if v, err = note.NewVerifier(f.key); err != nil {
			return exitError{2, fmt.Errorf("verify: -key is not a public key: %w", err)}
		}
	}
	var cp engine.Checkpoint
	if f.checkpoint != "" {
		signed, err := os.ReadFile(f.checkpoint)
		if err != nil {
			return exitError{2, err}
		}
		if cp, err = tlog.OpenCheckpoint(string(signed), v); err != nil {
			return printVerification(stdout, engine.Verification{BreakAtIndex: -1, Message: f.checkpoint + ": " + err.(*engine.Error).Msg})
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
	if f.checkpoint != "" {
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
	if res.Valid && v != nil && !f.allowDev {
		res = notDev(entries, v, res)
	}
	if res.Valid && v != nil && proofs != nil {
		res = voted(entries, proofs, v, res)
	}
	if res.Valid && v != nil && proofs != nil {
		res = headed(entries, proofs, v, res)
	}
	if res.Valid && f.checkpoint != "" {
		res = proved(entries, proofs, cp, v, f.allowUnproved, res)
	}
	var ids []engine.Identity
	if res.Valid && v != nil && proofs != nil {
		res, ids = identified(entries, proofs, v, trusted, f.allowUnprovedSignIn, res)
	}
	if !res.Valid {
		ids = nil
	}
	return printVerification(stdout, res, ids...)
}

// notDev breaks a journal with a decision signed in dev mode: its
// decider's name was typed, not verified, whatever key signed it.
func notDev(entries []engine.Entry, v note.Verifier, res engine.Verification) engine.Verification {
	for _, d := range engine.Decisions(entries, v) {
		if d.Auth == engine.AuthDev {
			i := int(d.Seq - 1)
			return engine.Verification{EntryCount: len(entries), BreakAtIndex: i, Message: fmt.Sprintf(
				"seq=%d (entry %d) was decided in dev mode (auth: dev): %s's name was typed, not verified; -allow-dev accepts it", d.Seq, i, d.Decider)}
		}
	}
	return res
}

// voted checks that every request met the approval rule in force when it
// was made: each policy line holds a policy document the key signed, and
// the votes on each request and its execution keep the rule its pinned
// policy, which must be among them, gives it (engine.VerifyVotes). It
// adds to the message who approved each executed request, under which
// rule.
func voted(entries []engine.Entry, proofs *engine.Proofs, v note.Verifier, res engine.Verification) engine.Verification {
	policies := map[string]*engine.Approvals{}
	for _, pe := range proofs.Policies.Entries {
		d, err := engine.OpenPolicy(pe, v)
		if err != nil {
			return policyBroken(entries, pe, err.(*engine.Error).Msg)
		}
		a, err := engine.ParsePolicy(d.Text)
		if err != nil {
			return policyBroken(entries, pe, fmt.Sprintf("seq=%d of %s holds no approval policy: %s", pe.Seq, engine.PolicySaga, err.(*engine.Error).Msg))
		}
		policies[d.Hash] = a
	}
	pks := proofs.Passkeys.Entries
	for i, pe := range pks {
		// The entries before pe read, pe is the first that does not.
		if _, err := engine.ReadPasskeys(pks[:i+1], v); err != nil {
			return passkeyBroken(entries, pe, v, err.(*engine.Error).Msg)
		}
	}
	keys, _ := engine.ReadPasskeys(pks, v)
	lc, _ := engine.ReadLifecycle(entries)
	votes, rulings := engine.VerifyVotes(entries, lc, func(hash string) (*engine.Approvals, error) {
		if a := policies[hash]; a != nil {
			return a, nil
		}
		return nil, engine.Errorf(engine.NotFound, "its document is not in the export")
	}, v, engine.Keyring{Passkeys: func() (engine.Passkeys, error) { return keys, nil }, Check: passkey.Check})
	if !votes.Valid {
		return votes
	}
	return engine.Named(res, rulings)
}

// identified checks who made each decision against the identity
// provider's word (engine.VerifyIdentities): the sign-in lines must be
// records the key signed, and each OIDC decision's sign-in an ID token
// the provider signed, with a key the log journals before it (or one of
// trusted). It returns what vouches for each decider.
func identified(entries []engine.Entry, proofs *engine.Proofs, v note.Verifier, trusted map[string][]byte, unproved bool,
	res engine.Verification) (engine.Verification, []engine.Identity) {
	signIns, err := engine.ReadSignIns(proofs.SignIns.Entries, v, auth.CheckIDToken, trusted)
	if err != nil {
		return engine.Verification{EntryCount: len(entries), BreakAtIndex: -1, Message: err.(*engine.Error).Msg}, nil
	}
	keys, _ := engine.ReadPasskeys(proofs.Passkeys.Entries, v) // voted read them
	checked, ids := engine.VerifyIdentities(entries, v, signIns, keys, unproved)
	if !checked.Valid {
		return checked, nil
	}
	return res, ids
}

// policyBroken breaks a journal at the first request that pins the
// policy a policy line names, which does not hold for why; at no entry
// when no request pins it.
func policyBroken(entries []engine.Entry, pe engine.Entry, why string) engine.Verification {
	n := len(entries)
	if hash := pe.Field(engine.KeyPolicy); hash != "" {
		lc, _ := engine.ReadLifecycle(entries)
		for _, seq := range lc.Order {
			if i := int(seq - 1); entries[i].Field(engine.KeyPolicy) == hash {
				return engine.Verification{EntryCount: n, BreakAtIndex: i, Message: fmt.Sprintf("seq=%d (entry %d) pins approval policy %s, but %s",
					seq, i, hash, why)}
			}
		}
	}
	return engine.Verification{EntryCount: n, BreakAtIndex: -1, Message: why}
}

// passkeyBroken breaks a journal at the first vote signed with the
// passkey a passkey line enrols or removes, which does not hold for why;
// at no entry when no vote was signed with it.
func passkeyBroken(entries []engine.Entry, pe engine.Entry, v note.Verifier, why string) engine.Verification {
	n := len(entries)
	var rec struct {
		Credential string `json:"credential"`
	}
	json.Unmarshal([]byte(pe.Input), &rec)
	for _, d := range engine.Decisions(entries, v) {
		if r, err := engine.OpenReceipt(engine.ReceiptOf(entries[d.Seq-1]), v); err == nil && r.Passkey != nil && r.Passkey.Credential == rec.Credential {
			i := int(d.Seq - 1)
			return engine.Verification{EntryCount: n, BreakAtIndex: i, Message: fmt.Sprintf("seq=%d (entry %d) is a vote by %s signed with passkey %s, but %s",
				d.Seq, i, r.Decider, rec.Credential, why)}
		}
	}
	return engine.Verification{EntryCount: n, BreakAtIndex: -1, Message: why}
}

// headed checks that an export with proofs ends where the server, which
// signed its head, exported it.
func headed(entries []engine.Entry, proofs *engine.Proofs, v note.Verifier, res engine.Verification) engine.Verification {
	n := len(entries)
	if proofs.Head == "" {
		return engine.Verification{EntryCount: n, BreakAtIndex: n - 1, Message: "the export carries no signed head: its tail may have been cut"}
	}
	h, err := engine.OpenHead(proofs.Head, v)
	if err != nil {
		return engine.Verification{EntryCount: n, BreakAtIndex: n - 1, Message: err.(*engine.Error).Msg}
	}
	if why := h.Ends(entries); why != "" {
		return engine.Verification{EntryCount: n, BreakAtIndex: n - 1, Message: why}
	}
	return res
}

// proved checks each entry's inclusion in the log the checkpoint signed:
// every entry is proved, but for entries after the last proved one when
// unproved entries are allowed (those the checkpoint is older than); so
// is every policy and passkey line, whatever is allowed.
func proved(entries []engine.Entry, proofs *engine.Proofs, cp engine.Checkpoint, v note.Verifier, allowUnproved bool, res engine.Verification) engine.Verification {
	n := len(entries)
	last := -1
	for i := range entries {
		if proofs.Of[i] != nil {
			last = i
		}
	}
	for i, e := range entries {
		if proofs.Of[i] == nil && (i < last || !allowUnproved) {
			why := "the checkpoint covers seq=" + fmt.Sprint(entries[last].Seq) + ", so it should cover this one"
			if i > last {
				why = "-allow-unproved accepts entries newer than the checkpoint"
			}
			return engine.Verification{EntryCount: n, BreakAtIndex: i, Message: fmt.Sprintf(
				"seq=%d (entry %d) carries no proof of inclusion in the log the checkpoint of size %d signed: %s", e.Seq, i, cp.Size, why)}
		}
	}
	bad, count := tlog.VerifyProofs(entries, proofs, cp.Root)
	if bad >= 0 {
		return engine.Verification{EntryCount: n, BreakAtIndex: bad,
			Message: fmt.Sprintf("seq=%d (entry %d) is not in the log the checkpoint of size %d signed", entries[bad].Seq, bad, cp.Size)}
	}
	attached := []struct {
		engine.Attached
		saga   string
		broken func(pe engine.Entry, why string) engine.Verification
	}{
		{proofs.Policies, engine.PolicySaga, func(pe engine.Entry, why string) engine.Verification { return policyBroken(entries, pe, why) }},
		{proofs.Passkeys, engine.PasskeySaga, func(pe engine.Entry, why string) engine.Verification {
			return passkeyBroken(entries, pe, v, why)
		}},
		{proofs.SignIns, engine.SignInSaga, func(pe engine.Entry, why string) engine.Verification {
			return engine.Verification{EntryCount: n, BreakAtIndex: -1, Message: why}
		}},
	}
	for _, a := range attached {
		if bad, why := unproved(a.Attached, a.saga, cp); bad >= 0 {
			return a.broken(a.Entries[bad], why)
		}
	}
	res.Message += fmt.Sprintf("; %d in the log the checkpoint of size %d signed", count, cp.Size)
	if k := n - count; k > 0 {
		res.Message += fmt.Sprintf(" (%d newer than it)", k)
	}
	return res
}

// unproved returns the index of the first of a's entries of saga that
// is not proved in the log the checkpoint signed, and why; -1 when all
// are.
func unproved(a engine.Attached, saga string, cp engine.Checkpoint) (int, string) {
	for i, pe := range a.Entries {
		if a.Of[i] == nil {
			return i, fmt.Sprintf("seq=%d of %s carries no proof of inclusion in the log the checkpoint of size %d signed", pe.Seq, saga, cp.Size)
		}
	}
	if bad, _ := tlog.VerifyProofs(a.Entries, &engine.Proofs{TreeSize: cp.Size, Of: a.Of}, cp.Root); bad >= 0 {
		return bad, fmt.Sprintf("seq=%d of %s is not in the log the checkpoint of size %d signed", a.Entries[bad].Seq, saga, cp.Size)
	}
	return -1, ""
}

// verified is what verify prints: the result, and what vouches for each
// decider when the identities were checked.
type verified struct {
	engine.Verification
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
func printVerification(stdout io.Writer, v engine.Verification, ids ...engine.Identity) error {
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
			f.proof, p.From, p.To, cps[0].Size, cps[1].Size, cps[0].Size, cps[1].Size)}
	}
	if err := tlog.VerifyConsistency(cps[0], cps[1], p.Proof); err != nil {
		return out(false, err.(*engine.Error).Msg)
	}
	return out(true, fmt.Sprintf("the log at size %d extends the log at size %d: nothing the older checkpoint covered was removed or rewritten", cps[1].Size, cps[0].Size))
}
