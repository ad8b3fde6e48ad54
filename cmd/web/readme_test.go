package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sagacity-go/sagacity/internal/api/apitest"
	"github.com/sagacity-go/sagacity/internal/testkit"
)

// The README's (and docs/'s) blocks of commands and configuration, each
// run or loaded by a test as written.

// step is one command of a README shell block, its continuation lines
// joined, with the answer the README shows for it: the comment just
// after it, "# 200 {…}" (or without the status), continued by the more
// indented comment lines after that.
type step struct {
	cmd    string
	status int    // the status shown; 0 when none is
	shown  string // the answer shown; "" when none is
}

var shownAnswer = regexp.MustCompile(`^#\s+(?:([1-5][0-9][0-9])\s+)?([{\[].*)$`)

// steps reads the commands of a shell block and the answers shown for
// them.
func steps(block string) []step {
	var out []step
	cur, answering := "", false
	for l := range strings.SplitSeq(block, "\n") {
		l = strings.TrimSpace(l)
		switch {
		case cur != "":
			if more, ok := strings.CutSuffix(l, `\`); ok {
				cur += more
				continue
			}
			out = append(out, step{cmd: cur + l})
			cur, answering = "", true
		case l == "":
			answering = false
		case strings.HasPrefix(l, "#"):
			if !answering {
				continue
			}
			s := &out[len(out)-1]
			if m := shownAnswer.FindStringSubmatch(l); s.shown == "" && m != nil {
				s.status, _ = strconv.Atoi(m[1])
				s.shown = m[2]
			} else if s.shown != "" && strings.HasPrefix(l, "#  ") {
				s.shown += strings.TrimSpace(strings.TrimPrefix(l, "#"))
			} else {
				answering = false
			}
		default:
			if more, ok := strings.CutSuffix(l, `\`); ok {
				cur = more
				continue
			}
			out = append(out, step{cmd: l})
			answering = true
		}
	}
	return out
}

// shownField is a field of an answer the README shows: "key":value.
var shownField = regexp.MustCompile(`"(\w+)":("(?:[^"\\]|\\.)*"|-?[0-9]+|true|false|null)`)

// holdsShown says how the JSON object answer departs from the one the
// README shows: each field shown must be in it with that value, a string
// ending in … (or ...) standing for any string that starts with what
// comes before; nil when it does not.
func holdsShown(answer []byte, shown string) error {
	var got map[string]any
	if err := json.Unmarshal(answer, &got); err != nil {
		return fmt.Errorf("the answer is no JSON object (%w): %s", err, answer)
	}
	fields := shownField.FindAllStringSubmatch(shown, -1)
	if len(fields) == 0 {
		return fmt.Errorf("the README shows %s, which names no field", shown)
	}
	var problems []string
	for _, f := range fields {
		var want any
		if err := json.Unmarshal([]byte(f[2]), &want); err != nil {
			return fmt.Errorf("the README shows %s: %w", f[0], err)
		}
		v, ok := got[f[1]]
		if s, str := want.(string); str {
			prefix, elided := strings.CutSuffix(s, "…")
			if !elided {
				prefix, elided = strings.CutSuffix(s, "...")
			}
			if g, ok := v.(string); elided && ok && strings.HasPrefix(g, prefix) {
				continue
			}
		}
		if !ok || !cmp.Equal(v, want) {
			problems = append(problems, fmt.Sprintf("%s: got %s", f[0], mustJSON(v)))
		}
	}
	if problems != nil {
		return fmt.Errorf("the answer %s departs from the README's %s: %s", answer, shown, strings.Join(problems, "; "))
	}
	return nil
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// TestSteps: the commands of a shell block are read with the answers the
// README shows for them, and those answers are held to what a server says.
func TestSteps(t *testing.T) {
	t.Parallel()
	block := "# A comment about the first.\ncurl -s -X POST x/calls \\\n  -d '{}'\n# 202 {\"a\":1,\n#      \"b\":\"79c2…\"}\n\n" +
		"# Prose before the second.\nsagacity verify f   # or -\n# {\"valid\":true,…}\n# prose again\ncurl y\n"
	want := []step{{cmd: "curl -s -X POST x/calls -d '{}'", status: 202, shown: `{"a":1,"b":"79c2…"}`},
		{cmd: "sagacity verify f   # or -", shown: `{"valid":true,…}`}, {cmd: "curl y"}}
	if diff := cmp.Diff(want, steps(block), cmp.AllowUnexported(step{})); diff != "" {
		t.Errorf("steps(%q) (-want +got):\n%s", block, diff)
	}
	for _, tc := range []struct {
		answer, shown string
		holds         bool
	}{
		{`{"a":1,"b":"79c2a241","c":true}`, `{"a":1,"b":"79c2…"}`, true},
		{`{"a":1,"b":"anything"}`, `{"a":1,"b":"..."}`, true},
		{`{"a":2,"b":"79c2a241"}`, `{"a":1,"b":"79c2…"}`, false},
		{`{"a":1,"b":"7"}`, `{"a":1,"b":"79c2…"}`, false},
		{`{"a":1}`, `{"a":1,"b":"..."}`, false},
		{`not json`, `{"a":1}`, false},
		{`{"a":1}`, `{…}`, false},
	} {
		if err := holdsShown([]byte(tc.answer), tc.shown); (err == nil) != tc.holds {
			t.Errorf("holdsShown(%s, %s) = %v; want it to hold: %v", tc.answer, tc.shown, err, tc.holds)
		}
	}
}

// shell runs script with sh in dir as a reader of the README would type
// it, with this checkout's sagacity on the PATH, none of the test's
// SAGACITY_* variables and vars ("NAME=value") besides. It returns what
// the script printed and its exit status; its standard error goes to the
// test's log when it fails.
func shell(t *testing.T, dir, script string, vars ...string) (stdout string, code int) {
	t.Helper()
	var out, errs bytes.Buffer
	cmd := exec.Command("sh", "-c", script)
	cmd.Dir, cmd.Env, cmd.Stdout, cmd.Stderr = dir, append(standInEnv(t, "sagacity"), vars...), &out, &errs
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
		t.Logf("%s: exit %d\n%s", script, code, errs.String())
	case err != nil:
		t.Fatalf("sh -c %q: %v", script, err)
	}
	return out.String(), code
}

// curlStep runs a README curl command against host, in place of the
// README's localhost:8080, and returns the answer's body and status.
func curlStep(t *testing.T, s step, host string) ([]byte, int) {
	t.Helper()
	out, code := shell(t, t.TempDir(), strings.ReplaceAll(s.cmd, "localhost:8080", host)+` -w '\n%{http_code}'`)
	i := strings.LastIndexByte(out, '\n')
	status, err := strconv.Atoi(out[i+1:])
	if code != 0 || i < 0 || err != nil {
		t.Fatalf("the README's %s = exit %d:\n%s", s.cmd, code, out)
	}
	return []byte(out[:i]), status
}

// TestReadmeWalkthrough runs the README's curl commands, as written,
// against the demo server, so the walkthrough cannot rot.
func TestReadmeWalkthrough(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("curl"); err != nil {
		t.Fatal("curl is needed to run the README's walkthrough:", err)
	}
	base, _ := start(t, map[string]string{"SAGACITY_DATABASE_URL": testkit.SQLiteURL(t), "SAGACITY_DEMO": "true"})
	// Through a proxy that holds every request and answer to the OpenAPI
	// document: dev mode's anonymous calls included.
	proxy, err := apitest.NewProxy(base)
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()
	host := strings.TrimPrefix(proxy.URL, "http://")
	wants := []string{
		`"sagaId":"transfer-77","journalSeq":3,"toolName":"sendWireTransfer","input":"{\"amount\":\"100\",\"to\":\"alice\"}"`,
		`"approved":true,"approverIdentity":"manager@company.com"`,
		`{"sagaId":"transfer-77","status":"COMPLETED","result":"transfer-ok",`,
		`"seq":6,"toolName":"sendWireTransfer","phase":"EXECUTED"`,
		`{"valid":true,"entryCount":6,"breakAtIndex":-1,"message":"all 6 entries verified`,
		"sagacity decision receipt v1\nsaga: transfer-77\nseq: 3\n",
	}
	cmds := steps(testkit.ReadmeBlock(t, "walkthrough"))
	if len(cmds) != len(wants) {
		t.Fatalf("README walkthrough has %d commands, the test knows %d: %v", len(cmds), len(wants), cmds)
	}
	for i, s := range cmds {
		c := strings.ReplaceAll(s.cmd, "localhost:8080", host)
		out, err := exec.Command("sh", "-c", c+" --fail-with-body").CombinedOutput()
		if err != nil || !strings.Contains(string(out), wants[i]) {
			t.Errorf("README step %d: %s\n= %v %s\nwant output containing %s", i+1, c, err, out, wants[i])
		}
	}
	for _, err := range proxy.Errors() {
		t.Errorf("the walkthrough departs from the OpenAPI document: %v", err)
	}
}

// TestReadmeGateway replays the README's agent gateway commands against
// the demo, through the proxy that holds them to the OpenAPI document:
// each answers with the status and the fields the README shows, and the
// run's end leaves the saga awaiting the transfer's approval, as its
// comment says.
func TestReadmeGateway(t *testing.T) {
	t.Parallel()
	base, _ := start(t, map[string]string{"SAGACITY_DATABASE_URL": testkit.SQLiteURL(t), "SAGACITY_DEMO": "true"})
	proxy, err := apitest.NewProxy(base)
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()
	host := strings.TrimPrefix(proxy.URL, "http://")
	ss := steps(testkit.ReadmeBlock(t, "agent gateway"))
	if len(ss) != 3 || ss[0].shown == "" || ss[1].shown == "" {
		t.Fatalf("the README's agent gateway shows %v; want two calls, each with its answer, then the run's end", ss)
	}
	for _, s := range ss[:2] {
		answer, status := curlStep(t, s, host)
		if status != s.status {
			t.Errorf("the README's %s = %d %s, want %d", s.cmd, status, answer, s.status)
		}
		if err := holdsShown(answer, s.shown); err != nil {
			t.Errorf("the README's %s: %v", s.cmd, err)
		}
	}
	answer, status := curlStep(t, ss[2], host)
	if err := holdsShown(answer, `{"sagaId":"order-42","status":"AWAITING_APPROVAL"}`); status != 200 || err != nil {
		t.Errorf("the README's %s = %d: %v", ss[2].cmd, status, err)
	}
	for _, err := range proxy.Errors() {
		t.Errorf("the agent gateway's commands depart from the OpenAPI document: %v", err)
	}
}

// TestReadmeOpenAPI runs the README's command that fetches the OpenAPI
// document with no token, against a server in tokens mode: it needs none.
// The command pipes it to jq, which a test machine need not have, so the
// test runs the curl and evaluates the filter (.paths | keys: the paths,
// sorted) in Go: they include /healthz, /readyz and /mcp, as the README
// says.
func TestReadmeOpenAPI(t *testing.T) {
	t.Parallel()
	cfg, _ := tokenConfig(t, "ci-bot=agent")
	base, _ := start(t, map[string]string{"SAGACITY_DATABASE_URL": testkit.SQLiteURL(t), "SAGACITY_AUTH": "tokens",
		"SAGACITY_CONFIG": cfg, "SAGACITY_SIGNING_KEY": testSigningKey(t), "SAGACITY_CHECKPOINT_DIR": t.TempDir()})
	if code, _ := api(t, "GET", base+"/sagacity/sagas", "", ""); code != 401 {
		t.Fatalf("GET /sagacity/sagas with no token = %d, want 401: the server takes tokens", code)
	}
	ss := steps(testkit.ReadmeBlock(t, "openapi"))
	if len(ss) != 1 {
		t.Fatalf("the README's OpenAPI block holds %v; want one command", ss)
	}
	fetch, filter, ok := strings.Cut(ss[0].cmd, " | jq ")
	if !ok || filter != "'.paths | keys'" {
		t.Fatalf("the README's OpenAPI command is %s; this test evaluates curl … | jq '.paths | keys'", ss[0].cmd)
	}
	answer, status := curlStep(t, step{cmd: fetch}, strings.TrimPrefix(base, "http://"))
	var doc struct{ Paths map[string]json.RawMessage }
	if err := json.Unmarshal(answer, &doc); status != 200 || err != nil {
		t.Fatalf("the README's %s, with no token = %d %.200s (%v), want 200 and the document", fetch, status, answer, err)
	}
	keys := slices.Sorted(maps.Keys(doc.Paths))
	for _, want := range []string{"/healthz", "/readyz", "/mcp", "/sagacity/openapi.json", "/sagacity/sagas/{sagaId}/calls"} {
		if !slices.Contains(keys, want) {
			t.Errorf("the README's %s lists the paths %v, without %s", ss[0].cmd, keys, want)
		}
	}
}
