package app_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sagacity-go/sagacity/internal/testkit"
)

// nodePackage fails the test in CI, and skips it elsewhere, when the npm
// package pkg of testdata/node is not installed (npm ci --prefix
// internal/app/testdata/node, which .ci/run does).
func nodePackage(t *testing.T, pkg string) {
	t.Helper()
	if _, err := os.Stat(filepath.Join("testdata/node/node_modules", pkg)); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s is not installed (npm ci --prefix internal/app/testdata/node): %v", pkg, err)
		}
		t.Skipf("%s is not installed: npm ci --prefix internal/app/testdata/node", pkg)
	}
}

// conformance is every server scenario the official MCP conformance suite
// (@modelcontextprotocol/conformance, pinned in testdata/node) runs for
// the protocol version the server negotiates, each with why it does not
// apply to this server, "" for those that do. A scenario that applies
// must pass every check; one the suite runs that is not listed here fails
// the test, so that a new version of the suite is read before it is
// pinned.
var conformance = map[string]string{
	"server-initialize":             "",
	"server-session-lifecycle":      "",
	"logging-set-level":             "",
	"ping":                          "",
	"tools-list":                    "",
	"server-sse-multiple-streams":   "",
	"resources-list":                "",
	"prompts-list":                  "",
	"dns-rebinding-protection":      "",
	"completion-complete":           "the server offers nothing to complete, and declares no completions capability",
	"tools-call-simple-text":        "calls the suite's fixture tool test_simple_text; this server serves only the tools it is configured with",
	"tools-call-image":              "calls the suite's fixture tool test_image_content",
	"tools-call-audio":              "calls the suite's fixture tool test_audio_content",
	"tools-call-embedded-resource":  "calls the suite's fixture tool test_embedded_resource",
	"tools-call-mixed-content":      "calls the suite's fixture tool test_multiple_content_types",
	"tools-call-with-logging":       "calls the suite's fixture tool test_tool_with_logging",
	"tools-call-error":              "calls the suite's fixture tool test_error_handling",
	"tools-call-with-progress":      "calls the suite's fixture tool test_tool_with_progress",
	"tools-call-sampling":           "calls the suite's fixture tool test_sampling; this server asks the client for nothing",
	"tools-call-elicitation":        "calls the suite's fixture tool test_elicitation; this server asks the client for nothing",
	"elicitation-sep1034-defaults":  "calls the suite's fixture tool test_elicitation_sep1034_defaults",
	"elicitation-sep1330-enums":     "calls the suite's fixture tool test_elicitation_sep1330_enums",
	"resources-read-text":           "reads the suite's fixture resource test://static-text; this server's resources are its sagas",
	"resources-read-binary":         "reads the suite's fixture resource test://static-binary",
	"resources-templates-read":      "reads the suite's fixture template test://template/{id}/data",
	"resources-subscribe":           "subscribes to the suite's fixture resource test://static-text (subscriptions to sagas: TestMCP)",
	"resources-unsubscribe":         "unsubscribes from the suite's fixture resource test://static-text (TestWatches)",
	"prompts-get-simple":            "gets the suite's fixture prompt test_simple_prompt; this server has no prompts",
	"prompts-get-with-args":         "gets the suite's fixture prompt test_prompt_with_arguments",
	"prompts-get-embedded-resource": "gets the suite's fixture prompt test_prompt_with_embedded_resource",
	"prompts-get-with-image":        "gets the suite's fixture prompt test_prompt_with_image",
}

// tasksExtension is why the suite's scenarios of the tasks extension
// (io.modelcontextprotocol/tasks, SEP-2663), which it runs only when
// named, do not pass here yet: the suite speaks them at protocol
// 2026-07-28, which the Go SDK serves only without sessions, and this
// server, whose sessions are sagas, does not negotiate (see
// TestMCPProtocolVersion). Its tasks are those of 2025-11-25
// (TestMCPTasks).
const tasksExtension = "not yet: runs at protocol 2026-07-28, which this server does not negotiate"

// extension are the suite's scenarios of extensions, which it runs only
// when named, with why each does not pass here ("" once it does).
var extension = map[string]string{
	"tasks-lifecycle": tasksExtension, "tasks-capability-negotiation": tasksExtension, "tasks-wire-fields": tasksExtension,
	"tasks-request-state-removal": tasksExtension, "tasks-mrtr-input": tasksExtension, "tasks-request-headers": tasksExtension,
	"tasks-dispatch-and-envelope": tasksExtension, "tasks-status-notifications": tasksExtension,
	"tasks-required-task-error": tasksExtension, "tasks-mrtr-composition": tasksExtension,
}

// TestMCPConformance runs the official MCP conformance suite's server
// scenarios against /mcp, at the protocol version the server negotiates,
// and those of the extensions: every scenario that applies to this
// server (see conformance and extension) passes every check.
func TestMCPConformance(t *testing.T) {
	t.Parallel()
	nodePackage(t, "@modelcontextprotocol/conformance")
	e := newAPI(t, testkit.SQLiteURL(t), envOptions{})
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	out := t.TempDir()
	// node20.mjs lets the suite load on Node.js 20; --spec-version is the
	// newest the server negotiates (see the OpenAPI document's /mcp).
	suite := func(args ...string) {
		cmd := exec.CommandContext(ctx, "node", append([]string{"--import", "./node20.mjs",
			"node_modules/@modelcontextprotocol/conformance/dist/index.js", "server", "--url", e.url + "/mcp", "--output-dir", out}, args...)...)
		cmd.Dir = "testdata/node"
		if log, err := cmd.CombinedOutput(); ctx.Err() != nil {
			t.Fatalf("the conformance suite did not finish: %v\n%s", err, log)
		}
	}
	suite("--spec-version", "2025-11-25")
	for name := range extension {
		suite("--scenario", name)
	}
	// The suite's exit status counts the scenarios that do not apply too:
	// what counts is each scenario's checks.
	dirs, _ := filepath.Glob(filepath.Join(out, "server-*"))
	stamp := regexp.MustCompile(`-\d{4}-\d\d-\d\dT[\d-]+Z$`)
	var ran []string
	for _, dir := range dirs {
		name := stamp.ReplaceAllString(strings.TrimPrefix(filepath.Base(dir), "server-"), "")
		ran = append(ran, name)
		why, listed := conformance[name]
		if w, ok := extension[name]; ok {
			why, listed = w, true
		}
		if !listed {
			t.Errorf("the suite ran scenario %s, which the test does not list: say whether it applies to this server", name)
			continue
		}
		if why != "" {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, "checks.json"))
		if err != nil {
			t.Errorf("scenario %s: %v", name, err)
			continue
		}
		var checks []struct {
			ID, Status, ErrorMessage string
			Details                  json.RawMessage
		}
		if err := json.Unmarshal(b, &checks); err != nil {
			t.Errorf("scenario %s's checks %s: %v", name, b, err)
		}
		for _, c := range checks {
			if c.Status == "FAILURE" {
				t.Errorf("scenario %s: check %s failed: %s %s", name, c.ID, c.ErrorMessage, c.Details)
			}
		}
	}
	for _, names := range []map[string]string{conformance, extension} {
		for name := range names {
			if !slices.Contains(ran, name) {
				t.Errorf("scenario %s did not run", name)
			}
		}
	}
}
