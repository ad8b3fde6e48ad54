package auth

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/sagacity-go/sagacity/internal/engine"
)

// Session is a signed-in console user. IDHash is a keyed hash of the
// cookie's random id; the id itself is never stored. Seal is a keyed MAC
// over everything else but itself: a row the server did not write, or
// one edited since, authenticates nobody.
type Session struct {
	IDHash    string
	Principal engine.Principal
	CreatedAt time.Time
	SeenAt    time.Time
	ExpiresAt time.Time // the absolute end, whatever the activity
	Seal      string
}

// Login is an OIDC sign-in in progress, sealed as a Session is.
type Login struct {
	IDHash   string
	State    string
	Nonce    string
	Verifier string
	ReturnTo string
	// MaxAge is how recent a sign-in at the provider it asked for, 0 for
	// the session's own (a step-up asks for less).
	MaxAge time.Duration
	// Reauth: it asked the provider to authenticate the person again
	// (max_age=0), as enrolling a passkey takes.
	Reauth    bool
	CreatedAt time.Time
	Seal      string
}

// SessionStore keeps sessions and sign-ins in progress. Implementations
// map their errors to engine kinds.
type SessionStore interface {
	// PutSession stores a new session, first dropping those that expired
	// before s.CreatedAt. Conflict when its IDHash is taken.
	PutSession(ctx context.Context, s Session) error
	// Session returns a session; NotFound when absent.
	Session(ctx context.Context, idHash string) (Session, error)
	// TouchSession records activity on a session, with the seal that
	// covers it.
	TouchSession(ctx context.Context, idHash string, at time.Time, seal string) error
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
	AbsoluteTimeout = engine.MaxSession
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
	// Known, when set, is told of each sign-in: the engine, whose team
	// health counts the people who signed in.
	Known interface {
		SignedIn(ctx context.Context, p engine.Principal) error
	}
}

// cookie names a cookie: __Host-<name> when Secure.
func (s *Sessions) cookie(name string) string {
	if s.Secure {
		return "__Host-" + name
	}
	return name
}

// Every hash and seal is an HMAC-SHA256 under the session key with a
// label of its own, so that nothing made for one use passes for another:
// a sign-in's id never names a session, nor a row's seal a cookie.
const (
	labelSessionID = "sagacity session id v1"
	labelLoginID   = "sagacity sign-in id v1"
	labelSession   = "sagacity session row v1"
	labelLogin     = "sagacity sign-in row v1"
)

// mac is the seal of label and fields under the key (engine.Seal).
func (s *Sessions) mac(label string, fields ...string) string {
	return engine.Seal(s.Key, label, fields...)
}

// sessionHash and loginHash are the keyed hashes under which a session's
// and a sign-in's ids are stored.
func (s *Sessions) sessionHash(id string) string { return s.mac(labelSessionID, id) }
func (s *Sessions) loginHash(id string) string   { return s.mac(labelLoginID, id) }

// micros writes a time as the store keeps it: microseconds since the epoch.
func micros(t time.Time) string { return strconv.FormatInt(t.UnixMicro(), 10) }

// seal is the MAC over every field of a session but its seal.
func (s *Sessions) seal(ss Session) string {
	p := ss.Principal
	f := []string{ss.IDHash, p.ID, p.Name, string(p.Auth), p.Issuer, p.Subject, strconv.FormatInt(unix(p.AuthTime), 10),
		micros(ss.CreatedAt), micros(ss.SeenAt), micros(ss.ExpiresAt), strconv.Itoa(len(p.Roles))}
	for _, r := range p.Roles {
		f = append(f, string(r))
	}
	f = append(f, strconv.Itoa(len(p.Groups)))
	f = append(f, p.Groups...)
	if in := p.SignIn; in != nil {
		f = append(f, "sign-in", in.Token, in.ClientID, in.Key, in.KeyID, strconv.FormatBool(in.Reauth))
	}
	return s.mac(labelSession, f...)
}

// sealLogin is the MAC over every field of a sign-in but its seal.
func (s *Sessions) sealLogin(l Login) string {
	return s.mac(labelLogin, l.IDHash, l.State, l.Nonce, l.Verifier, l.ReturnTo, strconv.FormatInt(int64(l.MaxAge/time.Second), 10),
		strconv.FormatBool(l.Reauth), micros(l.CreatedAt))
}

// sealed reports whether a row carries the seal its fields call for.
func sealed(got, want string) bool { return hmac.Equal([]byte(got), []byte(want)) }

// unix is t in unix seconds, 0 for the zero time (as the store keeps
// auth_time).
func unix(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.Unix()
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
		_ = s.Store.DeleteSession(r.Context(), s.sessionHash(c.Value))
	}
	now := engine.Truncate(s.Now())
	id := newID()
	ss := Session{IDHash: s.sessionHash(id), Principal: p, CreatedAt: now, SeenAt: now, ExpiresAt: now.Add(AbsoluteTimeout)}
	ss.Seal = s.seal(ss)
	if err := s.Store.PutSession(r.Context(), ss); err != nil {
		return err
	}
	if s.Known != nil {
		if err := s.Known.SignedIn(r.Context(), p); err != nil {
			return err
		}
	}
	s.set(w, "sagacity", id, int(AbsoluteTimeout.Seconds()))
	return nil
}

// SignOut ends the request's session on the server and in the browser.
func (s *Sessions) SignOut(w http.ResponseWriter, r *http.Request) error {
	s.set(w, "sagacity", "", -1)
	if c, err := r.Cookie(s.cookie("sagacity")); err == nil {
		return s.Store.DeleteSession(r.Context(), s.sessionHash(c.Value))
	}
	return nil
}

// errNoSession is what a request without a live session gets.
var errNoSession = &engine.Error{Kind: engine.Unauthenticated, Msg: "sign in first"}

// Principal returns the principal of the request's session.
// Unauthenticated when there is none, it has expired or gone idle, or its
// row is not sealed as the server wrote it (then it is deleted).
func (s *Sessions) Principal(r *http.Request) (engine.Principal, error) {
	c, err := r.Cookie(s.cookie("sagacity"))
	if err != nil || c.Value == "" {
		return engine.Principal{}, errNoSession
	}
	h := s.sessionHash(c.Value)
	ss, err := s.Store.Session(r.Context(), h)
	if engine.IsKind(err, engine.NotFound) {
		return engine.Principal{}, errNoSession
	}
	if err != nil {
		return engine.Principal{}, err
	}
	if ss.IDHash != h || !sealed(ss.Seal, s.seal(ss)) {
		_ = s.Store.DeleteSession(r.Context(), h)
		return engine.Principal{}, errForged
	}
	now := s.Now()
	if now.After(ss.ExpiresAt) || now.Sub(ss.SeenAt) > IdleTimeout {
		_ = s.Store.DeleteSession(r.Context(), h)
		return engine.Principal{}, &engine.Error{Kind: engine.Unauthenticated, Msg: "your session has ended; sign in again"}
	}
	if now.Sub(ss.SeenAt) > touchEvery {
		ss.SeenAt = engine.Truncate(now)
		if err := s.Store.TouchSession(r.Context(), h, ss.SeenAt, s.seal(ss)); err != nil {
			return engine.Principal{}, err
		}
	}
	return ss.Principal, nil
}

// errForged is what a session or sign-in row the server did not write
// gets: the same as none, so the row's writer learns nothing.
var errForged = &engine.Error{Kind: engine.Unauthenticated, Msg: "sign in first",
	Err: errors.New("the session's row is not sealed as the server wrote it: written or edited outside the server")}
