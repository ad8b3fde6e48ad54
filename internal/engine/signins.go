package engine

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	"github.com/sagacity-go/sagacity/evidence"
)

// A console sign-in's evidence from the identity provider is journaled
// in SignInSaga (package evidence reads and checks it) when the session
// first votes, decides or enrols a passkey.

// signInOf is the sign-in a receipt of p's decision names: its ID
// token's SHA-256, SignInByAccessToken, or "" for no OIDC identity.
func signInOf(p Principal) string {
	switch {
	case p.SignIn != nil:
		return PayloadHash(p.SignIn.Token)
	case p.Auth == AuthOIDC:
		return SignInByAccessToken
	}
	return ""
}

// seen are the SignInSaga records this process journaled, by hash: each
// is journaled once a process (a restart journals it again, which
// verification takes as the same record). Bounded: when full it starts
// over.
type seen struct {
	mu sync.Mutex
	m  map[string]bool
}

const maxSeen = 10_000

func (s *seen) has(h string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.m[h]
}

func (s *seen) add(hs ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil || len(s.m) >= maxSeen {
		s.m = map[string]bool{}
	}
	for _, h := range hs {
		s.m[h] = true
	}
}

// recordSignIn journals p's sign-in in SignInSaga, and the provider key
// that verifies it, before a decision or an enrolment names it. Nothing
// for a principal without one. Errors: Unavailable when the store is.
func (e *Engine) recordSignIn(ctx context.Context, p Principal) error {
	in := p.SignIn
	if in == nil {
		return nil
	}
	tokenHash, keyHash := PayloadHash(in.Token), in.KeyID
	if e.signIns.has(tokenHash) {
		return nil
	}
	key, err := json.Marshal(evidence.ProviderKeyRecord{Issuer: p.Issuer, Key: json.RawMessage(in.Key)})
	if err != nil {
		return Errorf(Invalid, "the provider key of %s's sign-in is not JSON", p.ID)
	}
	rec, err := json.Marshal(evidence.SignInRecord{Identity: p.ID, Issuer: p.Issuer, Subject: p.Subject, ClientID: in.ClientID,
		AuthTime: p.AuthTime.UTC().Format(time.RFC3339), Reauth: in.Reauth, Key: keyHash, IDToken: in.Token})
	if err != nil {
		return err
	}
	err = e.journalOwn(ctx, SignInSaga, SignedInTool, func(tx Tx, s *Saga) error {
		if !e.signIns.has(keyHash) {
			if _, err := e.signedEntry(tx, s, evidence.SignInNotes, ProviderKeyTool, string(key), Lines{{KeySignIn, keyHash}}); err != nil {
				return err
			}
		}
		_, err := e.signedEntry(tx, s, evidence.SignInNotes, SignedInTool, string(rec), Lines{{KeySignIn, tokenHash}})
		return err
	})
	if err == nil {
		e.signIns.add(tokenHash, keyHash)
	}
	return err
}
