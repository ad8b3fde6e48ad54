package evidence

import (
	"cmp"
	"encoding/json"
	"fmt"
	"time"

	"golang.org/x/mod/sumdb/note"
)

// An auditor holding an export (GET /sagacity/audit/{sagaId}?proofs=N,
// read by ReadNDJSON), the server's public key and a checkpoint checks,
// without the server, everything the server checks of a saga and more:
// VerifyExport is that check, which sagacity verify and the Go client
// run.

// Trust is what VerifyExport checks an export against, and what it
// accepts.
type Trust struct {
	// Key is the server's public key (GET /sagacity/keys). With it, every
	// decision's receipt is checked, and in an export with proofs every
	// vote against the rule of the policy its request pinned, every
	// passkey vote against its enrolment, the export's signed head and
	// each decider's sign-in. Without it, the hash chain and the rules of
	// the requests' lifecycle only.
	Key note.Verifier
	// Checkpoint, with Key, is a checkpoint the key signed
	// (OpenCheckpoint): every entry's and attached line's proof of
	// inclusion in the log it signed is checked.
	Checkpoint *Checkpoint
	// AllowUnproved accepts entries the checkpoint is older than: they
	// come last, without proofs.
	AllowUnproved bool
	// AllowDev accepts decisions signed in dev mode, whose decider's name
	// was typed, not verified.
	AllowDev bool
	// AllowUnprovedSignIn accepts decisions by OIDC identities whose
	// receipts name no sign-in the identity provider signed (made before
	// sign-ins were kept).
	AllowUnprovedSignIn bool
	// ProviderKeys, when not nil, are the identity provider's own keys,
	// by RFC 7638 thumbprint (its jwks_uri, fetched by the auditor): each
	// sign-in is checked against them instead of the keys the log
	// journals.
	ProviderKeys map[string][]byte
	// CheckAssertion checks passkey votes' assertions, and CheckIDToken
	// sign-ins' ID tokens (assertion.Check and OpenIDToken); a
	// journal with a passkey vote, or a sign-in, does not verify
	// without them.
	CheckAssertion CheckAssertion
	CheckIDToken   CheckIDToken
	// Now is when a break-glass execution not ratified yet is judged:
	// past its window then, it is flagged (Named). When zero, it is
	// judged as of the export's newest entry, so that the check stays a
	// function of its inputs; sagacity verify and the Go client pass the
	// time of the check.
	Now time.Time
}

// VerifyExport verifies one saga's export offline: its hash chain and
// the rules of its requests' lifecycle (VerifyJournal); with the key,
// every decision's receipt (VerifyReceipts), and no decision signed in
// dev mode unless allowed; with proofs too, that every request met the
// approval rule of the policy it pinned, as its policy lines hold it
// (VerifyVotes), that the export ends at the head the server signed,
// and who made each decision against the identity provider's word
// (VerifyIdentities); with the checkpoint too, every entry's and
// attached line's proof of inclusion in the log it signed. It returns
// the verification and, when the identities were checked and hold, what
// vouches for each decider. An *Error when the export cannot be verified
// as asked: it holds no entries, or entries of two sagas, or no proofs,
// or proofs against another size than the checkpoint's.
func VerifyExport(entries []Entry, proofs *Proofs, t Trust) (Verification, []Identity, error) {
	if len(entries) == 0 {
		return Verification{}, nil, errorf("holds no journal entries; export a saga with GET /sagacity/audit/{sagaId}")
	}
	for _, e := range entries {
		if e.SagaID != entries[0].SagaID {
			return Verification{}, nil, errorf("the export holds entries of sagas %q and %q; verify one saga at a time", entries[0].SagaID, e.SagaID)
		}
	}
	v, cp := t.Key, t.Checkpoint
	if cp != nil {
		switch {
		case v == nil:
			return Verification{}, nil, errorf("a checkpoint is checked with the key that signed it")
		case proofs == nil:
			return Verification{}, nil, errorf("carries no proofs; export it with GET /sagacity/audit/{sagaId}?proofs=%d", cp.Size)
		case proofs.TreeSize != cp.Size:
			return Verification{}, nil, errorf("its proofs are against the log at size %d, the checkpoint is of size %d; export it again with ?proofs=%d",
				proofs.TreeSize, cp.Size, cp.Size)
		}
	}
	res := VerifyJournal(entries)
	if res.Valid && v != nil {
		res = VerifyReceipts(entries, v)
	}
	if res.Valid && v != nil && !t.AllowDev {
		res = notDev(entries, v, res)
	}
	if res.Valid && v != nil && proofs != nil {
		res = voted(entries, proofs, v, t.CheckAssertion, cmp.Or(t.Now, entries[len(entries)-1].Timestamp), res)
	}
	if res.Valid && v != nil && proofs != nil {
		res = headed(entries, proofs, v, res)
	}
	if res.Valid && cp != nil {
		res = proved(entries, proofs, *cp, v, t.AllowUnproved, res)
	}
	var ids []Identity
	if res.Valid && v != nil && proofs != nil {
		res, ids = identified(entries, proofs, v, t.CheckIDToken, t.ProviderKeys, t.AllowUnprovedSignIn, res)
	}
	if !res.Valid {
		ids = nil
	}
	return res, ids, nil
}

