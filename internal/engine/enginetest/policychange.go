package enginetest

import (
	"context"
	"testing"

	"github.com/sagacity-go/sagacity/internal/engine"
	"github.com/sagacity-go/sagacity/internal/testkit"
	"github.com/sagacity-go/sagacity/wire"
)

// gatedPolicy is votePolicy whose own change needs one from treasury.
var gatedPolicy = engine.PolicySpec{Tools: votePolicy.Tools,
	PolicyChange: []engine.RuleSpec{{Name: "change", Approvers: []string{"treasury"}}}}

// laxPolicy lets one approver approve any transfer, and its own change
// needs no one.
var laxPolicy = engine.PolicySpec{Tools: map[string][]engine.RuleSpec{"sendWireTransfer": {{Name: "lax"}}}}

// testPolicyChangeGated: under a policy whose change needs approval, a
// server started with a laxer one keeps deciding by the one in force and
// proposes the new one, once however often it starts; approved under
// the policyChange rule, it takes effect — in this process at once, in
// another within its next refresh — and requests made before stay
// decided by the rule they pinned; rejected, it is sent back and the
// policy in force stays; proposed through the API, by an approver who
// then never decides it. PolicySaga verifies throughout.
func testPolicyChangeGated(t *testing.T, v *env) {
	ctx := context.Background()
	gated := v.usePolicy(gatedPolicy)
	if p, err := v.e.RecordPolicy(ctx); err != nil || p != nil || v.e.Policy().Hash != gated.Hash {
		t.Fatalf("RecordPolicy(gated, again) = %+v, %v; want it in force, nothing proposed", p, err)
	}
	other, _ := v.engine(v.open()) // another process, already running the gated policy
	if _, err := other.RecordPolicy(ctx); err != nil {
		t.Fatal(err)
	}

	// Started with the laxer policy: nothing changes until approved.
	lax, err := engine.CompilePolicy(laxPolicy)
	if err != nil {
		t.Fatal(err)
	}
	v.opts = []engine.Option{engine.WithApprovals(lax)}
	v.e, v.log = v.engine(v.db)
	var proposal *engine.Proposal
	for range 2 { // started twice: proposed once
		if proposal, err = v.e.RecordPolicy(ctx); err != nil || proposal == nil || proposal.Hash != lax.Hash {
			t.Fatalf("RecordPolicy(lax) under the gated policy = %+v, %v; want the lax one proposed", proposal, err)
		}
	}
	if ph, err := v.e.Policies(ctx, auditor); err != nil || len(ph.Proposals) != 1 {
		t.Fatalf("Policies' proposals = %+v, %v; want one", ph.Proposals, err)
	}
	if v.e.Policy().Hash != gated.Hash {
		t.Fatalf("in force while the lax policy waits: %s; want the gated one", v.e.Policy().Hash)
	}
	before := v.gateLarge("before", agent)
	if g := v.journal("before")[before-1]; g.Field(engine.KeyRule) != "large" || g.Field(engine.KeyPolicy) != gated.Hash {
		t.Errorf("a request while the change waits is under rule %s of %s; want large of the gated policy", g.Field(engine.KeyRule),
			g.Field(engine.KeyPolicy))
	}
	rv := v.review(engine.PolicySaga, proposal.Request)
	if rv.State != engine.StateUndecided || rv.Rule == nil || rv.Rule.Name != "change" {
		t.Fatalf("the proposal's review: %s, rule %+v; want undecided under rule change", rv.State, rv.Rule)
	}
	_, err = v.e.Approve(ctx, carol, engine.PolicySaga, proposal.Request, "")
	testkit.WantKind(t, "an approval of the change by carol, in no group of its rule", err, engine.Forbidden)
	if _, err := v.e.Resume(ctx, agent, engine.PolicySaga, proposal.Request, lax.Text); err == nil {
		t.Errorf("an agent's resume of the proposal ran")
	}

	// bob, of treasury, approves: the server enacts it.
	if _, err := v.e.Approve(ctx, bob, engine.PolicySaga, proposal.Request, ""); err != nil {
		t.Fatalf("bob's approval of the change: %v", err)
	}
	if v.e.Policy().Hash != lax.Hash {
		t.Fatalf("in force after the approval: %s; want the lax policy", v.e.Policy().Hash)
	}
	ph, err := v.e.Policies(ctx, auditor)
	if err != nil || len(ph.Proposals) != 0 {
		t.Errorf("Policies' proposals after it took effect = %+v, %v; want none", ph.Proposals, err)
	}
	docs, inForce := ph.Documents, ph.InForce
	if err != nil || inForce != lax.Hash || len(docs) == 0 || docs[len(docs)-1].Hash != lax.Hash {
		t.Fatalf("Policies = %d documents, in force %s, %v; want the lax one newest and in force", len(docs), inForce, err)
	}
	r, err := v.e.Call(ctx, agent, "after", "sendWireTransfer", large)
	if err != nil || r.Outcome != engine.OutcomeAwaitingApproval || v.journal("after")[r.Seq-1].Field(engine.KeyRule) != "lax" {
		t.Errorf("a request after the change = %+v, %v; want it under rule lax", r, err)
	}
	if rv := v.review("before", before); rv.Rule == nil || rv.Rule.Name != "large" || rv.Rule.Quorum != 2 {
		t.Errorf("the request made before the change is decided by %+v; want large's quorum of 2, as it pinned", rv.Rule)
	}
	// The other process decides by the gated policy until it reads the
	// journal again.
	if other.Policy().Hash != gated.Hash {
		t.Errorf("the other process changed policy before reading it")
	}
	if err := other.RefreshPolicy(ctx); err != nil || other.Policy().Hash != lax.Hash {
		t.Errorf("the other process after RefreshPolicy: %s, %v; want the lax policy", other.Policy().Hash, err)
	}
	if got := v.verify(engine.PolicySaga); !got.Valid {
		t.Errorf("Verify(%s) = %+v", engine.PolicySaga, got)
	}

	// The lax policy has no policyChange rules: the next takes effect at
	// start, and it says a change needs treasury again. A proposal
	// rejected is sent back; the policy stays.
	gated = v.usePolicy(gatedPolicy)
	strict := gatedPolicy
	strict.Tools = map[string][]engine.RuleSpec{"sendWireTransfer": {{Name: "strict", Quorum: 3}}}
	sa, err := engine.CompilePolicy(strict)
	if err != nil {
		t.Fatal(err)
	}
	v.opts = []engine.Option{engine.WithApprovals(sa)}
	v.e, v.log = v.engine(v.db)
	if proposal, err = v.e.RecordPolicy(ctx); err != nil || proposal == nil {
		t.Fatalf("RecordPolicy(strict) = %+v, %v; want it proposed", proposal, err)
	}
	d, err := v.e.Reject(ctx, bob, engine.PolicySaga, proposal.Request, "three is too many")
	if err != nil || d.Decided != engine.DecidedChanges {
		t.Fatalf("bob's rejection of the change = %+v, %v; want it sent back", d, err)
	}
	if v.e.Policy().Hash != gated.Hash {
		t.Errorf("in force after the rejection: %s; want the gated policy still", v.e.Policy().Hash)
	}
	if st := v.status(engine.PolicySaga); st != wire.Completed {
		t.Errorf("%s after the rejection: %s; want it completed, not compensated", engine.PolicySaga, st)
	}
	if got := v.verify(engine.PolicySaga); !got.Valid {
		t.Errorf("Verify(%s) after the rejection = %+v", engine.PolicySaga, got)
	}

	// Proposed through the API by alice, of treasury: she never decides
	// it; bob does.
	if _, err := v.e.ProposePolicy(ctx, agent, lax); !engine.IsKind(err, engine.Forbidden) {
		t.Errorf("a proposal by an agent: %v; want Forbidden", err)
	}
	byAlice, err := v.e.ProposePolicy(ctx, alice, lax)
	if err != nil {
		t.Fatalf("alice's proposal: %v", err)
	}
	if again, err := v.e.ProposePolicy(ctx, alice, lax); err != nil || again.Request != byAlice.Request {
		t.Errorf("the same proposal again = %+v, %v; want the pending one, seq %d", again, err, byAlice.Request)
	}
	_, err = v.e.Approve(ctx, alice, engine.PolicySaga, byAlice.Request, "")
	testkit.WantKind(t, "alice's approval of her own proposal", err, engine.Forbidden)
	if _, err := v.e.Approve(ctx, bob, engine.PolicySaga, byAlice.Request, ""); err != nil || v.e.Policy().Hash != lax.Hash {
		t.Fatalf("bob's approval of alice's proposal: %v; in force %s; want the lax policy", err, v.e.Policy().Hash)
	}
	// The lax policy gates no change: no proposal is taken.
	if _, err := v.e.ProposePolicy(ctx, alice, gated); !engine.IsKind(err, engine.Conflict) {
		t.Errorf("a proposal under a policy without policyChange rules: %v; want Conflict", err)
	}
	if got := v.verify(engine.PolicySaga); !got.Valid {
		t.Errorf("Verify(%s) after alice's proposal took effect = %+v", engine.PolicySaga, got)
	}
	// Another process started with another policy, under the lax one
	// that gates no change: its document takes effect, and this process,
	// which follows approved changes only, keeps deciding by its own.
	third, _ := v.process(v.db) // started with the strict policy
	if p, err := third.RecordPolicy(ctx); err != nil || p != nil || third.Policy().Hash != sa.Hash {
		t.Fatalf("a process started with the strict policy under the lax one: %+v, %v, in force %s; want the strict one in force",
			p, err, third.Policy().Hash)
	}
	if err := v.e.RefreshPolicy(ctx); err != nil || v.e.Policy().Hash != lax.Hash {
		t.Errorf("RefreshPolicy after another process started with its own policy: %s, %v; want the lax policy still", v.e.Policy().Hash, err)
	}
}
