package enginetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/sagacity-go/sagacity/internal/engine"
	"github.com/sagacity-go/sagacity/internal/store/storetest"
	"github.com/sagacity-go/sagacity/internal/testkit"
	"github.com/sagacity-go/sagacity/wire"
)

// Run runs the scenarios, in parallel, or only those named; a name no
// scenario has fails the test. newHarness must return a fresh, empty
// database each time it is called.
func Run(t *testing.T, newHarness func(t *testing.T) storetest.Harness, only ...string) {
	for _, name := range only {
		if !slices.ContainsFunc(scenarios, func(s scenario) bool { return s.name == name }) {
			t.Errorf("Run(%q): no scenario has that name", name)
		}
	}
	for _, s := range scenarios {
		if len(only) > 0 && !slices.Contains(only, s.name) {
			continue
		}
		t.Run(s.name, func(t *testing.T) {
			t.Parallel()
			s.fn(t, newHarness)
		})
	}
}

// scenario is one scenario by name: most run on an env of their own
// (withEnv), the others make their envs or databases from the harness.
type scenario struct {
	name string
	fn   func(*testing.T, func(*testing.T) storetest.Harness)
}

// withEnv runs f on an env of its own.
func withEnv(f func(*testing.T, *env)) func(*testing.T, func(*testing.T) storetest.Harness) {
	return func(t *testing.T, nh func(*testing.T) storetest.Harness) { f(t, newEnv(t, nh)) }
}

var scenarios = []scenario{
	{"Journal", withEnv(testJournal)},
	{"GateApproveResume", withEnv(testGateApproveResume)},
	{"RefusedResume", testRefusedResume},
	{"Reject", withEnv(testReject)},
	{"FinishedSaga", withEnv(testFinishedSaga)},
	{"Compensation", withEnv(testCompensation)},
	{"CompensationFailure", withEnv(testCompensationFailure)},
	{"GatedThenFailed", withEnv(testGatedThenFailed)},
	{"ResumedToolFails", withEnv(testResumedToolFails)},
	{"Panic", withEnv(testPanic)},
	{"Authorization", withEnv(testAuthorization)},
	{"BadInput", withEnv(testBadInput)},
	{"AbortAndEnd", withEnv(testAbortAndEnd)},
	{"SagaFunc", withEnv(testSagaFunc)},
	{"ConcurrentAppends", withEnv(testConcurrentAppends)},
	{"ConcurrentResumes", testConcurrentResumes},
	{"StalePromises", withEnv(testStalePromises)},
	{"Tampering", withEnv(testTampering)},
	{"Lifecycle", withEnv(testLifecycle)},
	{"VerifyWhileWriting", withEnv(testVerifyWhileWriting)},
	{"Pending", withEnv(testPending)},
	{"Review", withEnv(testReview)},
	{"Resolve", withEnv(testResolve)},
	{"Receipts", withEnv(testReceipts)},
	{"Log", withEnv(testLog)},
	{"LogTamper", testLogTamper},
	{"LogRollback", testLogRollback},
	{"LogHalts", testLogHalts},
	{"SagaRewritten", testSagaRewritten},
	{"Restart", testRestart},
	{"Listing", withEnv(testListing)},
	{"InDoubt", testInDoubt},
	{"IdempotencyKeys", withEnv(testIdempotencyKeys)},
	{"Answers", withEnv(testAnswers)},
	{"CutOff", testCutOff},
	{"LiveRunner", testLiveRunner},
	{"ReadAsItEnds", withEnv(testReadAsItEnds)},
	{"Dismiss", withEnv(testDismiss)},
	{"ApprovalRules", withEnv(testApprovalRules)},
	{"FailsClosed", withEnv(testFailsClosed)},
	{"Votes", withEnv(testVotes)},
	{"Clocks", withEnv(testClocks)},
	{"Lapses", withEnv(testLapses)},
	{"EditedRows", withEnv(testEditedRows)},
	{"PolicyChange", withEnv(testPolicyChange)},
	{"VoteRace", testVoteRace},
	{"Passkeys", withEnv(testPasskeys)},
	{"ForgedSessions", withEnv(testForgedSessions)},
	{"Outbox", withEnv(testOutbox)},
	{"OutboxClaims", withEnv(testOutboxClaims)},
	{"OutboxForged", withEnv(testOutboxForged)},
	{"VerifyAll", withEnv(testVerifyAll)},
	{"UndoneByHand", withEnv(testUndoneByHand)},
	{"SagaActions", withEnv(testSagaActions)},
	{"GroupCommit", withEnv(testGroupCommit)},
}

