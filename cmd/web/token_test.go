package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sagacity-go/sagacity/internal/config"
	"github.com/sagacity-go/sagacity/internal/engine"
)

// printedTokens reads what sagacity token prints without -config: each
// token beside its name, then the tokens: block. It fails the test unless
// every token is printed once, in its own line, and the block holds none.
func printedTokens(t *testing.T, out string) (tokens map[string]string, block string) {
	t.Helper()
	head, block, ok := strings.Cut(out, "\n\n# Add this to SAGACITY_CONFIG (it holds only each token's SHA-256), or let sagacity token -config FILE add it:\n")
	lines := strings.Split(head, "\n")
	if !ok || lines[0] != "# Give each token to its user alone; it is stored nowhere:" || !strings.HasPrefix(block, "tokens:\n") {
		t.Fatalf("sagacity token printed\n%s\nwant the tokens, then a tokens: block", out)
	}
	tokens = tokenLines(t, lines[1:])
	for name, tok := range tokens {
		if strings.Count(out, tok) != 1 {
			t.Errorf("sagacity token printed %s's token %d times, want once:\n%s", name, strings.Count(out, tok), out)
		}
	}
	return tokens, block
}

var tokenLine = regexp.MustCompile(`^(.+?) +(sgc_[A-Z2-7]{52})$`)

// tokenLines reads "NAME  TOKEN" lines.
func tokenLines(t *testing.T, lines []string) map[string]string {
	t.Helper()
	tokens := map[string]string{}
	for _, l := range lines {
		m := tokenLine.FindStringSubmatch(l)
		if m == nil {
			t.Fatalf("%q is not a name and a token", l)
		}
		tokens[m[1]] = m[2]
	}
	return tokens
}

func sum(tok string) string {
	s := sha256.Sum256([]byte(tok))
	return hex.EncodeToString(s[:])
}

// TestTokenCommand: several NAME=ROLES arguments make one token each,
// printed once beside its name, and one tokens: block declaring them all
// by hash, which the server's configuration loads; -name and -roles still
// make one. Mistakes are refused with exit status 2.
func TestTokenCommand(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want []config.Token // with the token's name in SHA256
	}{
		{[]string{"ci-bot=agent", "release=agent,approver", "prometheus=auditor", "a=b=auditor"}, []config.Token{
			{Name: "ci-bot", SHA256: "ci-bot", Roles: []engine.Role{engine.RoleAgent}},
			{Name: "release", SHA256: "release", Roles: []engine.Role{engine.RoleAgent, engine.RoleApprover}},
			{Name: "prometheus", SHA256: "prometheus", Roles: []engine.Role{engine.RoleAuditor}},
			{Name: "a=b", SHA256: "a=b", Roles: []engine.Role{engine.RoleAuditor}}}},
		{[]string{"-name", "ci-bot", "-roles", "agent, auditor"}, []config.Token{
			{Name: "ci-bot", SHA256: "ci-bot", Roles: []engine.Role{engine.RoleAgent, engine.RoleAuditor}}}},
		{nil, []config.Token{{Name: "automation", SHA256: "automation", Roles: []engine.Role{engine.RoleAgent}}}},
		{[]string{"true=agent"}, []config.Token{{Name: "true", SHA256: "true", Roles: []engine.Role{engine.RoleAgent}}}},
		// -groups puts every token it makes in those groups.
		{[]string{"-groups", "finance, treasury", "alice=approver", "bob=approver,auditor"}, []config.Token{
			{Name: "alice", SHA256: "alice", Roles: []engine.Role{engine.RoleApprover}, Groups: []string{"finance", "treasury"}},
			{Name: "bob", SHA256: "bob", Roles: []engine.Role{engine.RoleApprover, engine.RoleAuditor}, Groups: []string{"finance", "treasury"}}}},
		{[]string{"-name", "carol", "-roles", "approver", "-groups", "finance"}, []config.Token{
			{Name: "carol", SHA256: "carol", Roles: []engine.Role{engine.RoleApprover}, Groups: []string{"finance"}}}},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			var out bytes.Buffer
			if err := run(context.Background(), append([]string{"token"}, tc.args...), nil, &out); err != nil {
				t.Fatalf("sagacity token %v = %v", tc.args, err)
			}
			toks, block := printedTokens(t, out.String())
			f, err := config.ParseFile("printed", []byte(block))
			if err != nil {
				t.Fatalf("the printed block does not load: %v\n%s", err, block)
			}
			var want []config.Token
			for _, w := range tc.want {
				w.SHA256 = sum(toks[w.SHA256])
				want = append(want, w)
			}
			if diff := cmp.Diff(want, f.Tokens); diff != "" || len(toks) != len(want) {
				t.Errorf("sagacity token %v declares (-want +got):\n%s\nprinted:\n%s", tc.args, diff, out.String())
			}
		})
	}
	for _, bad := range [][]string{{"-roles", "admin"}, {"x=admin"}, {"x="}, {"=agent"}, {"extra"}, {"-nope"},
		{"-name", "x", "y=agent"}, {"x=agent", "x=auditor"}, {"x=approver", "-groups", "finance"}, {"-groups", "finance,", "x=approver"},
		{"-groups", "finance,finance", "x=approver"}} {
		err := run(context.Background(), append([]string{"token"}, bad...), nil, &bytes.Buffer{})
		if ee, ok := errors.AsType[exitError](err); !ok || ee.code != 2 {
			t.Errorf("sagacity token %v = %v, want exit 2", bad, err)
		}
	}
}

