package engine

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"time"

	"github.com/sagacity-go/sagacity/evidence"
	"github.com/sagacity-go/sagacity/wire"
)

// VoteCeremony is what a browser needs to sign a vote: the ceremony to
// answer, the options to pass to navigator.credentials.get, and the
// ballot signed, in words, to show; Origin is the origin the passkey is
// bound to.
type VoteCeremony struct {
	ID            string
	Options       json.RawMessage
	PasskeyBallot PasskeyBallot
	Origin        string
}

// BeginVote starts signing p's vote a (approve, reject or request
// changes), with reason, on the request at seq with p's passkey
// credential: it returns the ceremony, the options
// navigator.credentials.get takes, and the ballot to show. The vote
// itself is checked when it is cast (VoteWithPasskey). Errors: NotFound
// for no such request, or no such passkey of p's; Forbidden and Invalid
// as the vote would be; Unavailable when passkeys are off.
func (e *Engine) BeginVote(ctx context.Context, p Principal, sagaID string, seq int64, a Action, reason, credential string) (VoteCeremony, error) {
	if err := e.passkeysOn(); err != nil {
		return VoteCeremony{}, err
	}
	decision, ok := votes[a]
	if !ok {
		return VoteCeremony{}, Errorf(Invalid, "a passkey signs a vote: approve, reject or request-changes")
	}
	if err := validReason(reason); err != nil {
		return VoteCeremony{}, err
	}
	rv, err := e.Review(ctx, p, sagaID, seq)
	if err != nil {
		return VoteCeremony{}, err
	}
	if rv.Rule == nil {
		return VoteCeremony{}, Errorf(Conflict, "%s", rv.RuleProblem)
	}
	if err := e.Can(p, a, Subject{Saga: &rv.Saga, Requester: rv.Gated.Field(KeyRequester), Rule: rv.Rule}); err != nil {
		return VoteCeremony{}, err
	}
	if err := voteAllowed(p, *rv.Rule, reason, e.now()); err != nil {
		return VoteCeremony{}, err
	}
	keys, err := e.Passkeys(ctx, p)
	if err != nil {
		return VoteCeremony{}, err
	}
	found := false
	for _, k := range keys {
		found = found || (k.ID == credential && k.Removed.IsZero())
	}
	if !found {
		return VoteCeremony{}, Errorf(NotFound, "you have no passkey %q: enrol one on your page (/me)", credential)
	}
	g := rv.Gated
	b := PasskeyBallot{SagaID: sagaID, Seq: seq, Entry: g.Hash, PayloadSHA256: PayloadHash(g.Input), Decision: decision, Reason: reason,
		ApprovalPolicy: g.Field(KeyPolicy), Rule: rv.Rule.Name, Voter: p.ID, Credential: credential, Time: Truncate(e.now())}
	nonce := newNonce()
	options, err := e.webauthn.AssertionOptions(b.Challenge(nonce), credential)
	if err != nil {
		return VoteCeremony{}, err
	}
	data, err := json.Marshal(b)
	if err != nil {
		return VoteCeremony{}, err
	}
	c := Ceremony{ID: base64.RawURLEncoding.EncodeToString(nonce), Identity: p.ID, Kind: "vote", Data: string(data),
		Expires: e.now().Add(CeremonyTTL)}
	if err := e.store.PutCeremony(ctx, c, e.now()); err != nil {
		return VoteCeremony{}, err
	}
	return VoteCeremony{ID: c.ID, Options: options, PasskeyBallot: b, Origin: e.passkeyOrigin()}, nil
}

// passkeyVote is a vote's ballot and the assertion over it.
type passkeyVote struct {
	ballot    PasskeyBallot
	nonce     []byte
	assertion Assertion
}

