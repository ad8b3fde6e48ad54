package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/sagacity-go/sagacity/internal/config"
	"github.com/sagacity-go/sagacity/internal/testkit"
	"github.com/sagacity-go/sagacity/wire"
)

// The README's sagacity command lines, run as written by this checkout's
// binary on files the tests make.

// TestReadmeVerify runs the README's offline verify, as written and, as
// its comment offers, on standard input, in a directory holding an export
// named as it names it: a real saga's export verifies (exit 0), one with
// a byte changed does not (1), an empty one proves nothing (2).
func TestReadmeVerify(t *testing.T) {
	t.Parallel()
	ss := steps(testkit.ReadmeBlock(t, "verify export"))
	if len(ss) != 1 || !strings.HasPrefix(ss[0].cmd, "sagacity verify export.ndjson ") || !strings.Contains(ss[0].cmd, "# or - for standard input") {
		t.Fatalf("the README's verify block holds %v; this test runs sagacity verify export.ndjson, with its comment offering -", ss)
	}
	asWritten, _, _ := strings.Cut(ss[0].cmd, "#")
	stdin := strings.Replace(asWritten, "export.ndjson", "- < export.ndjson", 1)
	good := export(t)
	broken := bytes.Replace(good, []byte(`{\"item\":\"laptop\"}`), []byte(`{\"item\":\"laptoq\"}`), 1)
	if bytes.Equal(broken, good) {
		t.Fatal("the export holds no input to change")
	}
	for _, tc := range []struct {
		name    string
		content []byte
		code    int
		valid   bool
	}{{"a saga's export", good, 0, true}, {"a byte changed", broken, 1, false}, {"an empty file", nil, 2, false}} {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "export.ndjson"), tc.content, 0o644); err != nil {
			t.Fatal(err)
		}
		for _, cmd := range []string{asWritten, stdin} {
			out, code := shell(t, dir, cmd)
			var res wire.Verification
			if _ = json.Unmarshal([]byte(out), &res); code != tc.code || code != 2 && res.Valid != tc.valid {
				t.Errorf("the README's %s on %s = exit %d %s; want exit %d, valid %v", cmd, tc.name, code, out, tc.code, tc.valid)
			}
		}
	}
}

// TestReadmeVerifyReceipt runs the README's verify-receipt on a decision
// made on a server in tokens mode (a dev-mode decision is refused without
// -allow-dev, which the README's command does not give): the demo's
// transfer, approved with an approver's token, its receipt and the exact
// bytes it was decided on downloaded from the API, and $PUBLIC_KEY the key
// the server serves. It answers what the README shows, exit 0.
func TestReadmeVerifyReceipt(t *testing.T) {
	t.Parallel()
	cfg, tokens := tokenConfig(t, "manager=approver")
	base, _ := start(t, map[string]string{"SAGACITY_DATABASE_URL": testkit.SQLiteURL(t), "SAGACITY_DEMO": "true",
		"SAGACITY_AUTH": "tokens", "SAGACITY_CONFIG": cfg, "SAGACITY_SIGNING_KEY": testSigningKey(t),
		"SAGACITY_CHECKPOINT_DIR": t.TempDir()})
	tok := tokens["manager"]
	code, body := api(t, "GET", base+"/sagacity/approvals/transfer-77", tok, "")
	var pending []wire.Approval
	if err := json.Unmarshal(body, &pending); code != 200 || err != nil || len(pending) != 1 || pending[0].JournalSeq != 3 {
		t.Fatalf("GET /sagacity/approvals/transfer-77 = %d %s, want the demo's transfer at seq 3", code, body)
	}
	if code, body := api(t, "POST", base+"/sagacity/approve/transfer-77/3", tok, "{}"); code != 200 {
		t.Fatalf("approving the demo's transfer with manager's token = %d %s", code, body)
	}
	code, receipt := api(t, "GET", base+"/sagacity/receipts/transfer-77/4", tok, "")
	if code != 200 {
		t.Fatalf("GET /sagacity/receipts/transfer-77/4 = %d %s", code, receipt)
	}
	code, body = api(t, "GET", base+"/sagacity/keys", tok, "")
	var keys wire.Keys
	if err := json.Unmarshal(body, &keys); code != 200 || err != nil || len(keys.Keys) != 1 {
		t.Fatalf("GET /sagacity/keys = %d %s, want one key", code, body)
	}
	dir := t.TempDir()
	for name, content := range map[string]string{"receipt.note": string(receipt), "payload.json": pending[0].Input} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	ss := steps(testkit.ReadmeBlock(t, "verify receipt"))
	if len(ss) != 1 || ss[0].shown == "" {
		t.Fatalf("the README's verify-receipt block holds %v; want one command and its answer", ss)
	}
	out, code := shell(t, dir, ss[0].cmd, "PUBLIC_KEY="+keys.Keys[0])
	if err := holdsShown([]byte(out), ss[0].shown); code != 0 || err != nil {
		t.Errorf("the README's %s = exit %d: %v", ss[0].cmd, code, err)
	}
}

