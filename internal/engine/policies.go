package engine

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/sagacity-go/sagacity/evidence"
)

// Every approval policy document that takes effect is journaled in the
// server's own saga PolicySaga, its hash signed (evidence.OpenPolicy
// reads it back).
//
// A request is decided by the policy it records. A server that runs
// another policy since finds that one's document in PolicySaga and decides
// the request by it: a new configuration never changes how an open
// request is decided.

// ReservedSagaPrefix starts the ids of the server's own sagas.
const ReservedSagaPrefix = "sagacity:"

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

// RecordPolicy makes the policy the server was started with take effect,
// or asks for it to: a server calls it at start, before it takes
// requests. When the newest document in PolicySaga is another, the
// configured one takes effect (its document journaled there) if that
// one has no policyChange rules, or if there is none; otherwise the
// server keeps deciding by the one in force and proposes the configured
// one (see policychange.go), and RecordPolicy returns the proposal.
// Errors: Unavailable when the store is; Conflict when PolicySaga does
// not verify.
func (e *Engine) RecordPolicy(ctx context.Context) (*Proposal, error) {
	// The policy in force is read from a journal that verifies whole,
	// against the global log: no server starts on a document put there
	// behind the engine's back, or one that took effect unapproved.
	snap, logged, err := e.snapshot(ctx, PolicySaga, false)
	if err != nil {
		return nil, err
	}
	if snap.Saga != nil {
		if v, err := e.verify(ctx, snap, logged); err != nil || !v.Valid {
			if err == nil {
				err = Errorf(Conflict, "the journal of %s, which holds the approval policies, does not verify (%s)", PolicySaga, v.Message)
			}
			return nil, err
		}
	}
	var proposal *Proposal
	err = e.journalOwn(ctx, PolicySaga, PolicyTool, func(tx Tx, s *Saga) error {
		proposal = nil
		entries, err := tx.Entries(PolicySaga)
		if err != nil {
			return err
		}
		docs, err := e.policyDocuments(entries, *s)
		if err != nil {
			return err
		}
		want := e.configured
		if n := len(docs); n > 0 && docs[n-1].Hash != want.Hash {
			current, err := e.policyOf(ctx, docs[n-1].Hash)
			if err != nil {
				return err
			}
			if current.GatesChange() {
				e.setPolicy(current)
				if err := e.propose(tx, s, entries, current, want, Principal{ID: ServerDecider, Auth: AuthServer},
					"the server was started with this approval policy"); err != nil {
					return err
				}
				entries, err = tx.Entries(PolicySaga)
				for _, p := range proposals(entries) {
					if p.Hash == want.Hash {
						proposal = &p
					}
				}
				return err
			}
		}
		e.setPolicy(want)
		if n := len(docs); n > 0 && docs[n-1].Hash == want.Hash {
			return nil
		}
		result, err := e.enact(ctx, Invocation{Input: want.Text})
		if err != nil {
			return err
		}
		_, err = e.append(tx, s, PolicyTool, PhaseExecuted, want.Text, result)
		return err
	})
	return proposal, err
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
	lc, _ := evidence.ReadLifecycle(entries)
	for i, en := range entries {
		if en.ToolName != PolicyTool || en.Phase != PhaseExecuted {
			continue // a proposal, its votes and its execution's INTENT
		}
		d, err := evidence.OpenPolicy(en, e.keys.Verifier())
		if err != nil {
			return nil, &Error{Kind: Conflict, Msg: msgOf(err)}
		}
		d.Request = evidence.EnactedBy(entries[:i], lc, en)
		docs = append(docs, d)
	}
	return docs, nil
}

// PolicyHistory is what PolicySaga says of the approval policies: every
// document that took effect, oldest first, the hash of the one in force
// here, and the documents waiting for approval, oldest first.
type PolicyHistory struct {
	Documents []PolicyDocument
	InForce   string
	Proposals []Proposal
}

// Policies returns the policies' history, from one read of PolicySaga.
// Errors: Forbidden as Can says for ActReview (agents are not shown the
// thresholds they are held to); Conflict when PolicySaga does not verify;
// Unavailable when the store is.
func (e *Engine) Policies(ctx context.Context, p Principal) (PolicyHistory, error) {
	if err := e.Can(p, ActReview, Subject{}); err != nil {
		return PolicyHistory{}, err
	}
	h := PolicyHistory{InForce: e.policy().Hash}
	snap, err := e.store.Snapshot(ctx, PolicySaga, false)
	if err != nil || snap.Saga == nil {
		return h, err
	}
	if h.Documents, err = e.policyDocuments(snap.Entries, *snap.Saga); err != nil {
		return PolicyHistory{}, err
	}
	h.Proposals = proposals(snap.Entries)
	return h, nil
}

