package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sagacity-go/sagacity/evidence"
	"github.com/sagacity-go/sagacity/internal/engine"
	"github.com/sagacity-go/sagacity/internal/store"
	"github.com/sagacity-go/sagacity/internal/testkit"
	"github.com/sagacity-go/sagacity/internal/witness"
	"github.com/sagacity-go/sagacity/toolsig"
)

// env is an environment as os.Environ gives it.
func env(m map[string]string) []string {
	var out []string
	for k, v := range m {
		out = append(out, k+"="+v)
	}
	return out
}

// proc is a server started by run in the test process.
type proc struct {
	base   string
	out    *testkit.Buffer
	cancel context.CancelFunc
	done   chan error
}

// launch runs the server with the given environment on a free port.
func launch(t *testing.T, vars map[string]string) *proc {
	t.Helper()
	if vars["SAGACITY_ADDR"] == "" {
		vars["SAGACITY_ADDR"] = "127.0.0.1:0"
	}
	// Dev mode keeps its key and checkpoints beside a SQLite database;
	// anything else gets them here, never in the working directory.
	if _, ok := vars["SAGACITY_CHECKPOINT_DIR"]; !ok && !strings.HasPrefix(vars["SAGACITY_DATABASE_URL"], "sqlite:") {
		vars["SAGACITY_CHECKPOINT_DIR"] = t.TempDir()
	}
	_, key := vars["SAGACITY_SIGNING_KEY"]
	_, keyFile := vars["SAGACITY_SIGNING_KEY_FILE"]
	if !key && !keyFile && !strings.HasPrefix(vars["SAGACITY_DATABASE_URL"], "sqlite:") {
		vars["SAGACITY_SIGNING_KEY"] = testSigningKey(t)
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &proc{out: &testkit.Buffer{}, cancel: cancel, done: make(chan error, 1)}
	go func() { p.done <- run(ctx, []string{"serve"}, env(vars), p.out) }()
	re := regexp.MustCompile(`"url":"(http://127\.0\.0\.1:\d+)"`)
	// A cold start under -race on a loaded machine can take many seconds
	// (keys, migrations, the first full log check).
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); {
		if m := re.FindStringSubmatch(p.out.String()); m != nil {
			p.base = m[1]
			return p
		}
		select {
		case err := <-p.done:
			t.Fatalf("run exited early: %v\n%s", err, p.out)
		case <-time.After(25 * time.Millisecond):
		}
	}
	cancel()
	t.Fatalf("server did not start:\n%s", p.out)
	return nil
}

// stop shuts the server down and checks that run returned nil.
func (p *proc) stop(t *testing.T) {
	t.Helper()
	p.cancel()
	if err := <-p.done; err != nil {
		t.Errorf("run returned %v after shutdown, want nil", err)
	}
}

