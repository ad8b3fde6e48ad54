package engine

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"

	"github.com/sagacity-go/sagacity/evidence"
	"github.com/sagacity-go/sagacity/wire"
)

// A policy whose document has policyChange rules is changed only with
// their approval. A server started with another document (its
// approval: section) keeps deciding by the one in force and proposes the
// new one: a request of PolicyTool in PolicySaga, its input the new
// document, made by the server and decided by the policyChange rules of
// the document in force, like any request (votes, receipts, clocks). Its
// rules execute on approval: the server's execution of PolicyTool
// journals the document as having taken effect (the EXECUTED entry a
// document always was, its hash signed) and every process decides by it
// from then on. A document in force without policyChange rules lets the
// next take effect when a server starts with it, as before; the first
// document takes effect as it is.

// policy is the approval policy in force.
func (e *Engine) policy() *Approvals { return e.inForce.Load() }

// setPolicy puts a in force.
func (e *Engine) setPolicy(a *Approvals) {
	e.policies.put(a)
	e.inForce.Store(a)
}

// Policy is the approval policy in force: the one the server was
// started with, or the one before it while its change waits for
// approval.
func (e *Engine) Policy() *Approvals { return e.policy() }

// Proposal is a policy document waiting for approval to take effect.
type Proposal struct {
	PolicyDocument
	// Request is its request in PolicySaga (its AWAITING_APPROVAL).
	Request int64
}

// tool returns the tool named name: a registered one, or the server's
// own PolicyTool, whose execution makes an approved policy document take
// effect.
func (e *Engine) tool(name string) (Tool, bool) {
	if name == PolicyTool {
		return Tool{Name: PolicyTool, Reversibility: Irreversible, Executor: Funcs{Exec: e.enact},
			Description: "makes an approved approval policy document take effect"}, true
	}
	t, ok := e.tools[name]
	return t, ok
}

// enact is PolicyTool's execution: the document's hash signed, as the
// payload of the EXECUTED entry that says it took effect.
func (e *Engine) enact(_ context.Context, inv Invocation) (string, error) {
	a, err := ParsePolicy(inv.Input)
	if err != nil {
		return "", fmt.Errorf("the approved policy document no longer compiles: %s", msgOf(err))
	}
	sig, err := e.keys.Sign(evidence.PolicyNote(a.Hash))
	if err != nil {
		return "", fmt.Errorf("signing the policy document: %w", err)
	}
	return Lines{{KeyPolicy, a.Hash}, {KeyReceipt, base64.StdEncoding.EncodeToString([]byte(sig))}}.String(), nil
}

// RefreshPolicy puts in force the newest document that took effect in
// PolicySaga, when it is another than the one this process decides by
// and an approved change: one another process executed. The Lapser calls it every few
// seconds; a process that executes a change calls it at once. Errors:
// Unavailable when the store is; Conflict when PolicySaga does not
// verify.
func (e *Engine) RefreshPolicy(ctx context.Context) error {
	snap, err := e.store.Snapshot(ctx, PolicySaga, false)
	if err != nil || snap.Saga == nil {
		return err
	}
	docs, err := e.policyDocuments(snap.Entries, *snap.Saga)
	if err != nil || len(docs) == 0 {
		return err
	}
	// Only an approved change is followed: a document that took effect
	// when another server started with it (under a policy without
	// policyChange rules) leaves this one deciding by its own, as
	// replicas of other configurations always did.
	newest := docs[len(docs)-1]
	if newest.Hash == e.policy().Hash || newest.Request == 0 {
		return nil
	}
	// Another policy is put in force only from a journal that verifies
	// whole, against the global log: its votes, receipts, and each
	// document approved under the one before (VerifyVotes). The log is
	// read only then, not at every pass.
	snap, logged, err := e.snapshot(ctx, PolicySaga, false)
	if err != nil {
		return err
	}
	if v, err := e.verify(ctx, snap, logged); err != nil || !v.Valid {
		if err == nil {
			err = Errorf(Conflict, "the journal of %s, which holds the approval policies, does not verify (%s): the policy in force stays",
				PolicySaga, v.Message)
		}
		return err
	}
	a, err := e.policyOf(ctx, newest.Hash)
	if err != nil {
		return err
	}
	e.setPolicy(a)
	e.log.Info("an approved approval policy took effect", "policy", a.Hash)
	return nil
}

// enacted puts in force a policy change just executed in sagaID, when it
// is PolicySaga; the Lapser would within seconds.
func (e *Engine) enacted(ctx context.Context, sagaID string) {
	if sagaID != PolicySaga {
		return
	}
	if err := e.RefreshPolicy(ctx); err != nil {
		e.log.Warn("reading the approval policy that took effect failed; trying again later", "err", err)
	}
}

// proposals are the open requests of PolicyTool in PolicySaga's
// entries.
func proposals(entries []Entry) []Proposal {
	lc, _ := evidence.ReadLifecycle(entries)
	var out []Proposal
	for _, l := range lc.Open() {
		g := entries[l.Seq-1]
		out = append(out, Proposal{PolicyDocument: PolicyDocument{Hash: PayloadHash(g.Input), Text: g.Input, Since: g.Timestamp, Seq: g.Seq},
			Request: g.Seq})
	}
	return out
}

