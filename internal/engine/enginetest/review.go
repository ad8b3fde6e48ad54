package enginetest

import (
	"context"
	"encoding/base64"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/sagacity-go/sagacity/internal/engine"
	"github.com/sagacity-go/sagacity/internal/testkit"
	"github.com/sagacity-go/sagacity/wire"
	"golang.org/x/mod/sumdb/note"
)

// What reviewers read and record, on both stores: the pending list with
// its filters and paging, one request with everything needed to decide
// it, and what a person found out about a call in doubt.

func testPending(t *testing.T, v *env) {
	ctx := context.Background()
	other := engine.Principal{ID: "agent-2", Auth: "token", Roles: []engine.Role{engine.RoleAgent}}
	v.gate("a")                                                        // undecided, seq 3
	v.approve("b", v.gate("b"))                                        // approved, seq 3
	v.call("c", "sendWireTransfer", `{"amount":"250.00","to":"bob"}`)  // seq 1
	v.call("c", "sendWireTransfer", `{"amount":"2500.00","to":"bob"}`) // seq 2, re-planned
	if _, err := v.e.Call(ctx, other, "d", "sendWireTransfer", transfer); err != nil {
		t.Fatal(err)
	}
	key := func(p engine.Pending) string { return p.SagaID + "/" + string(rune('0'+p.JournalSeq)) }
	keys := func(ps []engine.Pending) []string {
		var out []string
		for _, p := range ps {
			out = append(out, key(p))
		}
		return out
	}
	tests := []struct {
		name  string
		f     engine.PendingFilter
		want  []string
		total int
	}{
		{"all", engine.PendingFilter{}, []string{"a/3", "b/3", "c/1", "c/2", "d/1"}, 5},
		{"approved", engine.PendingFilter{Approved: new(true)}, []string{"b/3"}, 1},
		{"undecided", engine.PendingFilter{Approved: new(false)}, []string{"a/3", "c/1", "c/2", "d/1"}, 4},
		{"one saga", engine.PendingFilter{SagaID: "c"}, []string{"c/1", "c/2"}, 2},
		{"initiator", engine.PendingFilter{Initiator: "agent-2"}, []string{"d/1"}, 1},
		{"tool", engine.PendingFilter{Tool: "reserveInventory"}, nil, 0},
		{"a page", engine.PendingFilter{Limit: 2}, []string{"a/3", "b/3"}, 5},
	}
	for _, tt := range tests {
		got, n, err := v.e.Pending(ctx, approver, tt.f)
		if err != nil || !cmp.Equal(keys(got), tt.want) || n != tt.total {
			t.Errorf("Pending(%s) = %v of %d, %v; want %v of %d", tt.name, keys(got), n, err, tt.want, tt.total)
		}
	}
	// The next page continues after the last one seen.
	page, _, _ := v.e.Pending(ctx, approver, engine.PendingFilter{Limit: 2})
	last := page[len(page)-1]
	rest, _, err := v.e.Pending(ctx, approver, engine.PendingFilter{Limit: 10,
		After: &engine.PendingCursor{CreatedAt: last.CreatedAt, SagaID: last.SagaID, JournalSeq: last.JournalSeq}})
	if want := []string{"c/1", "c/2", "d/1"}; err != nil || !cmp.Equal(keys(rest), want) {
		t.Errorf("Pending(after %s) = %v, %v; want %v", key(last), keys(rest), err, want)
	}
	// The newest page, and the page before a request, come oldest first.
	newest, n, err := v.e.Pending(ctx, approver, engine.PendingFilter{Limit: 2, Last: true})
	if want := []string{"c/2", "d/1"}; err != nil || !cmp.Equal(keys(newest), want) || n != 5 {
		t.Errorf("Pending(last 2) = %v of %d, %v; want %v of 5", keys(newest), n, err, want)
	}
	first := newest[0]
	back := &engine.PendingCursor{CreatedAt: first.CreatedAt, SagaID: first.SagaID, JournalSeq: first.JournalSeq}
	earlier, _, err := v.e.Pending(ctx, approver, engine.PendingFilter{Limit: 2, Before: back})
	if want := []string{"b/3", "c/1"}; err != nil || !cmp.Equal(keys(earlier), want) {
		t.Errorf("Pending(2 before %s) = %v, %v; want %v", key(first), keys(earlier), err, want)
	}
	for name, f := range map[string]engine.PendingFilter{
		"after and before": {After: back, Before: back},
		"after and last":   {After: back, Last: true},
		"before and last":  {Before: back, Last: true},
	} {
		_, _, err := v.e.Pending(ctx, approver, f)
		testkit.WantKind(t, "Pending("+name+")", err, engine.Invalid)
	}
	all, _, _ := v.e.Pending(ctx, auditor, engine.PendingFilter{})
	byKey := map[string]engine.Pending{}
	for _, p := range all {
		byKey[key(p)] = p
	}
	if p := byKey["b/3"]; !p.Approved() || !slices.Equal(p.Voters, []string{approver.ID}) || p.Initiator != agent.ID || p.Requester != agent.ID {
		t.Errorf("approved request = %+v, want approved by %s, started and requested by %s", p, approver.ID, agent.ID)
	}
	if p := byKey["a/3"]; p.Approved() || len(p.Voters) > 0 || p.Replanned || p.Refused {
		t.Errorf("undecided request = %+v, want no approver and no badges", p)
	}
	if p := byKey["c/2"]; !p.Replanned || byKey["c/1"].Replanned {
		t.Errorf("re-planned: c/1 %v, c/2 %v; want only c/2", byKey["c/1"].Replanned, p.Replanned)
	}
	_, _, err = v.e.Pending(ctx, agent, engine.PendingFilter{})
	testkit.WantKind(t, "Pending as an agent", err, engine.Forbidden)
}

