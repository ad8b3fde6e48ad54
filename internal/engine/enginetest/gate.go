package enginetest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/sagacity-go/sagacity/internal/engine"
	"github.com/sagacity-go/sagacity/internal/store/storetest"
	"github.com/sagacity-go/sagacity/internal/testkit"
	"github.com/sagacity-go/sagacity/wire"
)

func testGateApproveResume(t *testing.T, v *env) {
	ctx := context.Background()
	v.call("transfer-77", "reserveInventory", `{"item":"laptop"}`)
	r := v.call("transfer-77", "sendWireTransfer", transfer)
	want := engine.CallResult{SagaID: "transfer-77", Seq: 3, ToolName: "sendWireTransfer", Outcome: engine.OutcomeAwaitingApproval,
		Message:   "[AWAITING_APPROVAL] Tool 'sendWireTransfer' requires human approval before execution.",
		InputHash: "79c2a2413a3be71034f0a649bde0d50c5c3e32d5482db1d21549e82c59653e9b", Status: wire.AwaitingApproval}
	if diff := cmp.Diff(want, r); diff != "" {
		t.Errorf("gated Call (-want +got):\n%s", diff)
	}
	reqs, err := v.e.Approvals(ctx, approver, "")
	if err != nil || len(reqs) != 1 {
		t.Fatalf("Approvals() = %v, %v; want one request", reqs, err)
	}
	if q := reqs[0]; q.SagaID != "transfer-77" || q.JournalSeq != 3 || q.ToolName != "sendWireTransfer" || q.Input != transfer ||
		q.InputHash != engine.PayloadHash(transfer) {
		t.Errorf("pending request = %+v, want transfer-77 seq 3 with the exact input and its sha256", q)
	}
	d, err := v.e.Approve(ctx, approver, "transfer-77", 3, "")
	if err != nil || !d.Approved || d.Approver != approver.ID || d.JournalSeq != 3 || d.Status != wire.AwaitingApproval {
		t.Fatalf("Approve = %+v, %v; want approved by %s", d, err, approver.ID)
	}
	if v.pending("transfer-77") != 1 || v.fx.transfer.Load() != 0 {
		t.Errorf("after Approve: %d pending, wire ran %d times; want the request still pending and nothing executed",
			v.pending("transfer-77"), v.fx.transfer.Load())
	}
	_, err = v.e.Approve(ctx, approver, "transfer-77", 3, "")
	testkit.WantKind(t, "second Approve", err, engine.Conflict)
	es := v.journal("transfer-77")
	if last := es[len(es)-1]; last.ToolName != engine.GateTool || last.Phase != engine.PhaseApproved ||
		last.Input != "seq=3" || !strings.HasPrefix(last.Payload, "approver=manager@company.com\nauth=oidc\nreceipt=") {
		t.Errorf("APPROVED entry = %+v, want approval-gate, seq=3, approver=manager@company.com and auth=oidc", last)
	}
	if _, err := v.e.End(ctx, agent, "transfer-77"); err != nil {
		t.Fatal(err)
	}
	res, err := v.e.Resume(ctx, approver, "transfer-77", 3, transfer)
	if err != nil || res.Refused || res.Result != "transfer-ok" || res.Status != wire.Completed {
		t.Fatalf("Resume = %+v, %v; want executed with transfer-ok and the saga COMPLETED", res, err)
	}
	if got := v.fx.count("exec sendWireTransfer " + transfer); got != 1 {
		t.Errorf("wire executed %d times with the approved bytes, want 1", got)
	}
	// A second resume runs nothing, and answers what the first came to.
	if again, err := v.e.Resume(ctx, approver, "transfer-77", 3, transfer); err != nil || again.Refused ||
		again.Call.Outcome != engine.OutcomeExecuted || again.Result != res.Result || again.Status != wire.Completed {
		t.Errorf("second Resume = %+v, %v; want the first one's outcome, %q", again, err, res.Result)
	}
	if v.fx.transfer.Load() != 1 {
		t.Errorf("wire executed %d times after a second resume, want 1", v.fx.transfer.Load())
	}
	wantPhases := []string{"reserveInventory INTENT", "reserveInventory EXECUTED", "sendWireTransfer AWAITING_APPROVAL",
		"approval-gate APPROVED", "sendWireTransfer INTENT", "sendWireTransfer EXECUTED"}
	if diff := cmp.Diff(wantPhases, v.phases("transfer-77")); diff != "" {
		t.Errorf("journal (-want +got):\n%s", diff)
	}
	if got := v.verify("transfer-77"); !got.Valid || got.EntryCount != 6 {
		t.Errorf("Verify = %+v, want 6 entries verified", got)
	}
	if v.pending("transfer-77") != 0 || v.status("transfer-77") != wire.Completed {
		t.Errorf("after resume: %d pending, status %s; want none and COMPLETED", v.pending("transfer-77"), v.status("transfer-77"))
	}
}