// ParsePolicySpec compiles a policy sent as JSON (a PolicySpec, such as a
// canonical document): Invalid, naming what is wrong, otherwise.
func ParsePolicySpec(doc []byte) (*Approvals, error) {
	var spec PolicySpec
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&spec); err != nil {
		return nil, Errorf(Invalid, "the document is not an approval policy's JSON: %v", err)
	}
	a, err := CompilePolicy(spec)
	if err != nil {
		return nil, Errorf(Invalid, "the approval policy does not compile: %s", err.Error())
	}
	return a, nil
}

// ProposePolicy proposes policy want, by p: a request in PolicySaga
// decided by the policyChange rules of the policy in force, as a
// configuration's is at start (see RecordPolicy); p, its requester, never
// decides it. It returns the proposal, the pending one when want is
// proposed already. Errors: Forbidden as Can says for ActPropose;
// Conflict when the policy in force has no policyChange rules (a new
// document then takes effect when a server starts with it, never through
// the API), when want is in force already, or when no policyChange rule
// applies to it; Unavailable when the store is.
func (e *Engine) ProposePolicy(ctx context.Context, p Principal, want *Approvals) (Proposal, error) {
	if err := e.Can(p, ActPropose, Subject{}); err != nil {
		return Proposal{}, err
	}
	current := e.policy()
	switch {
	case !current.GatesChange():
		return Proposal{}, Errorf(Conflict, "the policy in force, %s, has no policyChange rules: another takes effect when a server "+
			"starts with it in its approval: section, not through a proposal", short12(current.Hash))
	case want.Hash == current.Hash:
		return Proposal{}, Errorf(Conflict, "that policy, %s, is in force already", short12(want.Hash))
	}
	var out Proposal
	err := e.journalOwn(ctx, PolicySaga, PolicyTool, func(tx Tx, s *Saga) error {
		entries, err := tx.Entries(PolicySaga)
		if err != nil {
			return err
		}
		if err := e.propose(tx, s, entries, current, want, p, "proposed through the API"); err != nil {
			return err
		}
		if entries, err = tx.Entries(PolicySaga); err != nil {
			return err
		}
		for _, q := range proposals(entries) {
			if q.Hash == want.Hash {
				out = q
				return nil
			}
		}
		return Errorf(Conflict, "no policyChange rule of the policy in force applies to policy %s: it cannot be proposed", short12(want.Hash))
	})
	return out, err
}

// propose makes the request, by proposer with reason why, that policy
// want take effect, decided by current's policyChange rules, in
// PolicySaga (locked, as s) holding entries; nothing when it is pending
// already. When no rule of them applies to it, nothing is proposed: the
// server says so and keeps the policy in force.
func (e *Engine) propose(tx Tx, s *Saga, entries []Entry, current, want *Approvals, proposer Principal, why string) error {
	for _, p := range proposals(entries) {
		if p.Hash == want.Hash {
			return nil
		}
	}
	// What a condition of the policyChange rules sees, as at the gate.
	var seen *Context
	if current.UsesContext() {
		c := current.See(proposer.who(), proposer.Claims, Truncate(e.now()))
		seen = &c
	}
	m := current.Match(PolicyTool, PolicySaga, proposer.ID, want.Text, seen)
	if !m.OK {
		e.log.Error("an approval policy cannot be proposed: no policyChange rule applies to it; "+
			"the server keeps deciding by the policy in force", "proposed", want.Hash, "in force", current.Hash, "why", m.Because())
		return nil
	}
	rule := m.Rule
	lines := requested(proposer, "").With(KeyRule, rule.Name).With(KeyPolicy, current.Hash)
	if seen != nil {
		lines = lines.With(KeyContext, seen.String())
	}
	en, err := e.append(tx, s, PolicyTool, PhaseAwaitingApproval, want.Text, lines.With(KeyReason, why).String())
	if err != nil {
		return err
	}
	t := tally(en, nil, rule)
	if err := tx.PutApproval(ApprovalRequest{SagaID: PolicySaga, JournalSeq: en.Seq, ToolName: PolicyTool, Input: want.Text,
		InputHash: PayloadHash(want.Text), Requester: proposer.ID, CreatedAt: en.Timestamp, Rule: rule.Name, Policy: current.Hash,
		Quorum: t.Quorum(), Reason: why, Due: t.Due(), EscalateAt: firstStep(en.Timestamp, rule)}); err != nil {
		return err
	}
	ev := requestEvent(wire.EventWaiting, en, rule, t, en.Seq, en.Timestamp)
	if err := e.tell(tx, ev.said("a new approval policy waits for approval to take effect: %s under rule %s", ev.votes(), rule.Name)); err != nil {
		return err
	}
	s.Status = wire.AwaitingApproval
	return nil
}
