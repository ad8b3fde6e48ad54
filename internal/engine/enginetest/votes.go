package enginetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sagacity-go/sagacity/internal/engine"
	"github.com/sagacity-go/sagacity/internal/store/storetest"
	"github.com/sagacity-go/sagacity/internal/testkit"
	"github.com/sagacity-go/sagacity/wire"
)

// The people of the vote scenarios. alice is in two of the rule's
// groups and counts once; bob is in one; carol holds the approver role
// and no group of the rule; dave is an agent who approves too, and
// starts the sagas he calls in.
var (
	alice = engine.Principal{ID: "https://idp.example.com#alice", Auth: engine.AuthOIDC, Roles: []engine.Role{engine.RoleApprover},
		Groups: []string{"finance-leads", "treasury"}, Issuer: "https://idp.example.com", Subject: "alice"}
	bob = engine.Principal{ID: "https://idp.example.com#bob", Auth: engine.AuthOIDC, Roles: []engine.Role{engine.RoleApprover},
		Groups: []string{"treasury"}, Issuer: "https://idp.example.com", Subject: "bob"}
	erin = engine.Principal{ID: "https://idp.example.com#erin", Auth: engine.AuthOIDC, Roles: []engine.Role{engine.RoleApprover},
		Groups: []string{"finance-leads"}, Issuer: "https://idp.example.com", Subject: "erin"}
	carol = engine.Principal{ID: "carol@company.com", Auth: engine.AuthOIDC, Roles: []engine.Role{engine.RoleApprover}}
	dave  = engine.Principal{ID: "token:dave", Auth: engine.AuthToken, Roles: []engine.Role{engine.RoleAgent, engine.RoleApprover},
		Groups: nil}
)

// votePolicy asks two of finance-leads or treasury for a transfer of
// 1000 or more, with a reason; one approver for less.
var votePolicy = engine.PolicySpec{Tools: map[string][]engine.RuleSpec{
	"sendWireTransfer": {
		{Name: "large", When: `double(payload.amount) >= 1000.0`, Approvers: []string{"finance-leads", "treasury"}, Quorum: 2,
			Reason: engine.ReasonRequired},
		{Name: "small"},
	},
}}

const large = `{"amount":"5000","to":"alice"}`

// gateLarge makes saga's request of a large transfer, after a
// reservation, as the agent, and returns its seq.
func (v *env) gateLarge(saga string, by engine.Principal) int64 {
	v.t.Helper()
	ctx := context.Background()
	if _, err := v.e.Call(ctx, by, saga, "reserveInventory", `{"item":"laptop"}`); err != nil {
		v.t.Fatal(err)
	}
	r, err := v.e.Call(ctx, by, saga, "sendWireTransfer", large)
	if err != nil || r.Outcome != engine.OutcomeAwaitingApproval {
		v.t.Fatalf("Call(large transfer) = %+v, %v; want it gated", r, err)
	}
	return r.Seq
}

// usePolicy restarts v's engine with the policy spec, recorded.
func (v *env) usePolicy(spec engine.PolicySpec, opts ...engine.Option) *engine.Approvals {
	v.t.Helper()
	a, err := engine.CompilePolicy(spec)
	if err != nil {
		v.t.Fatal(err)
	}
	return v.useApprovals(a, opts...)
}

// useApprovals starts the engine afresh under a, recorded.
func (v *env) useApprovals(a *engine.Approvals, opts ...engine.Option) *engine.Approvals {
	v.t.Helper()
	v.opts = append([]engine.Option{engine.WithApprovals(a)}, opts...)
	v.e, v.log = v.engine(v.db)
	if _, err := v.e.RecordPolicy(context.Background()); err != nil {
		v.t.Fatal(err)
	}
	return a
}

