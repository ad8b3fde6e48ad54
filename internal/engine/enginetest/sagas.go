package enginetest

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/sagacity-go/sagacity/internal/engine"
	"github.com/sagacity-go/sagacity/internal/testkit"
	"github.com/sagacity-go/sagacity/wire"
)

func testFinishedSaga(t *testing.T, v *env) {
	ctx := context.Background()
	seq := v.gate("s")
	v.approve("s", seq)
	if _, err := v.e.Resume(ctx, approver, "s", seq, transfer); err != nil {
		t.Fatal(err)
	}
	if _, err := v.e.End(ctx, agent, "s"); err != nil {
		t.Fatal(err)
	}
	if st := v.status("s"); st != wire.Completed {
		t.Fatalf("status = %s, want COMPLETED", st)
	}
	_, err := v.e.Approve(ctx, approver, "s", seq, "")
	testkit.WantKind(t, "Approve on a completed saga", err, engine.NotFound)
	_, err = v.e.Reject(ctx, approver, "s", seq, "")
	testkit.WantKind(t, "Reject on a completed saga", err, engine.NotFound)
	// A resume of the request it executed runs nothing and answers what
	// came of it.
	if res, err := v.e.Resume(ctx, approver, "s", seq, transfer); err != nil || res.Call.Outcome != engine.OutcomeExecuted ||
		res.Result != "transfer-ok" || res.Status != wire.Completed {
		t.Errorf("Resume on a completed saga = %+v, %v; want the execution's outcome, the saga COMPLETED", res, err)
	}
	_, err = v.e.Call(ctx, agent, "s", "reserveInventory", "{}")
	testkit.WantKind(t, "Call on a completed saga", err, engine.Conflict)
	_, err = v.e.Abort(ctx, agent, "s", "")
	testkit.WantKind(t, "Abort on a completed saga", err, engine.Conflict)
	_, err = v.e.End(ctx, agent, "s")
	testkit.WantKind(t, "End on a completed saga", err, engine.Conflict)
	if n := v.fx.count("undo reserveInventory reserved"); n != 0 || v.fx.transfer.Load() != 1 {
		t.Errorf("reserve undone %d times, wire ran %d times; want 0 and 1", n, v.fx.transfer.Load())
	}
}

func testCompensation(t *testing.T, v *env) {
	v.call("s", "reserveInventory", `{"item":"laptop"}`)
	v.call("s", "createOrder", `{"sku":"SKU-9"}`)
	r := v.call("s", "scheduleShipment", `{"carrier":"any"}`)
	if r.Outcome != engine.OutcomeFailed || r.Error != "no carrier available" || r.Status != wire.Compensated || r.Seq != 5 {
		t.Errorf("failed Call = %+v, want COMPENSATED with the tool's error at seq 5", r)
	}
	want := []string{"reserveInventory INTENT", "reserveInventory EXECUTED", "createOrder INTENT", "createOrder EXECUTED",
		"scheduleShipment INTENT", "scheduleShipment FAILED", "createOrder COMPENSATED", "reserveInventory COMPENSATED"}
	if diff := cmp.Diff(want, v.phases("s")); diff != "" {
		t.Errorf("journal (-want +got):\n%s", diff)
	}
	if got := v.journal("s")[5].Payload; got != "no carrier available" {
		t.Errorf("FAILED payload = %q, want the tool's error", got)
	}
	wantFx := []string{`exec reserveInventory {"item":"laptop"}`, `exec createOrder {"sku":"SKU-9"}`,
		`exec scheduleShipment {"carrier":"any"}`, "undo createOrder order-1", "undo reserveInventory reserved"}
	if diff := cmp.Diff(wantFx, v.fx.Log()); diff != "" {
		t.Errorf("effects (-want +got):\n%s", diff)
	}
	s, _ := v.e.Lookup(context.Background(), auditor, "s")
	if s.Reason != "tool scheduleShipment failed: no carrier available" {
		t.Errorf("saga reason = %q, want the failure", s.Reason)
	}
}