func testRefusedResume(t *testing.T, newHarness func(*testing.T) storetest.Harness) {
	stale := "stale-approval: payload changed since approval was granted\nattempted="
	tests := []struct {
		name    string
		payload string
		detail  string
	}{
		{"whitespace only", `{ "amount": "100", "to": "alice" }`, stale + `{ "amount": "100", "to": "alice" }`},
		{"amount changed", `{"amount":"999999","to":"mallory"}`, stale + `{"amount":"999999","to":"mallory"}`},
		// Bytes no store keeps as they are are still a refusal, journaled
		// in the reversible encoding.
		{"NUL added", transfer + "\x00", stale + engine.EncodeText(transfer+"\x00")},
		{"invalid UTF-8", "\xff" + transfer, stale + engine.EncodeText("\xff"+transfer)},
		{"the encoding's prefix", engine.EncodedPrefix + transfer, stale + engine.EncodeText(engine.EncodedPrefix+transfer)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			v := newEnv(t, newHarness)
			seq := v.gate("s")
			v.approve("s", seq)
			res, err := v.e.Resume(ctx, approver, "s", seq, tt.payload)
			wantReason, _, _ := strings.Cut(tt.detail, "\n")
			if err != nil || !res.Refused || res.Reason != wantReason || res.Status != wire.Compensated {
				t.Fatalf("Resume = %+v, %v; want refused (%s) and COMPENSATED", res, err, wantReason)
			}
			es := v.journal("s")
			rej := es[len(es)-2]
			if rej.Phase != engine.PhaseRejected || rej.ToolName != "sendWireTransfer" || rej.Input != fmt.Sprintf("seq=%d", seq) || rej.Payload != tt.detail {
				t.Errorf("refusal entry = %+v, want REJECTED by sendWireTransfer, seq=%d, payload %q", rej, seq, tt.detail)
			}
			if attempted, ok := strings.CutPrefix(rej.Payload, stale); ok {
				if got, err := engine.DecodeText(attempted); err != nil || got != tt.payload {
					t.Errorf("DecodeText(attempted) = %q, %v; want the exact bytes presented, %q", got, err, tt.payload)
				}
			}
			if last := es[len(es)-1]; last.Phase != engine.PhaseCompensated || last.ToolName != "reserveInventory" ||
				last.Payload != "compensated effect seq=2" {
				t.Errorf("last entry = %+v, want reserveInventory COMPENSATED effect seq=2", last)
			}
			if v.fx.transfer.Load() != 0 || v.fx.count("undo reserveInventory reserved") != 1 || v.pending("s") != 0 {
				t.Errorf("wire ran %d times, reserve undone %d times, %d pending; want 0, 1, 0",
					v.fx.transfer.Load(), v.fx.count("undo reserveInventory reserved"), v.pending("s"))
			}
			_, err = v.e.Resume(ctx, approver, "s", seq, transfer)
			testkit.WantKind(t, "Resume after refusal", err, engine.NotFound)
			_, err = v.e.Reject(ctx, approver, "s", seq, "")
			testkit.WantKind(t, "Reject after refusal", err, engine.NotFound)
			_, err = v.e.Approve(ctx, approver, "s", seq, "")
			testkit.WantKind(t, "Approve after refusal", err, engine.NotFound)
			if n := v.fx.count("undo reserveInventory reserved"); n != 1 || v.fx.transfer.Load() != 0 {
				t.Errorf("after more attempts: reserve undone %d times, wire ran %d times; want 1 and 0", n, v.fx.transfer.Load())
			}
			if got := v.verify("s"); !got.Valid {
				t.Errorf("Verify = %+v, want valid", got)
			}
		})
	}
}