// testVotes: a quorum of two distinct eligible identities, each counted
// once whatever groups or sessions they hold, the initiator and the
// requester never; one eligible rejection rejects; a withdrawal drops the
// count; a request for changes sends the request back, the saga going on.
func testVotes(t *testing.T, v *env) {
	ctx := context.Background()
	v.usePolicy(votePolicy)
	wires := func() int64 { return v.fx.transfer.Load() }

	seq := v.gateLarge("q", agent)
	if p := v.journal("q")[seq-1]; p.Field(engine.KeyRule) != "large" {
		t.Fatalf("the request's rule = %q; want large", p.Field(engine.KeyRule))
	}
	_, err := v.e.Approve(ctx, alice, "q", seq, "")
	testkit.WantKind(t, "an approval without the reason the rule requires", err, engine.Invalid)
	_, err = v.e.Approve(ctx, carol, "q", seq, "looks fine")
	testkit.WantKind(t, "an approval by an approver of no group of the rule", err, engine.Forbidden)
	d, err := v.e.Approve(ctx, alice, "q", seq, "invoice 77 checked")
	if err != nil || d.Votes != 1 || d.Quorum != 2 || d.Status != wire.AwaitingApproval {
		t.Fatalf("alice's approval = %+v, %v; want vote 1 of 2", d, err)
	}
	// alice again: the same person, another credential of the same
	// identity (her access token rather than her session), and two groups.
	again := alice
	again.Auth, again.AuthTime = engine.AuthOIDC, time.Time{}
	_, err = v.e.Approve(ctx, again, "q", seq, "once more")
	testkit.WantKind(t, "alice's second approval", err, engine.Conflict)
	if err == nil || !strings.Contains(err.Error(), "one person counts once") {
		t.Errorf("alice's second approval: %v; want it said that one person counts once", err)
	}
	// Not executable on one vote: the agent's resume and the console's
	// Execute change nothing (EarlyResume holds the rest).
	_, err = v.e.Execute(ctx, agent, "q", seq)
	wantCode(t, "Execute on one vote of two", err, engine.Conflict, wire.CodeUndecided)
	e := wantCode(t, "Resume on one vote of two", second(v.e.Resume(ctx, agent, "q", seq, large)), engine.Conflict, wire.CodeUndecided)
	if !strings.HasPrefix(e.Msg, engine.RefusedQuorum+": ") || !strings.Contains(e.Msg, "1 of 2 approvals") {
		t.Errorf("Resume on one vote of two: %q; want it to say the quorum is not reached, 1 of 2", e.Msg)
	}
	rv := v.review("q", seq)
	if rv.State != engine.StateUndecided || rv.Tally.Progress() != "1 of 2 approvals (https://idp.example.com#alice); waiting for 1 more from finance-leads or treasury" {
		t.Errorf("review after one vote: %s, %q", rv.State, rv.Tally.Progress())
	}
	if a := v.e.Allowed(alice, rv); a.Approve || !a.Withdraw || !a.Reject {
		t.Errorf("Allowed(alice, after her vote) = %+v; want withdraw and reject, no second approval", a)
	}
	if a := v.e.Allowed(bob, rv); !a.Approve || !a.Reject || !a.RequestChanges || a.Withdraw || a.Execute {
		t.Errorf("Allowed(bob) = %+v; want approve, reject, request changes", a)
	}
	if _, err := v.e.Approve(ctx, bob, "q", seq, "matches the PO"); err != nil {
		t.Fatalf("bob's approval: %v", err)
	}
	if rv := v.review("q", seq); rv.State != engine.StateApproved || !slices.Equal(rv.Tally.Voters(), []string{alice.ID, bob.ID}) {
		t.Errorf("review after two votes: %s, voters %v", rv.State, rv.Tally.Voters())
	}
	_, err = v.e.Approve(ctx, erin, "q", seq, "me too")
	testkit.WantKind(t, "a third approval of a quorum of two", err, engine.Conflict)
	res, err := v.e.Resume(ctx, agent, "q", seq, large)
	if err != nil || res.Refused || wires() != 1 {
		t.Fatalf("Resume after two votes = %+v, %v; wires %d; want it executed once", res, err, wires())
	}
	if got := v.verify("q"); !got.Valid {
		t.Errorf("Verify(q) = %+v", got)
	}
	// The receipts place each vote.
	es := v.journal("q")
	for i, want := range map[int64]string{seq + 1: "vote: 1 of 2\n", seq + 2: "vote: 2 of 2\n"} {
		r, err := engine.OpenReceipt(engine.ReceiptOf(es[i-1]), testkit.Keys(t).Verifier())
		if err != nil || !strings.Contains(r.Text(), want) || r.Rule != "large" || r.ApprovalPolicy == "" || r.EligibleAs == "" {
			t.Errorf("receipt of seq=%d = %+v, %v; want %q, rule large, its policy and the group voted as", i, r, err, want)
		}
	}

	// The initiator never counts: dave starts the saga and asks.
	seq = v.gateLarge("own", dave)
	_, err = v.e.Approve(ctx, dave, "own", seq, "mine")
	testkit.WantKind(t, "an approval by the saga's initiator", err, engine.Forbidden)

	// One eligible rejection rejects, whatever the votes.
	seq = v.gateLarge("r", agent)
	v.mustApprove("r", seq, alice)
	if d, err := v.e.Reject(ctx, bob, "r", seq, "wrong payee"); err != nil || d.Status != wire.Compensated {
		t.Errorf("bob's rejection after alice's approval = %+v, %v; want the saga compensated", d, err)
	}

	// A withdrawal drops the count; the voter may approve again.
	seq = v.gateLarge("w", agent)
	v.mustApprove("w", seq, alice)
	_, err = v.e.Withdraw(ctx, bob, "w", seq, "")
	testkit.WantKind(t, "bob withdrawing a vote he did not cast", err, engine.Conflict)
	if d, err := v.e.Withdraw(ctx, alice, "w", seq, "the amount changed on the invoice"); err != nil || d.Votes != 0 {
		t.Fatalf("alice's withdrawal = %+v, %v; want 0 votes standing", d, err)
	}
	v.mustApprove("w", seq, bob)
	wantCode(t, "Resume with a vote withdrawn", second(v.e.Resume(ctx, agent, "w", seq, large)), engine.Conflict, wire.CodeUndecided)
	v.mustApprove("w", seq, alice)
	if res, err := v.e.Resume(ctx, agent, "w", seq, large); err != nil || res.Refused || res.Call.Outcome != engine.OutcomeExecuted {
		t.Errorf("Resume once alice approved again = %+v, %v; want it executed", res, err)
	}
	if got := v.verify("w"); !got.Valid {
		t.Errorf("Verify(w) = %+v", got)
	}

	// A request for changes drops that request alone: the saga runs on,
	// nothing is compensated, and the agent reads what to change.
	seq = v.gateLarge("c", agent)
	undone := v.fx.count("undo reserveInventory reserved")
	_, err = v.e.RequestChanges(ctx, bob, "c", seq, "")
	testkit.WantKind(t, "a request for changes without saying what", err, engine.Invalid)
	if d, err := v.e.RequestChanges(ctx, bob, "c", seq, "split it: at most 2500 a transfer"); err != nil || d.Status != wire.Running {
		t.Fatalf("RequestChanges = %+v, %v; want the saga running", d, err)
	}
	if v.fx.count("undo reserveInventory reserved") != undone || v.pending("c") != 0 {
		t.Errorf("after a request for changes: %d compensations, %d pending; want none of either",
			v.fx.count("undo reserveInventory reserved")-undone, v.pending("c"))
	}
	e = wantCode(t, "resuming a request sent back", second(v.e.Resume(ctx, agent, "c", seq, large)), engine.Conflict, wire.CodeChangesRequested)
	if e.Msg != "[CHANGES_REQUESTED] Tool 'sendWireTransfer': split it: at most 2500 a transfer" {
		t.Errorf("what the agent reads = %q", e.Msg)
	}
	_, reqs, err := v.e.Requests(ctx, agent, "c")
	if err != nil || len(reqs) != 1 || reqs[0].State != engine.StateChangesRequested || reqs[0].Changes == nil ||
		reqs[0].Changes.Reason != "split it: at most 2500 a transfer" {
		t.Errorf("Requests(c) = %+v, %v; want the request sent back with the reason", reqs, err)
	}
	// The agent re-plans: the new request shows what was sent back.
	next := v.call("c", "sendWireTransfer", `{"amount":"2500","to":"alice"}`)
	if rv := v.review("c", next.Seq); rv.Previous == nil || rv.Previous.Seq != seq {
		t.Errorf("the re-planned request's previous = %+v; want the one sent back, seq=%d", rv.Previous, seq)
	}
	if got := v.verify("c"); !got.Valid {
		t.Errorf("Verify(c) = %+v", got)
	}
	if wires() != 2 {
		t.Errorf("the wire ran %d times; want twice, for q and w", wires())
	}

	// Nor does the requester, where agents share sagas: agent starts
	// it, dave (an agent who also approves) asks for the transfer.
	v.usePolicy(votePolicy, engine.WithAccess(engine.Access{ShareSagas: true}))
	v.call("shared", "reserveInventory", `{"item":"laptop"}`)
	r, err := v.e.Call(ctx, dave, "shared", "sendWireTransfer", large)
	if err != nil || r.Outcome != engine.OutcomeAwaitingApproval {
		t.Fatalf("dave's request in agent-1's saga = %+v, %v", r, err)
	}
	_, err = v.e.Approve(ctx, dave, "shared", r.Seq, "mine")
	testkit.WantKind(t, "an approval by the request's requester", err, engine.Forbidden)
}

