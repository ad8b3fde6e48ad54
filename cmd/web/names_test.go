package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sagacity-go/sagacity/internal/testkit"
)

// TestReadmeCheckpointNames: the checkpoint files the README's offline
// commands name are named as the server names them in
// SAGACITY_CHECKPOINT_DIR: their size in 20 digits (that a download
// from the console is named so too is internal/app
// TestConsoleDownloads's); and the commands run as written, against two
// checkpoints the demo's server signed, the sizes in them the only
// change: verify checks the export, curl fetches the consistency proof,
// verify-log says the newer log extends the older.
func TestReadmeCheckpointNames(t *testing.T) {
	t.Parallel()
	cps := t.TempDir()
	cfg := filepath.Join(t.TempDir(), "sagacity.yaml")
	if err := os.WriteFile(cfg, []byte("log: {checkpointEvery: 1, checkpointInterval: 100ms}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	base, _ := start(t, map[string]string{"SAGACITY_DATABASE_URL": testkit.SQLiteURL(t), "SAGACITY_DEMO": "true",
		"SAGACITY_CONFIG": cfg, "SAGACITY_CHECKPOINT_DIR": cps})
	var latest string
	var size int64
	for deadline := time.Now().Add(30 * time.Second); size == 0 && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if code, cp := get(t, base+"/sagacity/checkpoints/latest"); code == http.StatusOK {
			latest = cp
			_, _ = fmt.Sscan(strings.SplitN(cp, "\n", 3)[1], &size)
		}
	}
	if size == 0 {
		t.Fatal("the server signed no checkpoint")
	}
	written, err := os.ReadFile(filepath.Join(cps, fmt.Sprintf("%020d.checkpoint", size)))
	if err != nil || string(written) != latest {
		t.Fatalf("the checkpoint directory holds %v, %v under %020d.checkpoint; want the newest checkpoint", err, string(written), size)
	}

	block := testkit.ReadmeBlock(t, "checkpoint names")
	named := regexp.MustCompile(`\S+\.(checkpoint|note)\b`).FindAllString(block, -1)
	if len(named) == 0 {
		t.Fatalf("the README's offline commands name no checkpoint:\n%s", block)
	}
	for _, n := range named {
		if !regexp.MustCompile(`^[0-9]{20}\.checkpoint$`).MatchString(n) {
			t.Errorf("the README's offline commands name the checkpoint %s; the server names them like %020d.checkpoint", n, size)
		}
	}

	// The commands, run: the export of transfer-77 with proofs against
	// the older checkpoint, then the log grown and a newer one signed.
	dir := t.TempDir()
	save := func(name, content string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// The demo is seeded once the server runs: the older checkpoint is
	// the first that covers its saga transfer-77.
	checkpoint := func(after int64) (string, int64) {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			var n int64
			if code, cp := get(t, base+"/sagacity/checkpoints/latest"); code == http.StatusOK {
				if _, _ = fmt.Sscan(strings.SplitN(cp, "\n", 3)[1], &n); n > after {
					return cp, n
				}
			}
		}
		t.Fatalf("the server signed no checkpoint after %d", after)
		return "", 0
	}
	var older, export string
	var olderSize int64
	for deadline := time.Now().Add(30 * time.Second); export == "" && time.Now().Before(deadline); {
		older, olderSize = checkpoint(olderSize)
		code, e := get(t, fmt.Sprintf("%s/sagacity/audit/transfer-77?proofs=%d", base, olderSize))
		proved := code == http.StatusOK && strings.Contains(e, `"seq":3,`) && !slices.ContainsFunc(strings.Split(e, "\n"), func(l string) bool {
			return strings.HasPrefix(l, `{"sagaId":`) && !strings.Contains(l, `"proof":`)
		})
		if proved {
			export = e
		}
	}
	if export == "" {
		t.Fatalf("no checkpoint came to cover the demo's saga transfer-77")
	}
	save(fmt.Sprintf("%020d.checkpoint", olderSize), older)
	save("sagacity-transfer-77.ndjson", export)
	resp, err := http.Post(base+"/sagacity/sagas/grown/calls", "application/json",
		strings.NewReader(`{"tool":"reserveInventory","input":"{\"sku\":\"LAPTOP-13\",\"qty\":1}"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("a call to grow the log = %d; want 200", resp.StatusCode)
	}
	newer, newerSize := checkpoint(olderSize)
	save(fmt.Sprintf("%020d.checkpoint", newerSize), newer)
	_, key := get(t, base+"/sagacity/keys")
	var keys struct {
		Keys []string `json:"keys"`
	}
	if err := json.Unmarshal([]byte(key), &keys); err != nil || len(keys.Keys) != 1 {
		t.Fatalf("GET /sagacity/keys = %s", key)
	}
	script := strings.NewReplacer("00000000000000001204", fmt.Sprintf("%020d", olderSize), "00000000000000001733", fmt.Sprintf("%020d", newerSize),
		"from=1204&to=1733", fmt.Sprintf("from=%d&to=%d", olderSize, newerSize)).Replace(block)
	out, exit := shell(t, dir, script, "PUBLIC_KEY="+keys.Keys[0], "URL="+base)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if exit != 0 || len(lines) != 2 || !strings.HasPrefix(lines[0], `{"valid":true,"entryCount":`) ||
		!strings.Contains(lines[1], fmt.Sprintf(`"valid":true,"message":"the log at size %d extends the log at size %d`, newerSize, olderSize)) {
		t.Errorf("the README's offline commands = exit %d:\n%s\nwant the export verified, then the newer log extending the older", exit, out)
	}
}
