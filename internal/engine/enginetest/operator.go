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

// What an operator records on both stores: a step whose undo failed,
// undone by hand.

// testUndoneByHand: a person records that they undid by hand a step whose
// undo failed, with why they are sure; it is journaled by the approval
// gate under their identity with a receipt, like a resolution, the
// journal still verifies on the server and offline, and the saga is
// COMPENSATED once every failed undo is accounted for. Four-eyes holds,
// and nothing else of a settled saga can be recorded.
func testUndoneByHand(t *testing.T, v *env) {
	ctx := context.Background()
	both := engine.Principal{ID: agent.ID, Auth: "token", Roles: []engine.Role{engine.RoleAgent, engine.RoleApprover}}
	v.call("s", "reserveInventory", `{"item":"laptop"}`)
	v.call("s", "chargeCard", `{"cents":100}`) // seq 3: its undo fails
	v.call("s", "chargeCard", `{"cents":250}`) // seq 5: its undo fails too
	if r := v.call("s", "scheduleShipment", "{}"); r.Status != wire.CompensationFailed {
		t.Fatalf("the failed call = %+v; want the saga COMPENSATION_FAILED", r)
	}
	for _, tt := range []struct {
		name     string
		p        engine.Principal
		seq      int64
		happened bool
		reason   string
		want     engine.Kind
	}{
		{"by an agent", agent, 3, true, "refunded", engine.Forbidden},
		{"by the initiator, also an approver", both, 3, true, "refunded", engine.Forbidden},
		{"by an auditor", auditor, 3, true, "refunded", engine.Forbidden},
		{"without saying how the person knows", approver, 3, true, "", engine.Invalid},
		{"as not undone, which the journal says already", approver, 3, false, "refunded", engine.Conflict},
		{"of a step that was undone", approver, 1, true, "refunded", engine.Conflict},
		{"of no call", approver, 99, true, "refunded", engine.NotFound},
	} {
		_, err := v.e.Resolve(ctx, tt.p, "s", tt.seq, tt.happened, "", tt.reason)
		testkit.WantKind(t, "Resolve "+tt.name, err, tt.want)
	}
	if got := len(v.journal("s")); got != 11 {
		t.Fatalf("the journal has %d entries after refused records, want 11: nothing refused is journaled", got)
	}

	s, err := v.e.Resolve(ctx, approver, "s", 5, true, "", "refunded 250 in the processor's dashboard, ref R-5")
	if err != nil || s.Status != wire.CompensationFailed {
		t.Fatalf("Resolve(seq 5, undone by hand) = %+v, %v; want the saga still COMPENSATION_FAILED: seq 3's undo failed too", s, err)
	}
	s, err = v.e.Resolve(ctx, approver, "s", 3, true, "", "refunded 100 by hand, ref R-3")
	if err != nil || s.Status != wire.Compensated {
		t.Fatalf("Resolve(seq 3, undone by hand) = %+v, %v; want the saga COMPENSATED", s, err)
	}
	if got := v.status("s"); got != wire.Compensated {
		t.Errorf("status after every failed undo was undone by hand = %s, want COMPENSATED", got)
	}
	es := v.journal("s")
	want := []string{"chargeCard COMPENSATION_FAILED", "chargeCard COMPENSATION_FAILED", "reserveInventory COMPENSATED",
		"approval-gate COMPENSATED", "approval-gate COMPENSATED"}
	if diff := cmp.Diff(want, v.phases("s")[8:]); diff != "" {
		t.Errorf("journal's tail (-want +got):\n%s", diff)
	}
	for i, seq := range []string{"seq=5", "seq=3"} {
		en := es[11+i]
		if en.Input != seq || !strings.HasPrefix(en.Payload, "resolved-by=manager@company.com\nreason=refunded ") ||
			!strings.Contains(en.Payload, "\nauth=oidc\nreceipt=") || en.Actor() != approver.ID {
			t.Errorf("record %d = %+v; want the gate's entry on %s naming the person, why, how they signed in and a receipt", i, en, seq)
		}
	}
	if got := v.verify("s"); !got.Valid || got.EntryCount != 13 {
		t.Errorf("Verify = %+v; want all 13 entries verified", got)
	}
	// Offline, as sagacity verify checks an export: the chain and the
	// lifecycle's rules, and every receipt with the public key alone.
	if got := engine.VerifyJournal(es); !got.Valid {
		t.Errorf("VerifyJournal = %+v, want valid", got)
	}
	if got := engine.VerifyReceipts(es, testkit.Keys(t).Verifier()); !got.Valid {
		t.Errorf("VerifyReceipts = %+v, want valid", got)
	}
	ds := engine.Decisions(es, testkit.Keys(t).Verifier())
	if len(ds) != 2 || ds[0].Decision != engine.DecidedUndone || ds[0].Decider != approver.ID || ds[0].Problem != "" {
		t.Errorf("Decisions = %+v; want two undone by %s, their receipts holding", ds, approver.ID)
	}
	_, err = v.e.Resolve(ctx, approver, "s", 3, true, "", "again")
	testkit.WantKind(t, "Resolve of a step already undone by hand", err, engine.Conflict)

	// The receipt signs the reason: an insider who rewrites it breaks the
	// journal.
	rechain(t, v, "s", func(e *engine.Entry) {
		if e.Seq == 13 {
			e.Payload = strings.Replace(e.Payload, "reason=refunded 100 by hand", "reason=nothing to refund", 1)
		}
	})
	if got := v.verify("s"); got.Valid || !strings.Contains(got.Message, "receipt of seq=13 (entry 12) does not hold: it was signed for another reason") {
		t.Errorf("Verify with the record's reason rewritten = %+v; want its receipt broken", got)
	}
}