// mustApprove approves saga's request at seq as p, with a reason.
func (v *env) mustApprove(saga string, seq int64, p engine.Principal) {
	v.t.Helper()
	if _, err := v.e.Approve(context.Background(), p, saga, seq, "checked by "+p.ID); err != nil {
		v.t.Fatalf("Approve(%s, %d) by %s: %v", saga, seq, p.ID, err)
	}
}

// mustApproveAs approves as p, without a reason.
func (v *env) mustApproveAs(saga string, seq int64, p engine.Principal) {
	v.t.Helper()
	if _, err := v.e.Approve(context.Background(), p, saga, seq, ""); err != nil {
		v.t.Fatalf("Approve(%s, %d) by %s: %v", saga, seq, p.ID, err)
	}
}

// testVoteRace: the quorum's people vote at once on two servers sharing
// the database, as do a third person, and alice twice more (another tab,
// another server); exactly two votes are journaled, never the same
// person's twice; executions race too, and the tool runs once.
// race has people approve the request at seq of saga at once, on
// engines in turn (starting with round's), and counts the approvals
// accepted and those refused as conflicts; any other error fails t.
func race(t *testing.T, engines []*engine.Engine, round int, saga string, seq int64, reason string, people ...engine.Principal) (approved, conflicts int64) {
	var wg sync.WaitGroup
	var ok, refused atomic.Int64
	for i, p := range people {
		wg.Go(func() {
			_, err := engines[(i+round)%len(engines)].Approve(context.Background(), p, saga, seq, reason)
			switch {
			case err == nil:
				ok.Add(1)
			case engine.IsKind(err, engine.Conflict):
				refused.Add(1)
			default:
				t.Errorf("round %d: Approve by %s: %v", round, p.ID, err)
			}
		})
	}
	wg.Wait()
	return ok.Load(), refused.Load()
}

