package main

import (
	"encoding/base64"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sagacity-go/sagacity/evidence"
	"github.com/sagacity-go/sagacity/internal/engine"
	"github.com/sagacity-go/sagacity/internal/passkey"
	"github.com/sagacity-go/sagacity/internal/testkit"
)

// TestVerifyPasskeys: an export with proofs of a saga whose votes its
// rule counts only signed with the voters' passkeys carries the passkeys'
// enrolments, proved in the log, and sagacity verify checks each vote's
// assertion offline against them. It fails, naming the vote, when the
// database is rewritten to point the votes at other bytes; when, on top,
// the server's key re-signs their receipts for those bytes (the
// passkeys' assertions are over the bytes approved); when the enrolment
// is missing from the export, edited, or not in the log. sagacity
// verify-receipt checks one vote's receipt the same way, against the
// enrolment in an export.
func TestVerifyPasskeys(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	const origin = "http://localhost:8080"
	rp, err := passkey.New(origin)
	if err != nil {
		t.Fatal(err)
	}
	policy, err := engine.CompilePolicy(engine.PolicySpec{Tools: map[string][]engine.RuleSpec{"sendWireTransfer": {
		{Name: "signed", Approvers: []string{"finance-leads", "treasury"}, Quorum: 2, Passkey: engine.PasskeyRequired}}}})
	if err != nil {
		t.Fatal(err)
	}
	o := newDeployment(t, policy, engine.WithPasskeys(rp, passkey.Check))
	e, keys := o.e, o.keys
	// Each voter signed in just now, the provider authenticating them
	// again, as enrolling a passkey takes.
	idp := testkit.NewIDTokens(t, "https://idp.example.com", "sagacity")
	person := func(id string, groups ...string) engine.Principal {
		p := engine.Principal{ID: id, Auth: engine.AuthOIDC, Issuer: idp.Issuer, Subject: id,
			Roles: []engine.Role{engine.RoleApprover}, Groups: groups, AuthTime: o.now()}
		p.SignIn = idp.SignIn(t, p, true)
		return p
	}
	agent := engine.Principal{ID: "agent", Auth: engine.AuthToken, Roles: []engine.Role{engine.RoleAgent}}
	auditor := engine.Principal{ID: "auditor", Auth: engine.AuthOIDC, Roles: []engine.Role{engine.RoleAuditor}}
	voters := []engine.Principal{person("alice", "finance-leads"), person("bob", "treasury")}
	authenticators, credentials := map[string]*testkit.Authenticator{}, map[string]string{}
	for _, p := range voters {
		a := testkit.NewAuthenticator(origin)
		id, options, err := e.BeginEnrolment(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		response, err := a.Register(options)
		if err != nil {
			t.Fatal(err)
		}
		k, err := e.FinishEnrolment(ctx, p, id, response)
		if err != nil {
			t.Fatal(err)
		}
		authenticators[p.ID], credentials[p.ID] = a, k.ID
	}
	const transfer = `{"amount":"5000","to":"mallory"}`
	if r, err := e.Call(ctx, agent, "wire", "sendWireTransfer", transfer); err != nil || r.Seq != 1 {
		t.Fatalf("Call(wire) = %+v, %v; want it gated at seq 1", r, err)
	}
	for _, p := range voters {
		c, err := e.BeginVote(ctx, p, "wire", 1, engine.ActApprove, "", credentials[p.ID])
		if err != nil {
			t.Fatal(err)
		}
		assertion, err := authenticators[p.ID].Assert(c.Options)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.VoteWithPasskey(ctx, p, c.ID, assertion); err != nil {
			t.Fatalf("%s's passkey vote: %v", p.ID, err)
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
	if len(es) != 5 || len(ps.Passkeys.Entries) != 2 || ps.Passkeys.Of[0] == nil {
		t.Fatalf("Evidence(wire) = %d entries, passkey lines %+v; want 5 entries and the two enrolments, proved", len(es), ps.Passkeys.Entries)
	}

	x := exporter{t: t, dir: t.TempDir(), es: es, ps: ps}
	cpFile, key := x.save("cp.note", signed), keys.VerifierKey()
	const other = `{"amount":"5000","to":"mallory-2"}`
	// rewrite points the request, its votes and its execution at other
	// bytes, the votes' receipts as the server's key would sign them for
	// those bytes when resign is set.
	rewrite := func(resign bool) func(es []engine.Entry, ps *engine.Proofs) []engine.Entry {
		return func(es []engine.Entry, ps *engine.Proofs) []engine.Entry {
			for i := range es {
				if es[i].Input == transfer {
					es[i].Input = other
				}
			}
			es[0].Hash = engine.Hash(engine.ZeroHash, es[0])
			for _, i := range []int{1, 2} {
				r, err := engine.OpenReceipt(engine.ReceiptOf(es[i]), keys.Verifier())
				if err != nil || r.Passkey == nil {
					t.Fatalf("the receipt of seq %d = %+v, %v; want a passkey vote", i+1, r, err)
				}
				if !resign {
					continue
				}
				r.Entry, r.PayloadSHA256 = es[0].Hash, engine.PayloadHash(other)
				note, err := keys.Sign(r.Text())
				if err != nil {
					t.Fatal(err)
				}
				ls := evidence.ParseLines(es[i].Payload)
				for j := range ls {
					if ls[j].Key == engine.KeyReceipt {
						ls[j].Value = base64.StdEncoding.EncodeToString([]byte(note))
					}
				}
				es[i].Payload = ls.String()
			}
			return es
		}
	}
	alice := credentials["alice"]
	good := x.export("good.ndjson", nil)
	unenrolled := x.export("unenrolled.ndjson", func(es []engine.Entry, ps *engine.Proofs) []engine.Entry {
		ps.Passkeys.Entries, ps.Passkeys.Of = ps.Passkeys.Entries[1:], ps.Passkeys.Of[1:]
		return es
	})
	unlogged := x.export("unlogged.ndjson", func(es []engine.Entry, ps *engine.Proofs) []engine.Entry {
		ps.Passkeys.Of[0] = [][]byte{make([]byte, 32)}
		return es
	})
	checkVerify(t, []verifyCase{
		{"the export", []string{"-key", key, "-checkpoint", cpFile}, good, 0, fmt.Sprintf(
			`"valid":true,"entryCount":5,"breakAtIndex":-1,"message":"all 5 entries verified; seq=1 (rule signed of policy %s): resumed, approved by alice, bob; 5 in the log the checkpoint of size %d signed"`,
			policy.Hash, st.Size)},
		{"who voted, and the sign-ins they enrolled their passkeys from, proved by the provider", []string{"-key", key, "-checkpoint", cpFile}, good, 0,
			`"identities":[{"seq":2,"decider":"alice","proved":true,"proof":"https://idp.example.com signed their sign-in at ` +
				voters[0].AuthTime.Format(time.RFC3339) + ` (seq=2 of sagacity:sign-ins); its passkey was enrolled from a sign-in the provider signed"},` +
				`{"seq":3,"decider":"bob","proved":true,`},
		{"the votes pointed at other bytes", []string{"-key", key}, x.export("other-bytes.ndjson", rewrite(false)), 1,
			`"breakAtIndex":1,"message":"receipt of seq=2 (entry 1) does not hold: it was signed for another entry at seq=1"`},
		{"the votes pointed at other bytes, their receipts re-signed by the server's key", []string{"-key", key},
			x.export("resigned.ndjson", rewrite(true)), 1,
			`"breakAtIndex":1,"message":"seq=2 (entry 1) is a vote by alice that its passkey does not sign: the passkey's assertion does not verify: Error validating challenge`},
		{"alice's enrolment left out", []string{"-key", key, "-checkpoint", cpFile}, unenrolled, 1,
			`"breakAtIndex":1,"message":"seq=2 (entry 1) is a vote by alice that its passkey does not sign: its passkey ` + alice + ` was never enrolled"`},
		{"alice's enrolment edited to mallory's", []string{"-key", key}, x.export("rekeyed.ndjson", func(es []engine.Entry, ps *engine.Proofs) []engine.Entry {
			en := &ps.Passkeys.Entries[0]
			en.Input = strings.Replace(en.Input, `"identity":"alice"`, `"identity":"mallory"`, 1)
			return es
		}), 1, `"breakAtIndex":1,"message":"seq=2 (entry 1) is a vote by alice signed with passkey ` + alice +
			`, but seq=1 of sagacity:passkeys is no passkey entry the key signed: its signature does not verify`},
		{"alice's enrolment not in the log", []string{"-key", key, "-checkpoint", cpFile}, unlogged, 1, fmt.Sprintf(
			`"breakAtIndex":1,"message":"seq=2 (entry 1) is a vote by alice signed with passkey %s, but seq=1 of sagacity:passkeys is not in the log the checkpoint of size %d signed"`,
			alice, st.Size)},
	})

	// One vote's receipt, checked alone against the enrolment in an export.
	receipt := engine.ReceiptOf(es[1])
	r, err := engine.OpenReceipt(receipt, keys.Verifier())
	if err != nil {
		t.Fatal(err)
	}
	r.PayloadSHA256 = engine.PayloadHash(other)
	forged, err := keys.Sign(r.Text())
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{"receipt.note": x.save("receipt.note", receipt), "forged.note": x.save("forged.note", forged),
		"payload": x.save("payload", transfer), "other": x.save("other", other)}
	for _, tt := range []struct {
		name          string
		flags         []string
		receipt, data string
		code          int
		want          string
	}{
		{"alice's vote, against her enrolment", []string{"-passkeys", good, "-checkpoint", cpFile}, "receipt.note", "payload", 0,
			`"valid":true,"message":"alice approved the request at seq=1 of saga wire, about exactly these bytes, signed with alice's passkey ` + alice + `"`},
		{"alice's vote, without her enrolment", nil, "receipt.note", "payload", 1,
			`"valid":false,"message":"the vote carries alice's passkey assertion, which only the passkey's enrolment checks: give -passkeys an export with proofs of saga wire"`},
		{"alice's vote re-signed by the server's key for other bytes", []string{"-passkeys", good}, "forged.note", "other", 1,
			`"valid":false,"message":"the vote is not alice's own: the passkey's assertion does not verify: Error validating challenge`},
		{"alice's vote, her enrolment left out", []string{"-passkeys", unenrolled}, "receipt.note", "payload", 1,
			`"valid":false,"message":"the vote is not alice's own: its passkey ` + alice + ` was never enrolled"`},
		{"alice's vote, her enrolment not in the log", []string{"-passkeys", unlogged, "-checkpoint", cpFile}, "receipt.note", "payload", 1,
			fmt.Sprintf(`"valid":false,"message":"seq=1 of sagacity:passkeys is not in the log the checkpoint of size %d signed"`, st.Size)},
	} {
		args := append(append([]string{"verify-receipt", "-key", key}, tt.flags...), files[tt.receipt], files[tt.data])
		code, out, _ := offlineRun(t, args...)
		if code != tt.code || !strings.Contains(out, tt.want) {
			t.Errorf("verify-receipt (%s) = exit %d %s, want exit %d with %s", tt.name, code, out, tt.code, tt.want)
		}
	}
}