func testJournal(t *testing.T, v *env) {
	r := v.call("s1", "reserveInventory", `{"item":"laptop"}`)
	want := engine.CallResult{SagaID: "s1", Seq: 1, ToolName: "reserveInventory", Outcome: engine.OutcomeExecuted,
		Result: "reserved", Status: engine.Running}
	if diff := cmp.Diff(want, r); diff != "" {
		t.Errorf("Call result (-want +got):\n%s", diff)
	}
	es := v.journal("s1")
	if len(es) != 2 {
		t.Fatalf("journal has %d entries, want 2", len(es))
	}
	for i, e := range es {
		if e.Seq != int64(i+1) || e.SagaID != "s1" || e.Timestamp.Location() != time.UTC ||
			!e.Timestamp.Equal(e.Timestamp.Truncate(time.Microsecond)) || e.Hash != engine.Hash(prevHash(es, i), e) {
			t.Errorf("entry %d = %+v: want seq %d, UTC µs timestamp and a hash chained on the one before", i, e, i+1)
		}
	}
	if es[0].Phase != engine.PhaseIntent || es[0].Payload != "requester=agent-1\nauth=token" || es[1].Phase != engine.PhaseExecuted ||
		es[1].Payload != "reserved" || es[1].Input != `{"item":"laptop"}` {
		t.Errorf("journal = %+v, want INTENT (naming its requester) then EXECUTED with the input and result", es)
	}
	if got := v.verify("s1"); !got.Valid || got.EntryCount != 2 || got.Message != "all 2 entries verified" {
		t.Errorf("Verify = %+v, want all 2 entries verified", got)
	}
	if got := v.verify("nobody"); got != (engine.Verification{Valid: true, BreakAtIndex: -1, Message: "empty journal"}) {
		t.Errorf("Verify(unknown saga) = %+v, want empty journal", got)
	}
	if es := v.journal("nobody"); len(es) != 0 {
		t.Errorf("Journal(unknown saga) = %v, want empty", es)
	}
	s, err := v.e.Lookup(context.Background(), auditor, "s1")
	if err != nil || s.Initiator != agent.ID || s.HeadSeq != 2 || s.HeadHash != es[1].Hash || s.Status != engine.Running {
		t.Errorf("Lookup(s1) = %+v, %v; want initiator %s, head seq 2 with the last hash, RUNNING", s, err, agent.ID)
	}
	_, err = v.e.Lookup(context.Background(), auditor, "nobody")
	testkit.WantKind(t, "Lookup(unknown)", err, engine.NotFound)
}

func prevHash(es []engine.Entry, i int) string {
	if i == 0 {
		return engine.ZeroHash
	}
	return es[i-1].Hash
}