// testSagaActions: what the engine offers to do with a saga as a whole,
// to whom: abort it while it takes work (its initiator, or an approver),
// saying what compensating it undoes, what stays done and which requests
// it drops; and, of a saga whose compensation failed, record each failed
// undo as undone by hand (four-eyes, as resolving a call).
func testSagaActions(t *testing.T, v *env) {
	ctx := context.Background()
	both := engine.Principal{ID: agent.ID, Auth: "token", Roles: []engine.Role{engine.RoleAgent, engine.RoleApprover}}
	history := func(saga string) engine.History {
		t.Helper()
		h, err := v.e.History(ctx, auditor, saga)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	seqs := func(cs []engine.Call) []int64 {
		out := []int64{}
		for _, c := range cs {
			out = append(out, c.Seq)
		}
		return out
	}
	seq := v.gate("a") // reserveInventory at seq 1, sendWireTransfer gated at seq 3, approved at 4, run at 5
	v.approve("a", seq)
	if _, err := v.e.Resume(ctx, agent, "a", seq, transfer); err != nil {
		t.Fatal(err)
	}
	v.call("a", "createOrder", `{"sku":"SKU-9"}`)                // seq 7
	v.call("a", "sendWireTransfer", `{"amount":"5","to":"bob"}`) // gated at seq 9
	h := history("a")
	for _, tt := range []struct {
		who string
		p   engine.Principal
		why string
	}{
		{"its initiator", agent, ""},
		{"an approver", approver, ""},
		{"another agent", otherAgent, "You cannot abort this saga: saga a belongs to agent-1; only its initiator may act on it as an agent."},
		{"an auditor", auditor, "You cannot abort this saga: aborting a saga needs the agent or approver role."},
	} {
		got := v.e.SagaAllowed(tt.p, h)
		if got.Abort != (tt.why == "") || got.Why != tt.why {
			t.Errorf("SagaAllowed(%s).Abort = %t, %q; want %t, %q", tt.who, got.Abort, got.Why, tt.why == "", tt.why)
		}
	}
	got := v.e.SagaAllowed(approver, h)
	if diff := cmp.Diff([]int64{7, 1}, seqs(got.WouldUndo)); diff != "" {
		t.Errorf("what aborting undoes (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]int64{5}, seqs(got.StaysDone)); diff != "" { // the resume's INTENT
		t.Errorf("what stays done (-want +got):\n%s", diff)
	}
	if len(got.Dropped) != 1 || got.Dropped[0].JournalSeq != 9 || len(got.Failed) != 0 {
		t.Errorf("SagaAllowed = %+v; want the request at seq 9 dropped and no failed undo", got)
	}
	if _, err := v.e.Abort(ctx, approver, "a", "wrong vendor"); err != nil {
		t.Fatal(err)
	}
	if got := v.e.SagaAllowed(approver, history("a")); got.Abort || got.Why != "" {
		t.Errorf("SagaAllowed once compensated = %+v; want nothing offered, and no why", got)
	}

	v.call("f", "chargeCard", `{"cents":100}`)
	v.call("f", "scheduleShipment", "{}")
	h = history("f")
	for _, tt := range []struct {
		who string
		p   engine.Principal
		why string
	}{
		{"an approver", approver, ""},
		{"the initiator, also an approver", both, "agent-1 started saga f and cannot decide its requests"},
		{"an auditor", auditor, "resolving a call in doubt needs the approver role"},
	} {
		got := v.e.SagaAllowed(tt.p, h)
		if got.Abort || len(got.Failed) != 1 || got.Failed[0].Seq != 1 || got.Failed[0].Why != tt.why {
			t.Errorf("SagaAllowed(%s) of a saga whose undo failed = %+v; want no abort and the step at seq 1, %q", tt.who, got, tt.why)
		}
	}
	v.h.Exec(t, "UPDATE journal SET input = $1 WHERE saga_id = $2 AND seq = 1", `{"cents":1}`, "f")
	if got := v.e.SagaAllowed(approver, history("f")); len(got.Failed) != 1 || got.Failed[0].Why == "" {
		t.Errorf("SagaAllowed of a saga whose journal does not verify = %+v; want the failed undo not recordable", got)
	}
}
