package main

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sagacity-go/sagacity/internal/testkit"
)

// TestReadmeCheckpointNames: the checkpoint files the README's offline
// commands name are named as the server names them in
// SAGACITY_CHECKPOINT_DIR: their size in 20 digits. (That a download
// from the console is named so too is internal/server
// TestConsoleDownloads's.)
func TestReadmeCheckpointNames(t *testing.T) {
	cps := t.TempDir()
	cfg := filepath.Join(t.TempDir(), "sagacity.yaml")
	os.WriteFile(cfg, []byte("log: {checkpointEvery: 1, checkpointInterval: 100ms}\n"), 0o644)
	base, _ := start(t, map[string]string{"SAGACITY_DATABASE_URL": testkit.SQLiteURL(t), "SAGACITY_DEMO": "true",
		"SAGACITY_CONFIG": cfg, "SAGACITY_CHECKPOINT_DIR": cps})
	var latest string
	var size int64
	for deadline := time.Now().Add(30 * time.Second); size == 0 && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if code, cp := get(t, base+"/sagacity/checkpoints/latest"); code == http.StatusOK {
			latest = cp
			fmt.Sscan(strings.SplitN(cp, "\n", 3)[1], &size)
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
}
