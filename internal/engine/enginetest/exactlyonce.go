package enginetest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/sagacity-go/sagacity/internal/engine"
	"github.com/sagacity-go/sagacity/internal/store/storetest"
	"github.com/sagacity-go/sagacity/internal/testkit"
	"github.com/sagacity-go/sagacity/wire"
)

// wantCode fails unless err is an engine error of kind k and code code,
// and returns what it says (the zero Error when it is not one): a value,
// for the caller to read, not an error to check.
func wantCode(t *testing.T, what string, err error, k engine.Kind, code wire.Code) engine.Error {
	t.Helper()
	e, ok := errors.AsType[*engine.Error](err)
	if !ok || e.Kind != k || e.Code != code {
		t.Errorf("%s: error = %v (kind %v), want kind %v, code %q", what, err, testkit.KindName(err), k, code)
		return engine.Error{}
	}
	return *e
}

// testIdempotencyKeys: a call sent again under its key, with the same
// bytes, answers the first one's outcome and runs nothing; with other
// bytes it is refused, naming the first; keys are the saga's own.
func testIdempotencyKeys(t *testing.T, v *env) {
	ctx := context.Background()
	once := func(saga, tool, input, key string) (engine.CallResult, error) {
		return v.e.CallOnce(ctx, agent, saga, engine.Ask{Tool: tool, Input: input, Key: key})
	}
	in := `{"item":"laptop"}`
	first, err := once("k", "reserveInventory", in, "order-1")
	if err != nil || first.Outcome != engine.OutcomeExecuted || first.Seq != 1 {
		t.Fatalf("first call = %+v, %v; want executed at seq 1", first, err)
	}
	again, err := once("k", "reserveInventory", in, "order-1")
	if err != nil || again != first {
		t.Errorf("the call again under its key = %+v, %v; want the first outcome %+v", again, err, first)
	}
	if n := v.fx.count("exec reserveInventory " + in); n != 1 {
		t.Errorf("reserveInventory ran %d times, want once", n)
	}
	if p := v.journal("k")[0].Payload; p != "requester=agent-1\nauth=token\nkey=order-1" {
		t.Errorf("INTENT payload = %q, want the key journaled on its last line", p)
	}

	entries := len(v.journal("k"))
	e := wantCode(t, "the key with other bytes", second(once("k", "reserveInventory", `{"item":"phone"}`, "order-1")),
		engine.Unprocessable, wire.CodeKeyReused)
	if e.Seq != 1 || !strings.Contains(e.Msg, "seq=1") {
		t.Errorf("the key with other bytes: %+v; want it to name the call at seq=1", e)
	}
	wantCode(t, "the key with another tool", second(once("k", "createOrder", in, "order-1")),
		engine.Unprocessable, wire.CodeKeyReused)
	if n := len(v.journal("k")); n != entries {
		t.Errorf("refused repeats journaled %d entries", n-entries)
	}

	gated, err := once("k", "sendWireTransfer", transfer, "pay-1")
	if err != nil || gated.Outcome != engine.OutcomeAwaitingApproval {
		t.Fatalf("gated call = %+v, %v", gated, err)
	}
	if again, err := once("k", "sendWireTransfer", transfer, "pay-1"); err != nil || again.Seq != gated.Seq ||
		again.Outcome != engine.OutcomeAwaitingApproval || again.InputHash != gated.InputHash || v.pending("k") != 1 {
		t.Errorf("the gated call again = %+v, %v (%d pending); want the first request, still the only one", again, err, v.pending("k"))
	}

	failed, err := once("k", "scheduleShipment", `{"to":"bob"}`, "ship-1")
	if err != nil || failed.Outcome != engine.OutcomeFailed {
		t.Fatalf("failing call = %+v, %v; want the saga compensated", failed, err)
	}
	again, err = once("k", "scheduleShipment", `{"to":"bob"}`, "ship-1")
	if err != nil || again.Outcome != engine.OutcomeFailed || again.Seq != failed.Seq || again.Error != "no carrier available" {
		t.Errorf("the failed call again = %+v, %v; want its failure, as the first call answered it", again, err)
	}
	if n := v.fx.count(`exec scheduleShipment {"to":"bob"}`); n != 1 {
		t.Errorf("scheduleShipment ran %d times, want once", n)
	}
	// The executed call under its key answers as it did, whatever the
	// saga became since.
	if again, err := once("k", "reserveInventory", in, "order-1"); err != nil || again.Outcome != engine.OutcomeExecuted ||
		again.Result != "reserved" || again.Seq != 1 {
		t.Errorf("the executed call again, its saga compensated = %+v, %v; want EXECUTED as it was", again, err)
	}
	if _, err := once("k", "reserveInventory", in, "order-2"); !engine.IsKind(err, engine.Conflict) {
		t.Errorf("a new key on a compensated saga: %v; want Conflict", err)
	}

	// Keys are per saga; a repeat on another's saga is refused as any
	// call there is.
	if r, err := once("k2", "reserveInventory", in, "order-1"); err != nil || r.Seq != 1 || r.Outcome != engine.OutcomeExecuted {
		t.Errorf("the key in another saga = %+v, %v; want a new call", r, err)
	}
	_, err = v.e.CallOnce(ctx, otherAgent, "k2", engine.Ask{Tool: "reserveInventory", Input: in, Key: "order-1"})
	testkit.WantKind(t, "another agent replaying the key", err, engine.Forbidden)
	for _, key := range []string{strings.Repeat("k", engine.MaxKeyLen+1), "a\nb", "café"} {
		_, err := once("k3", "reserveInventory", in, key)
		testkit.WantKind(t, "key "+key[:min(len(key), 8)], err, engine.Invalid)
	}
	if r, err := once("k3", "reserveInventory", in, strings.Repeat("k", engine.MaxKeyLen)); err != nil || r.Outcome != engine.OutcomeExecuted {
		t.Errorf("a key of %d bytes: %+v, %v", engine.MaxKeyLen, r, err)
	}
}