func testVoteRace(t *testing.T, newHarness func(*testing.T) storetest.Harness) {
	ctx := context.Background()
	v := newEnv(t, newHarness)
	v.usePolicy(votePolicy)
	e2, _ := v.engine(v.open(), v.fx.tools()...)
	engines := []*engine.Engine{v.e, e2}
	for round := range 200 {
		saga := fmt.Sprintf("vote-%d", round)
		seq := v.gateLarge(saga, agent)
		approved, conflicts := race(t, engines, round, saga, seq, "checked", alice, bob, erin, alice, alice)
		var voters []string
		for _, en := range v.journal(saga) {
			if en.Phase == engine.PhaseApproved {
				voters = append(voters, en.Field(engine.KeyApprover))
			}
		}
		slices.Sort(voters)
		if approved != 2 || conflicts != 3 || len(voters) != 2 || voters[0] == voters[1] {
			t.Fatalf("round %d: %d approvals accepted, %d refused, journaled %v; want 2 distinct accepted, 3 refused",
				round, approved, conflicts, voters)
		}
		before := v.fx.transfer.Load()
		var wg sync.WaitGroup
		var answered atomic.Int64 // executed, or still running
		for i := range 4 {
			wg.Go(func() {
				res, err := engines[i%2].Execute(ctx, agent, saga, seq)
				if e, _ := errors.AsType[*engine.Error](err); (err == nil && res.Call.Outcome == engine.OutcomeExecuted) ||
					(e != nil && e.Code == wire.CodeInProgress) {
					answered.Add(1)
				}
			})
		}
		wg.Wait()
		if runs := v.fx.transfer.Load() - before; runs != 1 || answered.Load() != 4 {
			t.Fatalf("round %d: the wire ran %d times, %d executions answered it ran or runs; want 1 and 4", round, runs, answered.Load())
		}
	}
}