// start launches the server and stops it when the test ends.
func start(t *testing.T, vars map[string]string) (string, *testkit.Buffer) {
	t.Helper()
	p := launch(t, vars)
	t.Cleanup(func() { p.stop(t) })
	return p.base, p.out
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestServeHealth(t *testing.T) {
	t.Parallel()
	for name, url := range map[string]func(testing.TB) string{"sqlite": testkit.SQLiteURL, "postgres": testkit.PostgresURL} {
		t.Run(name, func(t *testing.T) {
			base, _ := start(t, map[string]string{"SAGACITY_DATABASE_URL": url(t)})
			for _, path := range []string{"/healthz", "/readyz"} {
				if code, body := get(t, base+path); code != 200 || body != "ok\n" {
					t.Errorf("GET %s = %d %q, want 200 ok", path, code, body)
				}
			}
		})
	}
}

func TestServeBadConfig(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	badYAML := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(badYAML, []byte("tools:\n  - name: x\n    retries: 3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tools := filepath.Join(dir, "tools.yaml")
	if err := os.WriteFile(tools, []byte("tools:\n  - name: x\n    execute: {url: \"http://127.0.0.1:9/x\"}\n    compensate: {url: \"http://127.0.0.1:9/y\"}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	demoClash := filepath.Join(dir, "clash.yaml")
	if err := os.WriteFile(demoClash, []byte("tools:\n  - name: sendWireTransfer\n    reversibility: IRREVERSIBLE\n    execute: {url: \"http://127.0.0.1:9/x\"}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	upstream := filepath.Join(dir, "upstream.yaml")
	if err := os.WriteFile(upstream, []byte("upstreams:\n  - name: files\n    url: \"http://127.0.0.1:9/mcp\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	secret := "0123456789abcdef0123456789abcdef"
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	busy := taken.Addr().String()
	tests := []struct {
		name string
		vars map[string]string
		want string
	}{
		{"address", map[string]string{"SAGACITY_ADDR": "nonsense"}, "SAGACITY_ADDR"},
		{"database scheme", map[string]string{"SAGACITY_DATABASE_URL": "mysql://x"}, "SAGACITY_DATABASE_URL"},
		{"database dir", map[string]string{"SAGACITY_DATABASE_URL": "sqlite:/nonexistent/dir/x.db"}, "SAGACITY_DATABASE_URL"},
		{"unknown YAML key", map[string]string{"SAGACITY_CONFIG": badYAML}, `unknown key "retries"`},
		{"tools without a signing secret", map[string]string{"SAGACITY_CONFIG": tools}, "SAGACITY_TOOL_SIGNING_SECRET: required"},
		{"dev mode on every interface", map[string]string{"SAGACITY_ADDR": "0.0.0.0:0", "SAGACITY_AUTH": "dev"}, "SAGACITY_AUTH: dev mode refuses to listen on 0.0.0.0:0"},
		{"no mode off loopback", map[string]string{"SAGACITY_ADDR": "0.0.0.0:0"}, "SAGACITY_AUTH: not set"},
		{"misspelled variable", map[string]string{"SAGACITY_ADRR": "127.0.0.1:9"}, "SAGACITY_ADRR: not a setting; did you mean SAGACITY_ADDR?"},
		{"database role missing", map[string]string{"SAGACITY_DATABASE_URL": "postgres://no_such_role@127.0.0.1:5432/test"},
			`SAGACITY_DATABASE_URL: PostgreSQL refused the connection: role "no_such_role" does not exist (SQLSTATE 28000); create the role`},
		{"database url bad", map[string]string{"SAGACITY_DATABASE_URL": "postgres://%zz"}, "SAGACITY_DATABASE_URL: cannot parse postgres url"},
		{"database unreachable", map[string]string{"SAGACITY_DATABASE_URL": "postgres://postgres@127.0.0.1:1/test"},
			"SAGACITY_DATABASE_URL: cannot reach PostgreSQL at 127.0.0.1:1"},
		{"port in use", map[string]string{"SAGACITY_ADDR": busy}, "SAGACITY_ADDR: " + busy + " is in use by another process; stop it, or set SAGACITY_ADDR to another port"},
		{"log level", map[string]string{"SAGACITY_LOG_LEVEL": "loud"}, `SAGACITY_LOG_LEVEL: "loud" is not one of debug, info, warn, error`},
		{"upstream unreachable", map[string]string{"SAGACITY_CONFIG": upstream}, `SAGACITY_CONFIG: upstream "files": connecting:`},
		{"demo tool clash", map[string]string{"SAGACITY_CONFIG": demoClash, "SAGACITY_TOOL_SIGNING_SECRET": secret, "SAGACITY_DEMO": "true",
			"SAGACITY_DATABASE_URL": "sqlite:" + filepath.Join(dir, "c.db")}, `tool "sendWireTransfer" is also a built-in demo tool`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.vars["SAGACITY_DATABASE_URL"] == "" {
				// Never the default, a file in the working directory.
				tt.vars["SAGACITY_DATABASE_URL"] = "sqlite:" + filepath.Join(t.TempDir(), "s.db")
			}
			err := run(context.Background(), nil, env(tt.vars), io.Discard)
			if err == nil || !strings.Contains(err.Error(), tt.want) || strings.Contains(err.Error(), secret) {
				t.Errorf("run with %v: %v, want an error containing %q", tt.vars, err, tt.want)
			}
			if err != nil && strings.Contains(err.Error(), "\n") {
				t.Errorf("run with %v: %q, want one line", tt.vars, err)
			}
		})
	}
}

// export runs a small saga on a real store and returns its NDJSON export.
func export(t *testing.T) []byte {
	ctx := context.Background()
	db, err := store.Open(ctx, testkit.SQLiteURL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ok := engine.Funcs{Exec: func(context.Context, engine.Invocation) (string, error) { return "ok\nwith a newline", nil }}
	e, err := engine.New(db, []engine.Tool{{Name: "reserveInventory", Executor: ok},
		{Name: "sendWireTransfer", Reversibility: engine.Irreversible, Executor: ok}}, engine.WithKeys(testkit.Keys(t)))
	if err != nil {
		t.Fatal(err)
	}
	p := engine.Principal{ID: "agent", Roles: engine.Roles}
	if _, err := e.Call(ctx, p, "s1", "reserveInventory", `{"item":"laptop"}`); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Call(ctx, p, "s1", "sendWireTransfer", `{"amount":"100","to":"alice"}`); err != nil {
		t.Fatal(err)
	}
	es, err := e.Journal(ctx, p, "s1")
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := evidence.WriteNDJSON(&b, es, nil); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func verifyFile(t *testing.T, content []byte) (int, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "export.ndjson")
	if err := os.WriteFile(path, content, 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, _ := offlineRun(t, "verify", path)
	return code, out
}

// offlineRun runs one of the binary's offline commands, and returns its
// exit status, what it printed and its error's words.
func offlineRun(t *testing.T, args ...string) (code int, out, why string) {
	t.Helper()
	var b bytes.Buffer
	err := run(context.Background(), args, env(nil), &b)
	if ee, ok := errors.AsType[exitError](err); ok {
		return ee.code, b.String(), ee.Error()
	} else if err != nil {
		t.Fatalf("sagacity %s: %v", args[0], err)
	}
	return 0, b.String(), ""
}

func TestVerifyCommand(t *testing.T) {
	t.Parallel()
	good := export(t)
	if code, out := verifyFile(t, good); code != 0 || out != `{"valid":true,"entryCount":3,"breakAtIndex":-1,"message":"all 3 entries verified"}`+"\n" {
		t.Fatalf("verify(untouched export) = %d %q, want 0 and all 3 entries verified", code, out)
	}
	lines := bytes.SplitAfter(good, []byte("\n"))
	// One changed byte inside each entry's input breaks the chain at that entry.
	for i := range 3 {
		bad := bytes.Clone(good)
		at := bytes.Index(good, lines[i]) + bytes.Index(lines[i], []byte(`"input":"`)) + len(`"input":"{\\"`) // the first letter of the first key
		bad[at] ^= 0x01
		want := fmt.Sprintf(`{"valid":false,"entryCount":3,"breakAtIndex":%d,"message":"hash mismatch at seq=%d (entry %d)"}`+"\n", i, i+1, i)
		if code, out := verifyFile(t, bad); code != 1 || out != want {
			t.Errorf("verify(byte %d changed) = %d %q, want 1 %q", at, code, out, want)
		}
	}
	// The journal's own rules hold offline too: the gated request
	// resumed twice, with its chain and head recomputed, is a break.
	es, _, err := evidence.ReadNDJSON(bytes.NewReader(good))
	if err != nil {
		t.Fatal(err)
	}
	gated := es[2]
	for _, st := range []struct {
		tool    string
		phase   engine.Phase
		input   string
		payload string
	}{
		{engine.GateTool, engine.PhaseApproved, "seq=3", "approver=bob"},
		{gated.ToolName, engine.PhaseIntent, gated.Input, "requester=agent\nresumes=seq=3"},
		{gated.ToolName, engine.PhaseExecuted, gated.Input, "ok"},
		{gated.ToolName, engine.PhaseIntent, gated.Input, "requester=agent\nresumes=seq=3"},
	} {
		last := es[len(es)-1]
		en := engine.Entry{SagaID: last.SagaID, Seq: last.Seq + 1, ToolName: st.tool, Phase: st.phase, Input: st.input,
			Payload: st.payload, Timestamp: last.Timestamp}
		en.Hash = engine.Hash(last.Hash, en)
		es = append(es, en)
	}
	var twice bytes.Buffer
	if err := evidence.WriteNDJSON(&twice, es, nil); err != nil {
		t.Fatal(err)
	}
	want := `"breakAtIndex":6,"message":"seq=7 (entry 6) executes the request at seq=3 again: it was resumed at seq=5"`
	if code, out := verifyFile(t, twice.Bytes()); code != 1 || !strings.Contains(out, want) {
		t.Errorf("verify(a request resumed twice) = %d %q, want 1 with %s", code, out, want)
	}
	for name, content := range map[string][]byte{
		"not json":    []byte("not json\n"),
		"cut short":   good[:len(good)-10],
		"two sagas":   append(bytes.Clone(good), bytes.ReplaceAll(lines[0], []byte(`"s1"`), []byte(`"s2"`))...),
		"wrong types": bytes.Replace(good, []byte(`"seq":1`), []byte(`"seq":"1"`), 1),
		// An empty file proves nothing: it is not a valid journal.
		"empty":       nil,
		"blank lines": []byte("\n\n"),
	} {
		if code, _ := verifyFile(t, content); code != 2 {
			t.Errorf("verify(%s) exit = %d, want 2", name, code)
		}
	}
	err = run(context.Background(), []string{"verify", "/nonexistent/export.ndjson"}, env(nil), io.Discard)
	if ee, ok := errors.AsType[exitError](err); !ok || ee.code != 2 {
		t.Errorf("verify(missing file) = %v, want exit 2", err)
	}
}

// TestGracefulShutdown stops the server (as SIGTERM does) while a signed
// HTTP tool call is in flight: the call finishes, is journaled and
// answered, and the last checkpoint, signed as the server stops, covers
// every entry.
func TestGracefulShutdown(t *testing.T) {
	t.Parallel()
	secret := "shutdown-test-signing-secret-0123456789"
	started, release := make(chan struct{}), make(chan struct{})
	writeLedger := toolsig.Expect{Tool: "writeLedger", Phase: toolsig.Execute}
	tools := httptest.NewServer(toolsig.Handler([]byte(secret), writeLedger, 1<<20, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(started)
		<-release
		_, _ = io.WriteString(w, "written")
	})))
	defer tools.Close()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "sagacity.yaml")
	if err := os.WriteFile(cfg, []byte("tools:\n  - name: writeLedger\n    execute: {url: \""+tools.URL+"/w\", timeout: 30s}\n"+
		"    compensate: {url: \""+tools.URL+"/undo\"}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	dbURL := "sqlite:" + filepath.Join(dir, "s.db")
	p := launch(t, map[string]string{"SAGACITY_DATABASE_URL": dbURL, "SAGACITY_CONFIG": cfg, "SAGACITY_TOOL_SIGNING_SECRET": secret})

	answer := make(chan string, 1)
	go func() {
		resp, err := http.Post(p.base+"/sagacity/sagas/g/calls", "application/json", strings.NewReader(`{"tool":"writeLedger","input":"{}"}`))
		if err != nil {
			answer <- err.Error()
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		answer <- fmt.Sprint(resp.StatusCode, " ", string(b))
	}()
	<-started
	p.cancel() // SIGTERM
	for !strings.Contains(p.out.String(), "shutting down") {
		time.Sleep(10 * time.Millisecond)
	}
	if resp, err := http.Get(p.base + "/healthz"); err == nil {
		resp.Body.Close()
		t.Errorf("server accepted a new request while shutting down")
	}
	close(release)
	if got := <-answer; !strings.HasPrefix(got, `200 {"sagaId":"g","journalSeq":1,"toolName":"writeLedger","outcome":"EXECUTED","status":"RUNNING","result":"written"}`) {
		t.Errorf("in-flight call answered %s, want 200 EXECUTED", got)
	}
	if err := <-p.done; err != nil {
		t.Errorf("run = %v after a graceful shutdown, want nil", err)
	}
	db, err := store.Open(context.Background(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	es, _ := db.Entries(context.Background(), "g")
	if len(es) != 2 || es[1].Phase != engine.PhaseExecuted || es[1].Payload != "written" {
		t.Errorf("journal after shutdown = %+v, want INTENT then EXECUTED", es)
	}
	w, err := witness.Open(filepath.Join(dir, "s.db.checkpoints"))
	if err != nil {
		t.Fatal(err)
	}
	signed, _, err := w.Newest()
	if err != nil {
		t.Fatal(err)
	}
	var size int64
	if lines := strings.Split(signed, "\n"); len(lines) > 1 {
		_, _ = fmt.Sscan(lines[1], &size)
	}
	if entries := testkit.Count(t, dbURL, "SELECT count(*) FROM journal"); size != entries {
		t.Errorf("the newest checkpoint after shutdown has size %d; want all %d journal entries covered", size, entries)
	}
}

// testSigningKey is a signing key as sagacity keygen prints it.
func testSigningKey(t *testing.T) string {
	skey, _ := keyPair(t)
	return skey
}