// notDev breaks a journal with a decision signed in dev mode: its
// decider's name was typed, not verified, whatever key signed it.
func notDev(entries []Entry, v note.Verifier, res Verification) Verification {
	for _, d := range Decisions(entries, v) {
		if d.Auth == AuthDev {
			i := int(d.Seq - 1)
			return Broken(len(entries), i, fmt.Sprintf(
				"seq=%d (entry %d) was decided in dev mode (auth: dev): %s's name was typed, not verified; -allow-dev accepts it", d.Seq, i, d.Decider))
		}
	}
	return res
}

// voted checks that every request met the approval rule in force when it
// was made: each policy line holds a policy document the key signed, and
// the votes on each request and its execution keep the rule its pinned
// policy, which must be among them, gives it (VerifyVotes). It
// adds to the message who approved each executed request, under which
// rule.
func voted(entries []Entry, proofs *Proofs, v note.Verifier, check CheckAssertion, now time.Time, res Verification) Verification {
	policies := map[string]*Approvals{}
	for _, pe := range proofs.Policies.Entries {
		d, err := OpenPolicy(pe, v)
		if err != nil {
			return policyBroken(entries, pe, Message(err))
		}
		a, err := ParsePolicy(d.Text)
		if err != nil {
			return policyBroken(entries, pe, fmt.Sprintf("seq=%d of %s holds no approval policy: %s", pe.Seq, PolicySaga, Message(err)))
		}
		policies[d.Hash] = a
	}
	pks := proofs.Passkeys.Entries
	for i, pe := range pks {
		// The entries before pe read, pe is the first that does not.
		if _, err := ReadPasskeys(pks[:i+1], v); err != nil {
			return passkeyBroken(entries, pe, v, Message(err))
		}
	}
	keys, _ := ReadPasskeys(pks, v)
	delegations, err := ReadDelegations(proofs.Delegations.Entries, v)
	if err != nil {
		return Broken(len(entries), -1, Message(err))
	}
	lc, _ := ReadLifecycle(entries)
	votes, rulings := VerifyVotes(entries, lc, func(hash string) (*Approvals, error) {
		if a := policies[hash]; a != nil {
			return a, nil
		}
		return nil, errorf("its document is not in the export")
	}, v, Keyring{Passkeys: func() (Passkeys, error) { return keys, nil }, Check: check,
		Delegations: func() (Delegations, error) { return delegations, nil }})
	if !votes.Valid {
		return votes
	}
	return Named(res, rulings, now)
}

// identified checks who made each decision against the identity
// provider's word (VerifyIdentities): the sign-in lines must be
// records the key signed, and each OIDC decision's sign-in an ID token
// the provider signed, with a key the log journals before it (or one of
// trusted). It returns what vouches for each decider.
func identified(entries []Entry, proofs *Proofs, v note.Verifier, check CheckIDToken, trusted map[string][]byte, unproved bool,
	res Verification) (Verification, []Identity) {
	signIns, err := ReadSignIns(proofs.SignIns.Entries, v, check, trusted)
	if err != nil {
		return Broken(len(entries), -1, Message(err)), nil
	}
	keys, _ := ReadPasskeys(proofs.Passkeys.Entries, v) // voted read them
	checked, ids := VerifyIdentities(entries, v, signIns, keys, unproved)
	if !checked.Valid {
		return checked, nil
	}
	return res, ids
}

// policyBroken breaks a journal at the first request that pins the
// policy a policy line names, which does not hold for why; at no entry
// when no request pins it.
func policyBroken(entries []Entry, pe Entry, why string) Verification {
	n := len(entries)
	if hash := pe.Field(KeyPolicy); hash != "" {
		lc, _ := ReadLifecycle(entries)
		for _, seq := range lc.Order {
			if i := int(seq - 1); entries[i].Field(KeyPolicy) == hash {
				return Broken(n, i, fmt.Sprintf("seq=%d (entry %d) pins approval policy %s, but %s",
					seq, i, hash, why))
			}
		}
	}
	return Broken(n, -1, why)
}

