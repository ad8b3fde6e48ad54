package enginetest

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/sagacity-go/sagacity/internal/engine"
	"github.com/sagacity-go/sagacity/internal/testkit"
	"github.com/sagacity-go/sagacity/wire"
)

// testApprovalRules: the approval policy's first matching rule is pinned,
// with the policy's hash, on the request it applies to; a request no rule
// applies to is refused at the gate — journaled, the saga compensated,
// nothing left to approve — and the same call again under its key answers
// the refusal; a policy with rules for a tool that is not IRREVERSIBLE is
// refused at start.
func testApprovalRules(t *testing.T, v *env) {
	ctx := context.Background()
	policy, err := engine.CompilePolicy(engine.PolicySpec{Tools: map[string][]engine.RuleSpec{
		"sendWireTransfer": {{Name: "up-to-1000", When: `double(payload.amount) <= 1000.0`}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	v.opts = []engine.Option{engine.WithApprovals(policy)}
	v.e, v.log = v.engine(v.db)

	seq := v.gate("small") // 100 to alice
	req := v.journal("small")[seq-1]
	if req.Field(engine.KeyRule) != "up-to-1000" || req.Field(engine.KeyPolicy) != policy.Hash {
		t.Errorf("the request's payload = %q; want rule up-to-1000 and policy %s", req.Payload, policy.Hash)
	}

	v.call("big", "reserveInventory", `{"item":"laptop"}`)
	const big = `{"amount":"250000","to":"alice"}`
	r, err := v.e.CallOnce(ctx, agent, "big", engine.Ask{Tool: "sendWireTransfer", Input: big, Key: "wire-1"})
	if err != nil || r.Outcome != engine.OutcomeRefused || r.Status != wire.Compensated || !strings.Contains(r.Error, engine.RefusedNoRule) {
		t.Fatalf("a transfer no rule applies to = %+v, %v; want it refused at the gate and the saga compensated", r, err)
	}
	j := v.journal("big")
	if len(j) < 4 || j[2].Phase != engine.PhaseAwaitingApproval || j[2].Field(engine.KeyRule) != "" ||
		j[2].Field(engine.KeyPolicy) != policy.Hash || j[3].Phase != engine.PhaseRejected || j[3].Payload != engine.RefusedNoRule {
		t.Errorf("journal = %+v; want the request, under the policy and no rule, then its refusal", j)
	}
	if v.pending("big") != 0 || v.fx.count("undo reserveInventory reserved") != 1 || v.fx.transfer.Load() != 0 {
		t.Errorf("after the refusal: %d pending, reserve undone %d times, wire ran %d times; want 0, 1, 0",
			v.pending("big"), v.fx.count("undo reserveInventory reserved"), v.fx.transfer.Load())
	}
	if res, err := v.e.Verify(ctx, auditor, "big"); err != nil || !res.Valid {
		t.Errorf("Verify(big) = %+v, %v; want the refused request's journal to verify", res, err)
	}
	if again, err := v.e.CallOnce(ctx, agent, "big", engine.Ask{Tool: "sendWireTransfer", Input: big, Key: "wire-1"}); err != nil || again.Outcome != engine.OutcomeRefused {
		t.Errorf("the refused call again under its key = %+v, %v; want the refusal", again, err)
	}

	// A condition that cannot be evaluated, or input that is no JSON
	// object, refuses the request: never allowed.
	for i, input := range []string{`{"to":"alice"}`, `{"amount":"a lot","to":"alice"}`, `"250000 to alice"`} {
		saga := "odd-" + string(rune('a'+i))
		v.call(saga, "reserveInventory", `{"item":"laptop"}`)
		if r := v.call(saga, "sendWireTransfer", input); r.Outcome != engine.OutcomeRefused {
			t.Errorf("sendWireTransfer(%s) = %s; want refused", input, r.Outcome)
		}
	}

	testApprovers(t, v)

	bad, err := engine.CompilePolicy(engine.PolicySpec{Tools: map[string][]engine.RuleSpec{"reserveInventory": {{}}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := engine.New(v.db, v.fx.tools(), engine.WithKeys(testkit.Keys(t)), engine.WithApprovals(bad)); err == nil ||
		!strings.Contains(err.Error(), `rules for "reserveInventory", which is no IRREVERSIBLE tool`) {
		t.Errorf("an engine whose policy has rules for a compensatable tool: %v; want it refused", err)
	}
}

// testApprovers: only the rule's approvers (a role or a group) may decide
// a request, and the console is told so; a request made under another
// policy is not decided by this one.
func testApprovers(t *testing.T, v *env) {
	ctx := context.Background()
	policy, err := engine.CompilePolicy(engine.PolicySpec{Tools: map[string][]engine.RuleSpec{
		"sendWireTransfer": {{Name: "finance", Approvers: []string{"finance-leads"}}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	v.opts = []engine.Option{engine.WithApprovals(policy)}
	v.e, v.log = v.engine(v.db)
	seq := v.gate("fin")
	lead := engine.Principal{ID: "lead@company.com", Auth: "oidc", Roles: []engine.Role{engine.RoleApprover}, Groups: []string{"finance-leads"}}
	for _, a := range []string{"approve", "reject"} {
		var err error
		if a == "approve" {
			_, err = v.e.Approve(ctx, approver, "fin", seq, "")
		} else {
			_, err = v.e.Reject(ctx, approver, "fin", seq, "")
		}
		if !engine.IsKind(err, engine.Forbidden) || !strings.Contains(err.Error(), "takes one of finance-leads (approval rule finance)") {
			t.Errorf("%s by an approver outside finance-leads: %v; want Forbidden naming the rule", a, err)
		}
	}
	rv, err := v.e.Review(ctx, approver, "fin", seq)
	if err != nil {
		t.Fatal(err)
	}
	if acts := v.e.Allowed(approver, rv); acts.Approve || acts.Reject || !strings.Contains(acts.Why, "finance-leads") {
		t.Errorf("Allowed(an approver outside finance-leads) = %+v; want nothing, saying why", acts)
	}
	if acts := v.e.Allowed(lead, rv); !acts.Approve || !acts.Reject {
		t.Errorf("Allowed(a finance lead) = %+v; want approve and reject", acts)
	}
	if _, err := v.e.Approve(ctx, lead, "fin", seq, "invoice checked"); err != nil {
		t.Fatalf("Approve by a finance lead: %v", err)
	}

	// The server restarts with another policy: requests made under the
	// first are not decided by the second's rules.
	seq = v.gate("fin-2")
	v.opts = nil
	v.e, v.log = v.engine(v.db)
	if _, err := v.e.Approve(ctx, approver, "fin-2", seq, ""); !engine.IsKind(err, engine.Conflict) ||
		!strings.Contains(err.Error(), "was made under approval policy "+policy.Hash[:12]) {
		t.Errorf("Approve under another policy: %v; want Conflict naming the request's policy", err)
	}
}

// testFailsClosed: a condition that cannot be evaluated for a request
// refuses it at the gate instead of letting a laxer rule apply — a
// payload padded past the condition's cost, a string where it compares a
// number — journaled naming the rule and why, the saga compensated, the
// journal verifying, and the same call again under its key answering the
// refusal; a rule that says onError: skip lets the next one apply.
func testFailsClosed(t *testing.T, v *env) {
	ctx := context.Background()
	spec := func(onError string) engine.PolicySpec {
		return engine.PolicySpec{Tools: map[string][]engine.RuleSpec{"sendWireTransfer": {
			{Name: "large", When: `payload.items.exists(i, i.amount >= 10000 || i.tags.exists(t, t == "large"))`, Quorum: 2, OnError: onError},
			{Name: "small"},
		}}}
	}
	policy := v.usePolicy(spec(""))
	// 200 items of 100 tags each go past the cost before the large one.
	padded := `{"items":[` + strings.Repeat(`{"amount":1,"tags":[`+strings.Repeat(`"a",`, 99)+`"b"]},`, 200) + `{"amount":50000,"tags":[]}]}`
	for _, tt := range []struct{ saga, input, why string }{
		{"padded", padded, "operation cancelled: actual cost limit exceeded"},
		{"confused", `{"items":[{"amount":"50000","tags":[]}]}`, "no such overload"},
		{"no-object", `[{"amount":50000}]`, "the input is not a JSON object"},
	} {
		v.call(tt.saga, "reserveInventory", `{"item":"laptop"}`)
		ask := engine.Ask{Tool: "sendWireTransfer", Input: tt.input, Key: "wire"}
		r, err := v.e.CallOnce(ctx, agent, tt.saga, ask)
		if err != nil || r.Outcome != engine.OutcomeRefused || r.Status != wire.Compensated ||
			!strings.Contains(r.Error, engine.RefusedCondition+" (rule large: "+tt.why) {
			t.Errorf("%s: Call = %+v, %v; want refused at the gate naming rule large and %q, the saga compensated", tt.saga, r, err, tt.why)
		}
		j := v.journal(tt.saga)
		if len(j) < 4 || j[2].Field(engine.KeyRule) != "" || j[2].Field(engine.KeyPolicy) != policy.Hash || j[3].Phase != engine.PhaseRejected ||
			!strings.HasPrefix(j[3].Payload, engine.RefusedCondition+"\nrule=large\nerror="+tt.why) {
			t.Errorf("%s: journal = %+v; want the request under the policy and no rule, then its refusal naming rule large and why", tt.saga, j)
		}
		if v.pending(tt.saga) != 0 {
			t.Errorf("%s: %d requests pending after the refusal; want none", tt.saga, v.pending(tt.saga))
		}
		if got := v.verify(tt.saga); !got.Valid {
			t.Errorf("%s: Verify = %+v; want the gate's refusal to verify", tt.saga, got)
		}
		if again, err := v.e.CallOnce(ctx, agent, tt.saga, ask); err != nil || again.Outcome != engine.OutcomeRefused || again.Error != r.Error {
			t.Errorf("%s: the call again under its key = %+v, %v; want the refusal, as first answered (%q)", tt.saga, again, err, r.Error)
		}
	}
	if v.fx.transfer.Load() != 0 {
		t.Errorf("the wire ran %d times; want never", v.fx.transfer.Load())
	}

	// onError: skip lets the next rule apply, by the rule's own word.
	v.usePolicy(spec(engine.OnErrorSkip))
	v.call("skips", "reserveInventory", `{"item":"laptop"}`)
	if r := v.call("skips", "sendWireTransfer", padded); r.Outcome != engine.OutcomeAwaitingApproval {
		t.Fatalf("under onError: skip, Call = %+v; want it gated", r)
	}
	if got := v.journal("skips")[2].Field(engine.KeyRule); got != "small" {
		t.Errorf("under onError: skip, the request's rule = %q; want small", got)
	}
	if got := v.verify("skips"); !got.Valid {
		t.Errorf("Verify(skips) = %+v", got)
	}
}

// testPolicyChange: requests made under policy A are decided by A after
// the server restarts with policy B, and B's by B; the journal of the
// server's own PolicySaga, and so the log, holds both documents, and
// verification checks each request's votes against its own policy.
func testPolicyChange(t *testing.T, v *env) {
	ctx := context.Background()
	a := v.usePolicy(votePolicy)
	underA := v.gateLarge("under-a", agent)
	v.mustApprove("under-a", underA, alice)

	// Policy B lets any one approver approve anything.
	b := v.usePolicy(engine.PolicySpec{Default: []engine.RuleSpec{{Name: "anyone"}}})
	underB := v.gateLarge("under-b", agent)
	if got := v.journal("under-b")[underB-1].Field(engine.KeyPolicy); got != b.Hash {
		t.Fatalf("the request made under B records policy %s; want B's %s", got, b.Hash)
	}
	// A's request still needs a second finance vote: carol, fine under B,
	// is not one of A's approvers.
	_, err := v.e.Approve(ctx, carol, "under-a", underA, "fine")
	testkit.WantKind(t, "carol approving a request made under A", err, engine.Forbidden)
	if e := wantCode(t, "Resume of A's request on one vote", second(v.e.Resume(ctx, agent, "under-a", underA, large)), engine.Conflict,
		wire.CodeUndecided); !strings.Contains(e.Msg, "1 of 2 approvals") {
		t.Errorf("Resume of A's request on one vote: %q; want it undecided by A's quorum, 1 of 2", e.Msg)
	}
	underA2 := v.gateLarge("under-a2", agent) // under B now: one approver
	if _, err := v.e.Approve(ctx, carol, "under-a2", underA2, ""); err != nil {
		t.Errorf("carol approving a request made under B: %v", err)
	}
	ph, err := v.e.Policies(ctx, auditor)
	docs, inForce := ph.Documents, ph.InForce
	if err != nil || len(docs) != 2 || docs[0].Hash != a.Hash || docs[1].Hash != b.Hash || inForce != b.Hash ||
		docs[0].Text != a.Text || !docs[1].Since.After(docs[0].Since) {
		t.Errorf("Policies = %+v, %s, %v; want A then B, B in force", docs, inForce, err)
	}
	// A restart with B again records nothing new; back to A records A again.
	v.usePolicy(engine.PolicySpec{Default: []engine.RuleSpec{{Name: "anyone"}}})
	if ph, _ := v.e.Policies(ctx, auditor); len(ph.Documents) != 2 {
		t.Errorf("a restart with the same policy recorded %d documents; want 2", len(docs))
	}
	if got := v.verify(engine.PolicySaga); !got.Valid {
		t.Errorf("Verify(%s) = %+v", engine.PolicySaga, got)
	}
	for _, saga := range []string{"under-a", "under-b", "under-a2"} {
		if got := v.verify(saga); !got.Valid {
			t.Errorf("Verify(%s) = %+v", saga, got)
		}
	}
	// A forged policy document in the server's saga is never taken.
	es := v.journal(engine.PolicySaga)
	forged := es[len(es)-1]
	forged.Seq, forged.Input = forged.Seq+1, strings.Replace(forged.Input, `"anyone"`, `"anyone2"`, 1)
	forged.Payload = strings.Replace(forged.Payload, "policy="+b.Hash, "policy="+engine.PayloadHash(forged.Input), 1)
	forged.Timestamp = forged.Timestamp.Add(time.Second)
	forged.Hash = engine.Hash(es[len(es)-1].Hash, forged)
	v.h.Exec(t, "INSERT INTO journal (saga_id, seq, tool_name, phase, input, payload, timestamp, hash) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
		forged.SagaID, forged.Seq, forged.ToolName, forged.Phase, forged.Input, forged.Payload, forged.Timestamp, forged.Hash)
	v.h.Exec(t, "UPDATE sagas SET head_seq = $2, head_hash = $3 WHERE id = $1", engine.PolicySaga, forged.Seq, forged.Hash)
	if _, err := v.e.Policies(ctx, auditor); !engine.IsKind(err, engine.Conflict) || !strings.Contains(err.Error(), "no policy document the key signed") {
		t.Errorf("Policies with a forged document: %v; want Conflict naming it", err)
	}
	if _, err := v.e.RecordPolicy(ctx); !engine.IsKind(err, engine.Conflict) {
		t.Errorf("RecordPolicy over a forged document: %v; want Conflict", err)
	}
}
