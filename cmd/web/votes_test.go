package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sagacity-go/sagacity/evidence"
	"github.com/sagacity-go/sagacity/internal/engine"
	"github.com/sagacity-go/sagacity/internal/store"
	"github.com/sagacity-go/sagacity/internal/testkit"
	"github.com/sagacity-go/sagacity/internal/tlog"
	"github.com/sagacity-go/sagacity/internal/witness"
)

// TestVerifyVotes: an export with proofs carries the approval policy its
// request pinned, proved in the log, and sagacity verify checks offline
// that the request had the quorum its rule asks for, from people the
// rule names, and was executed within the rule's grant, naming the rule
// and who approved. An export altered so that a request that did not
// meet its rule passes for one that did (its chain recomputed) is caught,
// each for what was altered.
func TestVerifyVotes(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	// A transfer takes two approvals from finance-leads or treasury, and
	// must be executed within the hour; a refund, one approver's.
	policy, err := engine.CompilePolicy(engine.PolicySpec{
		Default: []engine.RuleSpec{{Name: "one"}},
		Tools: map[string][]engine.RuleSpec{"sendWireTransfer": {{Name: "large", Approvers: []string{"finance-leads", "treasury"},
			Quorum: 2, Grant: engine.Duration(time.Hour)}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	o := newDeployment(t, policy)
	e, keys := o.e, o.keys
	agent := engine.Principal{ID: "agent", Auth: engine.AuthToken, Roles: []engine.Role{engine.RoleAgent}}
	auditor := engine.Principal{ID: "auditor", Auth: engine.AuthOIDC, Roles: []engine.Role{engine.RoleAuditor}}
	alice, bob, carol := approverIn("alice", "finance-leads"), approverIn("bob", "treasury"), approverIn("carol") // carol is in neither group

	// carol approves a refund in another saga, which her role allows.
	if _, err := e.Call(ctx, agent, "other", "refund", `{"amount":"7"}`); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Approve(ctx, carol, "other", 1, ""); err != nil {
		t.Fatal(err)
	}
	const transfer = `{"amount":"5000","to":"mallory"}`
	if r, err := e.Call(ctx, agent, "wire", "sendWireTransfer", transfer); err != nil || r.Seq != 1 || r.Outcome != engine.OutcomeAwaitingApproval {
		t.Fatalf("Call(wire) = %+v, %v; want it gated at seq 1", r, err)
	}
	for _, p := range []engine.Principal{alice, bob} {
		if _, err := e.Approve(ctx, p, "wire", 1, ""); err != nil {
			t.Fatalf("%s's approval: %v", p.ID, err)
		}
	}
	if r, err := e.Resume(ctx, agent, "wire", 1, transfer); err != nil || r.Refused {
		t.Fatalf("Resume(wire, 1) = %+v, %v; want it executed", r, err)
	}
	st, signed := o.checkpoint()
	es, ps, err := e.Evidence(ctx, auditor, "wire", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(es) != 5 || len(ps.Policies.Entries) != 1 || ps.Policies.Entries[0].Field(engine.KeyPolicy) != policy.Hash || ps.Policies.Of[0] == nil {
		t.Fatalf("Evidence(wire) = %d entries and policy lines %+v; want 5 entries and the policy %s, proved", len(es), ps.Policies.Entries, policy.Hash)
	}
	others, err := e.Journal(ctx, auditor, "other")
	if err != nil {
		t.Fatal(err)
	}

	x := exporter{t: t, dir: t.TempDir(), es: es, ps: ps}
	save, export := x.save, x.export
	// vote rewrites bob's approval (seq 3) as carol's, with the receipt
	// line of receipt.
	vote := func(receipt string) func(es []engine.Entry, ps *engine.Proofs) []engine.Entry {
		return func(es []engine.Entry, ps *engine.Proofs) []engine.Entry {
			ls := evidence.ParseLines(es[2].Payload)
			for i, l := range ls {
				switch l.Key {
				case engine.KeyApprover:
					ls[i].Value = carol.ID
				case engine.KeyReceipt:
					ls[i].Value = receipt
				}
			}
			es[2].Payload = ls.String()
			return es
		}
	}
	// carol's receipt as the server would sign it, had it counted her
	// vote in bob's place.
	r, err := engine.OpenReceipt(engine.ReceiptOf(es[2]), keys.Verifier())
	if err != nil || r.EligibleAs != "treasury" || r.Vote != 2 {
		t.Fatalf("bob's receipt = %+v, %v; want vote 2, as treasury", r, err)
	}
	r.Decider, r.EligibleAs = carol.ID, string(engine.RoleApprover)
	resigned, err := keys.Sign(r.Text())
	if err != nil {
		t.Fatal(err)
	}

	cpFile, key := save("cp.note", signed), keys.VerifierKey()
	good := export("good.ndjson", nil)
	hash := policy.Hash
	grantEnd := es[2].Timestamp.Add(time.Hour).UTC().Format(time.RFC3339)
	ruling := fmt.Sprintf("seq=1 (rule large of policy %s): resumed, approved by alice, bob", hash)
	checkVerify(t, []verifyCase{
		{"the export", []string{"-key", key, "-checkpoint", cpFile}, good, 0, fmt.Sprintf(
			`"valid":true,"entryCount":5,"breakAtIndex":-1,"message":"all 5 entries verified; %s; 5 in the log the checkpoint of size %d signed"`, ruling, st.Size)},
		{"the export, without the checkpoint", []string{"-key", key}, good, 0, `"message":"all 5 entries verified; ` + ruling + `"`},
		{"the export, without the key", nil, good, 0, `"message":"all 5 entries verified"`},
		{"a vote removed", []string{"-key", key}, export("removed.ndjson", func(es []engine.Entry, ps *engine.Proofs) []engine.Entry {
			ps.Of = slices.Delete(ps.Of, 2, 3)
			return slices.Delete(es, 2, 3)
		}), 1, `"breakAtIndex":2,"message":"seq=3 (entry 2) executes the request at seq=1 with 1 of 2 approvals (alice); waiting for 1 more from finance-leads or treasury"`},
		{"a vote removed, with the checkpoint", []string{"-key", key, "-checkpoint", cpFile}, filepath.Join(x.dir, "removed.ndjson"), 1,
			`"message":"seq=3 (entry 2) executes the request at seq=1 with 1 of 2 approvals`},
		{"a vote by carol, with the receipt of her vote on another request", []string{"-key", key},
			export("copied.ndjson", vote(others[1].Field(engine.KeyReceipt))), 1,
			`"breakAtIndex":2,"message":"receipt of seq=3 (entry 2) does not hold: it was signed for saga \"other\" seq=1"`},
		{"a vote by carol, with a receipt the key signed", []string{"-key", key, "-checkpoint", cpFile},
			export("ineligible.ndjson", vote(base64.StdEncoding.EncodeToString([]byte(resigned)))), 1,
			`"breakAtIndex":2,"message":"seq=3 (entry 2) is a vote by carol as \"approver\", which is none of rule large's approvers (finance-leads, treasury)"`},
		{"executed after the grant", []string{"-key", key, "-checkpoint", cpFile}, export("late.ndjson", func(es []engine.Entry, ps *engine.Proofs) []engine.Entry {
			for i := 3; i < len(es); i++ {
				es[i].Timestamp = es[i].Timestamp.Add(2 * time.Hour)
			}
			return es
		}), 1, `"breakAtIndex":3,"message":"seq=4 (entry 3) executes the request at seq=1 after its grant ended at ` + grantEnd + `"`},
		{"the policy's document edited", []string{"-key", key, "-checkpoint", cpFile}, export("edited.ndjson", func(es []engine.Entry, ps *engine.Proofs) []engine.Entry {
			ps.Policies.Entries[0].Input = strings.Replace(ps.Policies.Entries[0].Input, `"quorum":2`, `"quorum":1`, 1)
			return es
		}), 1, `"breakAtIndex":0,"message":"seq=1 (entry 0) pins approval policy ` + hash +
			`, but seq=1 of sagacity:policies is no policy document the key signed: the document's SHA-256 is not the hash it names"`},
		{"the policy's document edited, its hash too", []string{"-key", key, "-checkpoint", cpFile}, export("rehashed.ndjson", func(es []engine.Entry, ps *engine.Proofs) []engine.Entry {
			doc := strings.Replace(ps.Policies.Entries[0].Input, `"quorum":2`, `"quorum":1`, 1)
			ps.Policies.Entries[0].Input = doc
			ps.Policies.Entries[0].Payload = strings.Replace(ps.Policies.Entries[0].Payload, policy.Hash, engine.PayloadHash(doc), 1)
			return es
		}), 1, `"breakAtIndex":-1,"message":"seq=1 of sagacity:policies is no policy document the key signed: the key signed another document"`},
		{"the policy line removed", []string{"-key", key, "-checkpoint", cpFile}, export("unpinned.ndjson", func(es []engine.Entry, ps *engine.Proofs) []engine.Entry {
			ps.Policies = engine.Attached{}
			return es
		}), 1, `"breakAtIndex":0,"message":"seq=1 (entry 0) is a request under approval policy ` + hash + `: its document is not in the export"`},
		{"the policy line's proof altered", []string{"-key", key, "-checkpoint", cpFile}, export("misproved.ndjson", func(es []engine.Entry, ps *engine.Proofs) []engine.Entry {
			ps.Policies.Of[0] = slices.Clone(ps.Policies.Of[0])
			ps.Policies.Of[0][0] = bytes.Clone(ps.Policies.Of[0][0])
			ps.Policies.Of[0][0][0] ^= 1
			return es
		}), 1, fmt.Sprintf(`"breakAtIndex":0,"message":"seq=1 (entry 0) pins approval policy %s, but seq=1 of sagacity:policies is not in the log the checkpoint of size %d signed"`, hash, st.Size)},
		{"the policy line's proof dropped", []string{"-key", key, "-checkpoint", cpFile, "-allow-unproved"}, export("unproved.ndjson", func(es []engine.Entry, ps *engine.Proofs) []engine.Entry {
			ps.Policies.Of[0] = nil
			return es
		}), 1, fmt.Sprintf(`"message":"seq=1 (entry 0) pins approval policy %s, but seq=1 of sagacity:policies carries no proof of inclusion in the log the checkpoint of size %d signed"`, hash, st.Size)},
		{"a policy line of another saga, without the key", nil, export("foreign.ndjson", func(es []engine.Entry, ps *engine.Proofs) []engine.Entry {
			ps.Policies.Entries[0].SagaID = "wire"
			return es
		}), 2, `line 6: a policy line must hold an entry of saga sagacity:policies`},
	})
}

// TestVerifyGateRefusal: offline, sagacity verify agrees with the gate
// about a request whose rule's condition cannot be evaluated (a string
// where it compares a number): the gate's refusal, naming the rule,
// verifies; the request rewritten to pass for one its laxer rule decides
// (its refusal dropped, the chain recomputed) is caught, and so is the
// refusal rewritten to say that no rule applied.
func TestVerifyGateRefusal(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	policy, err := engine.CompilePolicy(engine.PolicySpec{
		Default: []engine.RuleSpec{{Name: "one"}},
		Tools: map[string][]engine.RuleSpec{"sendWireTransfer": {
			{Name: "large", When: "payload.amount >= 10000", Quorum: 2},
			{Name: "small"},
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	o := newDeployment(t, policy)
	agent := engine.Principal{ID: "agent", Auth: engine.AuthToken, Roles: []engine.Role{engine.RoleAgent}}
	auditor := engine.Principal{ID: "auditor", Auth: engine.AuthOIDC, Roles: []engine.Role{engine.RoleAuditor}}
	if r, err := o.e.Call(ctx, agent, "wire", "sendWireTransfer", `{"amount":"50000"}`); err != nil || r.Outcome != engine.OutcomeRefused {
		t.Fatalf("Call(wire) = %+v, %v; want it refused at the gate", r, err)
	}
	o.checkpoint()
	es, ps, err := o.e.Evidence(ctx, auditor, "wire", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(es) != 2 || es[1].Field(engine.KeyRule) != "large" {
		t.Fatalf("Evidence(wire) = %+v; want the request and its refusal naming rule large", es)
	}
	x := exporter{t: t, dir: t.TempDir(), es: es, ps: ps}
	key := o.keys.VerifierKey()
	checkVerify(t, []verifyCase{
		{"the export", []string{"-key", key}, x.export("good.ndjson", nil), 0, `"valid":true,"entryCount":2`},
		{"the request pinned to the laxer rule", []string{"-key", key}, x.export("laxer.ndjson", func(es []engine.Entry, _ *engine.Proofs) []engine.Entry {
			es[0].Payload += "\nrule=small"
			return es[:1]
		}), 1, `"breakAtIndex":0,"message":"seq=1 (entry 0) records approval rule \"small\", but its policy gives its bytes no rule (rule \"large\"'s condition cannot be evaluated for them)`},
		{"the refusal saying no rule applied", []string{"-key", key}, x.export("norule.ndjson", func(es []engine.Entry, _ *engine.Proofs) []engine.Entry {
			es[1].Payload = engine.RefusedNoRule
			return es
		}), 1, `"breakAtIndex":0,"message":"seq=1 (entry 0) is a request its policy refuses (` + engine.RefusedCondition + ` (rule large: no such overload`},
	})
}

// deployment is an engine over a SQLite database with its global log, the
// tools sendWireTransfer and refund, and an approval policy, whose
// exports a test verifies offline.
type deployment struct {
	t    *testing.T
	now  func() time.Time // the engine's clock
	e    *engine.Engine
	keys *engine.Keys
	log  *tlog.Log
	w    *witness.Dir
	// start starts an engine with policy on the deployment's database,
	// as a server restarted with another configuration, and records it.
	start func(policy *engine.Approvals) (*engine.Engine, *engine.Proposal)
}

func newDeployment(t *testing.T, policy *engine.Approvals, opts ...engine.Option) deployment {
	t.Helper()
	ctx := t.Context()
	db, err := store.Open(ctx, testkit.SQLiteURL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	w, err := witness.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	keys := testkit.Keys(t)
	var mu sync.Mutex
	at := time.Date(2026, 8, 7, 9, 0, 0, 0, time.UTC)
	now := func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		at = at.Add(time.Second)
		return at
	}
	// Checkpoints are signed when the test sequences the log.
	l := tlog.New(db, w, keys, tlog.Options{Every: 1, Interval: 24 * time.Hour, Now: now})
	if err := l.Claim(ctx); err != nil {
		t.Fatal(err)
	}
	ok := engine.Funcs{Exec: func(context.Context, engine.Invocation) (string, error) { return "ok", nil }}
	start := func(policy *engine.Approvals) (*engine.Engine, *engine.Proposal) {
		t.Helper()
		e, err := engine.New(db, []engine.Tool{{Name: "sendWireTransfer", Reversibility: engine.Irreversible, Executor: ok},
			{Name: "refund", Reversibility: engine.Irreversible, Executor: ok}},
			append([]engine.Option{engine.WithKeys(keys), engine.WithClock(now), engine.WithLog(l), engine.WithApprovals(policy)}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		p, err := e.RecordPolicy(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return e, p
	}
	e, _ := start(policy)
	return deployment{t: t, now: now, e: e, keys: keys, log: l, w: w, start: start}
}

// executed has an agent request a transfer in saga, voters approve it,
// the agent execute it, and returns the saga's evidence once checkpointed,
// as an auditor exports it.
func (o deployment) executed(saga, transfer string, voters ...engine.Principal) ([]engine.Entry, *engine.Proofs) {
	o.t.Helper()
	ctx := o.t.Context()
	agent := engine.Principal{ID: "agent", Auth: engine.AuthToken, Roles: []engine.Role{engine.RoleAgent}}
	auditor := engine.Principal{ID: "auditor", Auth: engine.AuthOIDC, Roles: []engine.Role{engine.RoleAuditor}}
	if _, err := o.e.Call(ctx, agent, saga, "sendWireTransfer", transfer); err != nil {
		o.t.Fatal(err)
	}
	for _, p := range voters {
		if _, err := o.e.Approve(ctx, p, saga, 1, ""); err != nil {
			o.t.Fatalf("%s's approval: %v", p.ID, err)
		}
	}
	if r, err := o.e.Resume(ctx, agent, saga, 1, transfer); err != nil || r.Refused {
		o.t.Fatalf("Resume(%s, 1) = %+v, %v; want it executed", saga, r, err)
	}
	o.checkpoint()
	es, ps, err := o.e.Evidence(ctx, auditor, saga, 0)
	if err != nil {
		o.t.Fatal(err)
	}
	return es, ps
}

// checkpoint sequences the log and returns its state and the newest
// checkpoint, signed.
func (o deployment) checkpoint() (tlog.State, string) {
	o.t.Helper()
	st, err := o.log.Sequence(o.t.Context(), true)
	if err != nil {
		o.t.Fatal(err)
	}
	signed, _, err := o.w.Newest()
	if err != nil {
		o.t.Fatal(err)
	}
	return st, signed
}

// approverIn is an OIDC approver of id, in groups.
func approverIn(id string, groups ...string) engine.Principal {
	return engine.Principal{ID: id, Auth: engine.AuthOIDC, Roles: []engine.Role{engine.RoleApprover}, Groups: groups}
}

// exporter writes exports of a saga's entries es with proofs ps into
// dir.
type exporter struct {
	t   *testing.T
	dir string
	es  []engine.Entry
	ps  *engine.Proofs
	// keys, when set, sign the altered export's head again, as whoever
	// holds the server's key could.
	keys *engine.Keys
}

// save writes a file into the directory and returns its path.
func (x exporter) save(name, content string) string {
	x.t.Helper()
	p := filepath.Join(x.dir, name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		x.t.Fatal(err)
	}
	return p
}

// export writes a copy of the export, altered by alter, with its chain
// recomputed from the first entry alter changed or removed, as an
// insider rewriting the database would; the proofs and head stay as
// signed.
func (x exporter) export(name string, alter func(es []engine.Entry, ps *engine.Proofs) []engine.Entry) string {
	x.t.Helper()
	clone := func(a engine.Attached) engine.Attached {
		return engine.Attached{Entries: slices.Clone(a.Entries), Of: slices.Clone(a.Of)}
	}
	es, ps := slices.Clone(x.es), &engine.Proofs{TreeSize: x.ps.TreeSize, Of: slices.Clone(x.ps.Of), Head: x.ps.Head,
		Policies: clone(x.ps.Policies), Passkeys: clone(x.ps.Passkeys), SignIns: clone(x.ps.SignIns), Delegations: clone(x.ps.Delegations)}
	if alter != nil {
		es = alter(es, ps)
	}
	prev := engine.ZeroHash
	for i := range es {
		es[i].Seq = int64(i + 1)
		es[i].Hash = engine.Hash(prev, es[i])
		prev = es[i].Hash
	}
	if x.keys != nil {
		h, err := evidence.OpenHead(ps.Head, x.keys.Verifier())
		if err != nil {
			x.t.Fatal(err)
		}
		h.Seq, h.Hash = es[len(es)-1].Seq, es[len(es)-1].Hash
		if ps.Head, err = x.keys.Sign(h.Text()); err != nil {
			x.t.Fatal(err)
		}
	}
	var b bytes.Buffer
	if err := evidence.WriteNDJSON(&b, es, ps); err != nil {
		x.t.Fatal(err)
	}
	return x.save(name, b.String())
}

// verifyCase is a run of sagacity verify and what it must answer.
type verifyCase struct {
	name string
	args []string // before the file
	file string
	code int
	want string // in the output, or in the error of an unreadable file
}

// checkVerify runs sagacity verify for each case.
func checkVerify(t *testing.T, tests []verifyCase) {
	t.Helper()
	for _, tt := range tests {
		args := append(append([]string{"verify"}, tt.args...), tt.file)
		code, out, why := offlineRun(t, args...)
		if got := out + why; code != tt.code || !strings.Contains(got, tt.want) {
			t.Errorf("%s: sagacity verify %s = exit %d %s, want exit %d with %s", tt.name, strings.Join(args[1:], " "), code, got, tt.code, tt.want)
		}
	}
}