func testReview(t *testing.T, v *env) {
	ctx := context.Background()
	review := func(saga string, seq int64) engine.Review {
		t.Helper()
		r, err := v.e.Review(ctx, auditor, saga, seq)
		if err != nil {
			t.Fatalf("Review(%s, %d): %v", saga, seq, err)
		}
		return r
	}
	// An earlier saga executed the wire: the nearest prior approved call.
	v.approve("paid", v.gate("paid"))
	if _, err := v.e.Resume(ctx, approver, "paid", 3, transfer); err != nil {
		t.Fatal(err)
	}
	v.call("s", "reserveInventory", `{"item":"laptop"}`)
	v.call("s", "sendWireTransfer", `{"amount":"250.00","to":"bob"}`)
	v.call("s", "sendWireTransfer", `{"amount":"2500.00","to":"bob"}`)
	r := review("s", 4)
	if r.State != engine.StateUndecided || !r.Pending || r.Gated.Input != `{"amount":"2500.00","to":"bob"}` ||
		line(r.Gated.Payload) != "requester=agent-1" || !r.Verification.Valid {
		t.Errorf("Review(s, 4) = state %s, pending %v, gated %+v, %+v; want the undecided request", r.State, r.Pending, r.Gated, r.Verification)
	}
	if r.Previous == nil || r.Previous.Seq != 3 || r.LastExecuted == nil || r.LastExecuted.SagaID != "paid" || r.LastExecuted.Input != transfer {
		t.Errorf("Review(s, 4): previous %+v, last executed %+v; want seq 3 of s and the wire of saga paid", r.Previous, r.LastExecuted)
	}
	if len(r.WouldUndo) != 1 || r.WouldUndo[0].ToolName != "reserveInventory" || len(r.Siblings) != 1 || r.Siblings[0].JournalSeq != 3 {
		t.Errorf("Review(s, 4): would undo %+v, siblings %+v; want the reservation and seq 3", r.WouldUndo, r.Siblings)
	}
	_, err := v.e.Review(ctx, auditor, "s", 1)
	testkit.WantKind(t, "Review of an entry that is not a request", err, engine.NotFound)
	_, err = v.e.Review(ctx, auditor, "nope", 1)
	testkit.WantKind(t, "Review of an unknown saga", err, engine.NotFound)

	v.approve("s", 4)
	if r := review("s", 4); r.State != engine.StateApproved || len(r.Votes) != 1 || r.Votes[0].Approver != approver.ID ||
		r.Tally.Progress() != "1 of 1 approval ("+approver.ID+")" {
		t.Errorf("after Approve: state %s, votes %+v, %s; want approved by %s", r.State, r.Votes, r.Tally.Progress(), approver.ID)
	}
	if _, err := v.e.Reject(ctx, approver, "s", 3, "wrong amount"); err != nil {
		t.Fatal(err)
	}
	if r := review("s", 3); r.State != engine.StateRejected || r.Pending || r.Rejection == nil || r.Rejection.Reason != "wrong amount" {
		t.Errorf("rejected request: state %s, rejection %+v", r.State, r.Rejection)
	}
	if r := review("s", 4); r.State != engine.StateDropped || r.Pending || len(r.Votes) != 1 {
		t.Errorf("sibling of a rejected request: state %s, pending %v; want dropped, still showing its approval", r.State, r.Pending)
	}
	if r := review("paid", 3); r.State != engine.StateExecuted || r.Outcome == nil || r.Outcome.Payload != "transfer-ok" {
		t.Errorf("resumed request: state %s, outcome %+v; want executed with its result", r.State, r.Outcome)
	}
	// Requests tells the same of every request of a saga, from one read.
	sg, reqs, err := v.e.Requests(ctx, agent, "s")
	var states []string
	for _, r := range reqs {
		states = append(states, fmt.Sprintf("%d %s", r.Gated.Seq, r.State))
	}
	if err != nil || sg.ID != "s" || !cmp.Equal(states, []string{"3 rejected", "4 dropped"}) ||
		reqs[0].Rejection == nil || len(reqs[1].Votes) != 1 {
		t.Errorf("Requests(s) = %v, %v; want seq 3 rejected and seq 4 dropped, with their decisions", states, err)
	}
	_, _, err = v.e.Requests(ctx, agent, "nope")
	testkit.WantKind(t, "Requests of an unknown saga", err, engine.NotFound)

	v.approve("stale", v.gate("stale"))
	if _, err := v.e.Resume(ctx, approver, "stale", 3, `{"amount":"1"}`); err != nil {
		t.Fatal(err)
	}
	if r := review("stale", 3); r.State != engine.StateRefused || r.Refusal == nil || r.Refusal.Phase != engine.PhaseRejected {
		t.Errorf("refused request: state %s, refusal %+v", r.State, r.Refusal)
	}
}