func testReject(t *testing.T, v *env) {
	ctx := context.Background()
	v.call("s", "reserveInventory", `{"item":"laptop"}`)
	v.call("s", "createOrder", `{"sku":"SKU-9"}`)
	seq := v.call("s", "sendWireTransfer", transfer).Seq
	d, err := v.e.Reject(ctx, approver, "s", seq, "amount looks wrong")
	if err != nil || d.Approved || d.Approver != approver.ID || d.Status != wire.Compensated {
		t.Fatalf("Reject = %+v, %v; want rejected by %s and COMPENSATED", d, err, approver.ID)
	}
	wantPhases := []string{"reserveInventory INTENT", "reserveInventory EXECUTED", "createOrder INTENT", "createOrder EXECUTED",
		"sendWireTransfer AWAITING_APPROVAL", "approval-gate REJECTED", "createOrder COMPENSATED", "reserveInventory COMPENSATED"}
	if diff := cmp.Diff(wantPhases, v.phases("s")); diff != "" {
		t.Errorf("journal (-want +got):\n%s", diff)
	}
	es := v.journal("s")
	if got := es[5].Payload; !strings.HasPrefix(got, "approver=manager@company.com\nreason=amount looks wrong\nauth=oidc\nreceipt=") {
		t.Errorf("REJECTED payload = %q, want approver, reason and auth lines", got)
	}
	if es[6].Payload != "compensated effect seq=4" || es[7].Payload != "compensated effect seq=2" {
		t.Errorf("COMPENSATED payloads = %q, %q; want effect seq=4 then seq=2", es[6].Payload, es[7].Payload)
	}
	wantUndo := []string{"undo createOrder order-1", "undo reserveInventory reserved"}
	if diff := cmp.Diff(wantUndo, v.fx.Log()[2:]); diff != "" {
		t.Errorf("effects after reject (-want +got):\n%s", diff)
	}
	_, err = v.e.Reject(ctx, approver, "s", seq, "")
	testkit.WantKind(t, "second Reject", err, engine.NotFound)
	_, err = v.e.Resume(ctx, approver, "s", seq, transfer)
	testkit.WantKind(t, "Resume after Reject", err, engine.NotFound)
	if len(v.fx.Log()) != 4 || v.fx.transfer.Load() != 0 {
		t.Errorf("effects = %v; want no second compensation and no wire", v.fx.Log())
	}
}

func testGatedThenFailed(t *testing.T, v *env) {
	ctx := context.Background()
	seq := v.gate("s")
	v.approve("s", seq)
	v.call("s", "scheduleShipment", "{}")
	if v.pending("s") != 0 || v.status("s") != wire.Compensated {
		t.Errorf("after a failure: %d pending, status %s; want none pending and COMPENSATED", v.pending("s"), v.status("s"))
	}
	want := []string{"reserveInventory INTENT", "reserveInventory EXECUTED", "sendWireTransfer AWAITING_APPROVAL",
		"approval-gate APPROVED", "scheduleShipment INTENT", "scheduleShipment FAILED", "sendWireTransfer REJECTED",
		"reserveInventory COMPENSATED"}
	if diff := cmp.Diff(want, v.phases("s")); diff != "" {
		t.Errorf("journal: the failure drops the approved request with an entry (-want +got):\n%s", diff)
	}
	if r := v.review("s", seq); r.State != engine.StateDropped || r.Dropped == nil || r.Dropped.Payload != "dropped=tool scheduleShipment failed: no carrier available" {
		t.Errorf("Review of the dropped request: %s, dropped by %+v; want dropped, saying why", r.State, r.Dropped)
	}
	_, err := v.e.Resume(ctx, approver, "s", seq, transfer)
	testkit.WantKind(t, "Resume after the saga failed", err, engine.NotFound)
	if v.fx.transfer.Load() != 0 {
		t.Errorf("wire ran %d times after compensation, want 0", v.fx.transfer.Load())
	}
}

