package main

import (
	"encoding/base64"
	"fmt"
	"strings"
	"testing"

	"github.com/sagacity-go/sagacity/evidence"
	"github.com/sagacity-go/sagacity/internal/engine"
)

// TestVerifyUntrusted: evidence that does not hold — a policy, passkey or
// sign-in line, an export's head, a receipt or a checkpoint signed by
// another key, or not signed at all — is refused by the offline commands
// with exit status 1 and what does not hold, whatever type of error the
// check that read it returned: they read its message, never assert its
// type, so no export panics them.
func TestVerifyUntrusted(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	policy, err := engine.CompilePolicy(engine.PolicySpec{Default: []engine.RuleSpec{{Name: "one"}}})
	if err != nil {
		t.Fatal(err)
	}
	o := newDeployment(t, policy)
	e, keys := o.e, o.keys
	agent := engine.Principal{ID: "agent", Auth: engine.AuthToken, Roles: []engine.Role{engine.RoleAgent}}
	approver := engine.Principal{ID: "token:approver", Auth: engine.AuthToken, Roles: []engine.Role{engine.RoleApprover}}
	auditor := engine.Principal{ID: "auditor", Auth: engine.AuthToken, Roles: []engine.Role{engine.RoleAuditor}}
	const refund = `{"amount":"7"}`
	if _, err := e.Call(ctx, agent, "r", "refund", refund); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Approve(ctx, approver, "r", 1, ""); err != nil {
		t.Fatal(err)
	}
	if r, err := e.Resume(ctx, agent, "r", 1, refund); err != nil || r.Refused {
		t.Fatalf("Resume(r, 1) = %+v, %v; want it executed", r, err)
	}
	st, signed := o.checkpoint()
	es, ps, err := e.Evidence(ctx, auditor, "r", 0)
	if err != nil {
		t.Fatal(err)
	}
	receipt, err := e.Receipt(ctx, auditor, "r", 2)
	if err != nil {
		t.Fatal(err)
	}

	// Another server's key, which signs what this one never did.
	skey, _, err := engine.GenerateKeys("sagacity.test")
	if err != nil {
		t.Fatal(err)
	}
	other, err := engine.NewKeys(skey)
	if err != nil {
		t.Fatal(err)
	}
	sign := func(text string) string {
		s, err := other.Sign(text)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	notBy := "does not verify with " + keys.Name()
	x := exporter{t: t, dir: t.TempDir(), es: es, ps: ps}
	key, cp := keys.VerifierKey(), x.save("cp.note", signed)
	forgedCP := x.save("forged-cp.note", sign(fmt.Sprintf("%s\n%d\n%s\n", keys.Name(), st.Size, base64.StdEncoding.EncodeToString(make([]byte, 32)))))
	// line is an entry of one of the server's sagas whose signature is
	// sig, attached to the export without a proof.
	line := func(saga, tool, sig string) engine.Attached {
		return engine.Attached{Entries: []engine.Entry{{SagaID: saga, Seq: 1, ToolName: tool, Phase: engine.PhaseExecuted, Input: "{}",
			Payload: engine.Lines{{Key: engine.KeyReceipt, Value: sig}}.String(), Timestamp: es[0].Timestamp, Hash: engine.ZeroHash, Leaf: -1}},
			Of: [][][]byte{nil}}
	}
	forged := base64.StdEncoding.EncodeToString([]byte(sign("sagacity passkey v1\n" + engine.PasskeyEnrolled + ": " + engine.PayloadHash("{}") + "\n")))

	for _, tt := range []struct {
		name string
		args []string
		want string
	}{
		{"a policy line signed by another key", []string{"verify", "-key", key, exportAs(x, "policy.ndjson", func(ps *engine.Proofs) {
			p := &ps.Policies.Entries[0]
			p.Payload = engine.Lines{{Key: engine.KeyPolicy, Value: p.Field(engine.KeyPolicy)},
				{Key: engine.KeyReceipt, Value: base64.StdEncoding.EncodeToString([]byte(sign("sagacity approval policy v1\npolicy-sha256: " + p.Field(engine.KeyPolicy) + "\n")))}}.String()
		})}, "seq=1 of sagacity:policies is no policy document the key signed: its signature " + notBy},
		{"a passkey line signed by another key", []string{"verify", "-key", key, exportAs(x, "passkey.ndjson", func(ps *engine.Proofs) {
			ps.Passkeys = line(engine.PasskeySaga, engine.PasskeyEnrolled, forged)
		})}, `"message":"seq=1 of sagacity:passkeys is no passkey entry the key signed: its signature ` + notBy},
		{"a sign-in line whose signature is not base64", []string{"verify", "-key", key, exportAs(x, "sign-in.ndjson", func(ps *engine.Proofs) {
			ps.SignIns = line(engine.SignInSaga, engine.SignedInTool, "not base64!")
		})}, `"message":"seq=1 of sagacity:sign-ins is no sign-in record the key signed: its signature is not base64"`},
		{"a head signed by another key", []string{"verify", "-key", key, exportAs(x, "head.ndjson", func(ps *engine.Proofs) {
			h, err := evidence.OpenHead(ps.Head, keys.Verifier())
			if err != nil {
				t.Fatal(err)
			}
			ps.Head = sign(h.Text())
		})}, `"message":"the export's head is not signed by ` + keys.Name() + `"`},
		{"a checkpoint signed by another key", []string{"verify", "-key", key, "-checkpoint", forgedCP, exportAs(x, "good.ndjson", nil)},
			`"message":"` + forgedCP + `: the checkpoint's signature ` + notBy + `"`},
		{"a receipt signed by another key", []string{"verify-receipt", "-key", key, x.save("receipt.note", sign(receiptText(t, receipt, keys))),
			x.save("refund.json", refund)}, `"message":"the receipt's signature ` + notBy + `"`},
		{"an older checkpoint signed by another key", []string{"verify-log", "-key", key, "-proof", x.save("proof.json", `{"from":1,"to":1,"proof":[]}`),
			forgedCP, cp}, `"message":"` + forgedCP + `: the checkpoint's signature ` + notBy + `"`},
	} {
		code, out, why := untrustedRun(t, tt.args...)
		if code != 1 || !strings.Contains(out, tt.want) {
			t.Errorf("%s: sagacity %s = exit %d %s%s; want exit 1 with %s", tt.name, strings.Join(tt.args, " "), code, out, why, tt.want)
		}
	}
}

// exportAs writes x's export with its proofs altered by alter (nil: as
// exported).
func exportAs(x exporter, name string, alter func(ps *engine.Proofs)) string {
	return x.export(name, func(es []engine.Entry, ps *engine.Proofs) []engine.Entry {
		if alter != nil {
			alter(ps)
		}
		return es
	})
}

// receiptText is the text of the receipt keys signed.
func receiptText(t *testing.T, signed string, keys *engine.Keys) string {
	t.Helper()
	r, err := engine.OpenReceipt(signed, keys.Verifier())
	if err != nil {
		t.Fatal(err)
	}
	return r.Text()
}

// untrustedRun is offlineRun, reporting a panic as the command's failure
// instead of ending the test binary.
func untrustedRun(t *testing.T, args ...string) (code int, out, why string) {
	t.Helper()
	defer func() {
		if p := recover(); p != nil {
			code, why = -1, fmt.Sprintf("panicked: %v", p)
		}
	}()
	return offlineRun(t, args...)
}
