package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sagacity-go/sagacity/internal/auth/authtest"
	"github.com/sagacity-go/sagacity/internal/testkit"
)

// freeAddr finds a loopback port the server can have, for settings that
// must name the address before it starts.
func freeAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func status(t *testing.T, c *http.Client, method, url, token string) int {
	t.Helper()
	req, _ := http.NewRequest(method, url, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestRunOIDC configures oidc mode through the environment and the
// README's roles: block, as an operator would, and signs in through a real
// provider: as a confidential client, with SAGACITY_OIDC_CLIENT_SECRET,
// and as a public one, without.
func TestRunOIDC(t *testing.T) {
	t.Parallel()
	for _, confidential := range []bool{true, false} {
		t.Run(map[bool]string{true: "confidential", false: "public"}[confidential], func(t *testing.T) { runOIDC(t, confidential) })
	}
}

func runOIDC(t *testing.T, confidential bool) {
	p := authtest.NewProvider(t, authtest.User{ID: "alice-id", Username: "alice", Password: "pw-alice-123",
		Email: "alice@example.test", Groups: []string{"payments-approvers"}})
	addr := freeAddr(t)
	public := "http://" + addr
	var id, secret string
	if confidential {
		id, secret = p.WebClient(t, public+"/auth/callback")
	} else {
		id = p.PublicClient(t, public+"/auth/callback")
	}
	cfg := filepath.Join(t.TempDir(), "sagacity.yaml")
	if err := os.WriteFile(cfg, []byte(testkit.ReadmeBlock(t, "roles")), 0o644); err != nil { // the README's OIDC set-up maps payments-approvers to approver
		t.Fatal(err)
	}
	launched := launch(t, map[string]string{"SAGACITY_ADDR": addr, "SAGACITY_AUTH": "oidc", "SAGACITY_OIDC_ISSUER": p.Issuer,
		"SAGACITY_SIGNING_KEY": testSigningKey(t), "SAGACITY_CHECKPOINT_DIR": t.TempDir(),
		"SAGACITY_OIDC_CLIENT_ID": id, "SAGACITY_OIDC_CLIENT_SECRET": secret, "SAGACITY_PUBLIC_URL": public,
		"SAGACITY_SESSION_KEY": "session-key-for-this-test-0123456789", "SAGACITY_CONFIG": cfg,
		"SAGACITY_DATABASE_URL": testkit.SQLiteURL(t)})
	defer launched.stop(t)

	j, _ := cookiejar.New(nil)
	c := &http.Client{Jar: j, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	u := authtest.LoginHTTP(t, c, public+"/login", public+"/auth/callback", "alice", "pw-alice-123")
	if code := status(t, c, "GET", u, ""); code != http.StatusFound {
		t.Fatalf("callback = %d, want 302", code)
	}
	resp, err := c.Get(public + "/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !bytes.Contains(body, []byte("alice@example.test")) || !bytes.Contains(body, []byte(">approver<")) {
		t.Errorf("console after sign-in = %d, want alice@example.test with the approver role", resp.StatusCode)
	}
	if code := status(t, http.DefaultClient, "GET", public+"/sagacity/approvals", ""); code != 401 {
		t.Errorf("anonymous API call in oidc mode = %d, want 401", code)
	}
	pu, _ := url.Parse(u)
	logs := launched.out.String()
	for _, ck := range j.Cookies(pu) {
		if strings.Contains(logs, ck.Value) {
			t.Errorf("the session cookie appears in the server's log")
		}
	}
	if code := pu.Query().Get("code"); code == "" || strings.Contains(logs, code) {
		t.Errorf("the authorisation code %q is missing or appears in the server's log", code)
	}
}

// TestRunTokens declares a token made by `sagacity token` and uses it.
func TestRunTokens(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	if err := run(context.Background(), []string{"token", "-name", "ci-bot", "-roles", "agent,approver,auditor"}, env(nil), &out); err != nil {
		t.Fatal(err)
	}
	toks, yaml := printedTokens(t, out.String())
	tok := toks["ci-bot"]
	cfg := filepath.Join(t.TempDir(), "sagacity.yaml")
	if err := os.WriteFile(cfg, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	base, logs := start(t, map[string]string{"SAGACITY_AUTH": "tokens", "SAGACITY_CONFIG": cfg, "SAGACITY_DATABASE_URL": testkit.SQLiteURL(t),
		"SAGACITY_SIGNING_KEY": testSigningKey(t), "SAGACITY_CHECKPOINT_DIR": t.TempDir()})
	if code := status(t, http.DefaultClient, "GET", base+"/sagacity/approvals", tok); code != 200 {
		t.Errorf("API call with the new token = %d, want 200", code)
	}
	if code := status(t, http.DefaultClient, "GET", base+"/sagacity/approvals", ""); code != 401 {
		t.Errorf("API call without a token = %d, want 401", code)
	}
	if strings.Contains(logs.String(), tok) {
		t.Errorf("the token appears in the server's log")
	}
	for _, bad := range [][]string{{"-roles", "admin"}, {"extra"}, {"-nope"}} {
		err := run(context.Background(), append([]string{"token"}, bad...), env(nil), io.Discard)
		if ee, ok := errors.AsType[exitError](err); !ok || ee.code != 2 {
			t.Errorf("sagacity token %v = %v, want exit 2", bad, err)
		}
	}
}
