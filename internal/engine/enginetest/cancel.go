package enginetest

import (
	"context"
	"strings"
	"testing"

	"github.com/sagacity-go/sagacity/evidence"
	"github.com/sagacity-go/sagacity/internal/engine"
	"github.com/sagacity-go/sagacity/internal/testkit"
	"github.com/sagacity-go/sagacity/wire"
)

// testCancel: the requester, and only the requester, cancels a pending
// request (an MCP task cancelled): journaled with its receipt, the saga
// goes on and nothing is compensated, a wait held on it ends, a resume of
// it is told so; once executed it cannot be cancelled; verification, on
// the server and offline, refuses a cancellation by anyone else.
func testCancel(t *testing.T, v *env) {
	ctx := context.Background()
	v.listen(v.e)
	seq := v.gate("c")
	held := awaiting(v.e, agent, "c", seq)
	waitHeld(t, v.e, 1)
	for _, p := range []engine.Principal{approver, otherAgent} {
		testkit.WantKind(t, "a cancellation by "+p.ID, second(v.e.Cancel(ctx, p, "c", seq, "")), engine.Forbidden)
	}
	d, err := v.e.Cancel(ctx, agent, "c", seq, "the customer called it off")
	if err != nil || d.Decided != engine.DecidedCancelled || d.Status != wire.Running || d.Approver != agent.ID {
		t.Fatalf("the requester's cancellation = %+v, %v; want cancelled, the saga running", d, err)
	}
	if r := <-held; r.State != engine.StateCancelled || r.Cancellation == nil || r.Cancellation.Reason != "the customer called it off" {
		t.Errorf("the wait held on it = %s (%+v); want it ended, cancelled with the reason", r.State, r.Cancellation)
	}
	if v.pending("c") != 0 || v.fx.count("undo reserveInventory reserved") != 0 || v.status("c") != wire.Running {
		t.Errorf("after the cancellation: %d pending, %d compensations, status %s; want none, none, RUNNING",
			v.pending("c"), v.fx.count("undo reserveInventory reserved"), v.status("c"))
	}
	if e := wantCode(t, "a resume of a cancelled request", second(v.e.Resume(ctx, agent, "c", seq, transfer)), engine.NotFound, ""); !strings.Contains(e.Msg, "cancelled at seq=") {
		t.Errorf("a resume of a cancelled request: %q; want it to say it was cancelled", e.Msg)
	}
	if got := v.verify("c"); !got.Valid {
		t.Errorf("Verify(c) = %+v", got)
	}
	if r := v.call("c", "sendWireTransfer", `{"amount":"90","to":"alice"}`); r.Outcome != engine.OutcomeAwaitingApproval {
		t.Errorf("the saga's next call = %+v; want it gated: the saga went on", r)
	}

	// Offline: a cancellation journaled as someone else's is refused.
	journal := v.journal("c")
	cancelled := journal[d.Receipt-1]
	cancelled.Payload = strings.Replace(cancelled.Payload, "cancelled-by="+agent.ID, "cancelled-by="+approver.ID, 1)
	journal[d.Receipt-1] = cancelled
	if _, got := evidence.ReadLifecycle(journal); got.Valid || !strings.Contains(got.Message, "who did not make it") {
		t.Errorf("ReadLifecycle with a cancellation by another = %+v; want it refused", got)
	}

	// Executed: no longer cancellable.
	seq = v.gate("ran")
	v.approve("ran", seq)
	if res, err := v.e.Resume(ctx, agent, "ran", seq, transfer); err != nil || res.Call.Outcome != engine.OutcomeExecuted {
		t.Fatalf("resume = %+v, %v", res, err)
	}
	testkit.WantKind(t, "cancelling an executed request", second(v.e.Cancel(ctx, agent, "ran", seq, "")), engine.NotFound)
}
