package main

import (
	"slices"
	"testing"

	"github.com/sagacity-go/sagacity/internal/engine"
)

// TestVerifyPolicyChange: an export of the server's policy saga verifies
// offline with the change a treasurer approved, naming the rule and who;
// the same history without the request and its votes — a document the
// server's key signed, in force after one whose change needs approval —
// is caught.
func TestVerifyPolicyChange(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	gated, err := engine.CompilePolicy(engine.PolicySpec{Default: []engine.RuleSpec{{Name: "two", Quorum: 2}},
		PolicyChange: []engine.RuleSpec{{Name: "change", Approvers: []string{"treasury"}}}})
	if err != nil {
		t.Fatal(err)
	}
	lax, err := engine.CompilePolicy(engine.PolicySpec{Default: []engine.RuleSpec{{Name: "one"}}})
	if err != nil {
		t.Fatal(err)
	}
	o := newDeployment(t, gated)
	e, proposal := o.start(lax)
	if proposal == nil || e.Policy().Hash != gated.Hash {
		t.Fatalf("started with the lax policy: proposal %+v, in force %s; want it proposed, the gated one in force", proposal, e.Policy().Hash)
	}
	bob := engine.Principal{ID: "bob", Auth: engine.AuthOIDC, Roles: []engine.Role{engine.RoleApprover}, Groups: []string{"treasury"}}
	if _, err := e.Approve(ctx, bob, engine.PolicySaga, proposal.Request, ""); err != nil || e.Policy().Hash != lax.Hash {
		t.Fatalf("bob's approval of the change: %v; in force %s; want the lax policy", err, e.Policy().Hash)
	}
	o.checkpoint()
	auditor := engine.Principal{ID: "auditor", Auth: engine.AuthOIDC, Roles: []engine.Role{engine.RoleAuditor}}
	es, ps, err := e.Evidence(ctx, auditor, engine.PolicySaga, 0)
	if err != nil {
		t.Fatal(err)
	}
	phases := make([]string, len(es))
	for i, en := range es {
		phases[i] = en.ToolName + " " + string(en.Phase)
	}
	if want := []string{"approval-policy EXECUTED", "approval-policy AWAITING_APPROVAL", "approval-gate APPROVED", "approval-policy INTENT",
		"approval-policy EXECUTED"}; !slices.Equal(phases, want) {
		t.Fatalf("%s = %q; want %q", engine.PolicySaga, phases, want)
	}
	x := exporter{t: t, dir: t.TempDir(), es: es, ps: ps}
	key := o.keys.VerifierKey()
	checkVerify(t, []verifyCase{
		{"the export", []string{"-key", key}, x.export("good.ndjson", nil), 0,
			`"message":"all 5 entries verified; seq=2 (rule change of policy ` + gated.Hash + `): resumed, approved by bob"`},
		{"the change without its request and votes", []string{"-key", key}, x.export("unapproved.ndjson",
			func(es []engine.Entry, ps *engine.Proofs) []engine.Entry {
				ps.Of = slices.Delete(ps.Of, 1, 4)
				return slices.Delete(es, 1, 4)
			}), 1, `"breakAtIndex":1,"message":"seq=2 (entry 1) is approval policy ` + lax.Hash + `, which took effect after policy ` +
			gated.Hash + ` without the approval of a request of it under that one's policyChange rules"`},
	})
}
