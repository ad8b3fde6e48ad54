package enginetest

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/sagacity-go/sagacity/internal/engine"
	"github.com/sagacity-go/sagacity/internal/testkit"
	"github.com/sagacity-go/sagacity/wire"
)

// testLifecycle: the journal alone says what is pending. An insider who
// puts a request row back after the request was resumed, rejected or
// dropped (and the saga's status with it) makes nothing run: the resume
// is refused, nothing is journaled, and verification names the entry that
// closed the request. A saga that fails drops its pending requests with
// an entry each. A request the saga re-planned and whose replacement was
// approved can be neither approved nor executed.
func testLifecycle(t *testing.T, v *env) {
	ctx := context.Background()
	second := engine.Principal{ID: "controller@company.com", Auth: "oidc", Roles: []engine.Role{engine.RoleApprover}}
	// revive writes the request row back as the gate wrote it, and makes
	// the saga wait for it again.
	revive := func(t *testing.T, saga string, seq int64, input string) {
		t.Helper()
		g := v.journal(saga)[seq-1]
		v.h.Exec(t, "INSERT INTO approval_requests (saga_id, journal_seq, tool_name, input, input_hash, requester, created_at, rule, policy)"+
			" VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)", saga, seq, g.ToolName, input, engine.PayloadHash(input), agent.ID, g.Timestamp,
			g.Field(engine.KeyRule), g.Field(engine.KeyPolicy))
		v.h.Exec(t, "UPDATE sagas SET status = 'AWAITING_APPROVAL' WHERE id = $1", saga)
	}
	// refused checks that nothing more runs or is journaled on a revived
	// request, and that verification names the entry that closed it.
	refused := func(t *testing.T, saga string, seq int64, closed string) {
		t.Helper()
		before, wires := len(v.journal(saga)), v.fx.transfer.Load()
		_, err := v.e.Resume(ctx, second, saga, seq, transfer)
		testkit.WantKind(t, "Resume of a revived request", err, engine.Conflict)
		if err == nil || !strings.Contains(err.Error(), "does not verify") {
			t.Errorf("Resume of a revived request: %v; want the journal named as not verifying", err)
		}
		_, err = v.e.Approve(ctx, second, saga, seq, "")
		testkit.WantKind(t, "Approve of a revived request", err, engine.Conflict)
		if n := len(v.journal(saga)); n != before || v.fx.transfer.Load() != wires {
			t.Errorf("after resuming a revived request: %d entries (was %d), %d more wires; want nothing journaled or run",
				n, before, v.fx.transfer.Load()-wires)
		}
		if got := v.verify(saga); got.Valid || !strings.Contains(got.Message, "approval request at seq=3 is pending, but the journal closed it: "+closed) {
			t.Errorf("Verify = %+v, want broken: the request closed %s", got, closed)
		}
	}

	t.Run("resumed", func(t *testing.T) {
		seq := v.gate("resumed")
		v.approve("resumed", seq)
		if _, err := v.e.Resume(ctx, agent, "resumed", seq, transfer); err != nil {
			t.Fatal(err)
		}
		if v.fx.transfer.Load() != 1 {
			t.Fatalf("wire ran %d times, want 1", v.fx.transfer.Load())
		}
		revive(t, "resumed", seq, transfer)
		refused(t, "resumed", seq, "resumed at seq=5 (entry 4)")
	})
	t.Run("rejected", func(t *testing.T) {
		seq := v.gate("rejected")
		v.approve("rejected", seq)
		if _, err := v.e.Reject(ctx, second, "rejected", seq, "changed my mind"); err != nil {
			t.Fatal(err)
		}
		revive(t, "rejected", seq, transfer)
		refused(t, "rejected", seq, "rejected at seq=5 (entry 4)")
	})
	t.Run("dropped", func(t *testing.T) {
		seq := v.gate("dropped")
		v.call("dropped", "payTyped", `{"cents":100,"to":"bob"}`)
		if _, err := v.e.Abort(ctx, agent, "dropped", "the customer cancelled"); err != nil {
			t.Fatal(err)
		}
		want := []string{"reserveInventory INTENT", "reserveInventory EXECUTED", "sendWireTransfer AWAITING_APPROVAL",
			"payTyped AWAITING_APPROVAL", "sendWireTransfer REJECTED", "payTyped REJECTED", "reserveInventory COMPENSATED"}
		if diff := cmp.Diff(want, v.phases("dropped")); diff != "" {
			t.Errorf("journal after an abort (-want +got):\n%s", diff)
		}
		es := v.journal("dropped")
		if es[4].Input != "seq=3" || es[4].Payload != "dropped=aborted by agent-1: the customer cancelled" || es[5].Input != "seq=4" {
			t.Errorf("drops = %+v, %+v; want each request dropped by seq, saying why", es[4], es[5])
		}
		if got := v.verify("dropped"); !got.Valid {
			t.Errorf("Verify after an abort = %+v", got)
		}
		revive(t, "dropped", seq, transfer)
		refused(t, "dropped", seq, "dropped at seq=5 (entry 4)")
	})
	t.Run("superseded", func(t *testing.T) {
		wires := v.fx.transfer.Load()
		first := v.gate("replanned")
		v.approve("replanned", first)
		replan := `{"amount":"90","to":"alice"}`
		next := v.call("replanned", "sendWireTransfer", replan).Seq
		if r := v.review("replanned", first); r.State != engine.StateApproved {
			t.Errorf("approved request re-planned, before its replacement is approved: %s, want approved", r.State)
		}
		v.approve("replanned", next)
		r := v.review("replanned", first)
		if r.State != engine.StateSuperseded || r.SupersededBy != next || !r.Pending {
			t.Errorf("approved request whose replacement was approved: %s superseded by %d (pending %v); want superseded by %d, pending",
				r.State, r.SupersededBy, r.Pending, next)
		}
		_, err := v.e.Resume(ctx, agent, "replanned", first, transfer)
		testkit.WantKind(t, "Resume of a superseded request", err, engine.Conflict)
		if err == nil || !strings.Contains(err.Error(), "superseded by the saga's request at seq=5") {
			t.Errorf("Resume of a superseded request: %v; want it named superseded", err)
		}
		if v.fx.transfer.Load() != wires || v.status("replanned") != wire.AwaitingApproval {
			t.Errorf("after resuming a superseded request: %d wires, status %s; want none and the saga still waiting",
				v.fx.transfer.Load()-wires, v.status("replanned"))
		}
		if res, err := v.e.Resume(ctx, agent, "replanned", next, replan); err != nil || res.Result != "transfer-ok" {
			t.Errorf("Resume of the replacement = %+v, %v; want it executed", res, err)
		}
		if got := v.verify("replanned"); !got.Valid {
			t.Errorf("Verify = %+v", got)
		}

		// Re-planned before anyone decided: approving the replacement
		// leaves the first undecidable.
		first = v.gate("replanned-early")
		next = v.call("replanned-early", "sendWireTransfer", replan).Seq
		v.approve("replanned-early", next)
		_, err = v.e.Approve(ctx, second, "replanned-early", first, "")
		testkit.WantKind(t, "Approve of a superseded request", err, engine.Conflict)
	})
}
