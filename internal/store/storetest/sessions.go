package storetest

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/sagacity-go/sagacity/internal/auth"
	"github.com/sagacity-go/sagacity/internal/engine"
	"github.com/sagacity-go/sagacity/internal/testkit"
)

// The SessionStore: sessions and sign-ins, as auth writes them.

func mkSession(idHash string, created time.Time) auth.Session {
	return auth.Session{IDHash: idHash, Principal: engine.Principal{ID: "https://id.example.com#u1", Name: "Ann Example",
		Auth: "oidc", Roles: []engine.Role{engine.RoleApprover, engine.RoleAuditor}},
		CreatedAt: created, SeenAt: created, ExpiresAt: created.Add(auth.AbsoluteTimeout), Seal: "seal-" + idHash}
}

func storedSession(s auth.Session) auth.Session {
	s.CreatedAt, s.SeenAt, s.ExpiresAt = stored(s.CreatedAt), stored(s.SeenAt), stored(s.ExpiresAt)
	return s
}

func mkLogin(idHash string, created time.Time) auth.Login {
	return auth.Login{IDHash: idHash, State: "state-" + idHash, Nonce: "nonce-" + idHash, Verifier: "verifier-" + idHash,
		ReturnTo: "/sagas/x%2Fy?decided=approved", CreatedAt: created, Seal: "seal-" + idHash}
}

func storedLogin(l auth.Login) auth.Login {
	l.CreatedAt = stored(l.CreatedAt)
	return l
}

// putSession stores a session and fails the test when it cannot.
func putSession(t *testing.T, db DB, s auth.Session) {
	t.Helper()
	if err := db.PutSession(t.Context(), s); err != nil {
		t.Fatalf("PutSession(%+v): %v", s, err)
	}
}

// wantSession fails unless Session(idHash) is want, or NotFound and the
// zero Session for nil.
func wantSession(t *testing.T, db DB, idHash string, want *auth.Session) {
	t.Helper()
	got, err := db.Session(t.Context(), idHash)
	if want == nil {
		testkit.WantKind(t, fmt.Sprintf("Session(%s)", idHash), err, engine.NotFound)
		if diff := cmp.Diff(auth.Session{}, got, exact...); diff != "" {
			t.Errorf("Session(%s) = a session; want the zero Session (-want +got):\n%s", idHash, diff)
		}
		return
	}
	if diff := cmp.Diff(storedSession(*want), got, exact...); err != nil || diff != "" {
		t.Errorf("Session(%s) = %v; (-want +got):\n%s", idHash, err, diff)
	}
}

func testPutSession(t *testing.T, d *drv) {
	h1 := d.id("h1")
	t.Run("stores", func(t *testing.T) {
		s := mkSession(h1, when(0))
		putSession(t, d.db, s)
		wantSession(t, d.db, h1, &s)
	})
	t.Run("a principal without roles", func(t *testing.T) {
		s := mkSession(d.id("h2"), when(0))
		s.Principal = engine.Principal{ID: "dev", Auth: "dev"}
		putSession(t, d.db, s)
		wantSession(t, d.db, s.IDHash, &s)
	})
	t.Run("a principal in groups", func(t *testing.T) {
		s := mkSession(d.id("h3"), when(0))
		s.Principal.Groups = []string{"finance-leads", "payments, EU", "Zahlungsfreigabe"}
		putSession(t, d.db, s)
		wantSession(t, d.db, s.IDHash, &s)
	})
	t.Run("the provider's word on the sign-in", func(t *testing.T) {
		s := mkSession(d.id("h4"), when(0))
		s.Principal.Issuer, s.Principal.Subject, s.Principal.AuthTime = "https://id.example.com", "u1", when(-30).Truncate(time.Second).UTC()
		s.Principal.SignIn = &engine.SignIn{Token: "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJ1MSJ9.c2ln", ClientID: "sagacity",
			Key: `{"kty":"RSA","kid":"k1","n":"AQAB","e":"AQAB"}`, KeyID: "NzbLsXh8uDCcd-6MNwXF4W_7noWXFZAfHkxZsRGC9Xs", Reauth: true}
		putSession(t, d.db, s)
		wantSession(t, d.db, s.IDHash, &s)
	})
	t.Run("id taken", func(t *testing.T) {
		s := mkSession(h1, when(1))
		s.Principal.ID = "mallory"
		testkit.WantKind(t, fmt.Sprintf("PutSession(%+v) under a taken id", s), d.db.PutSession(t.Context(), s), engine.Conflict)
		wantSession(t, d.db, h1, new(mkSession(h1, when(0))))
	})
	t.Run("drops expired sessions", func(t *testing.T) {
		// Sessions that ended before the new one's creation go; one ending
		// at that instant and one still live stay.
		expired, ending, live := mkSession(d.id("expired"), when(0)), mkSession(d.id("ending"), when(0)), mkSession(d.id("live"), when(0))
		expired.ExpiresAt, ending.ExpiresAt, live.ExpiresAt = when(10), when(20), when(30)
		for _, s := range []auth.Session{expired, ending, live} {
			putSession(t, d.db, s)
		}
		s := mkSession(d.id("new"), stored(when(20)))
		putSession(t, d.db, s)
		wantSession(t, d.db, expired.IDHash, nil)
		wantSession(t, d.db, ending.IDHash, &ending)
		wantSession(t, d.db, live.IDHash, &live)
		wantSession(t, d.db, s.IDHash, &s)
	})
}