// TestReadmeTokenCommand runs the README's sagacity token command and
// holds what it prints to what the README shows after it, line by line
// (a word ending in … stands for the token or hash printed there): each
// token beside its name, then the tokens: block declaring each by its
// SHA-256 with its roles, which loads as the server loads it.
func TestReadmeTokenCommand(t *testing.T) {
	t.Parallel()
	block := testkit.ReadmeBlock(t, "token command")
	prompt, shown, ok := strings.Cut(block, "\n")
	cmd, ok2 := strings.CutPrefix(prompt, "$ ")
	if !ok || !ok2 {
		t.Fatalf("the README's token block is not a command after $ and what it prints:\n%s", block)
	}
	out, code := shell(t, t.TempDir(), cmd)
	if code != 0 {
		t.Fatalf("the README's %s = exit %d\n%s", cmd, code, out)
	}
	got, want := strings.Split(out, "\n"), strings.Split(shown, "\n")
	for i := range max(len(got), len(want)) {
		var g, w string
		if i < len(got) {
			g = got[i]
		}
		if i < len(want) {
			w = want[i]
		}
		if !shownLine(w).MatchString(g) {
			t.Errorf("the README's %s prints, in line %d,\n%q\nwhere the README shows\n%q", cmd, i+1, g, w)
		}
	}
	tokens, yaml := printedTokens(t, out)
	f, err := config.ParseFile("printed", []byte(yaml))
	if err != nil {
		t.Fatalf("the tokens: block the README's %s prints does not load: %v", cmd, err)
	}
	for _, tk := range f.Tokens {
		if tk.SHA256 != sum(tokens[tk.Name]) {
			t.Errorf("the tokens: block declares %s by %s, not its token's SHA-256", tk.Name, tk.SHA256)
		}
	}
}

// TestReadmeTokenGroups runs the docs' sagacity token -groups command:
// the tokens: block it prints declares alice and bob in finance, and
// loads in tokens mode under a rule naming finance with a quorum of 2,
// which the server refuses to start with for tokens outside it.
func TestReadmeTokenGroups(t *testing.T) {
	t.Parallel()
	cmd := strings.TrimSpace(testkit.ReadmeBlock(t, "token groups"))
	out, code := shell(t, t.TempDir(), cmd)
	if code != 0 {
		t.Fatalf("the docs' %s = exit %d\n%s", cmd, code, out)
	}
	_, block := printedTokens(t, out)
	const rule = "approval:\n  default:\n    - {name: finance, approvers: [finance], quorum: 2}\n"
	load := func(yaml string) error {
		path := filepath.Join(t.TempDir(), "sagacity.yaml")
		if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
			t.Fatal(err)
		}
		vars := map[string]string{"SAGACITY_AUTH": "tokens", "SAGACITY_CONFIG": path, "SAGACITY_SIGNING_KEY": testSigningKey(t),
			"SAGACITY_CHECKPOINT_DIR": t.TempDir()}
		_, err := config.Load(func(k string) string { return vars[k] })
		return err
	}
	if err := load(block + rule); err != nil {
		t.Errorf("the tokens %s makes, under a rule of 2 from finance, in tokens mode: %v", cmd, err)
	}
	if err := load(strings.ReplaceAll(block, "groups: [finance]", "groups: [ops]") + rule); err == nil ||
		!strings.Contains(err.Error(), "a quorum of 2 can never be met here") {
		t.Errorf("the same tokens in ops, under a rule of 2 from finance: %v; want the quorum refused", err)
	}
}

// shownLine matches a line printed where the README shows line: as
// written, but that each word ending in … stands for any word.
func shownLine(line string) *regexp.Regexp {
	var re strings.Builder
	for i, part := range regexp.MustCompile(`\S*…`).Split(line, -1) {
		if i > 0 {
			re.WriteString(`\S+`)
		}
		re.WriteString(regexp.QuoteMeta(part))
	}
	return regexp.MustCompile("^" + re.String() + "$")
}
