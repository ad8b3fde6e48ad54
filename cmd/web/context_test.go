package main

import (
	"encoding/base64"
	"strings"
	"testing"

	"github.com/sagacity-go/sagacity/evidence"
	"github.com/sagacity-go/sagacity/internal/engine"
)

// TestVerifyContext: sagacity verify re-evaluates a request's rule
// offline from the context it journaled (who asked, when): a context
// edited so that a laxer rule would apply (the night moved to the day),
// with the rule line left or changed to match, breaks verification, with
// the head signed again too.
func TestVerifyContext(t *testing.T) {
	t.Parallel()
	// The deployment's clock starts at 09:00 UTC: 02:00 in Los Angeles.
	policy, err := engine.CompilePolicy(engine.PolicySpec{TimeZone: "America/Los_Angeles", Claims: []string{"department"},
		Default: []engine.RuleSpec{{Name: "one"}},
		Tools: map[string][]engine.RuleSpec{"sendWireTransfer": {
			{Name: "night", When: `now.getHours(tz) < 8 || now.getHours(tz) >= 19`, Quorum: 2},
			{Name: "day"}}}})
	if err != nil {
		t.Fatal(err)
	}
	o := newDeployment(t, policy)
	keys := o.keys
	person := func(id string) engine.Principal {
		return engine.Principal{ID: id, Auth: engine.AuthOIDC, Roles: []engine.Role{engine.RoleApprover}}
	}
	es, ps := o.executed("wire", `{"amount":"5000","to":"mallory"}`, person("alice"), person("bob"))
	if c := es[0].Field(engine.KeyContext); es[0].Field(engine.KeyRule) != "night" || !strings.Contains(c, `"now":"2026-08-07T02:00:03-07:00"`) {
		t.Fatalf("the request records rule %q, context %s; want night, at 2:00 in Los Angeles", es[0].Field(engine.KeyRule), c)
	}
	// daytime moves the request's now to noon and names rule as its rule;
	// with resign, every receipt of a vote on it is signed again by the
	// server's key for the entry so edited (and rule), as whoever holds
	// that key could.
	daytime := func(rule string, resign bool) func(es []engine.Entry, ps *engine.Proofs) []engine.Entry {
		return func(es []engine.Entry, ps *engine.Proofs) []engine.Entry {
			ls := evidence.ParseLines(es[0].Payload)
			for i, l := range ls {
				switch l.Key {
				case engine.KeyContext:
					ls[i].Value = strings.Replace(l.Value, "T02:00:03-07:00", "T12:00:03-07:00", 1)
				case engine.KeyRule:
					ls[i].Value = rule
				}
			}
			es[0].Payload = ls.String()
			if !resign {
				return es
			}
			hash := engine.Hash(engine.ZeroHash, es[0])
			for _, j := range []int{1, 2} {
				r, err := engine.OpenReceipt(engine.ReceiptOf(es[j]), keys.Verifier())
				if err != nil {
					t.Fatal(err)
				}
				r.Entry, r.Rule = hash, rule
				signed, err := keys.Sign(r.Text())
				if err != nil {
					t.Fatal(err)
				}
				vote := evidence.ParseLines(es[j].Payload)
				for k, l := range vote {
					if l.Key == engine.KeyReceipt {
						vote[k].Value = base64.StdEncoding.EncodeToString([]byte(signed))
					}
				}
				es[j].Payload = vote.String()
			}
			return es
		}
	}
	x := exporter{t: t, dir: t.TempDir(), es: es, ps: ps}
	resigned := x
	resigned.keys = keys
	key := keys.VerifierKey()
	checkVerify(t, []verifyCase{
		{"the export", []string{"-key", key}, x.export("good.ndjson", nil), 0,
			`"message":"all 5 entries verified; seq=1 (rule night of policy ` + policy.Hash + `): resumed, approved by alice, bob"`},
		{"now moved to the day", []string{"-key", key}, x.export("day.ndjson", daytime("night", false)), 1,
			`"breakAtIndex":1,"message":"receipt of seq=2 (entry 1) does not hold: it was signed for another entry at seq=1"`},
		{"now moved to the day, the receipts signed again", []string{"-key", key}, resigned.export("resigned.ndjson", daytime("night", true)), 1,
			`records approval rule \"night\", but its policy gives its bytes rule \"day\"`},
		{"now moved to the day, the rule with it, the receipts signed again", []string{"-key", key}, resigned.export("lax.ndjson", daytime("day", true)), 1,
			`"breakAtIndex":1,"message":"seq=2 (entry 1) is alice's approval, signed as vote 1 of 2, but it is vote 1 of 1 under rule day"`},
	})
}
