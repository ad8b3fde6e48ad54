package enginetest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/sagacity-go/sagacity/internal/engine"
	"github.com/sagacity-go/sagacity/internal/store/storetest"
	"github.com/sagacity-go/sagacity/internal/testkit"
	"github.com/sagacity-go/sagacity/wire"
)

// thresholdPolicy asks, for a large transfer, one from finance-leads and
// one from treasury; for a small one, two approvals or one from
// treasury.
var thresholdPolicy = engine.PolicySpec{Tools: map[string][]engine.RuleSpec{
	"sendWireTransfer": {
		{Name: "large", When: `double(payload.amount) >= 1000.0`,
			Thresholds: [][]engine.Requirement{{{From: "finance-leads", Count: 1}, {From: "treasury", Count: 1}}}},
		{Name: "small", Thresholds: [][]engine.Requirement{{{Count: 2}}, {{From: "treasury", Count: 1}}}},
	},
}}

// testThresholds: a rule met when every requirement of one of its
// alternatives is; one person meets one requirement, never two, and an
// approval that would meet none still short is refused with nothing
// journaled; where each vote counts is journaled with it and in its
// receipt, withdrawn with it, and verified.
func testThresholds(t *testing.T, v *env) {
	ctx := context.Background()
	v.usePolicy(thresholdPolicy)
	seq := v.gateLarge("t", agent)
	if r := v.review("t", seq); r.Tally.Progress() != "0 approvals: finance-leads 0 of 1, treasury 0 of 1; "+
		"waiting for 1 more from finance-leads and 1 more from treasury" {
		t.Errorf("progress before any vote: %q", r.Tally.Progress())
	}
	// alice, in both groups, meets finance-leads (the first) alone.
	d, err := v.e.Approve(ctx, alice, "t", seq, "")
	if err != nil || d.Votes != 1 || d.Quorum != 2 || d.Status != wire.AwaitingApproval {
		t.Fatalf("alice's approval = %+v, %v; want vote 1 of 2, still waiting", d, err)
	}
	rv := v.review("t", seq)
	if rv.State != engine.StateUndecided || rv.Tally.Progress() != "1 approval ("+alice.ID+"): finance-leads 1 of 1 ("+alice.ID+
		"), treasury 0 of 1; waiting for 1 more from treasury" {
		t.Errorf("after alice: %s, %q; want her in finance-leads alone", rv.State, rv.Tally.Progress())
	}
	// erin meets finance-leads only, met already: refused, nothing
	// journaled; carol is in neither group.
	before := len(v.journal("t"))
	_, err = v.e.Approve(ctx, erin, "t", seq, "")
	testkit.WantKind(t, "erin's approval, meeting only a requirement met already", err, engine.Conflict)
	if err == nil || !strings.Contains(err.Error(), "meets no requirement of rule large that is still short") {
		t.Errorf("erin's approval: %v; want it said she meets no requirement still short", err)
	}
	_, err = v.e.Approve(ctx, carol, "t", seq, "")
	testkit.WantKind(t, "carol's approval, in neither group", err, engine.Forbidden)
	if n := len(v.journal("t")); n != before {
		t.Errorf("the refused approvals journaled %d entries", n-before)
	}
	e := wantCode(t, "a resume on one requirement of two", second(v.e.Resume(ctx, agent, "t", seq, large)), engine.Conflict, wire.CodeUndecided)
	if !strings.Contains(e.Msg, "waiting for 1 more from treasury") {
		t.Errorf("the early resume: %q; want it to name the requirement still short", e.Msg)
	}
	// alice withdraws: finance-leads is short again, and erin meets it.
	if _, err := v.e.Withdraw(ctx, alice, "t", seq, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := v.e.Approve(ctx, erin, "t", seq, ""); err != nil {
		t.Fatalf("erin's approval after alice withdrew: %v", err)
	}
	// alice again, now meeting treasury: the quorum stands.
	if d, err = v.e.Approve(ctx, alice, "t", seq, ""); err != nil || d.Votes != 2 || d.Quorum != 2 {
		t.Fatalf("alice's second approval = %+v, %v; want vote 2 of 2", d, err)
	}
	if rv := v.review("t", seq); rv.State != engine.StateApproved {
		t.Errorf("after erin and alice: %s, %q; want approved", rv.State, rv.Tally.Progress())
	}
	var placed []string
	for _, en := range v.journal("t") {
		if en.ToolName == engine.GateTool && en.Phase == engine.PhaseApproved {
			r, err := engine.OpenReceipt(engine.ReceiptOf(en), testkit.Keys(t).Verifier())
			if err != nil {
				t.Fatal(err)
			}
			placed = append(placed, fmt.Sprintf("%s %s/%s %d/%d", strings.TrimPrefix(en.Field(engine.KeyApprover), "https://idp.example.com#"),
				en.Field(engine.KeyMeets), engine.MeetsText(r.Meets), r.Vote, r.Quorum))
		}
	}
	if want := []string{"alice 1/1 1/2", "erin 1/1 1/2", "alice 2/2 2/2"}; !slices.Equal(placed, want) {
		t.Errorf("the approvals' placements (entry/receipt, vote/quorum) = %q; want %q", placed, want)
	}
	if res, err := v.e.Resume(ctx, agent, "t", seq, large); err != nil || res.Refused {
		t.Fatalf("Resume with both requirements met = %+v, %v", res, err)
	}
	if got := v.verify("t"); !got.Valid {
		t.Errorf("Verify(t) = %+v", got)
	}

	// Alternatives: two approvals, or one from treasury.
	small := `{"amount":"10","to":"bob"}`
	for _, c := range []struct {
		saga   string
		voters []engine.Principal
	}{{"two", []engine.Principal{carol, erin}}, {"treasury", []engine.Principal{bob}}} {
		if _, err := v.e.Call(ctx, agent, c.saga, "reserveInventory", `{"item":"pen"}`); err != nil {
			t.Fatal(err)
		}
		r, err := v.e.Call(ctx, agent, c.saga, "sendWireTransfer", small)
		if err != nil || r.Outcome != engine.OutcomeAwaitingApproval {
			t.Fatalf("Call(small) in %s = %+v, %v", c.saga, r, err)
		}
		for i, p := range c.voters {
			if _, err := v.e.Approve(ctx, p, c.saga, r.Seq, ""); err != nil {
				t.Fatalf("%s: approval %d by %s: %v", c.saga, i+1, p.ID, err)
			}
			if rv, met := v.review(c.saga, r.Seq), i == len(c.voters)-1; (rv.State == engine.StateApproved) != met {
				t.Fatalf("%s: after approval %d by %s: %s, %q; want the quorum met by the last", c.saga, i+1, p.ID, rv.State, rv.Tally.Progress())
			}
		}
		if res, err := v.e.Resume(ctx, agent, c.saga, r.Seq, small); err != nil || res.Refused {
			t.Fatalf("%s: Resume = %+v, %v", c.saga, res, err)
		}
		if got := v.verify(c.saga); !got.Valid {
			t.Errorf("Verify(%s) = %+v", c.saga, got)
		}
	}
}

// testThresholdRace: the last requirement's approvals race on two
// engines: one meets it, the others are refused, and nothing runs twice.
func testThresholdRace(t *testing.T, newHarness func(*testing.T) storetest.Harness) {
	ctx := context.Background()
	v := newEnv(t, newHarness)
	v.usePolicy(thresholdPolicy)
	e2, _ := v.engine(v.open(), v.fx.tools()...)
	engines := []*engine.Engine{v.e, e2}
	for round := range 50 {
		saga := fmt.Sprintf("race-%d", round)
		seq := v.gateLarge(saga, agent)
		if _, err := engines[round%2].Approve(ctx, erin, saga, seq, ""); err != nil {
			t.Fatal(err)
		}
		// alice and bob both meet treasury, the requirement left; erin
		// again is one person counted once.
		if approved, conflicts := race(t, engines, round, saga, seq, "", alice, bob, erin, alice, bob); approved != 1 || conflicts != 4 {
			t.Fatalf("round %d: %d approvals accepted, %d refused; want 1 and 4", round, approved, conflicts)
		}
		if rv := v.review(saga, seq); rv.State != engine.StateApproved || len(rv.Tally.Votes) != 2 {
			t.Fatalf("round %d: %s, %q; want approved by two", round, rv.State, rv.Tally.Progress())
		}
		if got := v.verify(saga); !got.Valid {
			t.Fatalf("round %d: Verify = %+v", round, got)
		}
	}
}
