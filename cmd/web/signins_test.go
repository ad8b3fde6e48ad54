package main

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/sagacity-go/sagacity/evidence"
	"github.com/sagacity-go/sagacity/internal/engine"
	"github.com/sagacity-go/sagacity/internal/testkit"
)

// TestVerifySignIns: each vote of a console session names its sign-in,
// which the server journals with the identity provider's signed ID token
// and the provider's key; sagacity verify checks offline that the provider
// signed that person's sign-in, at the time the receipt says, before the
// vote, with the keys the log journals or those -provider-keys gives. A
// vote the server's own key made up (no sign-in, another's sign-in, a
// sign-in signed by a key of its own, an ID token altered, a sign-in time
// moved) is caught, each for what it is.
func TestVerifySignIns(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	policy, err := engine.CompilePolicy(engine.PolicySpec{Tools: map[string][]engine.RuleSpec{"sendWireTransfer": {{Name: "four-eyes", Quorum: 2}}}})
	if err != nil {
		t.Fatal(err)
	}
	o := newDeployment(t, policy)
	e, keys := o.e, o.keys
	idp := testkit.NewIDTokens(t, "https://idp.example.com", "sagacity")
	person := func(id string) engine.Principal {
		p := engine.Principal{ID: idp.Issuer + "#" + id, Name: id + "@example.com", Auth: engine.AuthOIDC, Issuer: idp.Issuer, Subject: id,
			Roles: []engine.Role{engine.RoleApprover}, AuthTime: o.now().Truncate(time.Second)}
		p.SignIn = idp.SignIn(t, p, false)
		return p
	}
	agent := engine.Principal{ID: "agent", Auth: engine.AuthToken, Roles: []engine.Role{engine.RoleAgent}}
	auditor := engine.Principal{ID: "auditor", Auth: engine.AuthToken, Roles: []engine.Role{engine.RoleAuditor}}
	alice, bob := person("alice"), person("bob")
	const transfer = `{"amount":"5000","to":"mallory"}`
	// alice votes in two sagas, bob in one: each sign-in is journaled
	// once.
	for _, v := range []struct {
		saga string
		p    engine.Principal
	}{{"other", alice}, {"wire", alice}, {"wire", bob}} {
		if v.p.ID == alice.ID {
			if _, err := e.Call(ctx, agent, v.saga, "sendWireTransfer", transfer); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := e.Approve(ctx, v.p, v.saga, 1, ""); err != nil {
			t.Fatalf("%s's approval in %s: %v", v.p.ID, v.saga, err)
		}
	}
	if r, err := e.Resume(ctx, agent, "wire", 1, transfer); err != nil || r.Refused {
		t.Fatalf("Resume(wire, 1) = %+v, %v; want it executed", r, err)
	}
	if es, err := e.Journal(ctx, auditor, engine.SignInSaga); err != nil || len(es) != 3 {
		t.Fatalf("%s = %d entries, %v; want the provider's key and two sign-ins, each once", engine.SignInSaga, len(es), err)
	}
	st, signed := o.checkpoint()
	es, ps, err := e.Evidence(ctx, auditor, "wire", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(ps.SignIns.Entries) != 3 || ps.SignIns.Of[0] == nil {
		t.Fatalf("Evidence(wire) sign-in lines = %+v; want the provider's key and the two sign-ins, proved", ps.SignIns.Entries)
	}

	x := exporter{t: t, dir: t.TempDir(), es: es, ps: ps, keys: keys}
	cpFile, key := x.save("cp.note", signed), keys.VerifierKey()
	jwks := x.save("jwks.json", idp.JWKS())
	stranger := testkit.NewIDTokens(t, idp.Issuer, "sagacity")
	otherJWKS := x.save("other-jwks.json", stranger.JWKS())

	// resign rewrites bob's vote (seq 3) with its receipt changed by
	// change, signed by the server's key, as a server that holds it could.
	resign := func(change func(r *engine.Receipt)) func(es []engine.Entry, ps *engine.Proofs) []engine.Entry {
		return func(es []engine.Entry, ps *engine.Proofs) []engine.Entry {
			r, err := engine.OpenReceipt(engine.ReceiptOf(es[2]), keys.Verifier())
			if err != nil {
				t.Fatal(err)
			}
			change(&r)
			es[2].Payload = withReceipt(t, es[2].Payload, keys, r.Text())
			return es
		}
	}
	// bobs is the index of bob's sign-in among the sign-in lines.
	bobs := -1
	for i, en := range ps.SignIns.Entries {
		if en.ToolName == engine.SignedInTool && strings.Contains(en.Input, `"subject":"bob"`) {
			bobs = i
		}
	}
	// forge replaces bob's sign-in with one whose ID token is token,
	// re-signed by the server's key, and points his receipt at it.
	forge := func(token string, key *testkit.IDTokens) func(es []engine.Entry, ps *engine.Proofs) []engine.Entry {
		return func(es []engine.Entry, ps *engine.Proofs) []engine.Entry {
			en := &ps.SignIns.Entries[bobs]
			var rec map[string]any
			if err := json.Unmarshal([]byte(en.Input), &rec); err != nil {
				t.Fatal(err)
			}
			rec["idToken"] = token
			if key != nil {
				rec["key"] = key.KeyID
				k := engine.Entry{SagaID: engine.SignInSaga, Seq: 99, ToolName: engine.ProviderKeyTool, Phase: engine.PhaseExecuted,
					Input: `{"issuer":"` + idp.Issuer + `","key":` + key.JWK + `}`, Timestamp: en.Timestamp}
				k.Payload = signInLines(t, keys, k, key.KeyID)
				ps.SignIns.Entries, ps.SignIns.Of = append([]engine.Entry{k}, ps.SignIns.Entries...), append([][][]byte{nil}, ps.SignIns.Of...)
				en = &ps.SignIns.Entries[bobs+1]
			}
			b, _ := json.Marshal(rec)
			en.Input = string(b)
			en.Payload = signInLines(t, keys, *en, engine.PayloadHash(token))
			return resign(func(r *engine.Receipt) { r.SignIn = engine.PayloadHash(token) })(es, ps)
		}
	}
	bobToken := idp.Sign(t, idp.Claims(bob))
	parts := strings.Split(bob.SignIn.Token, ".")
	claims, _ := base64.RawURLEncoding.DecodeString(parts[1])
	parts[1] = base64.RawURLEncoding.EncodeToString([]byte(strings.Replace(string(claims), `"sub":"bob"`, `"sub":"carol"`, 1)))
	altered := strings.Join(parts, ".")
	good := x.export("good.ndjson", nil)
	vouched := `"proved":true,"proof":"https://idp.example.com signed their sign-in at `
	checkVerify(t, []verifyCase{
		{"the export", []string{"-key", key, "-checkpoint", cpFile}, good, 0, `"identities":[{"seq":2,"decider":"https://idp.example.com#alice",` +
			vouched + alice.AuthTime.UTC().Format(time.RFC3339) + ` (seq=2 of sagacity:sign-ins)"},{"seq":3,"decider":"https://idp.example.com#bob",` + vouched},
		{"the export, with the provider's own keys", []string{"-key", key, "-provider-keys", jwks, "-checkpoint", cpFile}, good, 0, vouched},
		{"the export, with another provider's keys", []string{"-key", key, "-provider-keys", otherJWKS}, good, 1,
			`"breakAtIndex":1,"message":"seq=2 (entry 1) was decided by https://idp.example.com#alice, but its provider key is not among the provider keys given"`},
		{"the sign-ins left out", []string{"-key", key}, x.export("no-sign-ins.ndjson", func(es []engine.Entry, ps *engine.Proofs) []engine.Entry {
			ps.SignIns = engine.Attached{}
			return es
		}), 1, `"breakAtIndex":1,"message":"seq=2 (entry 1) was decided by https://idp.example.com#alice, but its sign-in is not in the export"`},
		{"a vote the server made up, naming no sign-in", []string{"-key", key}, x.export("unnamed.ndjson", resign(func(r *engine.Receipt) { r.SignIn = "" })), 1,
			`"breakAtIndex":2,"message":"seq=3 (entry 2) was decided by https://idp.example.com#bob, but its receipt names no sign-in the provider signed`},
		{"a vote naming no sign-in, allowed", []string{"-key", key, "-allow-unproved-sign-in"}, x.export("unnamed.ndjson", resign(func(r *engine.Receipt) { r.SignIn = "" })), 0,
			`{"seq":3,"decider":"https://idp.example.com#bob","proved":false,"proof":"no sign-in named: the server's word"}`},
		{"a vote the server made up, naming alice's sign-in", []string{"-key", key}, x.export("borrowed.ndjson", resign(func(r *engine.Receipt) {
			r.SignIn = engine.PayloadHash(alice.SignIn.Token)
		})), 1, `"breakAtIndex":2,"message":"seq=3 (entry 2) was decided by https://idp.example.com#bob, but its sign-in is https://idp.example.com#alice's, not https://idp.example.com#bob's"`},
		{"a sign-in time moved", []string{"-key", key}, x.export("moved.ndjson", resign(func(r *engine.Receipt) { r.AuthTime = r.AuthTime.Add(-time.Hour) })), 1,
			`"breakAtIndex":2,"message":"seq=3 (entry 2) was decided by https://idp.example.com#bob, but its sign-in was at`},
		{"a sign-in whose ID token was altered", []string{"-key", key}, x.export("altered.ndjson", forge(altered, nil)), 1,
			`"message":"seq=3 (entry 2) was decided by https://idp.example.com#bob, but the provider's signature on its ID token does not verify`},
		{"a sign-in the server made up, signed by a key of its own, journaled as the provider's", []string{"-key", key, "-provider-keys", jwks},
			x.export("forged.ndjson", forge(stranger.Sign(t, stranger.Claims(bob)), stranger)), 1,
			`"message":"seq=3 (entry 2) was decided by https://idp.example.com#bob, but its provider key is not among the provider keys given"`},
		{"the same, against the checkpoint", []string{"-key", key, "-checkpoint", cpFile},
			x.export("forged.ndjson", forge(stranger.Sign(t, stranger.Claims(bob)), stranger)), 1, `"message":"seq=3 (entry 2) is not in the log the checkpoint`},
		{"bob's own sign-in again, re-journaled", []string{"-key", key}, x.export("again.ndjson", forge(bobToken, nil)), 0, vouched},
	})
	if st.Size == 0 {
		t.Errorf("the log is empty")
	}
}

// withReceipt is a decision's payload with its receipt replaced by text,
// signed by keys.
func withReceipt(t *testing.T, payload string, keys *engine.Keys, text string) string {
	t.Helper()
	n, err := keys.Sign(text)
	if err != nil {
		t.Fatal(err)
	}
	ls := evidence.ParseLines(payload)
	for i := range ls {
		if ls[i].Key == engine.KeyReceipt {
			ls[i].Value = base64.StdEncoding.EncodeToString([]byte(n))
		}
	}
	return ls.String()
}

// signInLines is the payload of a sign-in entry named hash, signed by
// keys, as the server writes it.
func signInLines(t *testing.T, keys *engine.Keys, en engine.Entry, hash string) string {
	t.Helper()
	n, err := keys.Sign("sagacity sign-in v1\n" + en.ToolName + ": " + engine.PayloadHash(en.Input) + "\n")
	if err != nil {
		t.Fatal(err)
	}
	return engine.Lines{{Key: engine.KeySignIn, Value: hash}, {Key: engine.KeyReceipt, Value: base64.StdEncoding.EncodeToString([]byte(n))}}.String()
}
