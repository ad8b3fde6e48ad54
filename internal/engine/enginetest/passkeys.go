package enginetest

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sagacity-go/sagacity/internal/engine"
	"github.com/sagacity-go/sagacity/internal/testkit"
	"github.com/sagacity-go/sagacity/wire"
)

// enrol enrols a passkey of authenticator a for p, and returns it.
func (v *env) enrol(p engine.Principal, a *testkit.Authenticator) engine.Passkey {
	v.t.Helper()
	ctx := context.Background()
	id, options, err := v.e.BeginEnrolment(ctx, p)
	if err != nil {
		v.t.Fatalf("BeginEnrolment(%s): %v", p.ID, err)
	}
	response, err := a.Register(options)
	if err != nil {
		v.t.Fatal(err)
	}
	k, err := v.e.FinishEnrolment(ctx, p, id, response)
	if err != nil {
		v.t.Fatalf("FinishEnrolment(%s): %v", p.ID, err)
	}
	return k
}

// signed begins p's passkey vote d on saga's request at seq with
// credential k, has authenticator a answer it, and returns the ceremony
// and the answer, not cast yet.
func (v *env) signed(p engine.Principal, a *testkit.Authenticator, saga string, seq int64, d engine.Action, reason string, k engine.Passkey) (string, []byte) {
	v.t.Helper()
	c, err := v.e.BeginVote(context.Background(), p, saga, seq, d, reason, k.ID)
	if err != nil {
		v.t.Fatalf("BeginVote(%s, %s/%d): %v", p.ID, saga, seq, err)
	}
	response, err := a.Assert(c.Options)
	if err != nil {
		v.t.Fatal(err)
	}
	return c.ID, response
}