// passkeyBroken breaks a journal at the first vote signed with the
// passkey a passkey line enrols or removes, which does not hold for why;
// at no entry when no vote was signed with it.
func passkeyBroken(entries []Entry, pe Entry, v note.Verifier, why string) Verification {
	n := len(entries)
	var rec struct {
		Credential string `json:"credential"`
	}
	_ = json.Unmarshal([]byte(pe.Input), &rec)
	for _, d := range Decisions(entries, v) {
		if r, err := OpenReceipt(ReceiptOf(entries[d.Seq-1]), v); err == nil && r.Passkey != nil && r.Passkey.Credential == rec.Credential {
			i := int(d.Seq - 1)
			return Broken(n, i, fmt.Sprintf("seq=%d (entry %d) is a vote by %s signed with passkey %s, but %s",
				d.Seq, i, r.Decider, rec.Credential, why))
		}
	}
	return Broken(n, -1, why)
}

// headed checks that an export with proofs ends where the server, which
// signed its head, exported it.
func headed(entries []Entry, proofs *Proofs, v note.Verifier, res Verification) Verification {
	n := len(entries)
	if proofs.Head == "" {
		return Broken(n, n-1, "the export carries no signed head: its tail may have been cut")
	}
	h, err := OpenHead(proofs.Head, v)
	if err != nil {
		return Broken(n, n-1, Message(err))
	}
	if why := h.Ends(entries); why != "" {
		return Broken(n, n-1, why)
	}
	return res
}

// proved checks each entry's inclusion in the log the checkpoint signed:
// every entry is proved, but for entries after the last proved one when
// unproved entries are allowed (those the checkpoint is older than); so
// is every policy and passkey line, whatever is allowed.
func proved(entries []Entry, proofs *Proofs, cp Checkpoint, v note.Verifier, allowUnproved bool, res Verification) Verification {
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
			return Broken(n, i, fmt.Sprintf(
				"seq=%d (entry %d) carries no proof of inclusion in the log the checkpoint of size %d signed: %s", e.Seq, i, cp.Size, why))
		}
	}
	bad, count := VerifyProofs(entries, proofs, cp.Root)
	if bad >= 0 {
		return Verification{EntryCount: n, BreakAtIndex: bad,
			Message: fmt.Sprintf("seq=%d (entry %d) is not in the log the checkpoint of size %d signed", entries[bad].Seq, bad, cp.Size)}
	}
	attached := []struct {
		Attached
		saga   string
		broken func(pe Entry, why string) Verification
	}{
		{proofs.Policies, PolicySaga, func(pe Entry, why string) Verification { return policyBroken(entries, pe, why) }},
		{proofs.Passkeys, PasskeySaga, func(pe Entry, why string) Verification {
			return passkeyBroken(entries, pe, v, why)
		}},
		{proofs.SignIns, SignInSaga, func(pe Entry, why string) Verification {
			return Broken(n, -1, why)
		}},
		{proofs.Delegations, DelegationSaga, func(pe Entry, why string) Verification {
			return Broken(n, -1, why)
		}},
	}
	for _, a := range attached {
		if bad, why := a.Unproved(a.saga, cp); bad >= 0 {
			return a.broken(a.Entries[bad], why)
		}
	}
	res.Message += fmt.Sprintf("; %d in the log the checkpoint of size %d signed", count, cp.Size)
	if k := n - count; k > 0 {
		res.Message += fmt.Sprintf(" (%d newer than it)", k)
	}
	return res
}

// Unproved returns the index of the first of a's entries, of the
// server's saga saga, that is not proved in the log the checkpoint
// signed, and why; -1 when all are.
func (a Attached) Unproved(saga string, cp Checkpoint) (int, string) {
	for i, pe := range a.Entries {
		if a.Of[i] == nil {
			return i, fmt.Sprintf("seq=%d of %s carries no proof of inclusion in the log the checkpoint of size %d signed", pe.Seq, saga, cp.Size)
		}
	}
	if bad, _ := VerifyProofs(a.Entries, &Proofs{TreeSize: cp.Size, Of: a.Of}, cp.Root); bad >= 0 {
		return bad, fmt.Sprintf("seq=%d of %s is not in the log the checkpoint of size %d signed", a.Entries[bad].Seq, saga, cp.Size)
	}
	return -1, ""
}