// testCutOff: a call whose server process went away mid-call is in doubt
// at once: listed, answered IN_DOUBT to the agent that sends it again,
// and blocking its saga until a person resolves it; a call that may
// still run is neither.
func testCutOff(t *testing.T, newHarness func(*testing.T) storetest.Harness) {
	ctx := context.Background()
	v := newEnv(t, newHarness)
	const replica = "host-a:/var/lib/sagacity/checkpoints"
	started, release := make(chan struct{}), make(chan struct{})
	ran := 0
	slow := engine.Tool{Name: "slowPayout", Executor: engine.Funcs{Exec: func(context.Context, engine.Invocation) (string, error) {
		ran++
		close(started)
		<-release
		return "paid late", nil
	}}}
	tools := append(v.fx.tools(), slow)
	doomed, _ := v.engine(v.open(), tools...)
	beat, stop := context.WithCancel(ctx)
	defer stop()
	if err := (&engine.Heartbeat{Engine: doomed, Replica: replica, Lineage: v.w, Every: time.Hour}).Start(beat); err != nil {
		t.Fatal(err)
	}
	restarted, _ := v.engine(v.open(), tools...)

	v.call("payout", "reserveInventory", `{"item":"laptop"}`)
	in := `{"to":"alice","cents":100}`
	done := make(chan engine.CallResult, 1)
	go func() {
		r, err := doomed.CallOnce(ctx, agent, "payout", engine.Ask{Tool: "slowPayout", Input: in, Key: "payout-1"})
		if err != nil {
			t.Errorf("the cut-off call: %v", err)
		}
		done <- r
	}()
	<-started

	// Running on a live process: not in doubt, and the saga goes on.
	wantCode(t, "the running call again", second(restarted.CallOnce(ctx, agent, "payout", engine.Ask{Tool: "slowPayout", Input: in, Key: "payout-1"})),
		engine.Conflict, wire.CodeInProgress)
	if calls, err := restarted.InDoubt(ctx, auditor, -1); err != nil || len(calls) != 0 {
		t.Errorf("InDoubt while it runs on a live process = %+v, %v; want none", calls, err)
	}
	if r, err := restarted.Call(ctx, agent, "payout", "createOrder", `{}`); err != nil || r.Outcome != engine.OutcomeExecuted {
		t.Errorf("another call while one runs = %+v, %v; want it executed", r, err)
	}

	// The process is killed, and its replica starts again: the call's
	// runner, which the checkpoint directory names, is retired, and the
	// call in doubt at once.
	if err := (&engine.Heartbeat{Engine: restarted, Replica: replica, Lineage: v.w, Every: time.Hour}).Start(beat); err != nil {
		t.Fatal(err)
	}
	calls, err := restarted.InDoubt(ctx, auditor, -1)
	if err != nil || len(calls) != 1 || calls[0].Seq != 3 || calls[0].ToolName != "slowPayout" {
		t.Fatalf("InDoubt after the restart = %+v, %v; want the cut-off call, at once", calls, err)
	}
	// The retirement is journaled, signed, for every process to read.
	if es := v.journal(engine.RunnerSaga); len(es) != 1 || !engine.Retired(es, testkit.Keys(t).Verifier())[calls[0].Runner] {
		t.Errorf("journal of %s = %+v; want the retirement of the call's runner %s, signed", engine.RunnerSaga, es, calls[0].Runner)
	}
	if got := v.verify(engine.RunnerSaga); !got.Valid {
		t.Errorf("Verify(%s) = %+v", engine.RunnerSaga, got)
	}
	again, err := restarted.CallOnce(ctx, agent, "payout", engine.Ask{Tool: "slowPayout", Input: in, Key: "payout-1"})
	if err != nil || again.Outcome != engine.OutcomeInDoubt || again.Seq != 3 || !strings.Contains(again.Error, "do not call it again") ||
		again.Status != wire.Running {
		t.Errorf("the cut-off call again = %+v, %v; want IN_DOUBT, naming seq 3, with the saga's status", again, err)
	}
	wantCode(t, "the key with other bytes", second(restarted.CallOnce(ctx, agent, "payout", engine.Ask{Tool: "slowPayout", Input: `{"to":"alice","cents":101}`, Key: "payout-1"})),
		engine.Unprocessable, wire.CodeKeyReused)
	blocked := wantCode(t, "a new call", second(restarted.Call(ctx, agent, "payout", "reserveInventory", `{"item":"dock"}`)),
		engine.Conflict, wire.CodeInDoubt)
	if blocked.Seq != 3 || !strings.Contains(blocked.Msg, "resolve") {
		t.Errorf("a new call: %+v; want it to name the call in doubt and what a person must do", blocked)
	}
	if ran != 1 {
		t.Errorf("the tool ran %d times, want once", ran)
	}
	// Reads still work, and so does resolving.
	if s, err := restarted.Lookup(ctx, auditor, "payout"); err != nil || s.Running != 1 {
		t.Errorf("Lookup = %+v, %v; want one call unsettled", s, err)
	}
	if _, err := restarted.Resolve(ctx, approver, "payout", 3, true, "paid", "the payout provider shows it paid"); err != nil {
		t.Fatalf("Resolve: %v", err)
	}
	if s, _ := restarted.Lookup(ctx, auditor, "payout"); s.Running != 0 {
		t.Errorf("after Resolve, %d calls unsettled; want none", s.Running)
	}
	if r, err := restarted.Call(ctx, agent, "payout", "reserveInventory", `{"item":"dock"}`); err != nil || r.Outcome != engine.OutcomeExecuted {
		t.Errorf("a new call once resolved = %+v, %v; want it executed", r, err)
	}
	if again, err := restarted.CallOnce(ctx, agent, "payout", engine.Ask{Tool: "slowPayout", Input: in, Key: "payout-1"}); err != nil ||
		again.Outcome != engine.OutcomeExecuted || again.Result != "paid" {
		t.Errorf("the call again once resolved = %+v, %v; want the resolution's outcome", again, err)
	}

	// The killed process's tool answers at last: a person's word stands.
	close(release)
	if r := <-done; r.Outcome != engine.OutcomeInDoubt || !strings.Contains(r.Error, "resolved") {
		t.Errorf("the late answer = %+v; want it not journaled", r)
	}
	want := []string{"reserveInventory INTENT", "reserveInventory EXECUTED", "slowPayout INTENT", "createOrder INTENT",
		"createOrder EXECUTED", "approval-gate EXECUTED", "reserveInventory INTENT", "reserveInventory EXECUTED"}
	if diff := cmp.Diff(want, v.phases("payout")); diff != "" {
		t.Errorf("journal (-want +got):\n%s", diff)
	}
	if got := v.verify("payout"); !got.Valid {
		t.Errorf("Verify = %+v", got)
	}
}

