package auth

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"time"

	"github.com/sagacity-go/sagacity/internal/engine"
)

// Session is a signed-in console user. IDHash is a keyed hash of the
// cookie's random id; the id itself is never stored.
type Session struct {
	IDHash    string
	Principal engine.Principal
	CreatedAt time.Time
	SeenAt    time.Time
	ExpiresAt time.Time // the absolute end, whatever the activity
}

// Login is an OIDC sign-in in progress.
type Login struct {
	IDHash   string
	State    string
	Nonce    string
	Verifier string
	ReturnTo string
	// MaxAge is how recent a sign-in at the provider it asked for, 0 for
	// the session's own (a step-up asks for less).
	MaxAge    time.Duration
	CreatedAt time.Time
}

// SessionStore keeps sessions and sign-ins in progress. Implementations
// map their errors to engine kinds.
type SessionStore interface {
	// PutSession stores a new session, first dropping those that expired
	// before s.CreatedAt. Conflict when its IDHash is taken.
	PutSession(ctx context.Context, s Session) error
	// Session returns a session; NotFound when absent.
	Session(ctx context.Context, idHash string) (Session, error)
	// TouchSession records activity on a session.
	TouchSession(ctx context.Context, idHash string, at time.Time) error
	// DeleteSession ends a session; ending one that is gone is fine.
	DeleteSession(ctx context.Context, idHash string) error
	// PutLogin stores a sign-in in progress, first dropping those created
	// before staleBefore. Conflict when its IDHash is taken.
	PutLogin(ctx context.Context, l Login, staleBefore time.Time) error
	// TakeLogin returns a sign-in in progress and deletes it, so it can be
	// completed once; NotFound when absent.
	TakeLogin(ctx context.Context, idHash string) (Login, error)
}

// Session lifetimes: a session ends after IdleTimeout without a request,
// and after AbsoluteTimeout whatever happens.
const (
	IdleTimeout     = 30 * time.Minute
	AbsoluteTimeout = 12 * time.Hour
	// touchEvery limits how often activity is written back.
	touchEvery = time.Minute
)

// Sessions issues and checks console sessions: an opaque random id in a
// cookie, and a keyed hash of it in the store.
type Sessions struct {
	Store SessionStore
	// Key keys the hash of session ids; changing it ends every session.
	Key []byte
	// Secure marks cookies Secure and gives them the __Host- prefix. Only
	// plain-http loopback runs without it, where browsers would drop them.
	Secure bool
	Now    func() time.Time
}

// cookie names a cookie: __Host-<name> when Secure.
func (s *Sessions) cookie(name string) string {
	if s.Secure {
		return "__Host-" + name
	}
	return name
}

// hash is the keyed hash under which an id is stored.
func (s *Sessions) hash(id string) string {
	m := hmac.New(sha256.New, s.Key)
	m.Write([]byte(id))
	return hex.EncodeToString(m.Sum(nil))
}

// newID returns 256 random bits, as text.
func newID() string { return rand.Text() + rand.Text() }

func (s *Sessions) set(w http.ResponseWriter, name, value string, maxAge int) {
	http.SetCookie(w, &http.Cookie{Name: s.cookie(name), Value: value, Path: "/", MaxAge: maxAge,
		Secure: s.Secure, HttpOnly: true, SameSite: http.SameSiteLaxMode})
}

// SignIn starts a session for p with a new id, whatever the browser sent
// before, so a planted id is never promoted to a session.
func (s *Sessions) SignIn(w http.ResponseWriter, r *http.Request, p engine.Principal) error {
	if c, err := r.Cookie(s.cookie("sagacity")); err == nil {
		s.Store.DeleteSession(r.Context(), s.hash(c.Value))
	}
	now := s.Now()
	id := newID()
	if err := s.Store.PutSession(r.Context(), Session{IDHash: s.hash(id), Principal: p,
		CreatedAt: now, SeenAt: now, ExpiresAt: now.Add(AbsoluteTimeout)}); err != nil {
		return err
	}
	s.set(w, "sagacity", id, int(AbsoluteTimeout.Seconds()))
	return nil
}

// SignOut ends the request's session on the server and in the browser.
func (s *Sessions) SignOut(w http.ResponseWriter, r *http.Request) error {
	s.set(w, "sagacity", "", -1)
	if c, err := r.Cookie(s.cookie("sagacity")); err == nil {
		return s.Store.DeleteSession(r.Context(), s.hash(c.Value))
	}
	return nil
}

// errNoSession is what a request without a live session gets.
var errNoSession = &engine.Error{Kind: engine.Unauthenticated, Msg: "sign in first"}

// Principal returns the principal of the request's session.
// Unauthenticated when there is none, or it has expired or gone idle.
func (s *Sessions) Principal(r *http.Request) (engine.Principal, error) {
	c, err := r.Cookie(s.cookie("sagacity"))
	if err != nil || c.Value == "" {
		return engine.Principal{}, errNoSession
	}
	h := s.hash(c.Value)
	ss, err := s.Store.Session(r.Context(), h)
	if engine.IsKind(err, engine.NotFound) {
		return engine.Principal{}, errNoSession
	}
	if err != nil {
		return engine.Principal{}, err
	}
	now := s.Now()
	if now.After(ss.ExpiresAt) || now.Sub(ss.SeenAt) > IdleTimeout {
		s.Store.DeleteSession(r.Context(), h)
		return engine.Principal{}, &engine.Error{Kind: engine.Unauthenticated, Msg: "your session has ended; sign in again"}
	}
	if now.Sub(ss.SeenAt) > touchEvery {
		if err := s.Store.TouchSession(r.Context(), h, now); err != nil {
			return engine.Principal{}, err
		}
	}
	return ss.Principal, nil
}
