package testkit

import (
	"crypto/ed25519"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
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

// Block is a fenced code block of README.md or of a page of docs/: where
// it is, its language (the word after the opening fence), the name of the
// marker on the line just before it ("" when there is none) and its text,
// each line without the fence's indentation.
type Block struct {
	File   string // relative to the repository's root
	Line   int    // of the opening fence, from 1
	Lang   string
	Marker string
	Text   string
}

// A marker is a line "<!-- name: what reads the block -->" (or
// "<!-- name -->"), its name the words before the colon.
var markerLine = regexp.MustCompile(`^<!-- ([^:]+?)(?::.*)? -->$`)

// ReadmeBlocks returns every fenced code block of README.md and of
// docs/*.md, in file order (README.md first).
func ReadmeBlocks(t testing.TB) []Block {
	t.Helper()
	bs, err := blocksIn(Root(t))
	if err != nil {
		t.Fatal(err)
	}
	return bs
}

// Page is README.md or a page of docs/: its path from the repository's
// root and its text.
type Page struct {
	File string
	Text string
}

// Pages returns README.md and every page of docs/*.md, README.md first:
// the documentation a reader follows, wherever a section of it stands.
func Pages(t testing.TB) []Page {
	t.Helper()
	ps, err := pagesIn(Root(t))
	if err != nil {
		t.Fatal(err)
	}
	return ps
}

// pagesIn reads README.md and docs/*.md under root.
func pagesIn(root string) ([]Page, error) {
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		return nil, err
	}
	var out []Page
	for _, path := range append([]string{filepath.Join(root, "README.md")}, docs...) {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		rel, _ := filepath.Rel(root, path)
		out = append(out, Page{File: rel, Text: string(b)})
	}
	return out, nil
}

// blocksIn reads the blocks of the README and the docs pages under root.
func blocksIn(root string) ([]Block, error) {
	pages, err := pagesIn(root)
	if err != nil {
		return nil, err
	}
	var out []Block
	for _, p := range pages {
		bs, err := parseBlocks(p.File, p.Text)
		if err != nil {
			return nil, err
		}
		out = append(out, bs...)
	}
	return out, nil
}

// parseBlocks reads the fenced blocks of a Markdown file's text. A fence
// may be indented (a block in a list item); its block's lines lose that
// indentation.
func parseBlocks(file, text string) ([]Block, error) {
	var out []Block
	lines := strings.Split(text, "\n")
	for i := 0; i < len(lines); i++ {
		indent, lang, ok := strings.Cut(lines[i], "```")
		if !ok || strings.TrimSpace(indent) != "" {
			continue
		}
		b := Block{File: file, Line: i + 1, Lang: strings.TrimSpace(lang)}
		if i > 0 {
			if m := markerLine.FindStringSubmatch(strings.TrimSpace(lines[i-1])); m != nil {
				b.Marker = m[1]
			}
		}
		var body []string
		for i++; i < len(lines) && strings.TrimSpace(lines[i]) != "```"; i++ {
			body = append(body, strings.TrimPrefix(lines[i], indent))
		}
		if i == len(lines) {
			return nil, fmt.Errorf("%s:%d: the block is never closed", file, b.Line)
		}
		b.Text = strings.Join(body, "\n") + "\n"
		out = append(out, b)
	}
	return out, nil
}

// blockNamed is the block whose marker is name: exactly one, or an error
// naming the marker (and, when more than one holds it, each place).
func blockNamed(bs []Block, name string) (Block, error) {
	var found []Block
	for _, b := range bs {
		if b.Marker == name {
			found = append(found, b)
		}
	}
	switch len(found) {
	case 0:
		return Block{}, fmt.Errorf("README.md and docs/*.md have no code block just after <!-- %s: … -->", name)
	case 1:
		return found[0], nil
	}
	var at []string
	for _, b := range found {
		at = append(at, fmt.Sprintf("%s:%d", b.File, b.Line))
	}
	return Block{}, fmt.Errorf("the marker <!-- %s: … --> is held by more than one block (%s): a test could not tell which it runs",
		name, strings.Join(at, ", "))
}

// ReadmeBlock returns the text of the fenced code block just after the
// line "<!-- name: … -->" in README.md or one of docs/*.md, so that a test
// runs what the documentation tells a reader to type, as written. It fails
// the test when no block has that marker, or more than one.
func ReadmeBlock(t testing.TB, name string) string {
	t.Helper()
	b, err := blockNamed(ReadmeBlocks(t), name)
	if err != nil {
		t.Fatal(err)
	}
	return b.Text
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
