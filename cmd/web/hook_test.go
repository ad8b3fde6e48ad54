package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sagacity-go/sagacity/internal/hook"
	"github.com/sagacity-go/sagacity/internal/testkit"
	"github.com/sagacity-go/sagacity/wire"
)

// claudeSettings is the part of Claude Code's .claude/settings.json that
// declares hooks.
type claudeSettings struct {
	Hooks map[string][]struct {
		Matcher string `json:"matcher"`
		Hooks   []struct {
			Type    string `json:"type"`
			Command string `json:"command"`
			Timeout int    `json:"timeout"` // seconds
		} `json:"hooks"`
	} `json:"hooks"`
}

// hookRun is what the hook command did: its decision, exit status and
// standard error.
type hookRun struct {
	decision hook.Permission
	code     int
	stderr   string
}

// TestClaudeCodeHook runs the README's hook command as Claude Code does
// (sh -c, the event on standard input) on the documented fixtures of
// testdata/claude-code, against a server in tokens mode serving the
// README's tool: a tool use is allowed once a reviewer approved it and
// the hook executed the request; the same tool use with other bytes, one
// nobody decided within the wait, one sent back and one rejected (with
// the reviewer's reasons), the server down, input that is not Claude
// Code's are each denied with exit status 0; a decision that cannot be
// printed is exit status 2. The settings' matcher takes the tools the
// README names, and their timeout outlives the hook's wait.
func TestClaudeCodeHook(t *testing.T) {
	t.Parallel()
	var settings claudeSettings
	if err := json.Unmarshal([]byte(testkit.ReadmeBlock(t, "claude code settings")), &settings); err != nil {
		t.Fatalf("the README's .claude/settings.json: %v", err)
	}
	pre := settings.Hooks["PreToolUse"]
	if len(settings.Hooks) != 1 || len(pre) != 1 || len(pre[0].Hooks) != 1 || pre[0].Hooks[0].Type != "command" {
		t.Fatalf("the README's settings = %+v; want one PreToolUse command hook", settings)
	}
	h := pre[0].Hooks[0]
	matcher := regexp.MustCompile("^(?:" + pre[0].Matcher + ")$")
	for _, tool := range []string{"Bash", "Write", "Edit", "mcp__github__create_issue"} {
		if !matcher.MatchString(tool) {
			t.Errorf("the README's matcher %q does not match %s", pre[0].Matcher, tool)
		}
	}
	m := regexp.MustCompile(`^sagacity hook claude-code -wait (\S+)$`).FindStringSubmatch(h.Command)
	if m == nil {
		t.Fatalf("the README's hook command is %q; this test runs sagacity hook claude-code -wait D", h.Command)
	}
	if wait, err := time.ParseDuration(m[1]); err != nil || time.Duration(h.Timeout)*time.Second <= wait+hook.Margin {
		t.Errorf("the README's hook waits %s (%v) under a timeout of %ds; Claude Code would kill it, and run the tool, first", m[1], err, h.Timeout)
	}

	cfg, tokens := tokenConfig(t, "claude=agent", "reviewer=approver")
	f, err := os.OpenFile(cfg, os.O_APPEND|os.O_WRONLY, 0)
	if err == nil {
		// The README's tool, and a second one whose rule executes on
		// approval, under the approval policy of docs/agents.md.
		_, err = f.WriteString(testkit.ReadmeBlock(t, "claude code tool") + "  - name: claudeAuto\n    hook: claude-code\n" +
			testkit.ReadmeBlock(t, "claude code approval") + "    claudeAuto:\n      - name: auto\n        execute: on-approval\npolicy:\n  maxWait: 1m\n")
		err = errors.Join(err, f.Close())
	}
	if err != nil {
		t.Fatal(err)
	}
	base, _ := start(t, map[string]string{"SAGACITY_DATABASE_URL": testkit.SQLiteURL(t), "SAGACITY_AUTH": "tokens",
		"SAGACITY_CONFIG": cfg, "SAGACITY_SIGNING_KEY": testSigningKey(t), "SAGACITY_CHECKPOINT_DIR": t.TempDir()})
	environ := standInEnv(t, "sagacity")
	// run runs the README's command, and then args, on the fixture's
	// bytes with the server at server.
	run := func(fixture []byte, server, args string) hookRun {
		t.Helper()
		var out, errs bytes.Buffer
		cmd := exec.Command("sh", "-c", h.Command+args)
		cmd.Env = append(slices.Clone(environ), "SAGACITY_URL="+server, "SAGACITY_TOKEN="+tokens["claude"])
		cmd.Stdin, cmd.Stdout, cmd.Stderr = bytes.NewReader(fixture), &out, &errs
		r := hookRun{stderr: errs.String()}
		if err := cmd.Run(); err != nil {
			ee, ok := errors.AsType[*exec.ExitError](err)
			if !ok {
				t.Fatal(err)
			}
			r.code = ee.ExitCode()
			return r
		}
		var d hook.Decision
		if err := json.Unmarshal(out.Bytes(), &d); err != nil || d.HookSpecificOutput.HookEventName != "PreToolUse" {
			t.Fatalf("%s%s printed %q (%v); want a PreToolUse decision", h.Command, args, out.String(), err)
		}
		r.decision = d.HookSpecificOutput
		return r
	}
	fixture := func(name string) []byte {
		t.Helper()
		b, err := os.ReadFile(filepath.Join("testdata", "claude-code", name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	var session struct {
		ID string `json:"session_id"`
	}
	if err := json.Unmarshal(fixture("bash-push.json"), &session); err != nil {
		t.Fatal(err)
	}
	saga := url.PathEscape(hook.SagaPrefix + session.ID)
	// decided runs the hook on the fixture in the background, and once
	// its request (whose input holds what) is pending, decides it with
	// the reviewer's token: POST /sagacity/<action>/….
	decided := func(name, args, what, action, reason string) (hookRun, wire.Approval) {
		t.Helper()
		ran := make(chan hookRun, 1)
		go func() { ran <- run(fixture(name), base, args) }()
		var request wire.Approval
		for deadline := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
			code, body := api(t, "GET", base+"/sagacity/approvals/"+saga, tokens["reviewer"], "")
			var pending []wire.Approval
			if err := json.Unmarshal(body, &pending); code != 200 || err != nil {
				t.Fatalf("GET /sagacity/approvals/%s = %d %s", saga, code, body)
			}
			i := len(pending) - 1
			for i >= 0 && !strings.Contains(pending[i].Input, what) {
				i--
			}
			if i >= 0 {
				request = pending[i]
				b, _ := json.Marshal(wire.DecisionRequest{Reason: reason})
				path := "/sagacity/" + action + "/" + saga + "/" + strconv.FormatInt(pending[i].JournalSeq, 10)
				if code, body := api(t, "POST", base+path, tokens["reviewer"], string(b)); code != 200 {
					t.Fatalf("POST %s = %d %s", path, code, body)
				}
				break
			}
			select {
			case r := <-ran:
				t.Fatalf("the hook on %s answered %+v before its request was decided", name, r)
			default:
			}
			if time.Now().After(deadline) {
				t.Fatalf("no request holding %q is pending in a minute", what)
			}
		}
		select {
		case r := <-ran:
			return r, request
		case <-time.After(time.Minute):
			t.Fatalf("the hook on %s did not answer in a minute once its request was decided", name)
			return hookRun{}, request
		}
	}
	denied := func(what string, r hookRun, says string) {
		t.Helper()
		if r.code != 0 || r.decision.Decision != hook.Deny || !strings.Contains(r.decision.Reason, says) {
			t.Errorf("the hook on %s = exit %d %+v (%s); want exit 0 and a denial saying %q", what, r.code, r.decision, r.stderr, says)
		}
	}

	allowed := func(what string, r hookRun) {
		t.Helper()
		if r.code != 0 || r.decision.Decision != hook.Allow {
			t.Errorf("the hook on %s = exit %d %+v (%s); want it allowed", what, r.code, r.decision, r.stderr)
		}
	}
	r, request := decided("bash-push.json", "", "git push origin main", "approve", "release 1.4 is tagged")
	allowed("an approved tool use", r)
	if want := `{"tool_name":"Bash","tool_input":{"command":"git push origin main","description":"Push the release to main","timeout":120000},"cwd":"/home/dev/shop"}`; request.Input != want || request.Rule != "push" {
		t.Errorf("the tool use's request = %q under rule %q; want %s under the README's rule push", request.Input, request.Rule, want)
	}
	code, journal := api(t, "GET", base+"/sagacity/audit/"+saga, tokens["reviewer"], "")
	if code != 200 || !strings.Contains(string(journal), `"phase":"EXECUTED"`) || !strings.Contains(string(journal), hook.Allowed) ||
		!strings.Contains(string(journal), `git push origin main`) {
		t.Errorf("the session's journal = %d %s; want the approved tool use executed, its permission journaled", code, journal)
	}
	r, request = decided("bash-deploy.json", " -tool Bash=claudeAuto", "make deploy", "approve", "")
	allowed("a tool use executed on approval", r)
	if request.ToolName != "claudeAuto" || request.Rule != "auto" {
		t.Errorf("the tool use routed to claudeAuto made a request of %s under %q; want claudeAuto's, under auto", request.ToolName, request.Rule)
	}
	if r := run(fixture("write-env.json"), base, " -tool Bash=claudeCode -unmatched ask"); r.code != 0 || r.decision.Decision != hook.Ask {
		t.Errorf("the hook with -unmatched ask on a Write no -tool matches = exit %d %+v; want ask", r.code, r.decision)
	}
	denied("a matcher that is no regular expression", run(fixture("write-env.json"), base, " -tool 'Bash(=claudeCode'"), "matcher")
	denied("the approved tool use with other bytes", run(fixture("bash-push-changed.json"), base, ""), "sent with other bytes before")
	start := time.Now()
	denied("a tool use nobody decides", run(fixture("write-env.json"), base, " -wait 1s"), "nobody decided request seq")
	if time.Since(start) < time.Second {
		t.Errorf("the hook denied a tool use nobody decided after %s; want it to wait the second", time.Since(start))
	}
	if r := run(fixture("write-env.json"), base, " -wait 1s -undecided ask"); r.code != 0 || r.decision.Decision != hook.Ask {
		t.Errorf("the hook with -undecided ask on a tool use nobody decides = exit %d %+v; want ask", r.code, r.decision)
	}
	r, _ = decided("edit-prices.json", "", "laptop,12.99", "request-changes", "prices are in cents: 129900")
	denied("a tool use sent back", r, "prices are in cents: 129900")
	r, _ = decided("mcp-issue.json", "", "Prices are wrong", "reject", "no issues from agents")
	denied("a tool use rejected, with the reviewer's reason", r, "(no issues from agents)")
	next := bytes.Replace(fixture("bash-push.json"), []byte(`"toolu_01A9fq2ZbWm3Kd7VnXyP4sTe"`), []byte(`"toolu_01Next"`), 1)
	denied("the session's next tool use, its saga rejected", run(next, base, ""), "is already COMPENSATED")

	denied("the server down", run(fixture("bash-push.json"), "http://"+freeAddr(t), ""), "could not be reached")
	denied("input that is not JSON", run([]byte(`{"session_id":`), base, ""), "not Claude Code's JSON")
	// Claude Code gone before it reads the decision: a pipe with no
	// reader, whose write would kill the hook by SIGPIPE (a signal lets
	// the tool run).
	rd, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	rd.Close()
	var errs bytes.Buffer
	cmd := exec.Command("sh", "-c", h.Command)
	cmd.Env, cmd.Stdin, cmd.Stdout, cmd.Stderr = environ, strings.NewReader(`{}`), w, &errs
	err = cmd.Run()
	w.Close()
	if ee, ok := errors.AsType[*exec.ExitError](err); !ok || ee.ExitCode() != 2 || !strings.Contains(errs.String(), "could not be printed") {
		t.Errorf("the hook whose decision cannot be written = %v %q; want exit 2, which blocks the tool use, saying why", err, errs.String())
	}
}
