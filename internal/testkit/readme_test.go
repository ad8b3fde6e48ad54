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
	if err := os.Mkdir(filepath.Join(root, "docs"), 0o755); err != nil {
		t.Fatal(err)
	}
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

// TestBrokenLinks: a relative link of README.md or docs/*.md leads to a
// file that exists and, with an #anchor, to a heading of that file, its
// anchor made as GitHub makes it; each one that does not is named with
// its file, its line and the link. Links to other sites, and links in
// code, are not followed.
func TestBrokenLinks(t *testing.T) {
	root := t.TempDir()
	if err := os.Mkdir(filepath.Join(root, "docs"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(root, "wire"), 0o755); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"README.md": "# Sagacity for Go\n\n## Start here\n\nSee [the API](docs/api.md), [its\nerrors](docs/api.md#requests-and-answers),\n" +
			"[MCP](docs/api.md#mcp-the-gate-where-agents-already-are) and [below](#start-here), [its word](docs/api.md#the-providers-word).\n" +
			"[Gone](docs/gone.md), [a typo](docs/api.md#request-and-answers), [here](#nowhere).\n" +
			"[Away](https://example.com/x#y), [mail](mailto:a@example.com), `[in code](docs/none.md)`.\n\n" +
			"```sh\n# [in a block](docs/none.md)\n```\n",
		"docs/api.md": "# The API\n\n- [Requests and answers](#requests-and-answers)\n\n## Requests and answers\n\n" +
			"## MCP: the gate where agents already are\n\n### `wire`, the types\n\n## Requests and answers\n\n" +
			"![A screenshot](console.png \"the console\") and [`wire`](../wire/wire.go), [wire's](#wire-the-types),\n" +
			"[the second](#requests-and-answers-1), [a third](#requests-and-answers-2), [home](../README.md#start-here),\n" +
			"[out](../../elsewhere.md), [a file's anchor](../wire/wire.go#L1).\n\n## The provider's word\n",
		"docs/console.png": "",
		"wire/wire.go":     "package wire\n",
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(root, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := brokenLinks(root)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"README.md:8: (docs/gone.md): there is no docs/gone.md",
		"README.md:8: (docs/api.md#request-and-answers): no heading of docs/api.md makes the anchor #request-and-answers",
		"README.md:8: (#nowhere): no heading of README.md makes the anchor #nowhere",
		filepath.Join("docs", "api.md") + ":14: (#requests-and-answers-2): no heading of docs/api.md makes the anchor #requests-and-answers-2",
		filepath.Join("docs", "api.md") + ":15: (../../elsewhere.md): it leads out of the repository",
		filepath.Join("docs", "api.md") + ":15: (../wire/wire.go#L1): wire/wire.go is no Markdown page, whose headings make anchors",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("brokenLinks(%v) (-want +got):\n%s", files, diff)
	}
}