func testSession(t *testing.T, d *drv) {
	s := mkSession(d.id("h1"), when(0))
	putSession(t, d.db, s)
	tests := []struct {
		name, idHash string
		want         *auth.Session
	}{
		{"found", s.IDHash, &s},
		{"unknown", d.id("nobody"), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { wantSession(t, d.db, tt.idHash, tt.want) })
	}
}

func testTouchSession(t *testing.T, d *drv) {
	s, other := mkSession(d.id("h1"), when(0)), mkSession(d.id("h2"), when(0))
	putSession(t, d.db, s)
	putSession(t, d.db, other)
	if err := d.db.TouchSession(t.Context(), s.IDHash, when(90), "seal-touched"); err != nil {
		t.Fatalf("TouchSession(%s, %v): %v", s.IDHash, when(90), err)
	}
	touched := s
	touched.SeenAt, touched.Seal = when(90), "seal-touched"
	wantSession(t, d.db, s.IDHash, &touched)
	wantSession(t, d.db, other.IDHash, &other)
}

func testDeleteSession(t *testing.T, d *drv) {
	s, other := mkSession(d.id("h1"), when(0)), mkSession(d.id("h2"), when(0))
	putSession(t, d.db, s)
	putSession(t, d.db, other)
	for _, tt := range []struct{ name, idHash string }{{"deletes", s.IDHash}, {"again", s.IDHash}, {"unknown", d.id("nobody")}} {
		t.Run(tt.name, func(t *testing.T) {
			if err := d.db.DeleteSession(t.Context(), tt.idHash); err != nil {
				t.Errorf("DeleteSession(%s) = %v, want nil", tt.idHash, err)
			}
			wantSession(t, d.db, s.IDHash, nil)
			wantSession(t, d.db, other.IDHash, &other)
		})
	}
}

// putLogin stores a sign-in and fails the test when it cannot.
func putLogin(t *testing.T, db DB, l auth.Login, staleBefore time.Time) {
	t.Helper()
	if err := db.PutLogin(t.Context(), l, staleBefore); err != nil {
		t.Fatalf("PutLogin(%+v, %v): %v", l, staleBefore, err)
	}
}

// wantTake fails unless TakeLogin(idHash) is want, or NotFound and the
// zero Login for nil.
func wantTake(t *testing.T, db DB, idHash string, want *auth.Login) {
	t.Helper()
	got, err := db.TakeLogin(t.Context(), idHash)
	if want == nil {
		testkit.WantKind(t, fmt.Sprintf("TakeLogin(%s)", idHash), err, engine.NotFound)
		if diff := cmp.Diff(auth.Login{}, got, exact...); diff != "" {
			t.Errorf("TakeLogin(%s) = a sign-in; want the zero Login (-want +got):\n%s", idHash, diff)
		}
		return
	}
	if diff := cmp.Diff(storedLogin(*want), got, exact...); err != nil || diff != "" {
		t.Errorf("TakeLogin(%s) = %v; (-want +got):\n%s", idHash, err, diff)
	}
}

func testPutLogin(t *testing.T, d *drv) {
	t.Run("stores", func(t *testing.T) {
		l := mkLogin(d.id("l1"), when(0))
		putLogin(t, d.db, l, when(-600))
		wantTake(t, d.db, l.IDHash, &l)
	})
	t.Run("a step-up and a re-authentication", func(t *testing.T) {
		for _, l := range []auth.Login{mkLogin(d.id("l3"), when(0)), mkLogin(d.id("l4"), when(0))} {
			if l.IDHash == d.id("l3") {
				l.MaxAge = 15 * time.Minute
			} else {
				l.Reauth = true
			}
			putLogin(t, d.db, l, when(-600))
			wantTake(t, d.db, l.IDHash, &l)
		}
	})
	t.Run("id taken", func(t *testing.T) {
		l := mkLogin(d.id("l2"), when(0))
		putLogin(t, d.db, l, when(-600))
		forged := mkLogin(l.IDHash, when(1))
		forged.ReturnTo = "/elsewhere"
		testkit.WantKind(t, fmt.Sprintf("PutLogin(%+v) under a taken id", forged), d.db.PutLogin(t.Context(), forged, when(-600)), engine.Conflict)
		wantTake(t, d.db, l.IDHash, &l)
	})
	t.Run("drops stale sign-ins", func(t *testing.T) {
		// Sign-ins created before staleBefore go; one created at that
		// instant stays.
		stale, edge := mkLogin(d.id("stale"), when(0)), mkLogin(d.id("edge"), when(10))
		putLogin(t, d.db, stale, when(-600))
		putLogin(t, d.db, edge, when(-600))
		l := mkLogin(d.id("new"), when(20))
		putLogin(t, d.db, l, stored(when(10)))
		wantTake(t, d.db, stale.IDHash, nil)
		wantTake(t, d.db, edge.IDHash, &edge)
		wantTake(t, d.db, l.IDHash, &l)
	})
}

func testTakeLogin(t *testing.T, d *drv) {
	l, other := mkLogin(d.id("l1"), when(0)), mkLogin(d.id("l2"), when(0))
	putLogin(t, d.db, l, when(-600))
	putLogin(t, d.db, other, when(-600))
	// In order: each step sees what the ones before did.
	steps := []struct {
		name, idHash string
		want         *auth.Login
	}{
		{"takes", l.IDHash, &l},
		{"usable once", l.IDHash, nil},
		{"unknown", d.id("nobody"), nil},
		{"another is kept", other.IDHash, &other},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) { wantTake(t, d.db, st.idHash, st.want) })
	}
}