func testCompensationFailure(t *testing.T, v *env) {
	v.call("s", "reserveInventory", `{"item":"laptop"}`)
	v.call("s", "chargeCard", `{"cents":100}`)
	v.call("s", "createOrder", `{"sku":"SKU-9"}`)
	r := v.call("s", "scheduleShipment", "{}")
	if r.Outcome != engine.OutcomeFailed || r.Status != wire.CompensationFailed {
		t.Errorf("failed Call = %+v, want COMPENSATION_FAILED", r)
	}
	want := []string{"reserveInventory INTENT", "reserveInventory EXECUTED", "chargeCard INTENT", "chargeCard EXECUTED",
		"createOrder INTENT", "createOrder EXECUTED", "scheduleShipment INTENT", "scheduleShipment FAILED",
		"createOrder COMPENSATED", "chargeCard COMPENSATION_FAILED", "reserveInventory COMPENSATED"}
	if diff := cmp.Diff(want, v.phases("s")); diff != "" {
		t.Errorf("journal (-want +got):\n%s", diff)
	}
	if got := v.journal("s")[9].Payload; got != "card processor down" {
		t.Errorf("COMPENSATION_FAILED payload = %q, want the undo's error", got)
	}
	if n := v.fx.count("undo reserveInventory reserved"); n != 1 {
		t.Errorf("reserve undone %d times, want 1: a failed undo must not stop earlier ones", n)
	}
}

func testPanic(t *testing.T, v *env) {
	v.call("s", "reserveInventory", "{}")
	r := v.call("s", "explode", "{}")
	if r.Outcome != engine.OutcomeFailed || r.Error != "tool panicked: boom" {
		t.Errorf("Call(explode) = %+v, want COMPENSATED with the panic as the error", r)
	}
	want := []string{"reserveInventory INTENT", "reserveInventory EXECUTED", "explode INTENT", "explode FAILED", "reserveInventory COMPENSATED"}
	if diff := cmp.Diff(want, v.phases("s")); diff != "" {
		t.Errorf("journal (-want +got):\n%s", diff)
	}
}

func testAbortAndEnd(t *testing.T, v *env) {
	ctx := context.Background()
	v.call("a", "reserveInventory", "{}")
	v.call("a", "createOrder", "{}")
	s, err := v.e.Abort(ctx, agent, "a", "user cancelled")
	if err != nil || s.Status != wire.Compensated || s.Reason != "aborted by agent-1: user cancelled" {
		t.Errorf("Abort = %+v, %v; want COMPENSATED with the reason", s, err)
	}
	if got := v.fx.Log()[2:]; !cmp.Equal(got, []string{"undo createOrder order-1", "undo reserveInventory reserved"}) {
		t.Errorf("undo after Abort = %v, want createOrder then reserveInventory", got)
	}

	seq := v.gate("e")
	s, err = v.e.End(ctx, agent, "e")
	if err != nil || s.Status != wire.AwaitingApproval || !s.Ended {
		t.Errorf("End with a pending request = %+v, %v; want AWAITING_APPROVAL", s, err)
	}
	_, err = v.e.Call(ctx, agent, "e", "reserveInventory", "{}")
	testkit.WantKind(t, "Call after End", err, engine.Conflict)
	v.approve("e", seq)
	if res, err := v.e.Resume(ctx, approver, "e", seq, transfer); err != nil || res.Status != wire.Completed {
		t.Errorf("last Resume = %+v, %v; want the saga COMPLETED", res, err)
	}

	v.call("r", "reserveInventory", "{}")
	if s, err := v.e.End(ctx, agent, "r"); err != nil || s.Status != wire.Completed {
		t.Errorf("End = %+v, %v; want COMPLETED", s, err)
	}
}

