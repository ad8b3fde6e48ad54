package main

import (
	"fmt"
	"testing"
	"time"

	"github.com/sagacity-go/sagacity/evidence"
	"github.com/sagacity-go/sagacity/internal/engine"
	"github.com/sagacity-go/sagacity/wire"
)

// TestVerifyWait: offline, sagacity verify checks that a request whose
// rule has a wait timer (notBefore) was executed no sooner than that
// long after its quorum. An export altered so that the execution comes
// a minute after the vote (its chain recomputed) is caught, naming the
// wait and when it ended.
func TestVerifyWait(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	policy, err := engine.CompilePolicy(engine.PolicySpec{Default: []engine.RuleSpec{{Name: "one"}},
		Tools: map[string][]engine.RuleSpec{"sendWireTransfer": {{Name: "cooling", NotBefore: engine.Duration(time.Hour)}}}})
	if err != nil {
		t.Fatal(err)
	}
	o := newDeployment(t, policy)
	e := o.e
	agent := engine.Principal{ID: "agent", Auth: engine.AuthToken, Roles: []engine.Role{engine.RoleAgent}}
	alice := engine.Principal{ID: "alice", Auth: engine.AuthOIDC, Roles: []engine.Role{engine.RoleApprover}}
	auditor := engine.Principal{ID: "auditor", Auth: engine.AuthOIDC, Roles: []engine.Role{engine.RoleAuditor}}
	const transfer = `{"amount":"5000","to":"mallory"}`
	if _, err := e.Call(ctx, agent, "wire", "sendWireTransfer", transfer); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Approve(ctx, alice, "wire", 1, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Resume(ctx, agent, "wire", 1, transfer); engine.CodeOf(err) != wire.CodeNotYet {
		t.Fatalf("Resume(wire, 1) at once = %v; want NOT_YET", err)
	}
	for range 3600 { // the deployment's clock moves a second a reading
		o.now()
	}
	if r, err := e.Resume(ctx, agent, "wire", 1, transfer); err != nil || r.Refused {
		t.Fatalf("Resume(wire, 1) an hour on = %+v, %v; want it executed", r, err)
	}
	st, signed := o.checkpoint()
	es, ps, err := e.Evidence(ctx, auditor, "wire", 0)
	if err != nil || len(es) != 4 {
		t.Fatalf("Evidence(wire) = %d entries, %v; want 4", len(es), err)
	}
	x := exporter{t: t, dir: t.TempDir(), es: es, ps: ps}
	cpFile, key := x.save("cp.note", signed), o.keys.VerifierKey()
	ended := es[1].Timestamp.Add(time.Hour)
	checkVerify(t, []verifyCase{
		{"the export", []string{"-key", key, "-checkpoint", cpFile}, x.export("good.ndjson", nil), 0,
			fmt.Sprintf(`"valid":true,"entryCount":4,"breakAtIndex":-1,"message":"all 4 entries verified; seq=1 (rule cooling of policy %s): resumed, approved by alice; 4 in the log the checkpoint of size %d signed"`,
				policy.Hash, st.Size)},
		{"executed before the wait ended", []string{"-key", key, "-checkpoint", cpFile}, x.export("early.ndjson", func(es []engine.Entry, ps *engine.Proofs) []engine.Entry {
			for i := 2; i < len(es); i++ {
				es[i].Timestamp = es[1].Timestamp.Add(time.Minute)
			}
			return es
		}), 1, fmt.Sprintf(`"breakAtIndex":2,"message":"seq=3 (entry 2) executes the request at seq=1 at %s, before its wait of 1h0m0s (rule cooling) ended at %s"`,
			evidence.Moment(es[1].Timestamp.Add(time.Minute)), evidence.Moment(ended))},
	})
}