// VoteWithPasskey casts the vote ceremony id was begun for, with the
// browser's assertion over its ballot. The ceremony is taken once: a
// replayed answer finds none. Errors: NotFound for a ceremony taken or
// expired; Invalid for an assertion that does not verify; otherwise as
// the vote (Approve, Reject, RequestChanges).
func (e *Engine) VoteWithPasskey(ctx context.Context, p Principal, id string, response []byte) (Decision, error) {
	if err := e.passkeysOn(); err != nil {
		return Decision{}, err
	}
	c, err := e.takeCeremony(ctx, p, id, "vote")
	if err != nil {
		return Decision{}, err
	}
	var pv passkeyVote
	if err := json.Unmarshal([]byte(c.Data), &pv.ballot); err != nil {
		return Decision{}, err
	}
	if pv.nonce, err = base64.RawURLEncoding.DecodeString(c.ID); err != nil {
		return Decision{}, err
	}
	if pv.assertion, err = e.webauthn.ParseAssertion(response); err != nil {
		return Decision{}, err
	}
	b := pv.ballot
	return e.vote(ctx, p, b.SagaID, b.Seq, b.Decision, b.Reason, cast{passkey: &pv})
}

// checkPasskey checks vote pv, cast by p at at on request b under its
// rule, against p's passkey as PasskeySaga's journal enrolled it, and
// returns the receipt's passkey part; a counter that moved is journaled
// there, in the same transaction. Forbidden when it does not hold: a vote
// the rule needs a passkey for counts only with it. Conflict when that
// journal does not verify.
func (e *Engine) checkPasskey(tx Tx, p Principal, b bound, d Decided, reason string, pv *passkeyVote, at time.Time) (PasskeyProof, error) {
	want := PasskeyBallot{SagaID: b.gated.SagaID, Seq: b.gated.Seq, Entry: b.gated.Hash, PayloadSHA256: PayloadHash(b.gated.Input),
		Decision: d, Reason: reason, ApprovalPolicy: b.gated.Field(KeyPolicy), Rule: b.rule.Name, Voter: p.ID,
		Credential: pv.ballot.Credential, Time: pv.ballot.Time}
	refuse := func(why string) (PasskeyProof, error) {
		return PasskeyProof{}, &Error{Kind: Forbidden, Code: wire.CodePasskey, Msg: "your passkey's vote does not count: " + why}
	}
	if want.Text() != pv.ballot.Text() {
		return refuse("it signed another ballot than this vote's (the request, the rule or the decision changed)")
	}
	ps, keys, err := e.enrolled(tx)
	if err != nil {
		return PasskeyProof{}, err
	}
	k, ok := keys[want.Credential]
	if !ok || k.Identity != p.ID || !k.CountsAt(at) {
		return refuse("the passkey is not one of yours, or it was removed")
	}
	key, err := base64.RawURLEncoding.DecodeString(k.PublicKey)
	if err != nil {
		return PasskeyProof{}, err
	}
	if pv.assertion.Credential != k.ID {
		return refuse("it was made with another passkey than the one asked for")
	}
	counter, err := e.checkAssertion(pv.assertion, want.Challenge(pv.nonce), key, k.RPID, []string{k.Origin})
	if err != nil {
		return refuse(msgOf(err))
	}
	// The journal's counter is the floor; a row may hold a higher one,
	// from before counters were journaled.
	floor := k.SignCount
	if row, err := tx.Passkey(k.ID); err == nil {
		floor = max(floor, row.SignCount)
	} else if !IsKind(err, NotFound) {
		return PasskeyProof{}, err
	}
	if counter != 0 || floor != 0 {
		if counter <= floor {
			return refuse("its signature counter went back: the passkey may have been cloned")
		}
		e.heads.drop(PasskeySaga) // written here, not by journalPasskey
		use := evidence.PasskeyRecord{Credential: k.ID, Identity: k.Identity, Counter: counter, Saga: b.gated.SagaID, Seq: b.gated.Seq}
		if _, err := e.passkeyEntry(tx, ps, PasskeyUsed, use); err != nil {
			return PasskeyProof{}, err
		}
		if err := tx.PutSaga(*ps); err != nil {
			return PasskeyProof{}, err
		}
		if err := tx.SetSignCount(k.ID, counter); err != nil {
			return PasskeyProof{}, err
		}
	}
	return PasskeyProof{Credential: k.ID, Time: want.Time, Nonce: base64.RawURLEncoding.EncodeToString(pv.nonce),
		AuthenticatorData: pv.assertion.AuthenticatorData, ClientData: pv.assertion.ClientData, Signature: pv.assertion.Signature}, nil
}
