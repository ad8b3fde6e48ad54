package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sagacity-go/sagacity/internal/testkit"
)

// TestFromCheckout runs the README's commands that build a module of
// one's own on toolsig from a checkout, as written, beside this checkout,
// offline (GOPROXY=off: the module is not published, and nothing else is
// needed), and checks that what they built is this example.
func TestFromCheckout(t *testing.T) {
	script := testkit.ReadmeBlock(t, "checkout")
	dir := t.TempDir()
	if err := os.Symlink(testkit.Root(t), filepath.Join(dir, "sagacity")); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sh", "-ex")
	cmd.Stdin = strings.NewReader(script)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOPROXY=off", "GOWORK=off", "GOFLAGS=")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the README's commands failed: %v\n%s", err, out)
	}
	bin := filepath.Join(dir, "wiretool", "wiretool")
	out, err := exec.Command(bin).CombinedOutput()
	if _, ok := errors.AsType[*exec.ExitError](err); !ok || !strings.HasPrefix(string(out), "toolserver: SAGACITY_TOOL_SIGNING_SECRET: ") {
		t.Errorf("%s without a secret = %v, %q; want the example refusing to start", bin, err, out)
	}
}
