package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/sagacity-go/sagacity/internal/testkit"
	"github.com/sagacity-go/sagacity/toolsig"
	"github.com/sagacity-go/sagacity/wire"
)

// api sends a request with a JSON body (none when body is "") and a
// bearer token (none when token is ""), and returns the answer's status
// and body.
func api(t *testing.T, method, url, token, body string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b
}

// tokenConfig runs sagacity token with args, as an operator would, and
// writes the tokens: block it prints to a SAGACITY_CONFIG of its own; it
// returns that file and each token by its name.
func tokenConfig(t *testing.T, args ...string) (string, map[string]string) {
	t.Helper()
	var out bytes.Buffer
	if err := run(context.Background(), append([]string{"token"}, args...), nil, &out); err != nil {
		t.Fatalf("sagacity token %v = %v", args, err)
	}
	tokens, block := printedTokens(t, out.String())
	cfg := filepath.Join(t.TempDir(), "sagacity.yaml")
	if err := os.WriteFile(cfg, []byte(block), 0o600); err != nil {
		t.Fatal(err)
	}
	return cfg, tokens
}

// callBody is the body of an agent's call of tool with input.
func callBody(tool, input string) string {
	b, _ := json.Marshal(wire.CallRequest{Tool: tool, Input: &input})
	return string(b)
}

// TestReadmeTools serves the README's tools: block and its approval
// policy, in one SAGACITY_CONFIG with the signing secret, the tools'
// endpoints (the README's 127.0.0.1:9000) at tool servers of the test's
// own that take only calls signed for their tool and phase: the
// compensatable tool runs at once and is handed the exact input; each
// transfer waits for approval under the rule the policy's comments say,
// with its quorum.
func TestReadmeTools(t *testing.T) {
	const secret = "readme-tools-signing-secret-0123456789"
	var mu sync.Mutex
	handed := map[string][]string{} // endpoint → the bodies it was handed
	mux := http.NewServeMux()
	for path, ep := range map[string]toolsig.Expect{
		"/reserve": {Tool: "reserveInventory", Phase: toolsig.Execute},
		"/release": {Tool: "reserveInventory", Phase: toolsig.Compensate},
		"/wire":    {Tool: "sendWireTransfer", Phase: toolsig.Execute},
	} {
		mux.Handle("POST "+path, toolsig.Handler([]byte(secret), ep, 1<<20, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			b, _ := io.ReadAll(r.Body)
			mu.Lock()
			handed[path] = append(handed[path], string(b))
			mu.Unlock()
			io.WriteString(w, "done at "+path)
		})))
	}
	tools := httptest.NewServer(mux)
	defer tools.Close()
	yaml := testkit.ReadmeBlock(t, "tools") + testkit.ReadmeBlock(t, "approval")
	if !strings.Contains(yaml, "http://127.0.0.1:9000/") {
		t.Fatalf("the README's tools are not at http://127.0.0.1:9000, where this test puts its own:\n%s", yaml)
	}
	cfg := filepath.Join(t.TempDir(), "sagacity.yaml")
	if err := os.WriteFile(cfg, []byte(strings.ReplaceAll(yaml, "http://127.0.0.1:9000", tools.URL)), 0o600); err != nil {
		t.Fatal(err)
	}
	base, _ := start(t, map[string]string{"SAGACITY_DATABASE_URL": testkit.SQLiteURL(t), "SAGACITY_CONFIG": cfg,
		"SAGACITY_TOOL_SIGNING_SECRET": secret})

	const reserve = `{"sku":"LAPTOP-13","qty":1}`
	code, body := api(t, "POST", base+"/sagacity/sagas/po-1/calls", "", callBody("reserveInventory", reserve))
	var res wire.CallResult
	json.Unmarshal(body, &res)
	if code != 200 || res.Outcome != wire.Executed || res.Result == nil || *res.Result != "done at /reserve" {
		t.Errorf("a call of reserveInventory = %d %s, want 200 EXECUTED with its tool server's answer", code, body)
	}
	mu.Lock()
	if got := handed["/reserve"]; len(got) != 1 || got[0] != reserve {
		t.Errorf("reserveInventory's execute endpoint was handed %q, want the input %s once", got, reserve)
	}
	mu.Unlock()

	rules := map[string]struct {
		rule   string
		quorum int
	}{
		`{"amount":"20000","to":"alice"}`: {"large", 2},
		`{"amount":"100","to":"ext-7"}`:   {"large", 2},
		`{"amount":"100","to":"alice"}`:   {"small", 1},
	}
	n := 0
	for input := range rules {
		n++
		saga := fmt.Sprintf("wire-%d", n)
		if code, body := api(t, "POST", base+"/sagacity/sagas/"+saga+"/calls", "", callBody("sendWireTransfer", input)); code != 202 {
			t.Errorf("a call of sendWireTransfer %s = %d %s, want 202 AWAITING_APPROVAL", input, code, body)
		}
	}
	code, body = api(t, "GET", base+"/sagacity/approvals", "", "")
	var pending []wire.Approval
	if err := json.Unmarshal(body, &pending); code != 200 || err != nil || len(pending) != len(rules) {
		t.Fatalf("GET /sagacity/approvals = %d %s, want the %d transfers", code, body, len(rules))
	}
	for _, p := range pending {
		if want := rules[p.Input]; p.Rule != want.rule || p.Quorum != want.quorum {
			t.Errorf("the transfer %s waits under rule %s, quorum %d; the README's policy says rule %s, quorum %d",
				p.Input, p.Rule, p.Quorum, want.rule, want.quorum)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if got := handed["/wire"]; len(got) != 0 {
		t.Errorf("the IRREVERSIBLE transfer's endpoint was handed %q before anyone approved", got)
	}
}