// line returns a payload's first line.
func line(s string) string {
	for i, c := range s {
		if c == '\n' {
			return s[:i]
		}
	}
	return s
}

// inDoubt leaves a call of tool hang in saga in doubt, as a crash between
// its INTENT and its outcome would, and returns an engine that may resolve
// it at once.
func (v *env) inDoubt(saga string) *engine.Engine {
	v.t.Helper()
	started, release := make(chan struct{}), make(chan struct{})
	doomed := v.h.Open(v.t)
	hang := engine.Tool{Name: "hang", Executor: engine.Funcs{Exec: func(context.Context, engine.Invocation) (string, error) {
		close(started)
		<-release
		return "too late", nil
	}, Undo: func(context.Context, engine.Invocation, string) error { return nil }}}
	tools := append(v.fx.tools(), hang)
	crashing, err := engine.New(doomed, tools, engine.WithKeys(testkit.Keys(v.t)), engine.WithClock(clk.now), engine.WithOutcomeRetry(50*time.Millisecond))
	if err != nil {
		v.t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = crashing.Call(context.Background(), agent, saga, "hang", `{"n":1}`)
	}()
	<-started
	doomed.Close()
	close(release)
	<-done
	e, err := engine.New(v.db, tools, engine.WithKeys(testkit.Keys(v.t)), engine.WithClock(clk.now), engine.WithInDoubtAfter(0))
	if err != nil {
		v.t.Fatal(err)
	}
	return e
}

