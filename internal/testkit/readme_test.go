package testkit

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestReadmeBlocks: the blocks of README.md and docs/*.md are read with
// the marker just before each, an indented block without its indentation;
// a marker is found in whichever file holds it, and one that two blocks
// hold is refused, naming it and both places.
func TestReadmeBlocks(t *testing.T) {
	root := t.TempDir()
	os.Mkdir(filepath.Join(root, "docs"), 0o755)
	files := map[string]string{
		"README.md": "# Title\n\n<!-- first: a test -->\n```sh\necho one\n```\n\n```yaml\nplain: true\n```\n" +
			"1. A step:\n\n   <!-- listed: another test -->\n   ```yaml\n   roles:\n     claim: groups\n   ```\n",
		"docs/page.md":  "<!-- paged -->\n```sh\necho page\n```\n",
		"docs/twice.md": "<!-- first: again -->\n```text\nsecond\n```\n",
		"docs/note.txt": "<!-- ignored -->\n```sh\nnot a page\n```\n",
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(root, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	bs, err := blocksIn(root)
	if err != nil {
		t.Fatal(err)
	}
	want := []Block{
		{File: "README.md", Line: 4, Lang: "sh", Marker: "first", Text: "echo one\n"},
		{File: "README.md", Line: 8, Lang: "yaml", Text: "plain: true\n"},
		{File: "README.md", Line: 14, Lang: "yaml", Marker: "listed", Text: "roles:\n  claim: groups\n"},
		{File: filepath.Join("docs", "page.md"), Line: 2, Lang: "sh", Marker: "paged", Text: "echo page\n"},
		{File: filepath.Join("docs", "twice.md"), Line: 2, Lang: "text", Marker: "first", Text: "second\n"},
	}
	if diff := cmp.Diff(want, bs); diff != "" {
		t.Errorf("blocksIn(%v) (-want +got):\n%s", files, diff)
	}
	for name, want := range map[string]string{"listed": "roles:\n  claim: groups\n", "paged": "echo page\n"} {
		if b, err := blockNamed(bs, name); err != nil || b.Text != want {
			t.Errorf("blockNamed(%q) = %q, %v; want %q", name, b.Text, err, want)
		}
	}
	if _, err := blockNamed(bs, "first"); err == nil || !strings.Contains(err.Error(), "<!-- first: … --> is held by more than one block (README.md:4, docs/twice.md:2)") {
		t.Errorf("blockNamed(a marker two files hold) = %v; want it refused, naming both", err)
	}
	if _, err := blockNamed(bs, "firs"); err == nil {
		t.Errorf("blockNamed(a prefix of a marker) = nil error; want none found")
	}
	if _, err := parseBlocks("open.md", "```sh\necho\n"); err == nil || !strings.Contains(err.Error(), "open.md:1") {
		t.Errorf("parseBlocks(an unclosed block) = %v; want an error naming its line", err)
	}
}