// testDismiss: a request the saga superseded is marked so in the list,
// cannot be approved, and can be dismissed, which drops only it; a
// rejection ends the saga, and its review says what stays done.
func testDismiss(t *testing.T, v *env) {
	ctx := context.Background()
	controller := engine.Principal{ID: "controller@company.com", Auth: "oidc", Roles: []engine.Role{engine.RoleApprover}}
	first := v.gate("re")
	replan := `{"amount":"90","to":"alice"}`
	next := v.call("re", "sendWireTransfer", replan).Seq
	_, err := v.e.Dismiss(ctx, controller, "re", first, "")
	testkit.WantKind(t, "Dismiss before anything superseded it", err, engine.Conflict)
	v.approve("re", next)

	page, _, err := v.e.Pending(ctx, approver, engine.PendingFilter{SagaID: "re"})
	if err != nil || len(page) != 2 || page[0].SupersededBy != next || page[1].SupersededBy != 0 {
		t.Fatalf("Pending = %+v, %v; want the first superseded by %d, the second not", page, err, next)
	}
	wantCode(t, "Approve of the superseded request", second(v.e.Approve(ctx, controller, "re", first, "")), engine.Conflict, wire.CodeSuperseded)
	_, err = v.e.Dismiss(ctx, controller, "re", next, "")
	testkit.WantKind(t, "Dismiss of the request that stands", err, engine.Conflict)
	_, err = v.e.Dismiss(ctx, agent, "re", first, "")
	testkit.WantKind(t, "Dismiss by the saga's agent", err, engine.Forbidden)

	d, err := v.e.Dismiss(ctx, controller, "re", first, "replaced by the corrected amount")
	if err != nil || d.Approver != controller.ID || d.Status != wire.AwaitingApproval {
		t.Fatalf("Dismiss = %+v, %v; want it recorded, the saga still waiting for its request at %d", d, err, next)
	}
	if r := v.review("re", first); r.State != engine.StateDismissed || r.Dismissal == nil || r.Dismissal.Reason != "replaced by the corrected amount" {
		t.Errorf("the dismissed request: %+v; want dismissed, with the reason", r)
	}
	if es := v.journal("re"); es[len(es)-1].Phase != engine.PhaseRejected || !strings.HasPrefix(es[len(es)-1].Payload, "dismissed-by="+controller.ID) {
		t.Errorf("last entry = %+v; want the gate's REJECTED naming who dismissed it", es[len(es)-1])
	}
	if v.pending("re") != 1 || !v.verify("re").Valid {
		t.Errorf("after Dismiss: %d pending, verification %+v; want the replacement pending and the journal valid", v.pending("re"), v.verify("re"))
	}
	_, err = v.e.Dismiss(ctx, controller, "re", first, "")
	testkit.WantKind(t, "a second Dismiss", err, engine.NotFound)
	if res, err := v.e.Resume(ctx, agent, "re", next, replan); err != nil || res.Result != "transfer-ok" {
		t.Fatalf("Resume of the replacement = %+v, %v", res, err)
	}

	// A rejection: what it undoes and what stays done.
	later := v.call("re", "sendWireTransfer", `{"amount":"5","to":"carol"}`).Seq
	r := v.review("re", later)
	if len(r.WouldUndo) != 1 || r.WouldUndo[0].ToolName != "reserveInventory" || len(r.StaysDone) != 1 || r.StaysDone[0].ToolName != "sendWireTransfer" {
		t.Errorf("review before a rejection: undo %+v, stays done %+v; want the reservation undone and the wire staying done", r.WouldUndo, r.StaysDone)
	}
	if _, err := v.e.Reject(ctx, controller, "re", later, "no more payments"); err != nil {
		t.Fatal(err)
	}
	if st := v.status("re"); st != wire.Compensated || v.fx.transfer.Load() != 1 || v.fx.count("undo reserveInventory reserved") != 1 {
		t.Errorf("after Reject: %s, %d wires, %d undos; want COMPENSATED, the wire done once, the reservation undone",
			st, v.fx.transfer.Load(), v.fx.count("undo reserveInventory reserved"))
	}
}

