package main

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sagacity-go/sagacity/evidence"
	"github.com/sagacity-go/sagacity/internal/engine"
)

// TestVerifyDelegation: an export of a saga with a delegated vote carries
// the delegation, proved in the log, and sagacity verify checks offline
// that it covered the vote (delegator, delegate, rule, window, not
// revoked): the delegation left out of the export, its window edited
// (its signature no longer holds, or signed again by whoever holds the
// key to end before the vote) or a revocation before the vote is caught.
func TestVerifyDelegation(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	policy, err := engine.CompilePolicy(engine.PolicySpec{Default: []engine.RuleSpec{{Name: "one"}},
		Tools: map[string][]engine.RuleSpec{"sendWireTransfer": {{Name: "large", Approvers: []string{"finance", "security"}, Quorum: 2}}}})
	if err != nil {
		t.Fatal(err)
	}
	o := newDeployment(t, policy)
	keys := o.keys
	agent := engine.Principal{ID: "agent", Auth: engine.AuthToken, Roles: []engine.Role{engine.RoleAgent}}
	auditor := engine.Principal{ID: "auditor", Auth: engine.AuthOIDC, Roles: []engine.Role{engine.RoleAuditor}}
	alice, bob, carol := approverIn("alice", "finance"), approverIn("bob", "security"), approverIn("carol")
	d, err := o.e.Delegate(ctx, alice, carol.ID, []string{"large"}, time.Time{}, o.now().Add(24*time.Hour), "away")
	if err != nil {
		t.Fatal(err)
	}
	const transfer = `{"amount":"5000","to":"mallory"}`
	if _, err := o.e.Call(ctx, agent, "wire", "sendWireTransfer", transfer); err != nil {
		t.Fatal(err)
	}
	if _, err := o.e.VoteFor(ctx, carol, alice.ID, engine.ActApprove, "wire", 1, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := o.e.Approve(ctx, bob, "wire", 1, ""); err != nil {
		t.Fatal(err)
	}
	if r, err := o.e.Resume(ctx, agent, "wire", 1, transfer); err != nil || r.Refused {
		t.Fatalf("Resume(wire, 1) = %+v, %v; want it executed", r, err)
	}
	st, signed := o.checkpoint()
	es, ps, err := o.e.Evidence(ctx, auditor, "wire", 0)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(ps.Delegations.Entries); n != 1 || ps.Delegations.Entries[0].Seq != d.Seq || ps.Delegations.Of[0] == nil {
		t.Fatalf("Evidence(wire) carries delegation lines %+v; want delegation seq=%d, proved", ps.Delegations.Entries, d.Seq)
	}
	vote, err := engine.OpenReceipt(engine.ReceiptOf(es[1]), keys.Verifier())
	if err != nil || vote.OnBehalfOf != alice.ID || vote.Delegation != d.Seq {
		t.Fatalf("carol's receipt = %+v, %v; want it on behalf of alice, under delegation %d", vote, err, d.Seq)
	}

	x := exporter{t: t, dir: t.TempDir(), es: es, ps: ps}
	// lines replaces the export's delegation lines with delegation entry
	// en as edited, and, when sign, signed again with the server's key.
	entry := func(tool string, seq int64, at time.Time, rec evidence.DelegationRecord, sign bool, was engine.Entry) engine.Entry {
		b, err := json.Marshal(rec)
		if err != nil {
			t.Fatal(err)
		}
		receipt := engine.ReceiptOf(was)
		if sign {
			if receipt, err = keys.Sign(evidence.DelegationNotes.EntryNote(tool, string(b))); err != nil {
				t.Fatal(err)
			}
		}
		return engine.Entry{SagaID: engine.DelegationSaga, Seq: seq, ToolName: tool, Phase: engine.PhaseExecuted, Input: string(b),
			Timestamp: at, Payload: engine.Lines{{Key: engine.KeyRequester, Value: alice.ID},
				{Key: engine.KeyReceipt, Value: base64.StdEncoding.EncodeToString([]byte(receipt))}}.String()}
	}
	delegation := func(es ...engine.Entry) func([]engine.Entry, *engine.Proofs) []engine.Entry {
		return func(all []engine.Entry, ps *engine.Proofs) []engine.Entry {
			ps.Delegations = engine.Attached{Entries: es, Of: make([][][]byte, len(es))}
			return all
		}
	}
	lent := ps.Delegations.Entries[0]
	shortened := d
	shortened.Until = vote.Time
	revocation := entry(engine.DelegationRevoked, 2, vote.Time.Add(-time.Second), evidence.DelegationRecord{From: alice.ID, To: carol.ID,
		Seq: d.Seq, By: alice.ID}, true, lent)
	key, cp := keys.VerifierKey(), x.save("cp.note", signed)
	ruling := fmt.Sprintf("seq=1 (rule large of policy %s): resumed, approved by carol for alice, bob", policy.Hash)
	const covers = `"breakAtIndex":1,"message":"seq=2 (entry 1) is a vote by carol on behalf of alice that no delegation covers: `
	checkVerify(t, []verifyCase{
		{"the export", []string{"-key", key, "-checkpoint", cp}, x.export("good.ndjson", nil), 0, fmt.Sprintf(
			`"valid":true,"entryCount":5,"breakAtIndex":-1,"message":"all 5 entries verified; %s; 5 in the log the checkpoint of size %d signed"`,
			ruling, st.Size)},
		{"the delegation left out", []string{"-key", key}, x.export("none.ndjson", delegation()), 1,
			covers + `it names delegation seq=1 of sagacity:delegations, which is not there"`},
		{"its window edited", []string{"-key", key}, x.export("edited.ndjson", delegation(entry(engine.Delegated, d.Seq, lent.Timestamp,
			shortened.Record(), false, lent))), 1,
			`"message":"seq=1 of sagacity:delegations is no delegation entry the key signed: its signature does not verify with ` + keys.Verifier().Name()},
		{"its window edited and signed again", []string{"-key", key}, x.export("resigned.ndjson", delegation(entry(engine.Delegated, d.Seq,
			lent.Timestamp, shortened.Record(), true, lent))), 1, covers + "the vote at " + evidence.Moment(vote.Time) +
			" is outside delegation seq=1's window"},
		{"a revocation before the vote", []string{"-key", key}, x.export("revoked.ndjson", delegation(lent, revocation)), 1,
			covers + "delegation seq=1 was revoked at " + evidence.Moment(revocation.Timestamp) + `, before the vote"`},
		{"the delegation unproved", []string{"-key", key, "-checkpoint", cp}, x.export("unproved.ndjson", delegation(lent)), 1,
			"seq=1 of sagacity:delegations carries no proof of inclusion in the log the checkpoint of size"},
	})
	// verify-receipt names the delegator and the delegation of carol's receipt.
	receipt, data := x.save("vote.receipt", engine.ReceiptOf(es[1])), x.save("wire.json", es[0].Input)
	code, out, why := offlineRun(t, "verify-receipt", "-key", key, receipt, data)
	if wantMsg := "carol for alice approved the request at seq=1 of saga wire, about exactly these bytes, under delegation seq=1 of " +
		"sagacity:delegations"; code != 0 || !strings.Contains(out, wantMsg) || !strings.Contains(out, `"onBehalfOf":"alice","delegation":1`) {
		t.Errorf("verify-receipt (carol's vote for alice) = exit %d %s%s; want exit 0 with %q", code, out, why, wantMsg)
	}
}