func testGateApproveResume(t *testing.T, v *env) {
	ctx := context.Background()
	v.call("transfer-77", "reserveInventory", `{"item":"laptop"}`)
	r := v.call("transfer-77", "sendWireTransfer", transfer)
	want := engine.CallResult{SagaID: "transfer-77", Seq: 3, ToolName: "sendWireTransfer", Outcome: engine.OutcomeAwaitingApproval,
		Message:   "[AWAITING_APPROVAL] Tool 'sendWireTransfer' requires human approval before execution.",
		InputHash: "79c2a2413a3be71034f0a649bde0d50c5c3e32d5482db1d21549e82c59653e9b", Status: engine.AwaitingApproval}
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
	if err != nil || !d.Approved || d.Approver != approver.ID || d.JournalSeq != 3 || d.Status != engine.AwaitingApproval {
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
	if err != nil || res.Refused || res.Result != "transfer-ok" || res.Status != engine.Completed {
		t.Fatalf("Resume = %+v, %v; want executed with transfer-ok and the saga COMPLETED", res, err)
	}
	if got := v.fx.count("exec sendWireTransfer " + transfer); got != 1 {
		t.Errorf("wire executed %d times with the approved bytes, want 1", got)
	}
	// A second resume runs nothing, and answers what the first came to.
	if again, err := v.e.Resume(ctx, approver, "transfer-77", 3, transfer); err != nil || again.Refused ||
		again.Call.Outcome != engine.OutcomeExecuted || again.Result != res.Result || again.Status != engine.Completed {
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
	if v.pending("transfer-77") != 0 || v.status("transfer-77") != engine.Completed {
		t.Errorf("after resume: %d pending, status %s; want none and COMPLETED", v.pending("transfer-77"), v.status("transfer-77"))
	}
}

func testRefusedResume(t *testing.T, newHarness func(*testing.T) storetest.Harness) {
	stale := "stale-approval: payload changed since approval was granted\nattempted="
	tests := []struct {
		name    string
		approve bool
		payload string
		detail  string
	}{
		{"whitespace only", true, `{ "amount": "100", "to": "alice" }`, stale + `{ "amount": "100", "to": "alice" }`},
		{"amount changed", true, `{"amount":"999999","to":"mallory"}`, stale + `{"amount":"999999","to":"mallory"}`},
		{"not approved", false, transfer, "no human approval recorded"},
		// Bytes no store keeps as they are are still a refusal, journaled
		// in the reversible encoding.
		{"NUL added", true, transfer + "\x00", stale + engine.EncodeText(transfer+"\x00")},
		{"invalid UTF-8", true, "\xff" + transfer, stale + engine.EncodeText("\xff"+transfer)},
		{"the encoding's prefix", true, engine.EncodedPrefix + transfer, stale + engine.EncodeText(engine.EncodedPrefix+transfer)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			v := newEnv(t, newHarness)
			seq := v.gate("s")
			if tt.approve {
				v.approve("s", seq)
			}
			res, err := v.e.Resume(ctx, approver, "s", seq, tt.payload)
			wantReason, _, _ := strings.Cut(tt.detail, "\n")
			if err != nil || !res.Refused || res.Reason != wantReason || res.Status != engine.Compensated {
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
	if err != nil || d.Approved || d.Approver != approver.ID || d.Status != engine.Compensated {
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
	if st := v.status("s"); st != engine.Completed {
		t.Fatalf("status = %s, want COMPLETED", st)
	}
	_, err := v.e.Approve(ctx, approver, "s", seq, "")
	testkit.WantKind(t, "Approve on a completed saga", err, engine.NotFound)
	_, err = v.e.Reject(ctx, approver, "s", seq, "")
	testkit.WantKind(t, "Reject on a completed saga", err, engine.NotFound)
	// A resume of the request it executed runs nothing and answers what
	// came of it.
	if res, err := v.e.Resume(ctx, approver, "s", seq, transfer); err != nil || res.Call.Outcome != engine.OutcomeExecuted ||
		res.Result != "transfer-ok" || res.Status != engine.Completed {
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
	if r.Outcome != engine.OutcomeFailed || r.Error != "no carrier available" || r.Status != engine.Compensated || r.Seq != 5 {
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
	if r.Outcome != engine.OutcomeFailed || r.Status != engine.CompensationFailed {
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

func testGatedThenFailed(t *testing.T, v *env) {
	ctx := context.Background()
	seq := v.gate("s")
	v.approve("s", seq)
	v.call("s", "scheduleShipment", "{}")
	if v.pending("s") != 0 || v.status("s") != engine.Compensated {
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
	if err != nil || res.Refused || res.Status != engine.Compensated || res.Reason != "payment gateway unreachable" {
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

func testAuthorization(t *testing.T, v *env) {
	ctx := context.Background()
	seq := v.gate("s")
	both := engine.Principal{ID: "agent-1", Auth: "token", Roles: []engine.Role{engine.RoleAgent, engine.RoleApprover}}
	tests := []struct {
		name string
		err  error
		want engine.Kind
	}{
		{"agent approves", second(v.e.Approve(ctx, agent, "s", seq, "")), engine.Forbidden},
		{"auditor approves", second(v.e.Approve(ctx, auditor, "s", seq, "")), engine.Forbidden},
		{"initiator approves own saga", second(v.e.Approve(ctx, both, "s", seq, "")), engine.Forbidden},
		{"initiator rejects own saga", second(v.e.Reject(ctx, both, "s", seq, "")), engine.Forbidden},
		{"another agent calls in the saga", second(v.e.Call(ctx, otherAgent, "s", "reserveInventory", "{}")), engine.Forbidden},
		{"another agent ends the saga", second(v.e.End(ctx, otherAgent, "s")), engine.Forbidden},
		{"another agent aborts the saga", second(v.e.Abort(ctx, otherAgent, "s", "")), engine.Forbidden},
		{"another agent resumes in the saga", second(v.e.Resume(ctx, otherAgent, "s", seq, transfer)), engine.Forbidden},
		{"approver calls a tool", second(v.e.Call(ctx, approver, "s", "reserveInventory", "{}")), engine.Forbidden},
		{"auditor resumes", second(v.e.Resume(ctx, auditor, "s", seq, transfer)), engine.Forbidden},
		{"agent verifies", second(v.e.Verify(ctx, agent, "s")), engine.Forbidden},
		{"nobody", second(v.e.Approve(ctx, engine.Principal{}, "s", seq, "")), engine.Unauthenticated},
		// Another agent's saga names its payees, approvers and sessions.
		{"another agent looks the saga up", second(v.e.Lookup(ctx, otherAgent, "s")), engine.Forbidden},
		{"another agent reads the journal", second(v.e.Journal(ctx, otherAgent, "s")), engine.Forbidden},
		{"another agent reads the history", second(v.e.History(ctx, otherAgent, "s")), engine.Forbidden},
		{"another agent reads the request", second(v.e.Review(ctx, otherAgent, "s", seq)), engine.Forbidden},
		{"another agent reads the requests", third(v.e.Requests(ctx, otherAgent, "s")), engine.Forbidden},
		{"another agent reads a receipt", second(v.e.Receipt(ctx, otherAgent, "s", 1)), engine.Forbidden},
	}
	for _, tt := range tests {
		testkit.WantKind(t, tt.name, tt.err, tt.want)
	}
	if es, err := v.e.Journal(ctx, agent, "s"); err != nil || len(es) != 3 {
		t.Errorf("the initiator reads its journal: %d entries, %v", len(es), err)
	}
	v.call("theirs", "reserveInventory", "{}")
	if _, err := v.e.Call(ctx, otherAgent, "mine", "reserveInventory", "{}"); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		p    engine.Principal
		f    engine.SagaFilter
		want []string
	}{
		{otherAgent, engine.SagaFilter{}, []string{"mine"}},
		{otherAgent, engine.SagaFilter{Initiator: agent.ID}, nil},
		{agent, engine.SagaFilter{}, []string{"theirs", "s"}},
		{auditor, engine.SagaFilter{}, []string{"mine", "theirs", "s"}},
	} {
		var got []string
		sagas, err := v.e.Sagas(ctx, tt.p, tt.f)
		for _, s := range sagas {
			got = append(got, s.ID)
		}
		n, cerr := v.e.CountSagas(ctx, tt.p, tt.f)
		if err != nil || cerr != nil || !slices.Equal(got, tt.want) || n != len(tt.want) {
			t.Errorf("Sagas(%s, %+v) = %v (count %d), %v, %v; want %v", tt.p.ID, tt.f, got, n, err, cerr, tt.want)
		}
	}
	shared, err := engine.New(v.db, v.fx.tools(), engine.WithKeys(testkit.Keys(t)), engine.WithClock(clk.now),
		engine.WithAccess(engine.Access{ShareSagas: true}))
	if err != nil {
		t.Fatal(err)
	}
	if es, err := shared.Journal(ctx, otherAgent, "s"); err != nil || len(es) != 3 {
		t.Errorf("shareSagas: another agent reads the journal: %d entries, %v; want all 3", len(es), err)
	}
	if sagas, err := shared.Sagas(ctx, otherAgent, engine.SagaFilter{}); err != nil || len(sagas) != 3 {
		t.Errorf("shareSagas: another agent lists %d sagas, %v; want all 3", len(sagas), err)
	}
	if v.pending("s") != 1 || len(v.journal("s")) != 3 || v.fx.transfer.Load() != 0 {
		t.Errorf("refused calls changed state: %d pending, %d entries, wire ran %d times", v.pending("s"), len(v.journal("s")), v.fx.transfer.Load())
	}
}

func second[T any](_ T, err error) error { return err }

func third[T, U any](_ T, _ U, err error) error { return err }

func testBadInput(t *testing.T, v *env) {
	ctx := context.Background()
	long := strings.Repeat("x", engine.MaxIDLen+1)
	tests := []struct {
		name string
		err  error
		want engine.Kind
	}{
		{"empty saga id", second(v.e.Call(ctx, agent, "", "reserveInventory", "{}")), engine.Invalid},
		{"long saga id", second(v.e.Call(ctx, agent, long, "reserveInventory", "{}")), engine.Invalid},
		{"control character in saga id", second(v.e.Call(ctx, agent, "a\nb", "reserveInventory", "{}")), engine.Invalid},
		{"input not UTF-8", second(v.e.Call(ctx, agent, "s", "reserveInventory", "\xff\xfe")), engine.Invalid},
		{"input with NUL", second(v.e.Call(ctx, agent, "s", "reserveInventory", "{\"a\":\"\x00\"}")), engine.Invalid},
		{"gated input with NUL", second(v.e.Call(ctx, agent, "s", "sendWireTransfer", "\x00")), engine.Invalid},
		{"input too large", second(v.e.Call(ctx, agent, "s", "reserveInventory", strings.Repeat("x", 1<<20+1))), engine.Invalid},
		{"unknown tool", second(v.e.Call(ctx, agent, "s", "launchMissiles", "{}")), engine.NotFound},
		{"reason with a newline", second(v.e.Abort(ctx, agent, "s", "ok\nauth=oidc")), engine.Invalid},
		{"unknown saga ends", second(v.e.End(ctx, agent, "nope")), engine.NotFound},
		{"unknown saga approved", second(v.e.Approve(ctx, approver, "nope", 1, "")), engine.NotFound},
		{"unknown seq resumed", second(v.e.Resume(ctx, approver, "nope", 99, transfer)), engine.NotFound},
		{"unknown status listed", second(v.e.Sagas(ctx, auditor, engine.SagaFilter{Status: "DONE"})), engine.Invalid},
		{"input not JSON where a schema is", second(v.e.Call(ctx, agent, "s", "payTyped", "cents=5")), engine.Invalid},
		{"input off its schema", second(v.e.Call(ctx, agent, "s", "payTyped", `{"cents":0,"to":"alice"}`)), engine.Invalid},
		{"input with a key its schema refuses", second(v.e.Call(ctx, agent, "s", "payTyped", `{"cents":5,"to":"alice","memo":"x"}`)), engine.Invalid},
		// What parsers read differently, a reviewer could not see as the
		// tool would read it: refused at the gate.
		{"gated input with a name twice", second(v.e.Call(ctx, agent, "s", "sendWireTransfer",
			`{"amount":"1.00","to":"alice"`+strings.Repeat("\n", 60)+`,"amount":"250000"}`)), engine.Invalid},
		{"gated input with a name escaped", second(v.e.Call(ctx, agent, "s", "sendWireTransfer", `{"amount":"1","\u0061mount":"2"}`)), engine.Invalid},
		{"gated input with a name in another case", second(v.e.Call(ctx, agent, "s", "sendWireTransfer", `{"amount":"1","Amount":"2"}`)), engine.Invalid},
		{"gated input with a lone surrogate", second(v.e.Call(ctx, agent, "s", "sendWireTransfer", `{"to":"\ud800"}`)), engine.Invalid},
		{"gated input with a NUL escaped", second(v.e.Call(ctx, agent, "s", "sendWireTransfer", `{"to":"alice\u0000"}`)), engine.Invalid},
		{"input with a name twice", second(v.e.Call(ctx, agent, "s", "reserveInventory", `{"qty":1,"qty":40}`)), engine.Invalid},
		// Saga ids that read as the server's own: refused before anything
		// is stored, whatever the store keeps of them.
		{"a server saga's id", second(v.e.Call(ctx, agent, engine.PasskeySaga, "reserveInventory", "{}")), engine.Invalid},
		{"a server saga's id in another case", second(v.e.Call(ctx, agent, "Sagacity:passkeys", "reserveInventory", "{}")), engine.Invalid},
		{"a server saga's id with a fullwidth colon", second(v.e.Call(ctx, agent, "sagacity：passkeys", "reserveInventory", "{}")), engine.Invalid},
		{"a server saga's id with a ratio sign", second(v.e.Call(ctx, agent, "sagacity∶policies", "reserveInventory", "{}")), engine.Invalid},
		{"a server saga's id percent-encoded", second(v.e.Call(ctx, agent, "sagacity%3Apasskeys", "sendWireTransfer", transfer)), engine.Invalid},
	}
	for _, tt := range tests {
		testkit.WantKind(t, tt.name, tt.err, tt.want)
	}
	sagas, err := v.e.Sagas(ctx, auditor, engine.SagaFilter{})
	if err != nil || len(sagas) != 0 || len(v.fx.Log()) != 0 {
		t.Errorf("after bad input: sagas %v (%v), effects %v; want nothing written or run", sagas, err, v.fx.Log())
	}
	if r := v.call("typed", "payTyped", `{"to":"alice","cents":500}`); r.Outcome != engine.OutcomeAwaitingApproval {
		t.Errorf("Call of payTyped with an input its schema takes = %+v, want it gated", r)
	}
}

func testAbortAndEnd(t *testing.T, v *env) {
	ctx := context.Background()
	v.call("a", "reserveInventory", "{}")
	v.call("a", "createOrder", "{}")
	s, err := v.e.Abort(ctx, agent, "a", "user cancelled")
	if err != nil || s.Status != engine.Compensated || s.Reason != "aborted by agent-1: user cancelled" {
		t.Errorf("Abort = %+v, %v; want COMPENSATED with the reason", s, err)
	}
	if got := v.fx.Log()[2:]; !cmp.Equal(got, []string{"undo createOrder order-1", "undo reserveInventory reserved"}) {
		t.Errorf("undo after Abort = %v, want createOrder then reserveInventory", got)
	}

	seq := v.gate("e")
	s, err = v.e.End(ctx, agent, "e")
	if err != nil || s.Status != engine.AwaitingApproval || !s.Ended {
		t.Errorf("End with a pending request = %+v, %v; want AWAITING_APPROVAL", s, err)
	}
	_, err = v.e.Call(ctx, agent, "e", "reserveInventory", "{}")
	testkit.WantKind(t, "Call after End", err, engine.Conflict)
	v.approve("e", seq)
	if res, err := v.e.Resume(ctx, approver, "e", seq, transfer); err != nil || res.Status != engine.Completed {
		t.Errorf("last Resume = %+v, %v; want the saga COMPLETED", res, err)
	}

	v.call("r", "reserveInventory", "{}")
	if s, err := v.e.End(ctx, agent, "r"); err != nil || s.Status != engine.Completed {
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
			return fmt.Errorf("gated call = %q, %v", msg, err)
		}
		return nil
	})
	if err != nil || s.Status != engine.AwaitingApproval {
		t.Errorf("Saga(gated) = %+v, %v; want AWAITING_APPROVAL", s, err)
	}
	s, err = v.e.Saga(ctx, agent, "fails", func(r *engine.Run) error {
		if _, err := r.Call("reserveInventory", "{}"); err != nil {
			return err
		}
		_, err := r.Call("scheduleShipment", "{}")
		return err
	})
	if err != nil || s.Status != engine.Compensated {
		t.Errorf("Saga(failing tool) = %+v, %v; want COMPENSATED", s, err)
	}
	s, err = v.e.Saga(ctx, agent, "gives-up", func(r *engine.Run) error {
		if _, err := r.Call("createOrder", "{}"); err != nil {
			return err
		}
		return fmt.Errorf("model refused to continue:\nline two")
	})
	if err != nil || s.Status != engine.Compensated || !strings.Contains(s.Reason, "model refused to continue: line two") {
		t.Errorf("Saga(fn error) = %+v, %v; want COMPENSATED with the error as reason", s, err)
	}
	if s, err := v.e.Saga(ctx, agent, "done", func(r *engine.Run) error { _, err := r.Call("createOrder", "{}"); return err }); err != nil || s.Status != engine.Completed {
		t.Errorf("Saga(ok) = %+v, %v; want COMPLETED", s, err)
	}
	if n := v.fx.count("undo createOrder order-1"); n != 1 {
		t.Errorf("createOrder undone %d times, want 1 (only in gives-up)", n)
	}
}

// testConcurrentAppends gates 8×10 calls at once on one saga: each appends
// exactly one entry, so the journal must hold seq 1..80 and verify.
func testConcurrentAppends(t *testing.T, v *env) {
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, 80)
	for g := range 8 {
		wg.Go(func() {
			for i := range 10 {
				if _, err := v.e.Call(ctx, agent, "busy", "sendWireTransfer", fmt.Sprintf(`{"g":%d,"i":%d}`, g, i)); err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("concurrent Call: %v", err)
	}
	es := v.journal("busy")
	if len(es) != 80 {
		t.Fatalf("journal has %d entries, want 80", len(es))
	}
	for i, e := range es {
		if e.Seq != int64(i+1) {
			t.Fatalf("entry %d has seq %d, want %d", i, e.Seq, i+1)
		}
	}
	if got := v.verify("busy"); !got.Valid || got.EntryCount != 80 {
		t.Errorf("Verify = %+v, want 80 entries verified", got)
	}
	if n := v.pending("busy"); n != 80 {
		t.Errorf("%d pending requests, want 80", n)
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
	if len(es) != 9 || v.verify("s").Valid != true {
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
	if s, err := v.e.Lookup(ctx, auditor, "s"); err != nil || !s.Ended || s.Status != engine.AwaitingApproval {
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

// testTampering changes each column of one journal row with SQL, and
// deletes rows, and expects Verify to point at the right entry.
// testTampering is the tamper matrix: each change an insider with write
// access could make to a saga's rows behind the engine's back (every
// column of a journal row, rows deleted, inserted or reordered, the saga's
// head, the pending request) is reported by Verify at the right entry, and
// refused by Resume: Conflict, nothing journaled, the tool not called,
// the request kept.
func testTampering(t *testing.T, v *env) {
	// 4 entries: reserve INTENT, EXECUTED, wire AWAITING_APPROVAL, APPROVED.
	build := func(saga string) {
		v.gate(saga)
		v.approve(saga, 3)
	}
	forged := func(saga string) []any {
		es := v.journal(saga)
		f := engine.Entry{SagaID: saga, Seq: 5, ToolName: engine.GateTool, Phase: engine.PhaseApproved, Input: "seq=3",
			Payload: "approver=mallory", Timestamp: epoch}
		return []any{f.Seq, f.ToolName, f.Phase, f.Input, f.Payload, f.Timestamp, engine.Hash(es[3].Hash, f)}
	}
	mismatch := func(seq, i int) string { return fmt.Sprintf("hash mismatch at seq=%d (entry %d)", seq, i) }
	request := "approval request at seq=3 does not match the journal (entry 2)"
	tests := []struct {
		name    string
		dialect string // "" for both stores
		sql     string
		args    func(saga string) []any
		breakAt int
		msg     string
	}{
		{"saga_id", "", "UPDATE journal SET saga_id = 'other' WHERE saga_id = $1 AND seq = 2", nil, 1, mismatch(3, 1)},
		{"seq", "", "UPDATE journal SET seq = 9 WHERE saga_id = $1 AND seq = 2", nil, 1, mismatch(3, 1)},
		{"tool_name", "", "UPDATE journal SET tool_name = 'releaseInventory' WHERE saga_id = $1 AND seq = 2", nil, 1, mismatch(2, 1)},
		{"phase", "", "UPDATE journal SET phase = 'FAILED' WHERE saga_id = $1 AND seq = 2", nil, 1, mismatch(2, 1)},
		{"input", "", `UPDATE journal SET input = '{"item":"laptops"}' WHERE saga_id = $1 AND seq = 2`, nil, 1, mismatch(2, 1)},
		{"gated input", "", `UPDATE journal SET input = '{"amount":"100","to":"mallory"}' WHERE saga_id = $1 AND seq = 3`, nil, 2, mismatch(3, 2)},
		{"payload", "", "UPDATE journal SET payload = 'approver=mallory' WHERE saga_id = $1 AND seq = 4", nil, 3, mismatch(4, 3)},
		{"timestamp", "", "UPDATE journal SET timestamp = $2 WHERE saga_id = $1 AND seq = 3",
			func(string) []any { return []any{epoch.Add(-time.Hour)} }, 2, mismatch(3, 2)},
		{"timestamp not a time", "", "UPDATE journal SET timestamp = 'infinity' WHERE saga_id = $1 AND seq = 3", nil, 2,
			"unreadable entry at seq=3 (entry 2): column timestamp does not hold a value of its type"},
		{"seq not a number", "sqlite", "UPDATE journal SET seq = 'x' WHERE saga_id = $1 AND seq = 4", nil, 3,
			"unreadable entry at seq=0 (entry 3): column seq does not hold a value of its type"},
		{"hash", "", "UPDATE journal SET hash = $2 WHERE saga_id = $1 AND seq = 2",
			func(string) []any { return []any{engine.ZeroHash} }, 1, mismatch(2, 1)},
		{"first row deleted", "", "DELETE FROM journal WHERE saga_id = $1 AND seq = 1", nil, 0, mismatch(2, 0)},
		{"middle row deleted", "", "DELETE FROM journal WHERE saga_id = $1 AND seq = 2", nil, 1, mismatch(3, 1)},
		{"tail row deleted", "", "DELETE FROM journal WHERE saga_id = $1 AND seq = 4", nil, 3,
			"journal truncated: it ends at seq=3 but the saga's head is seq=4"},
		{"all rows deleted", "", "DELETE FROM journal WHERE saga_id = $1", nil, 0,
			"journal truncated: it ends at seq=0 but the saga's head is seq=4"},
		{"row inserted at the tail", "", "INSERT INTO journal (saga_id, seq, tool_name, phase, input, payload, timestamp, hash)" +
			" VALUES ($1, $2, $3, $4, $5, $6, $7, $8)", forged, 4, "head mismatch at seq=5 (entry 4): the saga records head seq=4 hash="},
		{"first row moved last", "", "UPDATE journal SET seq = 5 WHERE saga_id = $1 AND seq = 1", nil, 0, mismatch(2, 0)},
		{"head seq", "", "UPDATE sagas SET head_seq = 3 WHERE id = $1", nil, 3, "head mismatch at seq=4 (entry 3): the saga records head seq=3"},
		{"head hash", "", "UPDATE sagas SET head_hash = $2 WHERE id = $1",
			func(string) []any { return []any{engine.ZeroHash} }, 3, "head mismatch at seq=4 (entry 3)"},
		{"head seq not a number", "sqlite", "UPDATE sagas SET head_seq = 'x' WHERE id = $1", nil, 4,
			"saga record unreadable: column head_seq does not hold a value of its type"},
		{"request input", "", `UPDATE approval_requests SET input = '{"amount":"100","to":"mallory"}' WHERE saga_id = $1`, nil, 2, request},
		{"request input and hash", "", "UPDATE approval_requests SET input = $2, input_hash = $3 WHERE saga_id = $1",
			func(string) []any {
				return []any{`{"amount":"100","to":"mallory"}`, engine.PayloadHash(`{"amount":"100","to":"mallory"}`)}
			}, 2, request},
		{"request hash emptied", "", "UPDATE approval_requests SET input_hash = '' WHERE saga_id = $1", nil, 2, request},
		{"request tool", "", "UPDATE approval_requests SET tool_name = 'reserveInventory' WHERE saga_id = $1", nil, 2, request},
	}
	v.call("other", "sendWireTransfer", "{}") // one entry: seq 2 is free for the moved row
	for i, tt := range tests {
		if tt.dialect != "" && tt.dialect != v.h.Dialect {
			continue
		}
		t.Run(tt.name, func(t *testing.T) {
			saga := fmt.Sprintf("t%d", i)
			build(saga)
			if got := v.verify(saga); !got.Valid {
				t.Fatalf("Verify before tampering = %+v", got)
			}
			args := []any{saga}
			if tt.args != nil {
				args = append(args, tt.args(saga)...)
			}
			v.h.Exec(t, tt.sql, args...)
			got := v.verify(saga)
			if got.Valid || got.BreakAtIndex != tt.breakAt || !strings.HasPrefix(got.Message, tt.msg) {
				t.Errorf("Verify = %+v, want broken at index %d: %q", got, tt.breakAt, tt.msg)
			}
			before := len(v.journal(saga))
			wires := v.fx.transfer.Load()
			// The tampered request row's bytes, when there is one, or the
			// approved ones: either way nothing runs.
			for _, payload := range []string{transfer, `{"amount":"100","to":"mallory"}`} {
				_, err := v.e.Resume(context.Background(), approver, saga, 3, payload)
				if !engine.IsKind(err, engine.Conflict) && !engine.IsKind(err, engine.NotFound) {
					t.Errorf("Resume(%s) on a tampered saga: error = %v, want a conflict", payload, err)
				}
			}
			if n := len(v.journal(saga)); n != before || v.fx.transfer.Load() != wires {
				t.Errorf("after refusing a tampered saga: %d entries (was %d), wire ran %d more times; want nothing journaled or run",
					n, before, v.fx.transfer.Load()-wires)
			}
		})
	}
}

// testVerifyWhileWriting verifies a saga over and over while calls,
// requests and decisions are written to it: verification reads one
// snapshot, so a journal being written is never reported broken.
func testVerifyWhileWriting(t *testing.T, v *env) {
	ctx := context.Background()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 60 {
			v.call("w", "reserveInventory", fmt.Sprintf(`{"n":%d}`, i))
			if i%10 == 0 {
				v.approve("w", v.call("w", "sendWireTransfer", transfer).Seq)
			}
		}
	}()
	checks, broken := 0, 0
	for running := true; running; checks++ {
		select {
		case <-done:
			running = false
		default:
		}
		got, err := v.e.Verify(ctx, auditor, "w")
		if err != nil {
			t.Fatalf("Verify while writing: %v", err)
		}
		if !got.Valid {
			broken++
			t.Errorf("Verify while writing = %+v, want valid", got)
		}
	}
	if got := v.verify("w"); !got.Valid || got.EntryCount != 132 {
		t.Errorf("Verify after writing = %+v, want all 132 entries verified", got)
	}
	t.Logf("%d verifications while writing, %d false alarms", checks, broken)
}

// testRestart closes the store and opens it again: sagas, journals and
// pending approvals survive and stay resumable.
func testRestart(t *testing.T, newHarness func(*testing.T) storetest.Harness) {
	ctx := context.Background()
	v := newEnv(t, newHarness)
	seq := v.gate("pending")
	v.approve("pending", seq)
	v.gate("unapproved")
	v.call("done", "createOrder", "{}")
	if _, err := v.e.End(ctx, agent, "done"); err != nil {
		t.Fatal(err)
	}
	beforeSagas, _ := v.e.Sagas(ctx, auditor, engine.SagaFilter{})
	beforeJournal := v.journal("pending")
	beforeReqs, _ := v.e.Approvals(ctx, approver, "")
	v.db.Close()

	v.db = v.open()
	v.e, v.log = v.engine(v.db)
	afterSagas, _ := v.e.Sagas(ctx, auditor, engine.SagaFilter{})
	afterReqs, _ := v.e.Approvals(ctx, approver, "")
	if len(beforeSagas) != 3 || len(beforeReqs) != 2 {
		t.Fatalf("before restart: %d sagas, %d requests; want 3 and 2", len(beforeSagas), len(beforeReqs))
	}
	for _, d := range []string{cmp.Diff(beforeSagas, afterSagas), cmp.Diff(beforeJournal, v.journal("pending")), cmp.Diff(beforeReqs, afterReqs)} {
		if d != "" {
			t.Errorf("state changed across restart (-before +after):\n%s", d)
		}
	}
	res, err := v.e.Resume(ctx, approver, "pending", seq, transfer)
	if err != nil || res.Result != "transfer-ok" {
		t.Errorf("Resume after restart = %+v, %v; want executed", res, err)
	}
	if got := v.verify("pending"); !got.Valid {
		t.Errorf("Verify after restart = %+v", got)
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
	awaiting, _ := v.e.Sagas(ctx, auditor, engine.SagaFilter{Status: engine.AwaitingApproval})
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

// testInDoubt leaves a call between INTENT and its outcome, as a crash
// would, and expects it listed, never re-executed.
func testInDoubt(t *testing.T, newHarness func(*testing.T) storetest.Harness) {
	ctx := context.Background()
	v := newEnv(t, newHarness)
	started, release := make(chan struct{}), make(chan struct{})
	doomed := v.h.Open(t)
	hang := engine.Tool{Name: "hang", Executor: engine.Funcs{Exec: func(context.Context, engine.Invocation) (string, error) {
		close(started)
		<-release
		return "too late", nil
	}}}
	e2, err := engine.New(doomed, []engine.Tool{hang}, engine.WithKeys(testkit.Keys(t)), engine.WithClock(clk.now), engine.WithOutcomeRetry(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan engine.CallResult, 1)
	go func() {
		r, err := e2.Call(ctx, agent, "crash", "hang", `{"n":1}`)
		if err != nil {
			t.Errorf("Call whose store went away: %v, want no error: the outcome is IN_DOUBT", err)
		}
		done <- r
	}()
	<-started
	calls, err := v.e.InDoubt(ctx, auditor, 0)
	if err != nil || len(calls) != 1 || calls[0].SagaID != "crash" || calls[0].Seq != 1 || calls[0].State != engine.CallRunning {
		t.Fatalf("InDoubt() while running = %+v, %v; want the hanging call", calls, err)
	}
	doomed.Close() // the process dies before it can journal the outcome
	close(release)
	if r := <-done; r.Outcome != engine.OutcomeInDoubt || r.Status != engine.Running {
		t.Errorf("Call whose store went away = %+v, want outcome IN_DOUBT and the saga's status as its INTENT left it, RUNNING", r)
	}

	calls, err = v.e.InDoubt(ctx, auditor, 0)
	if err != nil || len(calls) != 1 || !calls[0].Unsettled() {
		t.Fatalf("InDoubt() after the crash = %+v, %v; want the call", calls, err)
	}
	if old, _ := v.e.InDoubt(ctx, auditor, time.Hour); len(old) != 0 {
		t.Errorf("InDoubt(older than an hour) = %v, want none", old)
	}
	if got := v.phases("crash"); !cmp.Equal(got, []string{"hang INTENT"}) {
		t.Errorf("journal = %v, want only the INTENT", got)
	}
	if got := v.verify("crash"); !got.Valid {
		t.Errorf("Verify = %+v, want valid", got)
	}
	if st := v.status("crash"); st != engine.Running {
		t.Errorf("status = %s, want RUNNING: the call is in doubt", st)
	}
}