// testAnswers: every answer about a gated call tells what became of its
// request since. The call sent again under its key, and a resume of a
// request that was executed, run nothing and answer the execution: 409
// IN_PROGRESS while it runs, IN_DOUBT naming how to resolve it once it may
// have taken effect, then its outcome, executed or failed; a resume with
// other bytes than the ones it ran with is refused. A request rejected,
// sent back or whose resume was refused is answered as such.
func testAnswers(t *testing.T, v *env) {
	ctx := context.Background()
	started, release := make(chan struct{}), make(chan struct{})
	slow := engine.Tool{Name: "slowWire", Reversibility: engine.Irreversible, Executor: engine.Funcs{
		Exec: func(context.Context, engine.Invocation) (string, error) {
			close(started)
			<-release
			return "wired", nil
		}}}
	tools := append(v.fx.tools(), slow)
	v.e, v.log = v.engine(v.db, tools...)
	v.opts = []engine.Option{engine.WithInDoubtAfter(time.Nanosecond)}
	impatient, _ := v.engine(v.open(), tools...) // sees a call standing still as in doubt at once
	once := func(e *engine.Engine, saga, tool, input string) (engine.CallResult, error) {
		return e.CallOnce(ctx, agent, saga, engine.Ask{Tool: tool, Input: input, Key: "pay"})
	}
	gate := func(saga, tool, input string) int64 {
		t.Helper()
		v.call(saga, "reserveInventory", `{"item":"laptop"}`)
		r, err := once(v.e, saga, tool, input)
		if err != nil || r.Outcome != engine.OutcomeAwaitingApproval {
			t.Fatalf("%s: the gated call = %+v, %v", saga, r, err)
		}
		return r.Seq
	}

	// While the approved request runs, then once it may have taken
	// effect, then once it did.
	seq := gate("slow", "slowWire", transfer)
	v.approve("slow", seq)
	done := make(chan engine.ResumeResult, 1)
	go func() {
		res, err := v.e.Resume(ctx, approver, "slow", seq, transfer)
		if err != nil {
			t.Errorf("the resume that runs it: %v", err)
		}
		done <- res
	}()
	<-started
	wantCode(t, "the gated call again while it runs", second(once(v.e, "slow", "slowWire", transfer)), engine.Conflict, wire.CodeInProgress)
	wantCode(t, "a resume while it runs", second(v.e.Resume(ctx, approver, "slow", seq, transfer)), engine.Conflict, wire.CodeInProgress)
	wantCode(t, "an execution while it runs", second(v.e.Execute(ctx, approver, "slow", seq)), engine.Conflict, wire.CodeInProgress)
	resolve := fmt.Sprintf("POST /sagacity/in-doubt/slow/%d/resolve", seq+2) // its INTENT, after the approval
	if r, err := once(impatient, "slow", "slowWire", transfer); err != nil || r.Outcome != engine.OutcomeInDoubt || r.Seq != seq ||
		r.Status != wire.Running || !strings.Contains(r.Error, resolve) {
		t.Errorf("the gated call again once it may have run = %+v, %v; want IN_DOUBT at seq %d, naming %s", r, err, seq, resolve)
	}
	if res, err := impatient.Resume(ctx, approver, "slow", seq, transfer); err != nil || res.Call.Outcome != engine.OutcomeInDoubt ||
		!strings.Contains(res.Reason, resolve) {
		t.Errorf("a resume once it may have run = %+v, %v; want IN_DOUBT, naming %s", res, err, resolve)
	}
	close(release)
	first := <-done
	if r, err := once(v.e, "slow", "slowWire", transfer); err != nil || r.Outcome != engine.OutcomeExecuted || r.Seq != seq ||
		r.Result != first.Result || r.Status != first.Status {
		t.Errorf("the gated call again once it ran = %+v, %v; want EXECUTED at seq %d with %q", r, err, seq, first.Result)
	}
	for _, e := range []*engine.Engine{v.e, impatient} {
		if res, err := e.Resume(ctx, approver, "slow", seq, transfer); err != nil || res.Call.Outcome != engine.OutcomeExecuted ||
			res.Result != first.Result || res.Seq != seq {
			t.Errorf("a resume once it ran = %+v, %v; want what the first came to, %+v", res, err, first)
		}
	}
	if res, err := v.e.Execute(ctx, agent, "slow", seq); err != nil || res.Result != first.Result {
		t.Errorf("an execution once it ran = %+v, %v; want what the first came to", res, err)
	}
	testkit.WantKind(t, "a resume with other bytes once it ran", second(v.e.Resume(ctx, approver, "slow", seq, `{"amount":"100","to":"bob"}`)),
		engine.Conflict)
	testkit.WantKind(t, "a resume by another agent", second(v.e.Resume(ctx, otherAgent, "slow", seq, transfer)), engine.Forbidden)

	// An execution that failed.
	seq = gate("down", "wireViaDownGateway", transfer)
	v.approve("down", seq)
	if res, err := v.e.Resume(ctx, approver, "down", seq, transfer); err != nil || res.Call.Outcome != engine.OutcomeFailed {
		t.Fatalf("the resume of a tool that fails = %+v, %v", res, err)
	}
	if r, err := once(v.e, "down", "wireViaDownGateway", transfer); err != nil || r.Outcome != engine.OutcomeFailed ||
		!strings.Contains(r.Error, "payment gateway unreachable") || r.Status != wire.Compensated {
		t.Errorf("the gated call again once its tool failed = %+v, %v; want FAILED, the saga compensated", r, err)
	}
	if res, err := v.e.Resume(ctx, approver, "down", seq, transfer); err != nil || res.Call.Outcome != engine.OutcomeFailed ||
		!strings.Contains(res.Reason, "payment gateway unreachable") {
		t.Errorf("a resume once its tool failed = %+v, %v; want FAILED", res, err)
	}

	// Rejected, sent back, refused.
	seq = gate("no", "sendWireTransfer", transfer)
	if _, err := v.e.Reject(ctx, approver, "no", seq, "not this month"); err != nil {
		t.Fatal(err)
	}
	if e := wantCode(t, "the gated call again once rejected", second(once(v.e, "no", "sendWireTransfer", transfer)), engine.Conflict, ""); !strings.Contains(e.Msg, "rejected at seq=4 by "+approver.ID+" (not this month)") {
		t.Errorf("the gated call again once rejected: %q; want it to say so", e.Msg)
	}
	if e := wantCode(t, "a resume once rejected", second(v.e.Resume(ctx, approver, "no", seq, transfer)), engine.NotFound, ""); !strings.Contains(e.Msg, "rejected at seq=4") {
		t.Errorf("a resume once rejected: %q; want it to say so", e.Msg)
	}
	seq = gate("back", "sendWireTransfer", transfer)
	if _, err := v.e.RequestChanges(ctx, approver, "back", seq, "to bob"); err != nil {
		t.Fatal(err)
	}
	wantCode(t, "the gated call again once sent back", second(once(v.e, "back", "sendWireTransfer", transfer)), engine.Conflict,
		wire.CodeChangesRequested)
	seq = gate("stale", "sendWireTransfer", transfer)
	v.approve("stale", seq)
	if res, err := v.e.Resume(ctx, approver, "stale", seq, `{"amount":"100","to":"bob"}`); err != nil || !res.Refused {
		t.Fatalf("a resume of other bytes = %+v, %v; want it refused", res, err)
	}
	if r, err := once(v.e, "stale", "sendWireTransfer", transfer); err != nil || r.Outcome != engine.OutcomeRefused ||
		!strings.Contains(r.Error, engine.RefusedStale) || r.Status != wire.Compensated {
		t.Errorf("the gated call again once its resume was refused = %+v, %v; want REFUSED, saying why", r, err)
	}
	if n := v.fx.transfer.Load(); n != 0 {
		t.Errorf("sendWireTransfer ran %d times; want never", n)
	}
}
