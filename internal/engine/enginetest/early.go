package enginetest

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/sagacity-go/sagacity/internal/engine"
	"github.com/sagacity-go/sagacity/wire"
)

// testEarlyResume: a resume asked before the request's quorum — how an
// agent polls — runs nothing and changes nothing, whatever bytes it
// presents: the journal, the pending request, its votes and the saga
// stay as they were, nothing is compensated, and the answer (Conflict,
// UNDECIDED) says where the votes stand. Once approved, the same resume
// runs. (Votes holds it for a quorum of two with one vote standing.)
func testEarlyResume(t *testing.T, v *env) {
	ctx := context.Background()
	seq := v.gate("early")
	before := v.journal("early")
	for _, tt := range []struct{ name, payload, says string }{
		{"the bytes asked for", transfer, "0 of 1 approval"},
		{"other bytes", `{"amount":"999999","to":"mallory"}`, "not the bytes it asks for (sha256 " + engine.PayloadHash(transfer) + ")"},
	} {
		e := wantCode(t, "a resume with "+tt.name+" before anyone decided", second(v.e.Resume(ctx, agent, "early", seq, tt.payload)),
			engine.Conflict, wire.CodeUndecided)
		if !strings.HasPrefix(e.Msg, engine.RefusedNoApproval+": ") || !strings.Contains(e.Msg, tt.says) || !strings.Contains(e.Msg, "nothing was run or changed") {
			t.Errorf("a resume with %s before anyone decided: %q; want %q…, saying %q and that nothing changed", tt.name, e.Msg, engine.RefusedNoApproval, tt.says)
		}
	}
	wantCode(t, "an execution before anyone decided", second(v.e.Execute(ctx, agent, "early", seq)), engine.Conflict, wire.CodeUndecided)
	if diff := cmp.Diff(before, v.journal("early")); diff != "" {
		t.Errorf("the journal after early resumes (-before +after):\n%s", diff)
	}
	if v.pending("early") != 1 || v.status("early") != wire.AwaitingApproval || v.fx.count("undo reserveInventory reserved") != 0 || v.fx.transfer.Load() != 0 {
		t.Errorf("after early resumes: %d pending, status %s, reserve undone %d times, wire ran %d times; want 1, AWAITING_APPROVAL, 0, 0",
			v.pending("early"), v.status("early"), v.fx.count("undo reserveInventory reserved"), v.fx.transfer.Load())
	}
	v.approve("early", seq)
	if rv := v.review("early", seq); rv.State != engine.StateApproved || !slices.Equal(rv.Tally.Voters(), []string{approver.ID}) {
		t.Errorf("the request after its approval: %s, voters %v; want approved by %s", rv.State, rv.Tally.Voters(), approver.ID)
	}
	if res, err := v.e.Resume(ctx, agent, "early", seq, transfer); err != nil || res.Call.Outcome != engine.OutcomeExecuted || v.fx.transfer.Load() != 1 {
		t.Errorf("the resume once approved = %+v, %v; want it executed once", res, err)
	}
	if got := v.verify("early"); !got.Valid {
		t.Errorf("Verify(early) = %+v", got)
	}
}
