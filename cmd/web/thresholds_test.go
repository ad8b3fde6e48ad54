package main

import (
	"encoding/base64"
	"testing"

	"github.com/sagacity-go/sagacity/evidence"
	"github.com/sagacity-go/sagacity/internal/engine"
)

// TestVerifyThresholds: sagacity verify checks offline where each
// approval counts under a rule's thresholds (one from finance and one
// from security): a vote moved to a requirement met already, in its
// entry alone or in its entry and a receipt the server's key signed
// again, placed in none, or placed otherwise by its entry than by its
// receipt, is caught.
func TestVerifyThresholds(t *testing.T) {
	t.Parallel()
	policy, err := engine.CompilePolicy(engine.PolicySpec{Default: []engine.RuleSpec{{Name: "one"}},
		Tools: map[string][]engine.RuleSpec{"sendWireTransfer": {{Name: "both",
			Thresholds: [][]engine.Requirement{{{From: "finance", Count: 1}, {From: "security", Count: 1}}}}}}})
	if err != nil {
		t.Fatal(err)
	}
	o := newDeployment(t, policy)
	keys := o.keys
	es, ps := o.executed("wire", `{"amount":"5000","to":"mallory"}`, approverIn("alice", "finance"), approverIn("bob", "security"))
	if r, err := engine.OpenReceipt(engine.ReceiptOf(es[2]), keys.Verifier()); err != nil || engine.MeetsText(r.Meets) != "2" ||
		es[2].Field(engine.KeyMeets) != "2" || r.Vote != 2 || r.Quorum != 2 {
		t.Fatalf("bob's receipt = %+v, %v; want vote 2 of 2, meeting security, as his entry says", r, err)
	}
	x := exporter{t: t, dir: t.TempDir(), es: es, ps: ps}
	key := keys.VerifierKey()
	// move places bob's approval (seq 3) in requirement to: in its entry,
	// and, when resign, in a receipt the server's key signs again.
	move := func(to []int, resign bool) func(es []engine.Entry, ps *engine.Proofs) []engine.Entry {
		return func(es []engine.Entry, ps *engine.Proofs) []engine.Entry {
			r, err := engine.OpenReceipt(engine.ReceiptOf(es[2]), keys.Verifier())
			if err != nil {
				t.Fatal(err)
			}
			ls := evidence.ParseLines(es[2].Payload)
			for i, l := range ls {
				switch {
				case l.Key == engine.KeyMeets:
					ls[i].Value = engine.MeetsText(to)
				case l.Key == engine.KeyReceipt && resign:
					r.Meets = to
					signed, err := keys.Sign(r.Text())
					if err != nil {
						t.Fatal(err)
					}
					ls[i].Value = base64.StdEncoding.EncodeToString([]byte(signed))
				}
			}
			es[2].Payload = ls.String()
			return es
		}
	}
	checkVerify(t, []verifyCase{
		{"the export", []string{"-key", key}, x.export("good.ndjson", nil), 0,
			`"message":"all 5 entries verified; seq=1 (rule both of policy ` + policy.Hash + `): resumed, approved by alice, bob"`},
		{"a vote moved in its entry alone", []string{"-key", key}, x.export("entry.ndjson", move([]int{1}, false)), 1,
			`"breakAtIndex":2,"message":"seq=3 (entry 2) is bob's approval under rule both's thresholds, which meets the requirement finance, met already"`},
		{"a vote moved, its receipt signed again", []string{"-key", key}, x.export("moved.ndjson", move([]int{1}, true)), 1,
			`"breakAtIndex":2,"message":"seq=3 (entry 2) is bob's approval under rule both's thresholds, which meets the requirement finance, met already"`},
		{"a vote placed in no requirement", []string{"-key", key}, x.export("none.ndjson", move([]int{0}, true)), 1,
			`"message":"seq=3 (entry 2) is bob's approval under rule both's thresholds, which meets no requirement"`},
		{"a vote whose entry and receipt disagree", []string{"-key", key}, x.export("split.ndjson", func(es []engine.Entry, ps *engine.Proofs) []engine.Entry {
			return move([]int{2}, false)(move([]int{1}, true)(es, ps), ps)
		}), 1, `"message":"seq=3 (entry 2) is bob's approval, which meets \"2\" by its entry but \"1\" by its receipt"`},
	})
}
