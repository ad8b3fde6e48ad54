package main

import (
	"slices"
	"testing"
	"time"

	"github.com/sagacity-go/sagacity/evidence"
	"github.com/sagacity-go/sagacity/internal/engine"
)

// TestVerifyBreakGlass: sagacity verify checks a break-glass execution
// offline. Ratified by its rule's quorum, it verifies and names who broke
// the glass and who ratified it; never ratified, past its window, the
// journal verifies and its message flags it; a ratification forged into
// it (one signed for another saga) breaks it.
func TestVerifyBreakGlass(t *testing.T) {
	t.Parallel()
	policy, err := engine.CompilePolicy(engine.PolicySpec{Default: []engine.RuleSpec{{Name: "one"}},
		BreakGlass: &engine.BreakGlassSpec{Approvers: []string{"oncall"}, RatifyWithin: engine.Duration(24 * time.Hour)}})
	if err != nil {
		t.Fatal(err)
	}
	o := newDeployment(t, policy)
	ctx := t.Context()
	agent := engine.Principal{ID: "agent", Auth: engine.AuthToken, Roles: []engine.Role{engine.RoleAgent}}
	auditor := engine.Principal{ID: "auditor", Auth: engine.AuthOIDC, Roles: []engine.Role{engine.RoleAuditor}}
	olga := engine.Principal{ID: "olga", Auth: engine.AuthOIDC, Roles: []engine.Role{engine.RoleApprover}, Groups: []string{"oncall"}}
	alice := engine.Principal{ID: "alice", Auth: engine.AuthOIDC, Roles: []engine.Role{engine.RoleApprover}}
	broken := func(saga string, ratifiers ...engine.Principal) ([]engine.Entry, *engine.Proofs) {
		t.Helper()
		if _, err := o.e.Call(ctx, agent, saga, "sendWireTransfer", `{"amount":"5000","to":"mallory"}`); err != nil {
			t.Fatal(err)
		}
		if _, err := o.e.BreakGlass(ctx, olga, saga, 1, "the bank closes"); err != nil {
			t.Fatal(err)
		}
		for _, p := range ratifiers {
			if _, err := o.e.Ratify(ctx, p, saga, 1, "fine"); err != nil {
				t.Fatal(err)
			}
		}
		o.checkpoint()
		es, ps, err := o.e.Evidence(ctx, auditor, saga, 0)
		if err != nil {
			t.Fatal(err)
		}
		return es, ps
	}
	okEs, okPs := broken("ratified", alice)
	lateEs, latePs := broken("late")
	ratification := okEs[len(okEs)-1]
	if ratification.Field(engine.KeyRatifiedBy) != alice.ID {
		t.Fatalf("the ratified saga's last entry = %q; want alice's ratification", ratification.Payload)
	}
	key := o.keys.VerifierKey()
	ratified := exporter{t: t, dir: t.TempDir(), es: okEs, ps: okPs}
	late := exporter{t: t, dir: t.TempDir(), es: lateEs, ps: latePs}
	checkVerify(t, []verifyCase{
		{"a ratified break-glass execution", []string{"-key", key}, ratified.export("ratified.ndjson", nil), 0,
			`"message":"all 5 entries verified; seq=1 (rule one of policy ` + policy.Hash + `): resumed by break-glass (olga), ratified by alice"`},
		{"a break-glass execution never ratified, past its window", []string{"-key", key}, late.export("late.ndjson", nil), 0,
			`; ` + evidence.Flagged + `the break-glass execution of seq=1 by olga was not ratified by its rule's quorum by `},
		{"a forged ratification", []string{"-key", key}, late.export("forged.ndjson", func(es []engine.Entry, ps *engine.Proofs) []engine.Entry {
			ps.Of = append(ps.Of, nil) // no proof: the receipt is checked first
			forged := ratification
			forged.SagaID = es[0].SagaID
			forged.Timestamp = es[len(es)-1].Timestamp
			return append(slices.Clone(es), forged)
		}), 1, `"breakAtIndex":4,"message":"receipt of seq=5 (entry 4) does not hold: it was signed for saga \"ratified\" seq=1"`},
	})
}
