package testkit

import (
	"crypto/ed25519"
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Root is the repository's root directory, where go.mod and README.md
// are: the nearest above the test's working directory with a go.mod.
func Root(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("testkit: no go.mod above the working directory")
		}
		dir = parent
	}
}

// ReadmeBlock returns the text of the first fenced code block after the
// line "<!-- name…" in README.md, so that a test runs what the README
// tells a reader to type, as written. It fails the test when there is
// no such block.
func ReadmeBlock(t testing.TB, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(Root(t), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "\n<!-- "+name)
	if ok {
		_, rest, ok = strings.Cut(rest, "\n```")
	}
	if ok {
		_, rest, ok = strings.Cut(rest, "\n") // the fence's language
	}
	block, _, ok2 := strings.Cut(rest, "```")
	if !ok || !ok2 {
		t.Fatalf("README.md has no code block after <!-- %s", name)
	}
	return block
}

// ReadmeNotifications returns the README's notifications example (the
// block after "<!-- notifications example"), as printed, and an
// environment that sets every secret it names, as a server reading it
// needs.
func ReadmeNotifications(t testing.TB) (yaml string, env map[string]string) {
	t.Helper()
	_, key, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	return ReadmeBlock(t, "notifications example"), map[string]string{
		"SLACK_BOT_TOKEN":       "xoxb-readme-token",
		"SMTP_USER":             "sagacity",
		"SMTP_PASSWORD":         "smtp-readme-password",
		"PAGERDUTY_ROUTING_KEY": "0123456789abcdef0123456789abcdef",
		"AUDIT_HOOK_SECRET":     "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
		"AUDIT_HOOK_KEY":        "whsk_" + base64.StdEncoding.EncodeToString(key),
		"AGENT7_HOOK_SECRET":    "whsec_" + base64.StdEncoding.EncodeToString([]byte("agent-7-secret-0123456789abcdef")),
	}
}
