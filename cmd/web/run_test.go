package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sagacity-go/sagacity/internal/engine"
	"github.com/sagacity-go/sagacity/internal/store"
	"github.com/sagacity-go/sagacity/internal/store/storetest"
)

// syncBuffer is a bytes.Buffer safe for a server goroutine and a test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

// start runs the server with the given environment on a free port and
// returns its base url; the server stops when the test ends.
func start(t *testing.T, vars map[string]string) (string, *syncBuffer) {
	t.Helper()
	vars["SAGACITY_ADDR"] = "127.0.0.1:0"
	ctx, cancel := context.WithCancel(context.Background())
	out := &syncBuffer{}
	done := make(chan error, 1)
	go func() { done <- run(ctx, []string{"serve"}, env(vars), out) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run returned %v after shutdown, want nil", err)
		}
	})
	re := regexp.MustCompile(`url=(http://127\.0\.0\.1:\d+)`)
	for range 200 {
		if m := re.FindStringSubmatch(out.String()); m != nil {
			return m[1], out
		}
		select {
		case err := <-done:
			t.Fatalf("run exited early: %v\n%s", err, out)
		case <-time.After(25 * time.Millisecond):
		}
	}
	t.Fatalf("server did not start:\n%s", out)
	return "", nil
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
	for name, url := range map[string]func(testing.TB) string{"sqlite": storetest.SQLiteURL, "postgres": storetest.PostgresURL} {
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
	tests := []struct{ name, key, value, want string }{
		{"address", "SAGACITY_ADDR", "nonsense", "SAGACITY_ADDR"},
		{"database scheme", "SAGACITY_DATABASE_URL", "mysql://x", "SAGACITY_DATABASE_URL"},
		{"database dir", "SAGACITY_DATABASE_URL", "sqlite:/nonexistent/dir/x.db", "SAGACITY_DATABASE_URL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := run(context.Background(), nil, env(map[string]string{tt.key: tt.value}), io.Discard)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("run with %s=%s: %v, want an error naming %s", tt.key, tt.value, err, tt.want)
			}
		})
	}
}

// export runs a small saga on a real store and returns its NDJSON export.
func export(t *testing.T) []byte {
	ctx := context.Background()
	db, err := store.Open(ctx, storetest.SQLiteURL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ok := engine.Funcs{Exec: func(context.Context, engine.Invocation) (string, error) { return "ok\nwith a newline", nil }}
	e, err := engine.New(db, []engine.Tool{{Name: "reserveInventory", Executor: ok},
		{Name: "sendWireTransfer", Reversibility: engine.Irreversible, Executor: ok}})
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
	if err := engine.WriteNDJSON(&b, es); err != nil {
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
	var out bytes.Buffer
	err := run(context.Background(), []string{"verify", path}, env(nil), &out)
	code := 0
	if ee, ok := err.(exitError); ok {
		code = ee.code
	} else if err != nil {
		t.Fatalf("verify: %v", err)
	}
	return code, out.String()
}

func TestVerifyCommand(t *testing.T) {
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
	for name, content := range map[string][]byte{
		"not json":    []byte("not json\n"),
		"cut short":   good[:len(good)-10],
		"two sagas":   append(bytes.Clone(good), bytes.ReplaceAll(lines[0], []byte(`"s1"`), []byte(`"s2"`))...),
		"wrong types": bytes.Replace(good, []byte(`"seq":1`), []byte(`"seq":"1"`), 1),
	} {
		if code, _ := verifyFile(t, content); code != 2 {
			t.Errorf("verify(%s) exit = %d, want 2", name, code)
		}
	}
	err := run(context.Background(), []string{"verify", "/nonexistent/export.ndjson"}, env(nil), io.Discard)
	if ee, ok := err.(exitError); !ok || ee.code != 2 {
		t.Errorf("verify(missing file) = %v, want exit 2", err)
	}
}
