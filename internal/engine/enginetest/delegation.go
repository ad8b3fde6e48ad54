package enginetest

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/sagacity-go/sagacity/internal/engine"
	"github.com/sagacity-go/sagacity/internal/testkit"
)

// delegationPolicy asks two of finance-leads or treasury for a large
// transfer, one approver for a small one.
var delegationPolicy = engine.PolicySpec{Tools: map[string][]engine.RuleSpec{
	"sendWireTransfer": {
		{Name: "large", When: `double(payload.amount) >= 1000.0`, Approvers: []string{"finance-leads", "treasury"}, Quorum: 2},
		{Name: "small"},
	},
}}

// testDelegation: an approver hands their eligibility under named rules
// to another person for a window; the delegate's vote counts as the
// delegator's, eligible by the groups the delegation records, and its
// entry and receipt say on whose behalf; outside the window, once
// revoked, for the requester or initiator, or counting a person twice,
// it is refused; the journal with delegated votes verifies.
func testDelegation(t *testing.T, v *env) {
	ctx := context.Background()
	clock := &fakeClock{now: time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)}
	v.usePolicy(delegationPolicy, engine.WithClock(clock.Now))
	week := clock.Now().Add(7 * 24 * time.Hour)

	for _, c := range []struct {
		what string
		err  error
		kind engine.Kind
	}{
		{"a delegation to oneself", second(v.e.Delegate(ctx, alice, alice.ID, []string{"large"}, time.Time{}, week, "")), engine.Invalid},
		{"a delegation of no rule", second(v.e.Delegate(ctx, alice, carol.ID, nil, time.Time{}, week, "")), engine.Invalid},
		{"a rule the policy lacks", second(v.e.Delegate(ctx, alice, carol.ID, []string{"huge"}, time.Time{}, week, "")), engine.Invalid},
		{"a window over 90 days", second(v.e.Delegate(ctx, alice, carol.ID, []string{"large"}, time.Time{},
			clock.Now().Add(91*24*time.Hour), "")), engine.Invalid},
		{"a window already over", second(v.e.Delegate(ctx, alice, carol.ID, []string{"large"}, time.Time{}, clock.Now().Add(-time.Hour), "")),
			engine.Invalid},
		{"an agent's delegation", second(v.e.Delegate(ctx, agent, carol.ID, []string{"large"}, time.Time{}, week, "")), engine.Forbidden},
	} {
		testkit.WantKind(t, c.what, c.err, c.kind)
	}
	if es := v.journal(engine.DelegationSaga); len(es) != 0 {
		t.Fatalf("the refused delegations journaled %d entries", len(es))
	}

	// alice, away for a week, lends carol (in no group of the rule)
	// her eligibility under large.
	lent, err := v.e.Delegate(ctx, alice, carol.ID, []string{"large"}, time.Time{}, week, "holiday")
	if err != nil || lent.Seq != 1 || lent.From != alice.ID || lent.To != carol.ID {
		t.Fatalf("Delegate(alice to carol) = %+v, %v", lent, err)
	}
	seq := v.gateLarge("d", agent)
	testkit.WantKind(t, "carol's own approval, in no group of the rule", second(v.e.Approve(ctx, carol, "d", seq, "")), engine.Forbidden)
	d, err := v.e.VoteFor(ctx, carol, alice.ID, engine.ActApprove, "d", seq, "for alice")
	if err != nil || d.Votes != 1 || d.Quorum != 2 || !strings.Contains(d.Progress, carol.ID+" for "+alice.ID) {
		t.Fatalf("carol's approval for alice = %+v, %v; want vote 1 of 2, said to be carol's for alice", d, err)
	}
	en := v.journal("d")[d.Receipt-1]
	r, err := engine.OpenReceipt(engine.ReceiptOf(en), testkit.Keys(t).Verifier())
	if err != nil || en.Field(engine.KeyApprover) != carol.ID || en.Field(engine.KeyOnBehalfOf) != alice.ID ||
		r.Decider != carol.ID || r.OnBehalfOf != alice.ID || r.Delegation != lent.Seq || r.EligibleAs != "finance-leads" {
		t.Fatalf("carol's vote for alice: entry %q, receipt %+v, %v; want carol's, on behalf of alice by delegation %d as finance-leads",
			en.Payload, r, err, lent.Seq)
	}
	// Distinct people throughout: alice herself, and carol again (for
	// alice, or for another delegator), count a person twice.
	testkit.WantKind(t, "alice's own approval after carol's for her", second(v.e.Approve(ctx, alice, "d", seq, "")), engine.Conflict)
	testkit.WantKind(t, "carol's second approval for alice", second(v.e.VoteFor(ctx, carol, alice.ID, engine.ActApprove, "d", seq, "")),
		engine.Conflict)
	if _, err := v.e.Delegate(ctx, erin, carol.ID, []string{"large"}, time.Time{}, week, ""); err != nil {
		t.Fatal(err)
	}
	testkit.WantKind(t, "carol's approval for erin after hers for alice", second(v.e.VoteFor(ctx, carol, erin.ID, engine.ActApprove, "d", seq, "")),
		engine.Conflict)
	if d, err := v.e.Approve(ctx, bob, "d", seq, ""); err != nil || d.Votes != 2 {
		t.Fatalf("bob's approval = %+v, %v; want vote 2 of 2", d, err)
	}
	if rv := v.review("d", seq); rv.State != engine.StateApproved {
		t.Errorf("after carol for alice and bob: %s; want approved", rv.State)
	}
	if vr := v.verify("d"); !vr.Valid {
		t.Errorf("Verify(a saga with a delegated vote) = %+v", vr)
	}

	// Outside the window: one that starts in an hour counts from then,
	// and not after it ends.
	later, err := v.e.Delegate(ctx, bob, erin.ID, []string{"large"}, clock.Now().Add(time.Hour), clock.Now().Add(2*time.Hour), "")
	if err != nil {
		t.Fatal(err)
	}
	w := v.gateLarge("w", agent)
	testkit.WantKind(t, "erin's vote for bob before the window", second(v.e.VoteFor(ctx, erin, bob.ID, engine.ActApprove, "w", w, "")),
		engine.Forbidden)
	clock.Add(time.Hour)
	if _, err := v.e.VoteFor(ctx, erin, bob.ID, engine.ActApprove, "w", w, ""); err != nil {
		t.Fatalf("erin's vote for bob in the window: %v", err)
	}
	if _, err := v.e.Withdraw(ctx, erin, "w", w, ""); err != nil {
		t.Fatalf("erin withdrawing her vote for bob: %v", err)
	}
	clock.Add(time.Hour)
	testkit.WantKind(t, "erin's vote for bob after the window", second(v.e.VoteFor(ctx, erin, bob.ID, engine.ActApprove, "w", w, "")),
		engine.Forbidden)

	// Revoked: by neither party refused; by the delegate, then never again.
	testkit.WantKind(t, "bob revoking alice's delegation to carol", second(v.e.Revoke(ctx, bob, lent.Seq)), engine.Forbidden)
	if got, err := v.e.Revoke(ctx, carol, lent.Seq); err != nil || got.RevokedBy != carol.ID || got.Revoked.IsZero() {
		t.Fatalf("Revoke(carol, her delegation from alice) = %+v, %v", got, err)
	}
	testkit.WantKind(t, "revoking it again", second(v.e.Revoke(ctx, alice, lent.Seq)), engine.Conflict)
	testkit.WantKind(t, "revoking no delegation", second(v.e.Revoke(ctx, alice, 99)), engine.NotFound)
	testkit.WantKind(t, "carol's vote for alice once revoked", second(v.e.VoteFor(ctx, carol, alice.ID, engine.ActApprove, "w", w, "")),
		engine.Forbidden)
	if _, err := v.e.VoteFor(ctx, carol, erin.ID, engine.ActReject, "w", w, "not this one"); err != nil {
		t.Fatalf("carol's rejection for erin: %v", err)
	}
	if vr := v.verify("w"); !vr.Valid {
		t.Errorf("Verify(a saga with delegated votes, one withdrawn, one a rejection) = %+v", vr)
	}

	// Never the requester or initiator: dave's delegation does not let
	// him vote on his own saga, nor carol vote for him on it.
	if _, err := v.e.Delegate(ctx, alice, dave.ID, []string{"small"}, time.Time{}, week, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := v.e.Delegate(ctx, dave, carol.ID, []string{"small"}, time.Time{}, week, ""); err != nil {
		t.Fatal(err)
	}
	r2, err := v.e.Call(ctx, dave, "own", "sendWireTransfer", transfer)
	if err != nil || r2.Outcome != engine.OutcomeAwaitingApproval {
		t.Fatalf("dave's small transfer = %+v, %v", r2, err)
	}
	testkit.WantKind(t, "dave voting for alice on his own request", second(v.e.VoteFor(ctx, dave, alice.ID, engine.ActApprove, "own", r2.Seq, "")),
		engine.Forbidden)
	testkit.WantKind(t, "carol voting for dave on his own request", second(v.e.VoteFor(ctx, carol, dave.ID, engine.ActApprove, "own", r2.Seq, "")),
		engine.Forbidden)
	testkit.WantKind(t, "a withdrawal cast for a delegator", second(v.e.VoteFor(ctx, carol, dave.ID, engine.ActWithdraw, "own", r2.Seq, "")),
		engine.Invalid)

	// The list: newest first, the revoked one said so.
	list, err := v.e.Delegations(ctx, auditor)
	if err != nil || len(list) != 5 || list[len(list)-1].Seq != lent.Seq || list[len(list)-1].RevokedBy != carol.ID || list[2].Seq != later.Seq {
		t.Errorf("Delegations = %+v, %v; want 5, the first revoked by carol", list, err)
	}
	testkit.WantKind(t, "an agent listing delegations", second(v.e.Delegations(ctx, agent)), engine.Forbidden)
	if _, err := engine.ReadDelegations(v.journal(engine.DelegationSaga), testkit.Keys(t).Verifier()); err != nil {
		t.Errorf("ReadDelegations(%s) = %v", engine.DelegationSaga, err)
	}
}