func testSagaFunc(t *testing.T, v *env) {
	ctx := context.Background()
	s, err := v.e.Saga(ctx, agent, "ok", func(r *engine.Run) error {
		if _, err := r.Call("reserveInventory", "{}"); err != nil {
			return err
		}
		msg, err := r.Call("sendWireTransfer", transfer)
		if err != nil || msg != engine.AwaitingMessage("sendWireTransfer") {
			return fmt.Errorf("gated call = %q, %w", msg, err)
		}
		return nil
	})
	if err != nil || s.Status != wire.AwaitingApproval {
		t.Errorf("Saga(gated) = %+v, %v; want AWAITING_APPROVAL", s, err)
	}
	s, err = v.e.Saga(ctx, agent, "fails", func(r *engine.Run) error {
		if _, err := r.Call("reserveInventory", "{}"); err != nil {
			return err
		}
		_, err := r.Call("scheduleShipment", "{}")
		return err
	})
	if err != nil || s.Status != wire.Compensated {
		t.Errorf("Saga(failing tool) = %+v, %v; want COMPENSATED", s, err)
	}
	s, err = v.e.Saga(ctx, agent, "gives-up", func(r *engine.Run) error {
		if _, err := r.Call("createOrder", "{}"); err != nil {
			return err
		}
		return fmt.Errorf("model refused to continue:\nline two")
	})
	if err != nil || s.Status != wire.Compensated || !strings.Contains(s.Reason, "model refused to continue: line two") {
		t.Errorf("Saga(fn error) = %+v, %v; want COMPENSATED with the error as reason", s, err)
	}
	if s, err := v.e.Saga(ctx, agent, "done", func(r *engine.Run) error { _, err := r.Call("createOrder", "{}"); return err }); err != nil || s.Status != wire.Completed {
		t.Errorf("Saga(ok) = %+v, %v; want COMPLETED", s, err)
	}
	if n := v.fx.count("undo createOrder order-1"); n != 1 {
		t.Errorf("createOrder undone %d times, want 1 (only in gives-up)", n)
	}
}

func testListing(t *testing.T, v *env) {
	ctx := context.Background()
	for i := range 5 {
		v.call(fmt.Sprintf("s%d", i), "createOrder", "{}")
	}
	v.gate("w1")
	v.gate("w2")
	all, err := v.e.Sagas(ctx, auditor, engine.SagaFilter{})
	if err != nil || len(all) != 7 || all[0].ID != "w2" || all[6].ID != "s0" {
		t.Fatalf("Sagas() = %d sagas (%v), want 7 newest first", len(all), err)
	}
	var paged []string
	f := engine.SagaFilter{Limit: 3}
	for range 4 {
		page, err := v.e.Sagas(ctx, auditor, f)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range page {
			paged = append(paged, s.ID)
		}
		if len(page) < 3 {
			break
		}
		last := page[len(page)-1]
		f.After = &engine.SagaCursor{CreatedAt: last.CreatedAt, ID: last.ID}
	}
	if want := []string{"w2", "w1", "s4", "s3", "s2", "s1", "s0"}; !cmp.Equal(paged, want) {
		t.Errorf("paged listing = %v, want %v", paged, want)
	}
	awaiting, _ := v.e.Sagas(ctx, auditor, engine.SagaFilter{Status: wire.AwaitingApproval})
	if len(awaiting) != 2 {
		t.Errorf("Sagas(AWAITING_APPROVAL) = %d, want 2", len(awaiting))
	}
	reqs, _ := v.e.Approvals(ctx, approver, "")
	if len(reqs) != 2 || reqs[0].SagaID != "w1" || reqs[1].SagaID != "w2" {
		t.Errorf("Approvals() = %+v, want w1 then w2 (oldest first)", reqs)
	}
	if one, _ := v.e.Approvals(ctx, approver, "w2"); len(one) != 1 {
		t.Errorf("Approvals(w2) = %d, want 1", len(one))
	}
	if none, err := v.e.Approvals(ctx, approver, "nobody"); err != nil || len(none) != 0 {
		t.Errorf("Approvals(unknown) = %v, %v; want empty", none, err)
	}
}
