package witness

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sagacity-go/sagacity/internal/engine"
)

// TestDir: checkpoints are kept one a file, never replaced; the newest is
// the largest size, whatever order they came in.
func TestDir(t *testing.T) {
	d, err := Open(filepath.Join(t.TempDir(), "cp"))
	if err != nil {
		t.Fatal(err)
	}
	if signed, _, err := d.Newest(); signed != "" || err != nil {
		t.Errorf("Newest of an empty directory = %q, %v; want none", signed, err)
	}
	for _, size := range []int64{9, 100, 10} {
		if err := d.Publish(size, note(size)); err != nil {
			t.Fatalf("Publish(%d): %v", size, err)
		}
	}
	if signed, at, err := d.Newest(); signed != note(100) || at.IsZero() || err != nil {
		t.Errorf("Newest = %q, %v, %v; want size 100's", signed, at, err)
	}
	if err := d.Publish(10, note(10)); err != nil {
		t.Errorf("publishing the same checkpoint again = %v, want nil", err)
	}
	if err := d.Publish(10, note(11)); err == nil || !strings.Contains(err.Error(), "holds a different checkpoint of size 10: the log forked") {
		t.Errorf("publishing another checkpoint of size 10 = %v, want refused", err)
	}
	if signed, err := d.Get(10); signed != note(10) || err != nil {
		t.Errorf("Get(10) = %q, %v; want the first one, kept", signed, err)
	}
	if signed, err := d.Get(11); signed != "" || err != nil {
		t.Errorf("Get(11) = %q, %v; want none", signed, err)
	}
	if err := os.WriteFile(filepath.Join(d.Path(), engine.CheckpointFile(200)), []byte("cut"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := d.Newest(); err == nil || !strings.Contains(err.Error(), "is not a signed checkpoint") {
		t.Errorf("Newest with a file cut short = %v, want an error", err)
	}
	if entries, _ := os.ReadDir(d.Path()); len(entries) != 4 {
		t.Errorf("the directory holds %d files, want the 4 checkpoints and nothing left over", len(entries))
	}
}

func note(size int64) string { return "origin\n" + strings.Repeat("x", int(size%7)) + "\n\n— sig\n" }

// TestRunner: the directory remembers the runner of the newest process
// started with it, each replacing the one before, and refuses a file
// that holds anything else.
func TestRunner(t *testing.T) {
	d, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if id, err := d.Runner(); id != "" || err != nil {
		t.Errorf("Runner of a new directory = %q, %v; want none", id, err)
	}
	for _, id := range []string{"FIRSTPROCESS", "SECONDPROCESS"} {
		if err := d.SetRunner(id); err != nil {
			t.Fatalf("SetRunner(%s): %v", id, err)
		}
		if got, err := d.Runner(); got != id || err != nil {
			t.Errorf("Runner after SetRunner(%s) = %q, %v", id, got, err)
		}
	}
	if err := os.WriteFile(filepath.Join(d.Path(), runnerFile), []byte("two\nlines\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if id, err := d.Runner(); err == nil {
		t.Errorf("Runner of a file of two lines = %q; want an error", id)
	}
	if signed, _, err := d.Newest(); signed != "" || err != nil {
		t.Errorf("Newest beside the runner file = %q, %v; want no checkpoint", signed, err)
	}
}
