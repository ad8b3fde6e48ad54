package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sagacity-go/sagacity/internal/config"
	"github.com/sagacity-go/sagacity/internal/engine"
)

// TestKeygenOut: keygen -out writes the signing key alone to a new file
// of mode 0600, which SAGACITY_SIGNING_KEY_FILE takes, prints the public
// key that verifies it first, and never overwrites a file; what keygen
// prints without -out, saved to a file, is refused as a key file, naming
// SAGACITY_SIGNING_KEY_FILE and keygen -out.
func TestKeygenOut(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "signing.key")
	var out bytes.Buffer
	if err := run(context.Background(), []string{"keygen", "-name", "sagacity.example.com", "-out", path}, nil, &out); err != nil {
		t.Fatalf("keygen -out %s = %v", path, err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	skey := string(b)
	if !strings.HasPrefix(skey, "PRIVATE+KEY+sagacity.example.com+") || strings.Count(skey, "\n") != 1 || !strings.HasSuffix(skey, "\n") {
		t.Errorf("keygen -out wrote %q, want the signing key alone on one line", skey)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("keygen -out made %s with mode %v (%v), want 0600", path, fi.Mode().Perm(), err)
	}
	keys, err := engine.NewKeys(skey)
	if err != nil {
		t.Fatal(err)
	}
	vkey, rest, _ := strings.Cut(out.String(), "\n")
	if vkey != keys.VerifierKey() || !strings.Contains(rest, path) || strings.Contains(out.String(), "PRIVATE+KEY") {
		t.Errorf("keygen -out printed %q; want the public key %s first, the file's name, and not the signing key", out.String(), keys.VerifierKey())
	}
	c, err := config.Load(lookup([]string{"SAGACITY_SIGNING_KEY_FILE=" + path}))
	if err != nil || c.SigningKey != strings.TrimSpace(skey) {
		t.Errorf("config.Load(SAGACITY_SIGNING_KEY_FILE=%s) = %q, %v; want the key keygen -out wrote", path, c.SigningKey, err)
	}

	// A second run never replaces the key.
	err = run(context.Background(), []string{"keygen", "-out", path}, nil, &out)
	if ee, ok := errors.AsType[exitError](err); !ok || ee.code != 2 || !strings.Contains(err.Error(), path+" exists already") {
		t.Errorf("keygen -out %s again = %v; want exit 2 saying it exists", path, err)
	}
	if again, _ := os.ReadFile(path); string(again) != skey {
		t.Errorf("keygen -out over an existing file changed it to %q", again)
	}
	missing := filepath.Join(dir, "no-such-dir", "signing.key")
	if err := run(context.Background(), []string{"keygen", "-out", missing}, nil, &out); err == nil {
		t.Errorf("keygen -out %s = nil; want an error", missing)
	}

	// What keygen prints without -out, redirected to a file, is no key
	// file.
	printed := filepath.Join(dir, "printed.key")
	out.Reset()
	if err := run(context.Background(), []string{"keygen"}, nil, &out); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(printed, out.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = config.Load(lookup([]string{"SAGACITY_SIGNING_KEY_FILE=" + printed}))
	if err == nil || !strings.HasPrefix(err.Error(), "SAGACITY_SIGNING_KEY_FILE ("+printed+"): holds ") || !strings.Contains(err.Error(), "sagacity keygen -out FILE") {
		t.Errorf("config.Load(SAGACITY_SIGNING_KEY_FILE=keygen's printed output) = %v; want it refused, naming SAGACITY_SIGNING_KEY_FILE and keygen -out", err)
	}
}
