package enginetest

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sagacity-go/sagacity/internal/auth"
	"github.com/sagacity-go/sagacity/internal/engine"
)

// when is a time n seconds into the test, given in a zone other than UTC
// and with nanoseconds, which no store keeps.
func when(n int) time.Time {
	return time.Date(2026, 8, 7, 11, 33, 15, 686364789, time.FixedZone("CEST", 2*60*60)).Add(time.Duration(n) * time.Second)
}

// testForgedSessions writes and edits session and sign-in rows by SQL, as
// anyone with the application role's privileges on the database can, and
// holds that none of it signs anybody in: a row is sealed under the session
// key, which the database never sees.
func testForgedSessions(t *testing.T, v *env) {
	clock := when(0)
	sessions := &auth.Sessions{Store: v.db, Key: []byte("storetest-session-key-0123456789abcdef"), Now: func() time.Time { return clock }}
	alice := engine.Principal{ID: "https://id.example.com#alice", Name: "alice@example.com", Auth: engine.AuthOIDC,
		Roles: []engine.Role{engine.RoleApprover}, Groups: []string{"approvers"}, Issuer: "https://id.example.com", Subject: "alice",
		AuthTime: clock.Add(-time.Minute).Truncate(time.Second).UTC()}
	mallory := engine.Principal{ID: "https://id.example.com#mallory", Name: "mallory@example.com", Auth: engine.AuthOIDC,
		Roles: []engine.Role{engine.RoleAgent}, Issuer: "https://id.example.com", Subject: "mallory"}
	// signIn starts a session for p and returns its cookie.
	signIn := func(p engine.Principal) *http.Cookie {
		t.Helper()
		w := httptest.NewRecorder()
		if err := sessions.SignIn(w, httptest.NewRequest("GET", "/", nil), p); err != nil {
			t.Fatalf("SignIn(%s): %v", p.ID, err)
		}
		return w.Result().Cookies()[0]
	}
	// as asks for the principal a request with cookie c signs in as.
	as := func(c *http.Cookie) (engine.Principal, error) {
		r := httptest.NewRequest("GET", "/", nil)
		r.AddCookie(c)
		return sessions.Principal(r)
	}
	// rows counts the session rows of principal id or name.
	rows := func(id, name string) int64 {
		return v.h.Count(t, "SELECT COUNT(*) FROM sessions WHERE principal = $1 OR name = $2", id, name)
	}

	a := signIn(alice)
	if got, err := as(a); err != nil || got.ID != alice.ID {
		t.Fatalf("Principal(alice's cookie) = %+v, %v; want alice", got, err)
	}

	t.Run("a sign-in's row made a session", func(t *testing.T) {
		// GET /login gives any visitor a sign-in cookie, and the database
		// its keyed hash: a session row under that hash, naming anyone,
		// must not make the cookie's value a session's.
		w := httptest.NewRecorder()
		if err := (&auth.OIDC{Sessions: sessions}).Start(w, httptest.NewRequest("GET", "/login?return_to=/", nil)); err != nil {
			t.Fatalf("Start: %v", err)
		}
		login := w.Result().Cookies()[0]
		v.h.Exec(t, "INSERT INTO sessions (id_hash, principal, name, auth, roles, member_of, issuer, subject, auth_time, sign_in,"+
			" created_at, seen_at, expires_at, seal) SELECT id_hash, $1, 'cfo@example.com', 'oidc', 'approver', 'finance', 'https://id.example.com',"+
			" 'cfo', 0, '', created_at, created_at, created_at, seal FROM logins", "https://id.example.com#cfo")
		v.h.Exec(t, "UPDATE sessions SET expires_at = (SELECT expires_at FROM sessions WHERE principal = $1) WHERE principal = $2",
			alice.ID, "https://id.example.com#cfo")
		forged := &http.Cookie{Name: "sagacity", Value: login.Value}
		if got, err := as(forged); !engine.IsKind(err, engine.Unauthenticated) {
			t.Errorf("Principal(a sign-in's cookie, its hash written into sessions) = %+v, %v; want Unauthenticated", got, err)
		}
	})

	t.Run("every column edited", func(t *testing.T) {
		// Each edit on a live session of its own: none signs anyone in,
		// and the edited row is gone after.
		edits := []struct{ name, set string }{
			{"principal", "principal = 'https://id.example.com#cfo'"},
			{"name", "name = 'cfo@example.com'"},
			{"auth", "auth = 'token'"},
			{"roles", "roles = 'approver,auditor'"},
			{"groups", "member_of = 'finance-leads'"},
			{"issuer", "issuer = 'https://other.example.com'"},
			{"subject", "subject = 'cfo'"},
			{"sign-in time", "auth_time = auth_time + 3600"},
			{"sign-in", `sign_in = '{"Token":"x.y.z","ClientID":"sagacity","Key":"{}","Reauth":true}'`},
			{"created", "created_at = expires_at"},
			{"seen", "seen_at = expires_at"},
			{"expires", "expires_at = (SELECT MAX(expires_at) FROM sessions)"},
			{"seal", "seal = ''"},
		}
		for i, tt := range edits {
			t.Run(tt.name, func(t *testing.T) {
				clock = when(i + 1)
				p := alice
				p.ID, p.Name, p.Subject = p.ID+"-"+tt.name, tt.name+"@example.com", p.Subject+"-"+tt.name
				c := signIn(p)
				if got, err := as(c); err != nil || got.ID != p.ID {
					t.Fatalf("Principal(%s's cookie) = %+v, %v; want %s", p.ID, got, err, p.ID)
				}
				clock = when(i + 2) // a later session's expiry is later
				signIn(mallory)
				v.h.Exec(t, "UPDATE sessions SET "+tt.set+" WHERE principal = $1", p.ID)
				if got, err := as(c); !engine.IsKind(err, engine.Unauthenticated) {
					t.Errorf("Principal(session with %s edited) = %+v, %v; want Unauthenticated", tt.name, got, err)
				}
				if n := rows(p.ID, p.Name); n != 0 {
					t.Errorf("the edited session's row is still there (%d); want it deleted", n)
				}
			})
		}
	})

	t.Run("a row copied onto another's session", func(t *testing.T) {
		// Mallory holds a session of her own and copies alice's sealed
		// row, seal and all, onto it.
		m2 := mallory
		m2.ID = mallory.ID + "-copier"
		m := signIn(m2)
		v.h.Exec(t, "UPDATE sessions SET principal = a.principal, name = a.name, auth = a.auth, roles = a.roles, member_of = a.member_of,"+
			" issuer = a.issuer, subject = a.subject, auth_time = a.auth_time, sign_in = a.sign_in, created_at = a.created_at,"+
			" seen_at = a.seen_at, expires_at = a.expires_at, seal = a.seal FROM (SELECT * FROM sessions WHERE principal = $1) AS a"+
			" WHERE sessions.principal = $2", alice.ID, m2.ID)
		if got, err := as(m); !engine.IsKind(err, engine.Unauthenticated) {
			t.Errorf("Principal(mallory's cookie on a copy of alice's row) = %+v, %v; want Unauthenticated", got, err)
		}
	})

	t.Run("alice is still alice", func(t *testing.T) {
		clock = when(0).Add(2 * time.Minute) // a touch rewrites the seal
		if got, err := as(a); err != nil || got.ID != alice.ID {
			t.Fatalf("Principal(alice's cookie) after a touch = %+v, %v; want alice", got, err)
		}
		clock = clock.Add(2 * time.Minute)
		if got, err := as(a); err != nil || got.ID != alice.ID {
			t.Fatalf("Principal(alice's cookie) after two touches = %+v, %v; want alice", got, err)
		}
	})

	t.Run("a sign-in's row edited", func(t *testing.T) {
		// Where the browser goes after the callback, and how fresh a
		// sign-in it asked for, are the server's: an edited row completes
		// nothing (the callback refuses it before it asks the provider).
		for _, set := range []string{"return_to = 'https://evil.example/'", "max_age = 0", "reauth = 1", "state = 'x'", "seal = ''"} {
			t.Run(set, func(t *testing.T) {
				w := httptest.NewRecorder()
				o := &auth.OIDC{Sessions: sessions}
				if err := o.Start(w, httptest.NewRequest("GET", "/login?return_to=/sagas&max_age=900", nil)); err != nil {
					t.Fatalf("Start: %v", err)
				}
				login := w.Result().Cookies()[0]
				state := stateOf(t, w.Result().Header.Get("Location"))
				v.h.Exec(t, "UPDATE logins SET "+set)
				r := httptest.NewRequest("GET", auth.CallbackPath+"?code=c&state="+state, nil)
				r.AddCookie(login)
				err := o.Callback(httptest.NewRecorder(), r)
				if !engine.IsKind(err, engine.Invalid) || !strings.Contains(fmt.Sprint(errors.Unwrap(err)), "not sealed") {
					t.Errorf("Callback(sign-in with %s) = %v; want Invalid, its row not sealed", set, err)
				}
				v.h.Exec(t, "DELETE FROM logins")
			})
		}
	})
}

// stateOf is the state parameter of a redirect to the provider.
func stateOf(t *testing.T, location string) string {
	t.Helper()
	_, q, _ := strings.Cut(location, "state=")
	state, _, _ := strings.Cut(q, "&")
	if state == "" {
		t.Fatalf("no state in %q", location)
	}
	return state
}

// tools lists entries' tool names, in order.
func tools(es []engine.Entry) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = e.ToolName
	}
	return out
}