// testEditedRows: a request row's columns are an index the journal
// governs. Edited with SQL — its due time pushed back or cleared, its
// quorum, voters or rule rewritten — a request is decided by no one while
// its row disagrees with its journal, and verification says so; but its
// time still runs out by the clock its rule and journal give: a late
// vote, the sweep of due rows or the pass over every pending request
// closes it then. A row that says it is due early closes nothing.
func testEditedRows(t *testing.T, v *env) {
	ctx := context.Background()
	clock := &fakeClock{now: time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)}
	v.usePolicy(engine.PolicySpec{Default: []engine.RuleSpec{{Name: "timed", Quorum: 2, Expires: engine.Duration(time.Hour),
		Grant: engine.Duration(10 * time.Minute)}}}, engine.WithClock(clock.Now))
	edits := []struct {
		saga  string
		votes []engine.Principal
		sql   string
		args  []any
	}{
		{"due-later", nil, "UPDATE approval_requests SET due_at = $2 WHERE saga_id = $1", []any{clock.now.AddDate(80, 0, 0)}},
		{"due-never", nil, "UPDATE approval_requests SET due_at = NULL WHERE saga_id = $1", nil},
		{"quorum", []engine.Principal{alice}, "UPDATE approval_requests SET quorum = 1 WHERE saga_id = $1", nil},
		{"quorum-due", []engine.Principal{alice}, "UPDATE approval_requests SET quorum = 1, due_at = NULL WHERE saga_id = $1", nil},
		{"voters", nil, "UPDATE approval_requests SET voters = $2, votes = 1 WHERE saga_id = $1", []any{"\nmallory\n"}},
		{"rule", nil, "UPDATE approval_requests SET rule = 'lax', due_at = NULL WHERE saga_id = $1", nil},
		{"late-vote", nil, "UPDATE approval_requests SET due_at = NULL WHERE saga_id = $1", nil},
		{"grant", []engine.Principal{alice, bob}, "UPDATE approval_requests SET due_at = NULL WHERE saga_id = $1", nil},
	}
	for _, ed := range edits {
		seq := v.gate(ed.saga)
		for _, p := range ed.votes {
			v.mustApproveAs(ed.saga, seq, p)
		}
		v.h.Exec(t, ed.sql, append([]any{ed.saga}, ed.args...)...)
		if got := v.verify(ed.saga); got.Valid || got.BreakAtIndex != 2 {
			t.Errorf("Verify(%s) after the edit = %+v; want the request's row reported", ed.saga, got)
		}
	}
	// Nobody decides on a row that disagrees with its journal.
	before := len(v.journal("quorum"))
	testkit.WantKind(t, "a vote on a request whose quorum was edited", second(v.e.Approve(ctx, bob, "quorum", 3, "")), engine.Conflict)
	testkit.WantKind(t, "executing a request whose quorum was edited", second(v.e.Execute(ctx, alice, "quorum", 3)), engine.Conflict)
	if n := len(v.journal("quorum")); n != before || v.pending("quorum") != 1 {
		t.Errorf("after acting on an edited row: %d entries (was %d), %d pending; want nothing journaled, the request kept", n, before, v.pending("quorum"))
	}

	// The grant ends: the pass over every request closes the one whose
	// row says it is never due; the sweep of due rows cannot see it.
	clock.Add(11 * time.Minute)
	if _, err := v.e.Lapse(ctx); err != nil || v.pending("grant") != 1 {
		t.Fatalf("Lapse after the grant: %v, %d pending; want the row that says never left to the pass", err, v.pending("grant"))
	}
	if _, err := v.e.LapseAll(ctx); err != nil {
		t.Fatal(err)
	}
	if es := v.journal("grant"); len(es) < 6 {
		t.Errorf("after the grant the journal has %d entries; want the request closed after its two votes", len(es))
	} else if detail, _, _ := es[5].Refusal(); !strings.HasPrefix(detail, engine.RefusedGrant) {
		t.Errorf("the entry after the grant = %q; want its refusal, %s", detail, engine.RefusedGrant)
	}

	// The deadline passes. A late vote finds its request expired, whatever
	// its row says; a request made now, whose row says it was due an hour
	// ago, is not.
	clock.Add(50 * time.Minute)
	wantCode(t, "a late vote on a request whose row says never", second(v.e.Approve(ctx, bob, "late-vote", 3, "")), engine.Conflict, wire.CodeExpired)
	early := v.gate("due-early")
	v.h.Exec(t, "UPDATE approval_requests SET due_at = $2 WHERE saga_id = $1", "due-early", clock.now.Add(-time.Hour))
	if _, err := v.e.Lapse(ctx); err != nil {
		t.Fatal(err)
	}
	for saga, pending := range map[string]int{"quorum": 0, "voters": 0, "due-later": 1, "due-never": 1, "quorum-due": 1, "rule": 1, "due-early": 1} {
		if got := v.pending(saga); got != pending {
			t.Errorf("after the sweep of due rows, %s has %d pending; want %d", saga, got, pending)
		}
	}
	if _, err := v.e.LapseAll(ctx); err != nil {
		t.Fatal(err)
	}
	for _, ed := range edits {
		var closing engine.Entry // after the request and its votes
		if es := v.journal(ed.saga); len(es) > 3+len(ed.votes) {
			closing = es[3+len(ed.votes)]
		}
		if v.pending(ed.saga) != 0 || v.status(ed.saga) != wire.Compensated || !v.verify(ed.saga).Valid ||
			(ed.saga != "grant" && closing.Field(engine.KeyExpired) == "") {
			t.Errorf("%s: %d pending, saga %s, %+v, closed by %+v; want it closed by its journal's clock, compensated, verifying",
				ed.saga, v.pending(ed.saga), v.status(ed.saga), v.verify(ed.saga), closing)
		}
	}
	if v.pending("due-early") != 1 || len(v.journal("due-early")) != int(early) {
		t.Errorf("the request whose row says it was due early: %d pending, %d entries; want it open, nothing journaled",
			v.pending("due-early"), len(v.journal("due-early")))
	}
	if v.fx.transfer.Load() != 0 {
		t.Errorf("the wire ran %d times; want never", v.fx.transfer.Load())
	}
}