// policyOf returns the compiled policy of a hash: the one in force, or one
// PolicySaga holds. NotFound when no document of that hash took effect;
// Conflict when PolicySaga does not verify or the document no longer
// compiles.
func (e *Engine) policyOf(ctx context.Context, hash string) (*Approvals, error) {
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
	inForce := e.policy()
	out := []*Approvals{inForce}
	snap, err := e.store.Snapshot(ctx, PolicySaga, false)
	if err != nil || snap.Saga == nil {
		return out, err
	}
	docs, err := e.policyDocuments(snap.Entries, *snap.Saga)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{inForce.Hash: true}
	for _, d := range docs {
		if seen[d.Hash] {
			continue
		}
		seen[d.Hash] = true
		a, err := e.policyOf(ctx, d.Hash)
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
	if evidence.LegacyRule().Eligible(p.Roles, p.Groups) {
		v.Rules = append(v.Rules, RuleRef{})
	}
	all, err := e.known(ctx)
	if err != nil {
		return nil, err
	}
	for _, a := range all {
		seen := map[string]bool{}
		for _, tool := range append(a.Tools(), "", PolicyTool) {
			for _, r := range a.Rules(tool) {
				if !seen[r.Name] && r.Eligible(p.Roles, p.Groups) {
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
		return evidence.LegacyRule(), nil
	}
	a, err := e.policyOf(ctx, hash)
	if IsKind(err, NotFound) {
		return Rule{}, &Error{Kind: Conflict, SagaID: gated.SagaID, Seq: gated.Seq, Msg: fmt.Sprintf(
			"the request at seq=%d was made under approval policy %s, which never took effect here (this server runs %s): "+
				"nothing is decided on it", gated.Seq, short12(hash), short12(e.policy().Hash))}
	}
	if err != nil {
		return Rule{}, err
	}
	return matchRecorded(a, gated)
}

// matchRecorded is a.Recorded(gated), Conflict at the request when the
// rule its policy gives its bytes is not the one it records.
func matchRecorded(a *Approvals, gated Entry) (Rule, error) {
	r, err := a.Recorded(gated)
	if err != nil {
		return Rule{}, &Error{Kind: Conflict, SagaID: gated.SagaID, Seq: gated.Seq, Msg: msgOf(err)}
	}
	return r, nil
}

// Unmeetable checks of policy a, for a deployment whose only voters are
// the given principals (static tokens, in tokens mode), that every rule can be
// met: enough of them may approve under it, and none needs a recent
// sign-in, which a token never has. Invalid naming the first rule that
// cannot.
func Unmeetable(a *Approvals, voters []Principal) error {
	for label, r := range a.All() {
		n := 0
		var people []evidence.Eligibility
		for _, p := range voters {
			if p.Has(RoleApprover) && r.Eligible(p.Roles, p.Groups) {
				n++
				people = append(people, evidence.Eligibility{Roles: p.Roles, Groups: p.Groups})
			}
		}
		switch {
		case r.PasskeyRequired:
			return Errorf(Invalid, "%s, rule %s: passkey can never be met here: a vote needs the voter's passkey, enrolled "+
				"and used in the console, and a static token has none (sign people in with OIDC, or drop passkey)", label, r.Name)
		case r.StepUp > 0:
			return Errorf(Invalid, "%s, rule %s: stepUp can never be met here: a vote counts only from a recent sign-in, and "+
				"a static token has none (sign people in with OIDC, or drop stepUp)", label, r.Name)
		case r.Thresholds == nil && n < r.Quorum:
			return Errorf(Invalid, "%s, rule %s: a quorum of %d can never be met here: only %d configured token(s) hold the "+
				"approver role and one of %s", label, r.Name, r.Quorum, n, strings.Join(r.Approvers, ", "))
		case !r.Meetable(people):
			return Errorf(Invalid, "%s, rule %s: its quorum can never be met here: the %d configured token(s) that hold the "+
				"approver role and one of %s cannot meet every requirement of any alternative, one requirement each", label, r.Name, n,
				strings.Join(r.Approvers, ", "))
		}
	}
	return nil
}

func short12(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	return h
}
