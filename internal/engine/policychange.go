package engine

import (
	"context"
	"encoding/base64"
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
// PolicySaga, when it is another than the one this process decides by:
// a change another process executed. The Lapser calls it every few
// seconds; a process that executes a change calls it at once. Errors:
// Unavailable when the store is; Conflict when PolicySaga does not
// verify.
func (e *Engine) RefreshPolicy(ctx context.Context) error {
	snap, logged, err := e.snapshot(ctx, PolicySaga, false)
	if err != nil || snap.Saga == nil {
		return err
	}
	docs, err := e.policyDocuments(snap.Entries, *snap.Saga)
	if err != nil || len(docs) == 0 {
		return err
	}
	newest := docs[len(docs)-1]
	if newest.Hash == e.policy().Hash {
		return nil
	}
	// Another policy is put in force only from a journal that verifies
	// whole, against the global log: its votes, receipts, and each
	// document approved under the one before (VerifyVotes).
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

// Proposals are the policy documents waiting for approval, oldest first.
// Errors as Policies.
func (e *Engine) Proposals(ctx context.Context, p Principal) ([]Proposal, error) {
	if err := e.Can(p, ActReview, Subject{}); err != nil {
		return nil, err
	}
	snap, err := e.store.Snapshot(ctx, PolicySaga, false)
	if err != nil || snap.Saga == nil {
		return nil, err
	}
	return proposals(snap.Entries), nil
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

// propose makes the request that the configured policy take effect,
// decided by current's policyChange rules, in PolicySaga (locked, as s)
// holding entries; nothing when it is pending already. When no rule of
// them applies to it, nothing is proposed: the server says so and keeps
// the policy in force.
func (e *Engine) propose(tx Tx, s *Saga, entries []Entry, current *Approvals) error {
	want := e.configured
	for _, p := range proposals(entries) {
		if p.Hash == want.Hash {
			return nil
		}
	}
	server := Principal{ID: ServerDecider, Auth: AuthServer}
	// What a condition of the policyChange rules sees, as at the gate.
	var seen *Context
	if current.UsesContext() {
		c := current.See(server.who(), nil, Truncate(e.now()))
		seen = &c
	}
	m := current.Match(PolicyTool, PolicySaga, server.ID, want.Text, seen)
	if !m.OK {
		e.log.Error("the approval policy this server was started with cannot be proposed: no policyChange rule applies to it; "+
			"the server keeps deciding by the policy in force", "configured", want.Hash, "in force", current.Hash, "why", m.Because())
		return nil
	}
	rule := m.Rule
	const why = "the server was started with this approval policy"
	lines := requested(server, "").With(KeyRule, rule.Name).With(KeyPolicy, current.Hash)
	if seen != nil {
		lines = lines.With(KeyContext, seen.String())
	}
	en, err := e.append(tx, s, PolicyTool, PhaseAwaitingApproval, want.Text, lines.With(KeyReason, why).String())
	if err != nil {
		return err
	}
	t := tally(en, nil, rule)
	if err := tx.PutApproval(ApprovalRequest{SagaID: PolicySaga, JournalSeq: en.Seq, ToolName: PolicyTool, Input: want.Text,
		InputHash: PayloadHash(want.Text), Requester: server.ID, CreatedAt: en.Timestamp, Rule: rule.Name, Policy: current.Hash,
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