func testResolve(t *testing.T, v *env) {
	ctx := context.Background()
	both := engine.Principal{ID: agent.ID, Auth: "token", Roles: []engine.Role{engine.RoleAgent, engine.RoleApprover}}

	// It happened: the outcome is journaled by the approval gate, naming
	// the person, and the call's undo gets the reported result.
	v.call("ok", "reserveInventory", `{"item":"laptop"}`)
	e := v.inDoubt("ok")
	for _, tt := range []struct {
		name string
		p    engine.Principal
		want engine.Kind
	}{
		{"an agent", agent, engine.Forbidden},
		{"the initiator, also an approver", both, engine.Forbidden},
		{"an auditor", auditor, engine.Forbidden},
	} {
		_, err := e.Resolve(ctx, tt.p, "ok", 3, true, "", "checked")
		testkit.WantKind(t, "Resolve by "+tt.name, err, tt.want)
	}
	_, err := e.Resolve(ctx, approver, "ok", 3, true, "", "")
	testkit.WantKind(t, "Resolve without saying how the person knows", err, engine.Invalid)
	_, err = e.Resolve(ctx, approver, "ok", 9, true, "", "checked")
	testkit.WantKind(t, "Resolve of no call", err, engine.NotFound)
	_, err = e.Resolve(ctx, approver, "ok", 1, true, "", "checked")
	testkit.WantKind(t, "Resolve of a settled call", err, engine.Conflict)
	_, err = e.Resolve(ctx, approver, "ok", 3, true, "a\x00b", "checked")
	testkit.WantKind(t, "Resolve with a NUL in the result", err, engine.Invalid)
	_, err = v.e.Resolve(ctx, approver, "ok", 3, true, "", "checked")
	testkit.WantKind(t, "Resolve within the in-doubt window", err, engine.Conflict)

	s, err := e.Resolve(ctx, approver, "ok", 3, true, "booked H-7", "hotel confirmed by phone")
	if err != nil || s.Status != wire.Running {
		t.Fatalf("Resolve(happened) = %+v, %v; want the saga RUNNING", s, err)
	}
	es := v.journal("ok")
	last := es[len(es)-1]
	want := engine.Entry{SagaID: "ok", Seq: 4, ToolName: engine.GateTool, Phase: engine.PhaseExecuted, Input: "seq=3",
		Payload:   last.Payload,
		Timestamp: last.Timestamp, Hash: last.Hash, Leaf: -1}
	if diff := cmp.Diff(want, last); diff != "" {
		t.Errorf("resolution entry (-want +got):\n%s", diff)
	}
	if p := last.Payload; !strings.HasPrefix(p, "resolved-by=manager@company.com\nreason=hotel confirmed by phone\nauth=oidc\nreceipt=") ||
		!strings.HasSuffix(p, "\nresult=booked H-7") {
		t.Errorf("resolution payload = %q, want who, why, how, the receipt and the result last", p)
	}
	if doubt, _ := v.e.InDoubt(ctx, auditor, 0); len(doubt) != 0 {
		t.Errorf("InDoubt after resolving = %+v, want none", doubt)
	}
	_, err = e.Resolve(ctx, approver, "ok", 3, false, "", "checked")
	testkit.WantKind(t, "Resolve twice", err, engine.Conflict)
	if _, err := e.Abort(ctx, agent, "ok", "done"); err != nil {
		t.Fatal(err)
	}
	if got := v.phases("ok")[4:]; !cmp.Equal(got, []string{"hang COMPENSATED", "reserveInventory COMPENSATED"}) {
		t.Errorf("after aborting: %v, want the resolved call and the reservation compensated", got)
	}
	// The receipt signs the result and the reason the person gave: an
	// insider who rewrites either breaks the journal.
	for what, edit := range map[string]func(e *engine.Entry){
		"another result": func(e *engine.Entry) {
			e.Payload = strings.Replace(e.Payload, "\nresult=booked H-7", "\nresult=booked H-8", 1)
		},
		"another reason": func(e *engine.Entry) {
			e.Payload = strings.Replace(e.Payload, "\nreason=hotel confirmed by phone\n", "\nreason=the owner said so\n", 1)
		},
	} {
		rechain(t, v, "ok", edit)
		if got := v.verify("ok"); got.Valid || !strings.Contains(got.Message, "receipt of seq=4 (entry 3) does not hold: it was signed for "+what) {
			t.Errorf("Verify with the resolution's %s = %+v; want its receipt broken", what, got)
		}
		rechain(t, v, "ok", func(e *engine.Entry) {
			if e.Seq == 4 {
				e.Payload = last.Payload
			}
		})
	}

	// It did not happen: FAILED, and the saga compensates.
	v.call("no", "reserveInventory", `{"item":"laptop"}`)
	e = v.inDoubt("no")
	s, err = e.Resolve(ctx, approver, "no", 3, false, "", "the hotel has no booking")
	if err != nil || s.Status != wire.Compensated {
		t.Fatalf("Resolve(did not happen) = %+v, %v; want COMPENSATED", s, err)
	}
	// The saga's reason says who found what, in their words: not the
	// journal entry's payload, whose receipt is no reason.
	if want := "tool hang did not happen, as manager@company.com found out: the hotel has no booking"; s.Reason != want {
		t.Errorf("Resolve(did not happen) reason = %q; want %q", s.Reason, want)
	}
	want2 := []string{"reserveInventory INTENT", "reserveInventory EXECUTED", "hang INTENT", "approval-gate FAILED", "reserveInventory COMPENSATED"}
	if got := v.phases("no"); !cmp.Equal(got, want2) {
		t.Errorf("journal = %v, want %v", got, want2)
	}
	if got := v.verify("no"); !got.Valid {
		t.Errorf("Verify = %+v", got)
	}

	// Resolved on another process while its tool still ran there, past
	// the in-doubt window: the tool's late answer is not journaled, and
	// the agent is told the call is in doubt, not what the tool said. The
	// process running it refuses to resolve it.
	started, release := make(chan struct{}), make(chan struct{})
	slow := engine.Tool{Name: "slow", Executor: engine.Funcs{Exec: func(context.Context, engine.Invocation) (string, error) {
		close(started)
		<-release
		return "late answer", nil
	}, Undo: func(context.Context, engine.Invocation, string) error { return nil }}}
	live, err := engine.New(v.db, append(v.fx.tools(), slow), engine.WithKeys(testkit.Keys(t)), engine.WithClock(clk.now), engine.WithInDoubtAfter(0))
	if err != nil {
		t.Fatal(err)
	}
	v.call("late", "reserveInventory", `{"item":"laptop"}`)
	answer := make(chan engine.CallResult, 1)
	go func() {
		r, _ := live.Call(ctx, agent, "late", "slow", `{"n":1}`)
		answer <- r
	}()
	<-started
	_, err = live.Resolve(ctx, approver, "late", 3, true, "done by hand", "checked by phone")
	testkit.WantKind(t, "Resolve on the process running the call", err, engine.Conflict)
	if _, err := e.Resolve(ctx, approver, "late", 3, true, "done by hand", "checked by phone"); err != nil {
		t.Fatal(err)
	}
	close(release)
	if r := <-answer; r.Outcome != engine.OutcomeInDoubt || r.Result != "" || !strings.Contains(r.Error, "after a person had resolved the call") {
		t.Errorf("the call resolved while it ran = %+v, want IN_DOUBT naming the resolution, not the late answer", r)
	}
	want3 := []string{"reserveInventory INTENT", "reserveInventory EXECUTED", "slow INTENT", "approval-gate EXECUTED"}
	if got := v.phases("late"); !cmp.Equal(got, want3) {
		t.Errorf("journal = %v, want %v: the resolution and nothing of the late answer", got, want3)
	}
}

