package main

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/sagacity-go/sagacity/internal/testkit"
)

// TestReadmeTested: every block of README.md and docs/*.md that a reader
// types or hands the server — YAML, shell, any block holding a curl
// command or a sagacity command line — has a marker <!-- name: … --> on
// the line just before it, and a test reads it by that name: a Go file of
// the repository's tests (or of testkit, their kit) calls
// testkit.ReadmeBlock with it.
func TestReadmeTested(t *testing.T) {
	t.Parallel()
	read := readmeNamesRead(t)
	for _, b := range testkit.ReadmeBlocks(t) {
		what := typed(b)
		if what == "" {
			continue
		}
		first, _, _ := strings.Cut(b.Text, "\n")
		switch {
		case b.Marker == "":
			t.Errorf("%s:%d: a block %s (%q) has no marker <!-- name: the test that runs it --> on the line before it", b.File, b.Line, what, first)
		case !read[b.Marker]:
			t.Errorf("%s:%d: no test reads the block %s after <!-- %s: … --> (testkit.ReadmeBlock(t, %q))", b.File, b.Line, what, b.Marker, b.Marker)
		}
	}
}

// TestDocLinks: every relative link of README.md and docs/*.md leads to
// a file of the repository and, with an #anchor, to a heading of that
// file, so that a section moved from one page to another takes its links
// along; and README.md links every page of docs/, so that a reader finds
// each from the front door.
func TestDocLinks(t *testing.T) {
	t.Parallel()
	for _, b := range testkit.BrokenLinks(t) {
		t.Errorf("%s", b)
	}
	pages := testkit.Pages(t)
	for _, p := range pages[1:] {
		link := "](" + filepath.ToSlash(p.File)
		if !strings.Contains(pages[0].Text, link+")") && !strings.Contains(pages[0].Text, link+"#") {
			t.Errorf("%s links no %s: a reader of the README never finds it", pages[0].File, p.File)
		}
	}
}

var (
	// A curl command, wherever it stands in a line: first, after a pipe,
	// in $(…).
	curlCommand = regexp.MustCompile(`(^|[\s;|&(])curl\s`)
	// A line that runs sagacity: after a prompt and variables set for it,
	// the binary (any path to it) and a word, which names a command when
	// it is one.
	sagacityLine = regexp.MustCompile(`^\s*(\$\s+)?([A-Za-z_][A-Za-z0-9_]*=\S*\s+)*(\S*/)?sagacity\s+(\S+)`)
)

// typed says what makes block b one a test must run ("" when nothing
// does): its language, or a command in it.
func typed(b testkit.Block) string {
	switch b.Lang {
	case "yaml", "yml":
		return "of YAML"
	case "sh", "shell", "bash", "console":
		return "of shell commands"
	}
	for l := range strings.SplitSeq(b.Text, "\n") {
		if curlCommand.MatchString(l) {
			return "holding a curl command"
		}
		if m := sagacityLine.FindStringSubmatch(l); m != nil && slices.ContainsFunc(commands, func(c command) bool { return c.name == m[4] }) {
			return "holding a sagacity command line"
		}
	}
	return ""
}

// readmeBlockCall is a call of testkit.ReadmeBlock with a name.
var readmeBlockCall = regexp.MustCompile(`ReadmeBlock\(\s*\w+\s*,\s*("(?:[^"\\]|\\.)*")\s*\)`)

// readmeNamesRead are the names the repository's tests (its _test.go
// files, and testkit's helpers) read README blocks by.
func readmeNamesRead(t *testing.T) map[string]bool {
	root := testkit.Root(t)
	kit := filepath.Join(root, "internal", "testkit")
	read := map[string]bool{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case d.IsDir() && path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "node_modules"):
			return filepath.SkipDir
		case d.IsDir() || !strings.HasSuffix(path, ".go") || !strings.HasSuffix(path, "_test.go") && filepath.Dir(path) != kit:
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range readmeBlockCall.FindAllSubmatch(src, -1) {
			name, err := strconv.Unquote(string(m[1]))
			if err != nil {
				return fmt.Errorf("%s: %s: %w", path, m[1], err)
			}
			read[name] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(read) == 0 {
		t.Fatal("no test of the repository calls testkit.ReadmeBlock with a name: the search finds nothing")
	}
	return read
}
