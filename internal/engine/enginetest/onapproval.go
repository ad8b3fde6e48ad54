package enginetest

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/sagacity-go/sagacity/evidence"
	"github.com/sagacity-go/sagacity/internal/engine"
	"github.com/sagacity-go/sagacity/internal/testkit"
	"github.com/sagacity-go/sagacity/wire"
)

// onApprovalPolicy has the server execute a transfer once two of
// treasury approve it; anything else goes by the default rule.
var onApprovalPolicy = engine.PolicySpec{Default: engine.DefaultPolicy.Default, Tools: map[string][]engine.RuleSpec{
	"sendWireTransfer": {{Name: "auto", Approvers: []string{"treasury", "finance-leads"}, Quorum: 2, Execute: engine.ExecuteOnApproval}},
}}

// testOnApproval: under a rule that executes on approval, the vote that
// completes the quorum has the server execute the approved bytes for
// the requester, once: the INTENT names the requester and the server,
// a held wait answers the tool's result, the agent's resume answers
// that execution, racing last votes in two processes execute it once,
// and a vote whose process stopped before executing leaves it to the
// Recoverer's pass (ExecuteApproved) of any process. Verification
// accepts the server's execution only under a rule that says so.
func testOnApproval(t *testing.T, v *env) {
	ctx := context.Background()
	a := v.usePolicy(onApprovalPolicy)
	v.listen(v.e)
	wires := func() int64 { return v.fx.transfer.Load() }

	seq := v.gateLarge("auto", agent)
	held := awaiting(v.e, agent, "auto", seq)
	waitHeld(t, v.e, 1)
	v.mustApprove("auto", seq, alice)
	if wires() != 0 {
		t.Fatalf("the wire ran on one vote of two")
	}
	d, err := v.e.Approve(ctx, bob, "auto", seq, "")
	if err != nil || wires() != 1 || d.Status != wire.Running {
		t.Fatalf("the vote completing the quorum = %+v, %v, the wire ran %d times; want it executed once, the saga running on", d, err, wires())
	}
	if r := <-held; r.State != engine.StateExecuted || r.Outcome == nil || r.Outcome.Payload != "transfer-ok" {
		t.Errorf("the held wait = %s (outcome %+v); want executed with the tool's result", r.State, r.Outcome)
	}
	es := v.journal("auto")
	intent := es[len(es)-2]
	if intent.Phase != engine.PhaseIntent || intent.Field(engine.KeyRequester) != agent.ID ||
		intent.Field(engine.KeyExecutedBy) != engine.ExecutedByServer || intent.Field(engine.KeyAuth) != "" {
		t.Errorf("the execution's INTENT = %+v; want the requester %s, executed by the server, no sign-in", intent, agent.ID)
	}
	if res, err := v.e.Resume(ctx, agent, "auto", seq, large); err != nil || res.Call.Outcome != engine.OutcomeExecuted || res.Result != "transfer-ok" {
		t.Errorf("the agent's resume after the server's execution = %+v, %v; want what it came to", res, err)
	}
	if got := v.verify("auto"); !got.Valid {
		t.Errorf("Verify(auto) = %+v", got)
	}

	// The same execution under a rule that does not say so is refused
	// by verification, offline as on the server.
	strict := *a
	plain, err := engine.CompilePolicy(engine.PolicySpec{Default: engine.DefaultPolicy.Default, Tools: map[string][]engine.RuleSpec{
		"sendWireTransfer": {{Name: "auto", Approvers: []string{"treasury", "finance-leads"}, Quorum: 2}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name   string
		policy *engine.Approvals
		edit   func(*engine.Entry)
		want   string
	}{
		{"as journaled", &strict, func(*engine.Entry) {}, ""},
		{"under a rule without it", plain, func(*engine.Entry) {}, "rule auto does not execute on approval"},
		{"for another requester", &strict, func(en *engine.Entry) {
			en.Payload = strings.Replace(en.Payload, agent.ID, otherAgent.ID, 1)
		}, "who did not make it"},
		{"by someone else", &strict, func(en *engine.Entry) {
			en.Payload = strings.Replace(en.Payload, "executed-by=server", "executed-by=mallory", 1)
		}, `by "mallory"`},
	} {
		journal := v.journal("auto")
		tt.edit(&journal[intent.Seq-1])
		lc, _ := evidence.ReadLifecycle(journal)
		got, _ := evidence.VerifyVotes(journal, lc, func(string) (*engine.Approvals, error) { return tt.policy, nil },
			testkit.Keys(t).Verifier(), engine.Keyring{})
		if ok := tt.want == ""; got.Valid != ok || (!ok && !strings.Contains(got.Message, tt.want)) {
			t.Errorf("VerifyVotes with the server's execution %s = %+v; want valid %v, saying %q", tt.name, got, ok, tt.want)
		}
	}

	// Racing last votes: bob and erin complete a quorum of two at once,
	// each in a process of its own (the one that comes second finds the
	// request approved, or executed already).
	other, _ := v.process(v.open())
	seq = v.gateLarge("race", agent)
	v.mustApprove("race", seq, alice)
	var wg sync.WaitGroup
	for _, cast := range []struct {
		e *engine.Engine
		p engine.Principal
	}{{v.e, bob}, {other, erin}} {
		wg.Go(func() {
			if _, err := cast.e.Approve(ctx, cast.p, "race", seq, ""); err != nil && !engine.IsKind(err, engine.Conflict) && !engine.IsKind(err, engine.NotFound) {
				t.Errorf("%s's racing vote: %v", cast.p.ID, err)
			}
		})
	}
	wg.Wait()
	if wires() != 2 {
		t.Errorf("after racing last votes the wire ran %d times in all; want 2 (once for each saga)", wires())
	}

	// A process stops between the vote and the execution: the store
	// refuses the execution's INTENT, as a dead database would; the vote
	// stands, and the next pass of any process executes it, once.
	seq = v.gateLarge("stopped", agent)
	v.mustApprove("stopped", seq, alice)
	dying := &failAfter{Store: v.open(), left: 1}
	stopping, err := engine.New(dying, v.fx.tools(), append([]engine.Option{engine.WithKeys(testkit.Keys(t)), engine.WithClock(clk.now),
		engine.WithLog(v.log)}, v.opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stopping.Approve(ctx, bob, "stopped", seq, ""); err != nil {
		t.Fatalf("the vote whose execution fails: %v", err)
	}
	if rv := v.review("stopped", seq); rv.State != engine.StateApproved || wires() != 2 {
		t.Fatalf("after the vote of a process that stopped: %s, the wire ran %d times; want approved, not executed", rv.State, wires())
	}
	for _, e := range []*engine.Engine{other, v.e} {
		if _, err := e.ExecuteApproved(ctx); err != nil {
			t.Fatalf("ExecuteApproved: %v", err)
		}
	}
	if rv := v.review("stopped", seq); rv.State != engine.StateExecuted || wires() != 3 {
		t.Errorf("after the next passes: %s, the wire ran %d times; want executed, once more", rv.State, wires())
	}
	// A row edited to look approved (an insider with the database) is
	// only where the pass looks: the journal has no quorum, so nothing
	// runs and the request stays as it was.
	seq = v.gateLarge("forged", agent)
	v.h.Exec(t, "UPDATE approval_requests SET voters = $2, votes = 2 WHERE saga_id = $1", "forged", "\nmallory\neve\n")
	if n, _ := v.e.ExecuteApproved(ctx); n != 0 || wires() != 3 || v.review("forged", seq).State != engine.StateUndecided {
		t.Errorf("ExecuteApproved with a row edited to look approved = %d, the wire ran %d times; want nothing executed", n, wires())
	}

	// A request approved under a rule that does not execute on approval
	// is its requester's to resume.
	plainSeq := v.call("plain", "payTyped", `{"cents":5,"to":"bob"}`).Seq
	v.approve("plain", plainSeq)
	if n, err := v.e.ExecuteApproved(ctx); err != nil || n != 0 || v.review("plain", plainSeq).State != engine.StateApproved {
		t.Errorf("ExecuteApproved with a request approved under the default rule = %d, %v; want it left to its requester", n, err)
	}
}

// failAfter is a store whose Updates fail, as a database gone away,
// once left of them have committed.
type failAfter struct {
	engine.Store
	mu   sync.Mutex
	left int
}

func (f *failAfter) Update(ctx context.Context, fn func(engine.Tx) error) error {
	f.mu.Lock()
	gone := f.left == 0
	f.left--
	f.mu.Unlock()
	if gone {
		return &engine.Error{Kind: engine.Unavailable, Msg: "the database went away", Err: errors.New("connection refused")}
	}
	return f.Store.Update(ctx, fn)
}
