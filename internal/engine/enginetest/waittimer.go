package enginetest

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/sagacity-go/sagacity/evidence"
	"github.com/sagacity-go/sagacity/internal/engine"
	"github.com/sagacity-go/sagacity/internal/testkit"
	"github.com/sagacity-go/sagacity/wire"
)

// waitPolicy has a transfer wait an hour after its quorum of two before
// it may run, within a grant of two hours: executed by the server under
// rule auto (sagas named auto…), resumed by its requester otherwise.
var waitPolicy = engine.PolicySpec{Default: engine.DefaultPolicy.Default, Tools: map[string][]engine.RuleSpec{
	"sendWireTransfer": {
		{Name: "auto", When: `saga.startsWith("auto")`, Approvers: []string{"treasury"}, Quorum: 2, NotBefore: engine.Duration(time.Hour),
			Grant: engine.Duration(2 * time.Hour), Execute: engine.ExecuteOnApproval},
		{Name: "cooling", Approvers: []string{"treasury"}, Quorum: 2, NotBefore: engine.Duration(time.Hour), Grant: engine.Duration(2 * time.Hour)},
	},
}}

// testWaitTimer: an approved request whose rule sets notBefore may not
// run until that long after its quorum. A resume or an execution before
// then, whatever its bytes, answers Conflict (NOT_YET) saying when it may
// run and how long that is (as its progress and its approved event
// say), and changes nothing: the journal, the request, its votes and the
// saga stay as they were, and neither the sweep nor the Recoverer's pass
// runs it. Once the wait ends, the resume
// runs. Verification, offline as on the server, refuses an execution
// journaled before the wait ended, naming it. Under a rule that executes
// on approval, the vote completing the quorum executes nothing, a held
// wait goes on waiting, and the sweep (Lapse) executes it once the wait
// ends, once however many processes sweep.
func testWaitTimer(t *testing.T, v *env) {
	ctx := context.Background()
	clock := &fakeClock{now: time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)}
	a := v.usePolicy(waitPolicy, engine.WithClock(clock.Now), engine.WithNotifications([]engine.Endpoint{{Name: "chat"}}))
	wires := func() int64 { return v.fx.transfer.Load() }

	seq := v.gateLarge("cool", agent)
	v.mustApprove("cool", seq, alice)
	v.mustApprove("cool", seq, bob)
	rv := v.review("cool", seq)
	runsFrom := rv.Tally.RunsFrom
	if rv.State != engine.StateApproved || !runsFrom.Equal(rv.Tally.Reached.Add(time.Hour)) ||
		!strings.Contains(rv.Tally.Progress(), "may run from "+evidence.Moment(runsFrom)) {
		t.Fatalf("the request once approved: %s, runs from %v (quorum at %v), progress %q; want approved, runnable an hour after its quorum, saying so",
			rv.State, runsFrom, rv.Tally.Reached, rv.Tally.Progress())
	}
	ds, err := v.e.Notifications(ctx, auditor, "cool", seq)
	i := slices.IndexFunc(ds, func(d engine.Delivery) bool { return d.Event.Type == wire.EventApproved })
	if want := "may be executed from " + evidence.Moment(runsFrom); err != nil || i < 0 || !strings.Contains(ds[i].Event.Message, want) {
		t.Errorf("the notifications of the approved request = %+v, %v; want its approved event saying %q", ds, err, want)
	}
	before := v.journal("cool")
	for _, tt := range []struct{ name, payload, says string }{
		{"the bytes approved", large, "in 1h0m0s"},
		{"other bytes", transfer, "not the bytes it asks for (sha256 " + engine.PayloadHash(large) + ")"},
	} {
		e := wantCode(t, "a resume with "+tt.name+" before the wait ended", second(v.e.Resume(ctx, agent, "cool", seq, tt.payload)),
			engine.Conflict, wire.CodeNotYet)
		if !strings.HasPrefix(e.Msg, engine.RefusedWait+": ") || !strings.Contains(e.Msg, "may run from "+evidence.Moment(runsFrom)) ||
			!strings.Contains(e.Msg, tt.says) || !strings.Contains(e.Msg, "nothing was run or changed") {
			t.Errorf("a resume with %s before the wait ended: %q; want %q…, saying when it may run, %q, and that nothing changed",
				tt.name, e.Msg, engine.RefusedWait, tt.says)
		}
	}
	wantCode(t, "an execution before the wait ended", second(v.e.Execute(ctx, agent, "cool", seq)), engine.Conflict, wire.CodeNotYet)
	if n, err := v.e.Lapse(ctx); err != nil || n != 0 {
		t.Errorf("Lapse before the wait ended = %d, %v; want nothing done", n, err)
	}
	if n, err := v.e.ExecuteApproved(ctx); err != nil || n != 0 {
		t.Errorf("ExecuteApproved under a rule its requester resumes = %d, %v; want nothing executed", n, err)
	}
	if diff := cmp.Diff(before, v.journal("cool")); diff != "" {
		t.Errorf("the journal after early resumes (-before +after):\n%s", diff)
	}
	if rv := v.review("cool", seq); rv.State != engine.StateApproved || v.pending("cool") != 1 || v.status("cool") != wire.AwaitingApproval ||
		!slices.Equal(rv.Tally.Voters(), []string{alice.ID, bob.ID}) || wires() != 0 || v.fx.count("undo reserveInventory reserved") != 0 {
		t.Errorf("after early resumes: %s, %d pending, status %s, voters %v, the wire ran %d times; want approved by alice and bob, nothing run or undone",
			rv.State, v.pending("cool"), v.status("cool"), rv.Tally.Voters(), wires())
	}
	if rv := v.review("cool", seq); v.e.Allowed(agent, rv).Execute {
		t.Errorf("Allowed(agent) while the wait runs (%s, runs from %v, the clock at %v) offers Execute, which would answer NOT_YET",
			rv.State, rv.Tally.RunsFrom, clock.Now())
	}
	clock.Add(time.Hour)
	if a := v.e.Allowed(agent, v.review("cool", seq)); !a.Execute {
		t.Errorf("Allowed(agent) once the wait ended = %+v; want Execute", a)
	}
	if res, err := v.e.Resume(ctx, agent, "cool", seq, large); err != nil || res.Call.Outcome != engine.OutcomeExecuted || wires() != 1 {
		t.Fatalf("the resume once the wait ended = %+v, %v (the wire ran %d times); want it executed once", res, err, wires())
	}
	if got := v.verify("cool"); !got.Valid {
		t.Errorf("Verify(cool) = %+v", got)
	}
	// The execution moved back before the wait ended: verification
	// names the wait.
	journal := v.journal("cool")
	for i := range journal {
		if journal[i].Seq > before[len(before)-1].Seq {
			journal[i].Timestamp = runsFrom.Add(-time.Minute)
		}
	}
	lc, _ := evidence.ReadLifecycle(journal)
	got, _ := evidence.VerifyVotes(journal, lc, func(string) (*engine.Approvals, error) { return a, nil }, testkit.Keys(t).Verifier(), engine.Keyring{})
	if want := "before its wait of 1h0m0s (rule cooling) ended at " + evidence.Moment(runsFrom); got.Valid || !strings.Contains(got.Message, want) {
		t.Errorf("VerifyVotes with the execution a minute before the wait ended = %+v; want broken, saying %q", got, want)
	}

	// Executed on approval: the last vote executes nothing; the sweep of
	// either process executes it once the wait ends, once.
	v.listen(v.e)
	other, _ := v.process(v.open())
	seq = v.gateLarge("auto", agent)
	held := awaiting(v.e, agent, "auto", seq)
	waitHeld(t, v.e, 1)
	v.mustApprove("auto", seq, alice)
	d, err := v.e.Approve(ctx, bob, "auto", seq, "")
	if err != nil || d.Status != wire.AwaitingApproval || wires() != 1 || !strings.Contains(d.Progress, "may run from") {
		t.Fatalf("the vote completing the quorum = %+v, %v, the wire ran %d times in all; want it approved, not executed, saying from when it may run",
			d, err, wires())
	}
	for _, e := range []*engine.Engine{v.e, other} {
		if n, err := e.Lapse(ctx); err != nil || n != 0 {
			t.Errorf("Lapse before the wait ended = %d, %v; want nothing done", n, err)
		}
		if n, err := e.ExecuteApproved(ctx); err != nil || n != 0 {
			t.Errorf("ExecuteApproved before the wait ended = %d, %v; want nothing executed", n, err)
		}
	}
	select {
	case r := <-held:
		t.Errorf("the held wait ended before the execution: %s", r.State)
	case <-time.After(50 * time.Millisecond):
	}
	clock.Add(time.Hour)
	if n, err := v.e.Lapse(ctx); err != nil || n != 1 || wires() != 2 {
		t.Errorf("Lapse once the wait ended = %d, %v, the wire ran %d times in all; want it executed (2)", n, err, wires())
	}
	if r := <-held; r.State != engine.StateExecuted || r.Outcome == nil || r.Outcome.Payload != "transfer-ok" {
		t.Errorf("the held wait = %s (outcome %+v); want executed with the tool's result", r.State, r.Outcome)
	}
	// Two processes sweep at once when the wait of another ends: the
	// wire runs once.
	raced := v.gateLarge("auto-race", agent)
	v.mustApprove("auto-race", raced, alice)
	v.mustApprove("auto-race", raced, bob)
	clock.Add(time.Hour)
	var wg sync.WaitGroup
	for _, e := range []*engine.Engine{v.e, other} {
		wg.Go(func() {
			if _, err := e.Lapse(ctx); err != nil {
				t.Errorf("Lapse once the wait ended: %v", err)
			}
		})
	}
	wg.Wait()
	if wires() != 3 {
		t.Errorf("after both processes swept, the wire ran %d times in all; want 3 (once for each saga)", wires())
	}
	es := v.journal("auto")
	if intent := es[len(es)-2]; intent.Phase != engine.PhaseIntent || intent.Field(engine.KeyExecutedBy) != engine.ExecutedByServer {
		t.Errorf("the execution's INTENT = %+v; want the server's", intent)
	}
	for _, saga := range []string{"auto", "auto-race"} {
		if got := v.verify(saga); !got.Valid {
			t.Errorf("Verify(%s) = %+v", saga, got)
		}
	}
}