// testReceipts: every decision carries a receipt that the standard note
// verifier accepts with the public key alone; a decision written into the
// database by hand, even with its chain hashes right, has no valid receipt,
// so verification reports it and resume executes nothing.
func testReceipts(t *testing.T, v *env) {
	ctx := context.Background()
	seq := v.gate("ok")
	v.approve("ok", seq)
	approved := v.journal("ok")[3]
	b, err := base64.StdEncoding.DecodeString(approved.Field("receipt"))
	if err != nil {
		t.Fatalf("APPROVED payload %q: no base64 receipt: %v", approved.Payload, err)
	}
	verifier, err := note.NewVerifier(testkit.Keys(t).VerifierKey())
	if err != nil {
		t.Fatal(err)
	}
	n, err := note.Open(b, note.VerifierList(verifier))
	if err != nil {
		t.Fatalf("note.Open(receipt) with the public key: %v", err)
	}
	gated := v.journal("ok")[2]
	for _, want := range []string{"saga: ok\n", "seq: 3\n", "entry: " + gated.Hash + "\n", "payload-sha256: " + engine.PayloadHash(transfer) + "\n",
		"decision: approved\n", "decider: manager@company.com\n", "auth: oidc\n"} {
		if !strings.Contains(n.Text, want) {
			t.Errorf("receipt text %q lacks %q", n.Text, want)
		}
	}

	// An insider appends a decision with the right chain hash and head.
	other, _ := testkit.NewKeys(t, testkit.Keys(t).Name())
	forgedBy := func(k *engine.Keys) string {
		signed, err := k.Sign(strings.Replace(n.Text, "saga: ok\n", "saga: SAGA\n", 1))
		if err != nil {
			t.Fatal(err)
		}
		return "approver=mallory\nauth=oidc\nreceipt=" + base64.StdEncoding.EncodeToString([]byte(signed))
	}
	// signedAfter is a receipt the server's own key signed for the forged
	// decision, naming a sign-in after it (which would meet any step-up).
	signedAfter := func(saga string, gated engine.Entry, at time.Time) string {
		r, err := engine.ParseReceipt(n.Text)
		if err != nil {
			t.Fatal(err)
		}
		r.SagaID, r.Entry, r.Time, r.AuthTime = saga, gated.Hash, at, at.Add(time.Hour).Truncate(time.Second)
		signed, err := testkit.Keys(t).Sign(r.Text())
		if err != nil {
			t.Fatal(err)
		}
		return "approver=manager@company.com\nauth=oidc\nreceipt=" + base64.StdEncoding.EncodeToString([]byte(signed))
	}
	for _, tt := range []struct{ name, payload, why string }{
		{"no receipt", "approver=mallory\nauth=oidc", "the decision carries no receipt"},
		{"receipt of another key", forgedBy(other), "the receipt's signature does not verify"},
		{"receipt of another decision", approved.Payload, `it was signed for saga "ok" seq=3`},
		{"a sign-in after the decision", "", "after the decision"},
	} {
		saga := "forged-" + strings.ReplaceAll(tt.name, " ", "-")
		v.gate(saga)
		es := v.journal(saga)
		at := es[2].Timestamp.Add(time.Second)
		payload := strings.ReplaceAll(tt.payload, "SAGA", saga)
		switch tt.name {
		case "receipt of another decision":
			payload = strings.Replace(approved.Payload, "approver=manager@company.com", "approver=mallory", 1)
		case "a sign-in after the decision":
			payload = signedAfter(saga, es[2], at)
		}
		f := engine.Entry{SagaID: saga, Seq: 4, ToolName: engine.GateTool, Phase: engine.PhaseApproved, Input: "seq=3",
			Payload: payload, Timestamp: at}
		f.Hash = engine.Hash(es[2].Hash, f)
		v.h.Exec(t, "INSERT INTO journal (saga_id, seq, tool_name, phase, input, payload, timestamp, hash) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
			f.SagaID, f.Seq, f.ToolName, f.Phase, f.Input, f.Payload, f.Timestamp, f.Hash)
		v.h.Exec(t, "UPDATE sagas SET head_seq = 4, head_hash = $2 WHERE id = $1", saga, f.Hash)
		v.h.Exec(t, "UPDATE approval_requests SET voters = $2, votes = 1 WHERE saga_id = $1", saga, "\nmallory\n")
		got := v.verify(saga)
		if got.Valid || got.BreakAtIndex != 3 || !strings.Contains(got.Message, tt.why) {
			t.Errorf("%s: Verify = %+v, want broken at the forged decision: %s", tt.name, got, tt.why)
		}
		wires := v.fx.transfer.Load()
		_, err := v.e.Resume(ctx, approver, saga, 3, transfer)
		testkit.WantKind(t, tt.name+": Resume on a forged approval", err, engine.Conflict)
		if v.fx.transfer.Load() != wires {
			t.Errorf("%s: the wire ran on a forged approval", tt.name)
		}
	}
}
