package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	sagacity "github.com/sagacity-go/sagacity/client"
	"github.com/sagacity-go/sagacity/internal/auth/authtest"
	"github.com/sagacity-go/sagacity/internal/testkit"
)

// TestSignIns runs the real binary in oidc mode against a real OpenID
// provider, on both stores, as an attacker with the application role's
// rights on the database: a session row made from the sign-in row any
// visitor gets (GET /login), naming an approver, signs nobody in and
// casts no vote; an edited session row ends that session. Two people
// then sign in and vote for real, the tool runs, and offline sagacity
// verify proves each vote's identity from the provider's own signature
// of that person's sign-in, with the keys the log journals and with the
// provider's key set fetched from the provider itself.
func TestSignIns(t *testing.T) {
	for _, db := range []struct {
		name string
		url  func(testing.TB) string
	}{{"postgres", testkit.PostgresURL}, {"sqlite", testkit.SQLiteURL}} {
		t.Run(db.name, func(t *testing.T) { testSignIns(t, db.url(t)) })
	}
}

func testSignIns(t *testing.T, dbURL string) {
	f := newFixture(t, 90*time.Second)
	ctx := f.ctx
	idp := authtest.NewProvider(t,
		authtest.User{ID: "alice-id", Username: "alice", Password: "pw-alice-123", Email: "alice@example.test", Groups: []string{"payments"}},
		authtest.User{ID: "bob-id", Username: "bob", Password: "pw-bob-123", Email: "bob@example.test", Groups: []string{"payments"}},
		authtest.User{ID: "mallory-id", Username: "mallory", Password: "pw-mallory-123", Email: "mallory@example.test"})
	addr := freeAddr(t)
	public := "http://" + addr
	id, secret := idp.WebClient(t, public+"/auth/callback")
	base, err := os.ReadFile(f.config)
	if err != nil {
		t.Fatal(err)
	}
	config := filepath.Join(t.TempDir(), "oidc.yaml")
	if err := os.WriteFile(config, append(base, []byte("roles:\n  map:\n    payments: [approver]\n"+
		"approval:\n  tools:\n    "+toolWire+":\n      - {name: four-eyes, quorum: 2}\n")...), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := newServer(t, "sagacity", f.env("sagacity", dbURL, map[string]string{"SAGACITY_CONFIG": config, "SAGACITY_ADDR": addr,
		"SAGACITY_AUTH": "oidc", "SAGACITY_OIDC_ISSUER": idp.Issuer, "SAGACITY_OIDC_CLIENT_ID": id, "SAGACITY_OIDC_CLIENT_SECRET": secret,
		"SAGACITY_PUBLIC_URL": public, "SAGACITY_SESSION_KEY": "e2e-session-key-0123456789abcdef0123"}))
	srv.start()
	agent := f.initiator(0)
	agent.call(ctx, srv, "signed", toolReserve, `{"sku":"desk","qty":1}`)
	_, gated := agent.call(ctx, srv, "signed", toolWire, wire)
	if gated.Outcome != sagacity.Gated {
		t.Fatalf("the wire: %+v; want it gated", gated)
	}
	votes := func() int {
		_, l := f.auditor.approvals(ctx, srv, "signed")
		if len(l.Approvals) != 1 {
			t.Fatalf("approvals of saga signed = %+v; want the wire's request", l)
		}
		return len(l.Approvals[0].ApprovedBy)
	}

	// A visitor's sign-in row, made a session of bob's by SQL.
	visitor := browser(t)
	resp := visitor.get(t, public+"/login")
	login := cookieNamed(visitor.jar.Cookies(resp.Request.URL), "sagacity-login")
	if login == nil {
		t.Fatalf("GET /login set no sign-in cookie")
	}
	testkit.Exec(t, dbURL, "INSERT INTO sessions (id_hash, principal, name, auth, roles, member_of, issuer, subject, auth_time, sign_in,"+
		" created_at, seen_at, expires_at, seal) SELECT id_hash, $1, 'bob@example.test', 'oidc', 'approver', 'payments', $2, 'bob-id', 0, '',"+
		" created_at, created_at, created_at, seal FROM logins", strings.TrimSuffix(idp.Issuer, "/")+"#bob-id", idp.Issuer)
	testkit.Exec(t, dbURL, "UPDATE sessions SET expires_at = $1, seen_at = $2", time.Now().Add(time.Hour), time.Now())
	forged := browser(t)
	forged.jar.SetCookies(&url.URL{Scheme: "http", Host: addr, Path: "/"}, []*http.Cookie{{Name: "sagacity", Value: login.Value, Path: "/"}})
	if resp := forged.get(t, public+"/"); resp.StatusCode != http.StatusSeeOther && resp.StatusCode != http.StatusFound ||
		!strings.HasPrefix(resp.Header.Get("Location"), "/login") {
		t.Errorf("the console with a sign-in's cookie made a session by SQL = %d (Location %q); want sent to sign in", resp.StatusCode, resp.Header.Get("Location"))
	}
	if code := forged.vote(t, public, gated.JournalSeq, gated.InputHash); code == http.StatusSeeOther || code == http.StatusOK {
		t.Errorf("a vote with a sign-in's cookie made a session by SQL = %d; want it refused", code)
	}
	if n := votes(); n != 0 {
		t.Fatalf("the forged session cast %d votes; want none", n)
	}

	// alice signs in for real; her session's row, edited to give her the
	// auditor role too, signs her out.
	alice := browser(t)
	alice.signIn(t, public, "alice", "pw-alice-123")
	testkit.Exec(t, dbURL, "UPDATE sessions SET roles = 'approver,auditor' WHERE subject = 'alice-id'")
	if resp := alice.get(t, public+"/"); resp.StatusCode == http.StatusOK {
		t.Errorf("the console with a session row edited by SQL = 200; want sent to sign in")
	}

	// alice and bob sign in and vote; the wire runs.
	alice.signIn(t, public, "alice", "pw-alice-123")
	bob := browser(t)
	bob.signIn(t, public, "bob", "pw-bob-123")
	for _, v := range []struct {
		name string
		s    *session
	}{{"alice", alice}, {"bob", bob}} {
		if code := v.s.vote(t, public, gated.JournalSeq, gated.InputHash); code != http.StatusSeeOther {
			t.Fatalf("%s's vote = %d; want 303", v.name, code)
		}
	}
	if ans, r := agent.resume(ctx, srv, "signed", gated.JournalSeq, wire); !ans.is(200) || r.Outcome != sagacity.Executed {
		t.Fatalf("resume after both votes: %s %+v", ans, r)
	}
	f.waitLogged(srv, "signed")

	// Offline: the export, the checkpoint and the key, and the
	// provider's own key set.
	dir := t.TempDir()
	save := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	get := func(path, token string) []byte {
		req, _ := http.NewRequestWithContext(ctx, "GET", path, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 {
			t.Fatalf("GET %s = %d %s", path, resp.StatusCode, b)
		}
		return b
	}
	cp := get(public+"/sagacity/checkpoints/latest", f.auditor.token)
	size := strings.Fields(string(cp))[1]
	export := save("signed.ndjson", get(public+"/sagacity/audit/signed?proofs="+size, f.auditor.token))
	var discovery struct {
		JWKS string `json:"jwks_uri"`
	}
	if err := json.Unmarshal(get(strings.TrimSuffix(idp.Issuer, "/")+"/.well-known/openid-configuration", ""), &discovery); err != nil {
		t.Fatal(err)
	}
	jwks := save("jwks.json", get(discovery.JWKS, ""))
	cpFile := save("checkpoint.note", cp)
	for _, args := range [][]string{{}, {"-provider-keys", jwks}} {
		cmd := exec.CommandContext(ctx, binary(t), append(append([]string{"verify", "-key", f.verifierKey(), "-checkpoint", cpFile}, args...), export)...)
		out, err := cmd.CombinedOutput()
		var got struct {
			Valid      bool `json:"valid"`
			Identities []struct {
				Decider string `json:"decider"`
				Proved  bool   `json:"proved"`
			} `json:"identities"`
		}
		_ = json.Unmarshal(out, &got)
		if err != nil || !got.Valid || len(got.Identities) != 2 || !got.Identities[0].Proved || !got.Identities[1].Proved ||
			!strings.HasSuffix(got.Identities[0].Decider, "#alice-id") {
			t.Errorf("sagacity verify %v = %v %s; want valid, alice's and bob's votes proved by the provider", args, err, out)
		}
	}
}

// session is a browser's cookies, following no redirect.
type session struct {
	c   *http.Client
	jar *cookiejar.Jar
}

func browser(t *testing.T) *session {
	jar, _ := cookiejar.New(nil)
	return &session{jar: jar, c: &http.Client{Jar: jar, Timeout: 10 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

func (s *session) get(t *testing.T, u string) *http.Response {
	t.Helper()
	resp, err := s.c.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp
}

// signIn signs in through the provider's login form.
func (s *session) signIn(t *testing.T, public, user, password string) {
	t.Helper()
	u := authtest.LoginHTTP(t, s.c, public+"/login", public+"/auth/callback", user, password)
	if resp := s.get(t, u); resp.StatusCode != http.StatusFound {
		t.Fatalf("%s's callback = %d, want 302", user, resp.StatusCode)
	}
}

// vote approves the request at seq of saga signed from the console, as
// its confirmed form posts it, and returns the status.
func (s *session) vote(t *testing.T, public string, seq int64, hash string) int {
	t.Helper()
	form := url.Values{"saga": {"signed"}, "seq": {fmt.Sprint(seq)}, "hash": {hash}, "decision": {"approve"}, "confirm": {"yes"}}
	req, _ := http.NewRequestWithContext(context.Background(), "POST", public+"/request/decide", bytes.NewBufferString(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	resp, err := s.c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func cookieNamed(cs []*http.Cookie, name string) *http.Cookie {
	for _, c := range cs {
		if c.Name == name {
			return c
		}
	}
	return nil
}

// freeAddr is a loopback address no one listens on, for a server whose
// public URL must be known before it starts.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}
