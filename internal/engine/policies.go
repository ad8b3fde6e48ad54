package engine

import (
	"context"
	"encoding/base64"
	"fmt"
	"strings"
	"sync"
	"time"

	"golang.org/x/mod/sumdb/note"
)

// Every approval policy document that takes effect is journaled, its full
// text and its hash, as an entry of one saga of the server's own,
// PolicySaga: like every entry it becomes a leaf of the global log, so an
// auditor holding a checkpoint reads the exact rules behind any hash a
// request records. The entry carries the document's hash signed with the
// server's key: a document written into the database by hand is never
// taken for one the server ran.
//
// A request is decided by the policy it records. A server that runs
// another policy since finds that one's document in PolicySaga and decides
// the request by it: a new configuration never changes how an open
// request is decided.

// PolicySaga is the saga whose journal holds every approval policy
// document that took effect, oldest first. No agent may call in it.
const PolicySaga = "sagacity:policies"

// PolicyTool names the entries of PolicySaga.
const PolicyTool = "approval-policy"

// ReservedSagaPrefix starts the ids of the server's own sagas.
const ReservedSagaPrefix = "sagacity:"

// policyHeader opens the signed statement of a policy document's hash.
const policyHeader = "sagacity approval policy v1"

// policyNote is the text signed for the policy document of hash.
func policyNote(hash string) string { return policyHeader + "\npolicy-sha256: " + hash + "\n" }

// PolicyDocument is a policy document as PolicySaga journals it.
type PolicyDocument struct {
	Hash  string    // its SHA-256, hex
	Text  string    // the canonical document
	Since time.Time // when it took effect (its entry's time)
	Seq   int64     // its entry in PolicySaga
}

// OpenPolicy checks a PolicySaga entry: the document it holds has the
// hash it names, and the key signed that hash. Invalid otherwise.
func OpenPolicy(en Entry, v note.Verifier) (PolicyDocument, error) {
	bad := func(why string) (PolicyDocument, error) {
		return PolicyDocument{}, Errorf(Invalid, "seq=%d of %s is no policy document the key signed: %s", en.Seq, PolicySaga, why)
	}
	hash := en.Field(KeyPolicy)
	switch {
	case en.ToolName != PolicyTool || en.Phase != PhaseExecuted:
		return bad("it is a " + string(en.Phase) + " entry of " + en.ToolName)
	case hash != PayloadHash(en.Input):
		return bad("the document's SHA-256 is not the hash it names")
	}
	signed, err := base64.StdEncoding.DecodeString(en.Field(KeyReceipt))
	if err != nil {
		return bad("its signature is not base64")
	}
	n, err := note.Open(signed, note.VerifierList(v))
	if err != nil {
		return bad("its signature does not verify with " + v.Name())
	}
	if n.Text != policyNote(hash) {
		return bad("the key signed another document")
	}
	return PolicyDocument{Hash: hash, Text: en.Input, Since: en.Timestamp, Seq: en.Seq}, nil
}

// history is every policy this engine has read, compiled, by hash.
type history struct {
	mu sync.Mutex
	m  map[string]*Approvals
}

func (h *history) get(hash string) (*Approvals, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	a, ok := h.m[hash]
	return a, ok
}

func (h *history) put(a *Approvals) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.m == nil {
		h.m = map[string]*Approvals{}
	}
	h.m[a.Hash] = a
}

// RecordPolicy makes the policy in force take effect: it journals its
// document in PolicySaga unless the newest document there is this one.
// A server calls it at start, before it takes requests. Errors:
// Unavailable when the store is; Conflict when PolicySaga does not
// verify.
func (e *Engine) RecordPolicy(ctx context.Context) error {
	return e.journalOwn(ctx, PolicySaga, PolicyTool, func(tx Tx, s *Saga) error {
		entries, err := tx.Entries(PolicySaga)
		if err != nil {
			return err
		}
		docs, err := e.policyDocuments(entries, *s)
		if err != nil {
			return err
		}
		if n := len(docs); n > 0 && docs[n-1].Hash == e.approvals.Hash {
			return nil
		}
		sig, err := e.keys.Sign(policyNote(e.approvals.Hash))
		if err != nil {
			return fmt.Errorf("signing the policy document: %w", err)
		}
		_, err = e.append(tx, s, PolicyTool, PhaseExecuted, e.approvals.Text,
			Lines{{KeyPolicy, e.approvals.Hash}, {KeyReceipt, base64.StdEncoding.EncodeToString([]byte(sig))}}.String())
		return err
	})
}

// policyDocuments reads PolicySaga's journal: it must verify against its
// row and every entry must be a document the key signed. Conflict
// otherwise: no request is decided by a document the server cannot
// vouch for.
func (e *Engine) policyDocuments(entries []Entry, s Saga) ([]PolicyDocument, error) {
	if v := VerifySaga(entries, s, nil); !v.Valid {
		e.obs.VerifyFailed(CheckedJournal)
		return nil, Errorf(Conflict, "the journal of %s, which holds the approval policies, does not verify (%s)", PolicySaga, v.Message)
	}
	var docs []PolicyDocument
	for _, en := range entries {
		d, err := OpenPolicy(en, e.keys.Verifier())
		if err != nil {
			return nil, &Error{Kind: Conflict, Msg: msgOf(err)}
		}
		docs = append(docs, d)
	}
	return docs, nil
}