func testResumedToolFails(t *testing.T, v *env) {
	ctx := context.Background()
	v.call("s", "reserveInventory", `{"item":"laptop"}`)
	seq := v.call("s", "wireViaDownGateway", transfer).Seq
	v.approve("s", seq)
	res, err := v.e.Resume(ctx, approver, "s", seq, transfer)
	if err != nil || res.Refused || res.Status != wire.Compensated || res.Reason != "payment gateway unreachable" {
		t.Fatalf("Resume = %+v, %v; want executed, failed with the gateway's error, COMPENSATED", res, err)
	}
	want := []string{"reserveInventory INTENT", "reserveInventory EXECUTED", "wireViaDownGateway AWAITING_APPROVAL",
		"approval-gate APPROVED", "wireViaDownGateway INTENT", "wireViaDownGateway FAILED", "reserveInventory COMPENSATED"}
	if diff := cmp.Diff(want, v.phases("s")); diff != "" {
		t.Errorf("journal (-want +got):\n%s", diff)
	}
	if n := v.fx.count("undo reserveInventory reserved"); n != 1 {
		t.Errorf("reserve undone %d times, want 1", n)
	}
}

// testStalePromises: an engine writes a saga on the promise that it is as
// the engine last wrote it; when another engine (another server) wrote it
// since, the promise breaks, nothing of it is kept, and the call is made
// on the saga as it is: the chain holds, and a saga another server ended
// takes no more calls.
func testStalePromises(t *testing.T, v *env) {
	ctx := context.Background()
	other, _ := v.engine(v.open())
	v.call("s", "reserveInventory", `{"n":1}`) // this engine knows s now
	for i := range 2 {
		if _, err := other.Call(ctx, agent, "s", "reserveInventory", fmt.Sprintf(`{"m":%d}`, i)); err != nil {
			t.Fatal(err)
		}
	}
	v.call("s", "reserveInventory", `{"n":2}`)
	v.call("s", "sendWireTransfer", transfer)
	es := v.journal("s")
	if len(es) != 9 || !v.verify("s").Valid {
		t.Fatalf("journal of %d entries, verify %+v; want 9 chained entries", len(es), v.verify("s"))
	}
	for i, e := range es {
		if e.Seq != int64(i+1) {
			t.Fatalf("entry %d has seq %d", i, e.Seq)
		}
	}
	if _, err := other.End(ctx, agent, "s"); err != nil {
		t.Fatal(err)
	}
	_, err := v.e.Call(ctx, agent, "s", "reserveInventory", `{"n":3}`)
	testkit.WantKind(t, "Call on a saga another engine ended", err, engine.Conflict)
	if n := len(v.journal("s")); n != 9 {
		t.Errorf("journal has %d entries after a refused call, want 9", n)
	}
	if s, err := v.e.Lookup(ctx, auditor, "s"); err != nil || !s.Ended || s.Status != wire.AwaitingApproval {
		t.Errorf("Lookup(s) = %+v, %v; want ended, awaiting approval", s, err)
	}
}

// testConcurrentResumes races 16 resumes of one approved request across
// two engines on two handles (two processes sharing the database), 100
// times; the tool must run exactly once each time.
func testConcurrentResumes(t *testing.T, newHarness func(*testing.T) storetest.Harness) {
	ctx := context.Background()
	v := newEnv(t, newHarness)
	e2, _ := v.engine(v.open(), v.fx.tools()...)
	engines := []*engine.Engine{v.e, e2}
	for rep := range 100 {
		saga := fmt.Sprintf("race-%d", rep)
		before := v.fx.transfer.Load()
		seq := v.gate(saga)
		v.approve(saga, seq)
		var wg sync.WaitGroup
		var mu sync.Mutex
		outcomes := map[string]int{}
		for i := range 16 {
			wg.Go(func() {
				res, err := engines[i%2].Resume(ctx, approver, saga, seq, transfer)
				key := "executed"
				switch e, _ := errors.AsType[*engine.Error](err); {
				case e != nil && e.Code == wire.CodeInProgress:
					key = "in progress"
				case err != nil:
					key = engine.KindOf(err).String()
				case res.Refused || res.Result != "transfer-ok":
					key = "refused or otherwise"
				}
				mu.Lock()
				outcomes[key]++
				mu.Unlock()
			})
		}
		wg.Wait()
		// Each resume that came after the one that ran it is told what
		// became of it: still running, or executed with its result.
		if runs := v.fx.transfer.Load() - before; runs != 1 || outcomes["executed"] < 1 || outcomes["executed"]+outcomes["in progress"] != 16 {
			t.Fatalf("rep %d: wire ran %d times, outcomes %v; want exactly 1 execution, the others answered it", rep, runs, outcomes)
		}
	}
}