// testPasskeys: people enrol passkeys from a recent sign-in, journaled in
// the server's own saga; under a rule that asks for it, a vote counts
// only signed by the voter's own enrolled passkey over its ballot: a
// vote without one (the API, MCP), a bogus signature, a missing user
// verification, a replayed or late answer, an answer to another
// request's challenge, a counter that goes back, a removed key, and the
// passkeys table edited (a row revived, written in, given another key or
// person, its counter reset) — each refused, and nothing journaled or
// executed; a removal the journal would not take is refused; two good
// votes run the tool, and the journal verifies.
func testPasskeys(t *testing.T, v *env) {
	ctx := context.Background()
	clock := &fakeClock{now: time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)}
	v.usePolicy(engine.PolicySpec{Tools: map[string][]engine.RuleSpec{"sendWireTransfer": {
		{Name: "signed", Quorum: 2, Approvers: []string{"finance-leads", "treasury"}, Passkey: engine.PasskeyRequired}}}},
		engine.WithClock(clock.Now))
	// Signed in just now, in a sign-in of their own: enrolling takes it.
	now := func(p engine.Principal) engine.Principal {
		p.AuthTime = clock.Now()
		p.SignIn = &engine.SignIn{Token: "id-token-of-" + p.ID, ClientID: "sagacity", Key: `{"kty":"OKP"}`, KeyID: "k1", Reauth: true}
		return p
	}
	alice, bob := now(alice), now(bob)
	authA, authB := testkit.NewAuthenticator(origin), testkit.NewAuthenticator(origin)

	// Enrolment takes a recent sign-in, and is journaled, signed.
	stale := alice
	stale.AuthTime = clock.Now().Add(-time.Hour)
	_, _, err := v.e.BeginEnrolment(ctx, stale)
	wantCode(t, "enrolling from an hour-old sign-in", err, engine.Forbidden, wire.CodeStepUp)
	// A sign-in time after the server's clock would meet any freshness.
	future := alice
	future.AuthTime = clock.Now().Add(time.Hour)
	_, _, err = v.e.BeginEnrolment(ctx, future)
	testkit.WantKind(t, "enrolling from a sign-in an hour in the future", err, engine.Forbidden)
	// A recent sign-in is not enough: enrolling takes one of its own, in
	// which the provider authenticated the person again.
	for name, in := range map[string]*engine.SignIn{"no sign-in kept (an access token)": nil,
		"a sign-in that did not authenticate again": {Token: "t", ClientID: "sagacity", Key: "{}", KeyID: "k1"}} {
		p := alice
		p.SignIn = in
		_, _, err = v.e.BeginEnrolment(ctx, p)
		wantCode(t, "enrolling from "+name, err, engine.Forbidden, wire.CodeStepUp)
	}
	keyA, keyB := v.enrol(alice, authA), v.enrol(bob, authB)
	if keyA.Identity != alice.ID || keyA.Issuer != alice.Issuer || keyA.Subject != "alice" || keyA.PublicKey == "" || keyA.RPID != "localhost" {
		t.Errorf("alice's passkey = %+v; want hers, with its public key, for localhost", keyA)
	}
	es := v.journal(engine.PasskeySaga)
	if len(es) != 2 || es[0].ToolName != engine.PasskeyEnrolled || !strings.Contains(es[0].Input, keyA.PublicKey) ||
		!strings.Contains(es[0].Input, `"issuer":"https://idp.example.com"`) {
		t.Fatalf("%s = %+v; want two enrolments naming key, issuer and subject", engine.PasskeySaga, es)
	}
	keys, err := engine.ReadPasskeys(es, testkit.Keys(t).Verifier())
	if err != nil || keys[keyB.ID].Identity != bob.ID || keys[keyB.ID].SignIn != engine.PayloadHash(bob.SignIn.Token) {
		t.Errorf("ReadPasskeys = %v, %v; want bob's key bound to him and to the sign-in he enrolled it from", keys, err)
	}
	// Each sign-in the enrolments name is journaled, with the provider
	// key it names, once.
	signIns := v.journal(engine.SignInSaga)
	if got := tools(signIns); !slices.Equal(got, []string{engine.ProviderKeyTool, engine.SignedInTool, engine.SignedInTool}) {
		t.Errorf("%s's tools = %v; want the provider key, then alice's and bob's sign-ins", engine.SignInSaga, got)
	}
	read, err := engine.ReadSignIns(signIns, testkit.Keys(t).Verifier(), nil, nil)
	if s := read[engine.PayloadHash(alice.SignIn.Token)]; err != nil || s.Identity != alice.ID || !s.Reauth || !s.AuthTime.Equal(alice.AuthTime.Truncate(time.Second)) {
		t.Errorf("ReadSignIns = %+v, %v; want alice's sign-in, re-authenticated, at %v", read, err, alice.AuthTime)
	}
	// A ceremony is answered once.
	id, options, err := v.e.BeginEnrolment(ctx, alice)
	if err != nil {
		t.Fatal(err)
	}
	response, _ := authA.Register(options)
	if _, err := v.e.FinishEnrolment(ctx, bob, id, response); !engine.IsKind(err, engine.NotFound) {
		t.Errorf("bob finishing alice's enrolment: %v; want NotFound", err)
	}
	if _, err := v.e.FinishEnrolment(ctx, alice, id, response); !engine.IsKind(err, engine.NotFound) {
		t.Errorf("the enrolment answered again after another's try took it: %v; want NotFound", err)
	}

	seq := v.gateLarge("pk", agent)
	wires := v.fx.transfer.Load()
	entries := func() int { return len(v.journal("pk")) }
	before := entries()
	// The API and MCP cannot vote under this rule.
	wantCode(t, "an approval without a passkey", second(v.e.Approve(ctx, alice, "pk", seq, "ok")), engine.Forbidden, wire.CodePasskey)

	refused := func(what string, err error) {
		t.Helper()
		if !engine.IsKind(err, engine.Forbidden) && !engine.IsKind(err, engine.NotFound) && !engine.IsKind(err, engine.Invalid) {
			t.Errorf("%s: %v; want it refused", what, err)
		}
		if n := entries(); n != before {
			t.Errorf("%s journaled %d entries", what, n-before)
		}
	}
	// A bogus signature; no user verification.
	authA.BadSignature = true
	refused("a bogus signature", v.cast(alice, authA, "pk", seq, engine.ActApprove, "ok", keyA))
	authA.BadSignature, authA.NoUV = false, true
	refused("no user verification", v.cast(alice, authA, "pk", seq, engine.ActApprove, "ok", keyA))
	authA.NoUV = false
	// Another request's challenge.
	other := v.gateLarge("pk-other", agent)
	_, forOther := v.signed(alice, authA, "pk-other", other, engine.ActApprove, "ok", keyA)
	mine, _ := v.signed(alice, authA, "pk", seq, engine.ActApprove, "ok", keyA)
	refused("an answer to another request's challenge", second(v.e.VoteWithPasskey(ctx, alice, mine, forOther)))
	// Another person's ceremony.
	id, response = v.signed(alice, authA, "pk", seq, engine.ActApprove, "ok", keyA)
	refused("bob casting alice's ceremony", second(v.e.VoteWithPasskey(ctx, bob, id, response)))
	// An answer after the ceremony's time.
	id, response = v.signed(alice, authA, "pk", seq, engine.ActApprove, "ok", keyA)
	clock.Add(engine.CeremonyTTL + time.Second)
	refused("an answer after the ceremony expired", second(v.e.VoteWithPasskey(ctx, alice, id, response)))

	// alice's good vote; then the same answer again.
	id, response = v.signed(alice, authA, "pk", seq, engine.ActApprove, "invoice 77", keyA)
	d, err := v.e.VoteWithPasskey(ctx, alice, id, response)
	if err != nil || d.Votes != 1 {
		t.Fatalf("alice's passkey vote = %+v, %v; want vote 1 of 2", d, err)
	}
	before = entries()
	refused("the same answer again", second(v.e.VoteWithPasskey(ctx, alice, id, response)))
	r, err := engine.OpenReceipt(engine.ReceiptOf(v.journal("pk")[before-1]), testkit.Keys(t).Verifier())
	if err != nil || r.Passkey == nil || r.Passkey.Credential != keyA.ID || r.Passkey.Signature == "" {
		t.Errorf("alice's receipt = %+v, %v; want her passkey's assertion in it", r, err)
	}

	// A counter that goes back: a cloned authenticator.
	five, three := uint32(5), uint32(3)
	authB.Counter = &five
	if err := v.cast(bob, authB, "pk", seq, engine.ActApprove, "ok", keyB); err != nil {
		t.Fatalf("bob's first vote, counter 5: %v", err)
	}
	if _, err := v.e.Withdraw(ctx, bob, "pk", seq, "wrong key"); err != nil {
		t.Fatal(err)
	}
	before = entries()
	authB.Counter = &three
	refused("a counter that goes back from 5 to 3", v.cast(bob, authB, "pk", seq, engine.ActApprove, "ok", keyB))
	// The journal keeps the counter's floor: a row whose counter was reset
	// does not lower it.
	v.h.Exec(t, "UPDATE passkeys SET sign_count = 0 WHERE id = $1", keyB.ID)
	refused("a counter that goes back from 5 to 3, its row's counter reset", v.cast(bob, authB, "pk", seq, engine.ActApprove, "ok", keyB))
	authB.Counter = nil

	// A removed key votes no more, even on a ceremony begun before.
	keyB2 := v.enrol(bob, authB)
	id, response = v.signed(bob, authB, "pk", seq, engine.ActApprove, "ok", keyB2)
	if err := v.e.RemovePasskey(ctx, bob, keyB2.ID); err != nil {
		t.Fatal(err)
	}
	refused("a vote by a removed key", second(v.e.VoteWithPasskey(ctx, bob, id, response)))
	if _, err := v.e.BeginVote(ctx, bob, "pk", seq, engine.ActApprove, "ok", keyB2.ID); !engine.IsKind(err, engine.NotFound) {
		t.Errorf("a ceremony for a removed key: %v; want NotFound", err)
	}
	if ks, _ := v.e.Passkeys(ctx, bob); len(ks) != 2 || ks[1].Removed.IsZero() {
		t.Errorf("bob's passkeys = %+v; want two, the second removed", ks)
	}

	// The passkeys table only indexes the journal: a vote is checked
	// against the enrolment sagacity:passkeys holds. A row revived after
	// its removal, a row of a key never enrolled, a row moved to another
	// person: no vote counts by them.
	v.h.Exec(t, "UPDATE passkeys SET removed_at = NULL WHERE id = $1", keyB2.ID)
	refused("a vote by a removed key revived in its row", v.cast(bob, authB, "pk", seq, engine.ActApprove, "ok", keyB2))
	options, state, err := rp.BeginRegistration(bob, nil)
	if err != nil {
		t.Fatal(err)
	}
	response, _ = authB.Register(options)
	forged, err := rp.FinishRegistration(bob, state, response)
	if err != nil {
		t.Fatal(err)
	}
	v.h.Exec(t, "UPDATE passkeys SET id = $1, public_key = $2 WHERE id = $3", forged.ID, forged.PublicKey, keyB.ID)
	refused("a vote by a key never enrolled, its credential id and public key written over bob's row",
		v.cast(bob, authB, "pk", seq, engine.ActApprove, "ok", forged))
	v.h.Exec(t, "UPDATE passkeys SET id = $1, public_key = $2 WHERE id = $3", keyB.ID, keyB.PublicKey, forged.ID)
	v.h.Exec(t, "INSERT INTO passkeys (id, identity, issuer, subject, public_key, rp_id, origin, sign_count, enrolled_at, enrolled_seq)"+
		" SELECT $1, identity, issuer, subject, $2, rp_id, origin, 0, enrolled_at, enrolled_seq FROM passkeys WHERE id = $3",
		forged.ID, forged.PublicKey, keyB.ID)
	refused("a vote by a key written into the table, never enrolled", v.cast(bob, authB, "pk", seq, engine.ActApprove, "ok", forged))
	v.h.Exec(t, "DELETE FROM passkeys WHERE id = $1", forged.ID)
	v.h.Exec(t, "UPDATE passkeys SET identity = $1 WHERE id = $2", bob.ID, keyA.ID)
	refused("bob's vote with alice's key, its row moved to him", v.cast(bob, authA, "pk", seq, engine.ActApprove, "ok", keyA))
	// Nor is a removal journaled that the journal would not take: the
	// server never signs an entry that breaks sagacity:passkeys.
	pks := len(v.journal(engine.PasskeySaga))
	if err := v.e.RemovePasskey(ctx, bob, keyA.ID); !engine.IsKind(err, engine.NotFound) {
		t.Errorf("bob removing alice's key, its row moved to him: %v; want NotFound", err)
	}
	if n := len(v.journal(engine.PasskeySaga)); n != pks {
		t.Errorf("bob removing alice's key journaled %d entries in %s", n-pks, engine.PasskeySaga)
	}
	v.h.Exec(t, "UPDATE passkeys SET identity = $1 WHERE id = $2", alice.ID, keyA.ID)
	if v.fx.transfer.Load() != wires {
		t.Fatalf("the wire ran before its quorum")
	}

	// bob's good vote: the quorum, and the tool runs.
	authB.Counter = new(uint32)
	*authB.Counter = 100
	id, response = v.signed(bob, authB, "pk", seq, engine.ActApprove, "matches PO", keyB)
	if d, err := v.e.VoteWithPasskey(ctx, bob, id, response); err != nil || d.Votes != 2 {
		t.Fatalf("bob's passkey vote = %+v, %v; want vote 2 of 2", d, err)
	}
	if res, err := v.e.Resume(ctx, agent, "pk", seq, large); err != nil || res.Refused || v.fx.transfer.Load() != wires+1 {
		t.Fatalf("Resume after two passkey votes = %+v, %v", res, err)
	}
	for _, saga := range []string{"pk", engine.PasskeySaga} {
		if got := v.verify(saga); !got.Valid {
			t.Errorf("Verify(%s) = %+v", saga, got)
		}
	}
	// Each vote's counter is journaled with the enrolments.
	keys, err = engine.ReadPasskeys(v.journal(engine.PasskeySaga), testkit.Keys(t).Verifier())
	if err != nil || keys[keyB.ID].SignCount != 100 || keys[keyA.ID].SignCount == 0 {
		t.Errorf("ReadPasskeys = %+v, %v; want bob's counter at 100 and alice's journaled", keys, err)
	}
}

// cast signs p's vote with authenticator a and casts it, as signed does,
// and returns what casting it said.
func (v *env) cast(p engine.Principal, a *testkit.Authenticator, saga string, seq int64, d engine.Action, reason string, k engine.Passkey) error {
	v.t.Helper()
	id, response := v.signed(p, a, saga, seq, d, reason, k)
	_, err := v.e.VoteWithPasskey(context.Background(), p, id, response)
	return err
}