// TestTokenConfig: token -config adds the new tokens to the file's
// tokens: list in place, leaving every other byte as it was (comments,
// blank lines, indentation, line ends), keeps the file's mode and makes a
// file that is not there; it refuses, changing nothing, a name the file
// declares already, a file that does not load and a tokens: it cannot
// extend line by line.
func TestTokenConfig(t *testing.T) {
	t.Parallel()
	const (
		old   = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
		added = "- name: ci-bot\n  sha256: {ci-bot}\n  roles: [agent]\n- name: \"true\"\n  sha256: {true}\n  roles: [agent, approver]\n"
	)
	args := []string{"ci-bot=agent", "true=agent,approver"}
	for _, tc := range []struct {
		name, file string
		want       string // with {name} for each new token's hash; "" when refused
		refusal    string
	}{
		{name: "a list among comments and blank lines",
			file: "# Sagacity\n\ntools: []   # none yet\n\n# who may call\ntokens:\n    - name: a      # the first\n      sha256: \"" + old + "\"\n      roles: [agent]\n\n# groups\nroles:\n  claim: email\n",
			want: "# Sagacity\n\ntools: []   # none yet\n\n# who may call\ntokens:\n    - name: a      # the first\n      sha256: \"" + old + "\"\n      roles: [agent]\n" + indent(added, "    ") + "\n# groups\nroles:\n  claim: email\n"},
		{name: "a list of flow entries, last in the file without a line end",
			file: "tokens:\n- {name: a, sha256: " + old + ", roles: [agent]}",
			want: "tokens:\n- {name: a, sha256: " + old + ", roles: [agent]}\n" + added},
		{name: "CRLF line ends",
			file: "roles:\r\n  claim: groups\r\ntokens:\r\n  - name: a\r\n    sha256: " + old + "\r\n    roles: [agent]\r\n",
			want: "roles:\r\n  claim: groups\r\ntokens:\r\n  - name: a\r\n    sha256: " + old + "\r\n    roles: [agent]\r\n" + strings.ReplaceAll(indent(added, "  "), "\n", "\r\n")},
		{name: "tokens: with no value",
			file: "tokens:   # none yet\nroles:\n  claim: email\n",
			want: "tokens:   # none yet\n" + indent(added, "  ") + "roles:\n  claim: email\n"},
		{name: "no tokens:",
			file: "roles:\n  claim: email\n# the end\n",
			want: "roles:\n  claim: email\n# the end\ntokens:\n" + indent(added, "  ")},
		{name: "empty", file: "", want: "tokens:\n" + indent(added, "  ")},
		{name: "no file", file: "-", want: "tokens:\n" + indent(added, "  ")},
		{name: "a name there already", file: "tokens:\n  - {name: ci-bot, sha256: " + old + ", roles: [agent]}\n",
			refusal: `declares a token named "ci-bot" already`},
		{name: "a flow list", file: "tokens: [{name: a, sha256: " + old + ", roles: [agent]}]\n",
			refusal: "its tokens: (line 1) is not a list of - name: … entries, one a line"},
		{name: "a file that does not load", file: "tokenz: []\n", refusal: `SAGACITY_CONFIG (`},
		{name: "a list whose last entry ends on a later line", file: "tokens:\n  - {name: a, sha256: " + old + ",\n     roles: [agent]\n    }\n",
			refusal: "nothing was changed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "sagacity.yaml")
			if tc.file != "-" {
				if err := os.WriteFile(path, []byte(tc.file), 0o640); err != nil {
					t.Fatal(err)
				}
			}
			var out bytes.Buffer
			err := run(context.Background(), append([]string{"token", "-config", path}, args...), nil, &out)
			got, _ := os.ReadFile(path)
			if tc.refusal != "" {
				if ee, ok := errors.AsType[exitError](err); !ok || ee.code != 2 || !strings.Contains(err.Error(), tc.refusal) {
					t.Errorf("sagacity token -config over %q = %v; want exit 2 containing %q", tc.file, err, tc.refusal)
				}
				if string(got) != tc.file || out.Len() > 0 {
					t.Errorf("a refused token -config printed %q and left the file %q, want nothing printed and %q", out.String(), got, tc.file)
				}
				return
			}
			if err != nil {
				t.Fatalf("sagacity token -config over %q = %v", tc.file, err)
			}
			head, rest, _ := strings.Cut(out.String(), "\n")
			lines := strings.Split(strings.TrimSuffix(rest, "\n"), "\n")
			if head != "# Added to "+path+"'s tokens: ci-bot (agent), true (agent, approver); restart the server to take them." ||
				lines[0] != "# Give each token to its user alone; it is stored nowhere:" {
				t.Fatalf("sagacity token -config printed\n%s", out.String())
			}
			toks := tokenLines(t, lines[1:])
			want := strings.NewReplacer("{ci-bot}", sum(toks["ci-bot"]), "{true}", sum(toks["true"])).Replace(tc.want)
			if diff := cmp.Diff(want, string(got)); diff != "" || len(toks) != 2 {
				t.Errorf("token -config turned\n%s\ninto (-want +got):\n%s", tc.file, diff)
			}
			mode := os.FileMode(0o640)
			if tc.file == "-" {
				mode = 0o644
			}
			if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != mode {
				t.Errorf("the file's mode is %v (%v), want %v", fi.Mode().Perm(), err, mode)
			}
			if entries, _ := os.ReadDir(dir); len(entries) != 1 {
				t.Errorf("the directory holds %d files after the edit, want the file alone (no temporary file left)", len(entries))
			}
		})
	}

	// A link to the file stays a link; the file it names changes.
	dir := t.TempDir()
	target := filepath.Join(dir, "real.yaml")
	if err := os.WriteFile(target, []byte("roles: {claim: email}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "sagacity.yaml")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	if err := run(context.Background(), []string{"token", "-config", link, "x=auditor"}, nil, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	f, err := config.ReadFile(link)
	if fi, _ := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 ||
		!slices.ContainsFunc(f.Tokens, func(c config.Token) bool { return c.Name == "x" }) {
		t.Errorf("token -config through a link: %v, %v; want the link kept and its target holding the token", err, f.Tokens)
	}

	// -groups goes into the file, and the note says so.
	path := filepath.Join(t.TempDir(), "sagacity.yaml")
	var out bytes.Buffer
	if err := run(context.Background(), []string{"token", "-config", path, "-groups", "finance", "alice=approver"}, nil, &out); err != nil {
		t.Fatal(err)
	}
	head, _, _ := strings.Cut(out.String(), "\n")
	f, err = config.ReadFile(path)
	if err != nil || len(f.Tokens) != 1 || !slices.Equal(f.Tokens[0].Groups, []string{"finance"}) ||
		head != "# Added to "+path+"'s tokens: alice (approver; groups finance); restart the server to take them." {
		t.Errorf("token -config -groups finance alice=approver printed %q and declares %+v (%v); want alice in group finance", head, f.Tokens, err)
	}
}
