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
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

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
	t.Parallel()
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
			_, _ = io.WriteString(w, "done at "+path)
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
	_ = json.Unmarshal(body, &res)
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

// TestReadmeToolServer runs the README's commands that start the example
// tool server and Sagacity with its configuration, from the repository's
// root, as written but for where things listen: the example's port
// (127.0.0.1:9000, in the commands and the example's sagacity.yaml) is a
// free one, bin/sagacity is this checkout's binary, and the server
// listens on a free port with a database of the test's own. A call of the
// example's tool through the server they started executes: the tool
// server took Sagacity's signature, made with the secret both were given.
func TestReadmeToolServer(t *testing.T) {
	t.Parallel()
	root := testkit.Root(t)
	script := testkit.ReadmeBlock(t, "tool server")
	example, err := os.ReadFile(filepath.Join(root, "examples", "toolserver", "sagacity.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	const port, config, binary = "127.0.0.1:9000", "SAGACITY_CONFIG=examples/toolserver/sagacity.yaml ", "bin/sagacity serve"
	for _, want := range []string{"-addr " + port + " &", config + binary} {
		if !strings.Contains(script, want) {
			t.Fatalf("the README's tool server commands hold no %q, which this test rewrites:\n%s", want, script)
		}
	}
	if !strings.Contains(string(example), "http://"+port+"/") {
		t.Fatalf("examples/toolserver/sagacity.yaml names no tool at %s, where the README starts the tool server", port)
	}
	addr := freeAddr(t)
	cfg := filepath.Join(t.TempDir(), "sagacity.yaml")
	if err := os.WriteFile(cfg, []byte(strings.ReplaceAll(string(example), port, addr)), 0o600); err != nil {
		t.Fatal(err)
	}
	script = strings.NewReplacer(port, addr, config, "SAGACITY_CONFIG="+cfg+" ", binary, "sagacity serve").Replace(script)

	cmd := exec.Command("sh", "-ec", script)
	out := &testkit.Buffer{}
	cmd.Dir, cmd.Stdout, cmd.Stderr, cmd.WaitDelay = root, out, out, 10*time.Second
	cmd.Env = append(standInEnv(t, "sagacity"), "SAGACITY_ADDR=127.0.0.1:0", "SAGACITY_DATABASE_URL="+testkit.SQLiteURL(t))
	// Its own process group, so that the tool server it starts in the
	// background, and what go run builds, stop with it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// exited closes when the commands have ended, with waited their error.
	exited, waited := make(chan struct{}), error(nil)
	go func() { waited = cmd.Wait(); close(exited) }()
	defer func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		<-exited
	}()
	served := regexp.MustCompile(`"url":"(http://127\.0\.0\.1:\d+)"`)
	var base string
	// go run compiles the example first: that can take a while on a
	// loaded machine.
	for deadline := time.Now().Add(3 * time.Minute); base == "" || !strings.Contains(out.String(), "toolserver: scheduleTransfer on http://"+addr); {
		if m := served.FindStringSubmatch(out.String()); m != nil {
			base = m[1]
		}
		select {
		case <-exited:
			t.Fatalf("the README's tool server commands ended (%v) before both servers started:\n%s", waited, out)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("the README's tool server commands did not start both servers:\n%s", out)
		}
	}
	code, body := api(t, "POST", base+"/sagacity/sagas/t-1/calls", "", callBody("scheduleTransfer", `{"amount":"100","to":"alice"}`))
	var res wire.CallResult
	if _ = json.Unmarshal(body, &res); code != 200 || res.Outcome != wire.Executed {
		t.Errorf("a call of scheduleTransfer through the server the README starts = %d %s, want 200 EXECUTED\n%s", code, body, out)
	}
}

// TestReadmeScrape reads the README's Prometheus scrape configuration as
// Prometheus would (every field it holds known to this test) and scrapes
// with it: its target is a server's public host, served over https
// through the TLS proxy the checklist puts in front, here the test
// speaking to the server as that proxy does; its credentials file holds
// the token sagacity token prometheus=auditor made, sent as a bearer
// token (authorization's default type); the default metrics path is
// /metrics. The scrape gets the metrics; without the token, 401.
func TestReadmeScrape(t *testing.T) {
	t.Parallel()
	var prom struct {
		ScrapeConfigs []struct {
			JobName       string `yaml:"job_name"`
			Scheme        string `yaml:"scheme"`
			Authorization struct {
				CredentialsFile string `yaml:"credentials_file"`
			} `yaml:"authorization"`
			StaticConfigs []struct {
				Targets []string `yaml:"targets"`
			} `yaml:"static_configs"`
		} `yaml:"scrape_configs"`
	}
	block := testkit.ReadmeBlock(t, "prometheus")
	dec := yaml.NewDecoder(strings.NewReader(block))
	dec.KnownFields(true)
	if err := dec.Decode(&prom); err != nil {
		t.Fatalf("the README's scrape configuration: %v\n%s", err, block)
	}
	if len(prom.ScrapeConfigs) != 1 || len(prom.ScrapeConfigs[0].StaticConfigs) != 1 || len(prom.ScrapeConfigs[0].StaticConfigs[0].Targets) != 1 {
		t.Fatalf("the README's scrape configuration is %+v; want one job with one target", prom)
	}
	sc := prom.ScrapeConfigs[0]
	target, creds := sc.StaticConfigs[0].Targets[0], sc.Authorization.CredentialsFile
	if sc.Scheme != "https" || !filepath.IsAbs(creds) || strings.Contains(target, ":") {
		t.Errorf("the README scrapes %s://%s with the credentials in %q; want https, the public host name, a file's absolute path", sc.Scheme, target, creds)
	}

	cfg, tokens := tokenConfig(t, "prometheus=auditor")
	base, _ := start(t, map[string]string{"SAGACITY_DATABASE_URL": testkit.SQLiteURL(t), "SAGACITY_AUTH": "tokens",
		"SAGACITY_CONFIG": cfg, "SAGACITY_PUBLIC_URL": sc.Scheme + "://" + target,
		"SAGACITY_SIGNING_KEY": testSigningKey(t), "SAGACITY_CHECKPOINT_DIR": t.TempDir()})
	file := filepath.Join(t.TempDir(), creds) // where Prometheus's machine keeps it
	if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, []byte(tokens["prometheus"]+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	scrape := func(withCredentials bool) (int, string) {
		req, _ := http.NewRequest("GET", base+"/metrics", nil)
		req.Host = target
		if withCredentials {
			b, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(b)))
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := scrape(true); code != 200 || !strings.Contains(body, "\nsagacity_calls_in_doubt 0\n") {
		t.Errorf("scraping %s as the README configures it = %d\n%.300s\nwant 200 and the metrics", target, code, body)
	}
	if code, _ := scrape(false); code != 401 {
		t.Errorf("scraping %s without the credentials file = %d, want 401", target, code)
	}
}