// Policies returns every policy document that took effect, oldest first,
// and the hash of the one in force. Errors: Forbidden as Can says for
// ActReview (agents are not shown the thresholds they are held to); Conflict when PolicySaga does not verify; Unavailable when the
// store is.
func (e *Engine) Policies(ctx context.Context, p Principal) ([]PolicyDocument, string, error) {
	if err := e.Can(p, ActReview, Subject{}); err != nil {
		return nil, "", err
	}
	snap, err := e.store.Snapshot(ctx, PolicySaga, false)
	if err != nil || snap.Saga == nil {
		return nil, e.approvals.Hash, err
	}
	docs, err := e.policyDocuments(snap.Entries, *snap.Saga)
	return docs, e.approvals.Hash, err
}

// Policy returns the compiled policy of a hash: the one in force, or one
// PolicySaga holds. NotFound when no document of that hash took effect;
// Conflict when PolicySaga does not verify or the document no longer
// compiles.
func (e *Engine) Policy(ctx context.Context, hash string) (*Approvals, error) {
	if a, ok := e.policies.get(hash); ok {
		return a, nil
	}
	snap, err := e.store.Snapshot(ctx, PolicySaga, false)
	if err != nil {
		return nil, err
	}
	if snap.Saga != nil {
		docs, err := e.policyDocuments(snap.Entries, *snap.Saga)
		if err != nil {
			return nil, err
		}
		for _, d := range docs {
			if d.Hash != hash {
				continue
			}
			a, err := ParsePolicy(d.Text)
			if err != nil {
				return nil, Errorf(Conflict, "approval policy %s no longer compiles: %s", short12(hash), msgOf(err))
			}
			e.policies.put(a)
			return a, nil
		}
	}
	return nil, Errorf(NotFound, "no approval policy %s took effect on this database", short12(hash))
}

// known returns the policy in force and every other that took effect,
// compiled. Errors as Policy.
func (e *Engine) known(ctx context.Context) ([]*Approvals, error) {
	out := []*Approvals{e.approvals}
	snap, err := e.store.Snapshot(ctx, PolicySaga, false)
	if err != nil || snap.Saga == nil {
		return out, err
	}
	docs, err := e.policyDocuments(snap.Entries, *snap.Saga)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{e.approvals.Hash: true}
	for _, d := range docs {
		if seen[d.Hash] {
			continue
		}
		seen[d.Hash] = true
		a, err := e.Policy(ctx, d.Hash)
		if err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, nil
}

// voter is p as the pending list looks for what waits for its vote: the
// rules of every known policy that p is one of the approvers of (and the
// one approver of requests from before policies).
func (e *Engine) voter(ctx context.Context, p Principal) (*Voter, error) {
	v := &Voter{ID: p.ID}
	if legacyRule.Eligible(p) {
		v.Rules = append(v.Rules, RuleRef{})
	}
	all, err := e.known(ctx)
	if err != nil {
		return nil, err
	}
	for _, a := range all {
		seen := map[string]bool{}
		for _, tool := range append(a.Tools(), "") {
			for _, r := range a.Rules(tool) {
				if !seen[r.Name] && r.Eligible(p) {
					seen[r.Name] = true
					v.Rules = append(v.Rules, RuleRef{Policy: a.Hash, Rule: r.Name})
				}
			}
		}
	}
	return v, nil
}

// ruleOf is the rule a request is decided by: the one its
// AWAITING_APPROVAL entry records, of the policy it records, which may be
// another than the one in force. The rule is found again from the
// request's bytes, so an entry that records another rule than its policy
// gives it (written into the database to pass for a laxer one) decides
// nothing. Conflict when the recorded policy is not one that took effect
// here, or the rules differ.
func (e *Engine) ruleOf(ctx context.Context, gated Entry) (Rule, error) {
	hash := gated.Field(KeyPolicy)
	if hash == "" {
		return legacyRule, nil
	}
	a, err := e.Policy(ctx, hash)
	if IsKind(err, NotFound) {
		return Rule{}, &Error{Kind: Conflict, SagaID: gated.SagaID, Seq: gated.Seq, Msg: fmt.Sprintf(
			"the request at seq=%d was made under approval policy %s, which never took effect here (this server runs %s): "+
				"nothing is decided on it", gated.Seq, short12(hash), short12(e.approvals.Hash))}
	}
	if err != nil {
		return Rule{}, err
	}
	return matchRecorded(a, gated)
}

// matchRecorded finds the rule a policy gives a request's bytes, which
// must be the one its entry records. Conflict otherwise.
func matchRecorded(a *Approvals, gated Entry) (Rule, error) {
	name := gated.Field(KeyRule)
	m := a.Match(gated.ToolName, gated.SagaID, gated.Field(KeyRequester), gated.Input)
	if !m.OK || m.Rule.Name != name {
		gives := "no rule"
		switch {
		case m.OK:
			gives = fmt.Sprintf("rule %q", m.Rule.Name)
		case m.Failed != "":
			gives = fmt.Sprintf("no rule (rule %q's condition cannot be evaluated for them)", m.Failed)
		}
		return Rule{}, &Error{Kind: Conflict, SagaID: gated.SagaID, Seq: gated.Seq, Msg: fmt.Sprintf(
			"the request at seq=%d records approval rule %q, but its policy gives its bytes %s: nothing is decided on it",
			gated.Seq, name, gives)}
	}
	return m.Rule, nil
}

// legacyRule decides a request made before requests recorded a policy:
// one person with the approver role.
var legacyRule = Rule{Name: "default", Approvers: []string{string(RoleApprover)}, Quorum: 1}

// notReserved refuses an agent's saga id that names one of the server's own
// sagas, or that a person would read as one (see readAs): a journal of
// "Sagacity：passkeys" beside the server's "sagacity:passkeys" would pass
// for the server's word.
func notReserved(sagaID string) error {
	if strings.HasPrefix(readAs(sagaID), readAs(ReservedSagaPrefix)) {
		return Errorf(Invalid, "saga ids that read as %q… are the server's own: choose another id", ReservedSagaPrefix)
	}
	return nil
}
