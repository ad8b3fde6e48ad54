package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/sagacity-go/sagacity/internal/engine"
	"github.com/sagacity-go/sagacity/internal/store"
	"github.com/sagacity-go/sagacity/internal/tlog"
	"github.com/sagacity-go/sagacity/internal/witness"
)

// seededStore is the SQLite store of a million logged entries that
// BenchmarkVerify1M in internal/store seeds in the system's temporary
// directory (its seededStore), which make bench runs first.
var seededStore = filepath.Join(os.TempDir(), "sagacity-bench-verify1m-v2")

// streamed is the server's full check of the seeded store, run in a
// process of its own so that its peak RSS is its own.
type streamed struct {
	Leaves  int64   `json:"leaves"`
	Seconds float64 `json:"seconds"`
	RSSOpen int64   `json:"rssOpen"` // peak RSS, in bytes, once the store was open
	RSSPeak int64   `json:"rssPeak"` // peak RSS after the check
}

// streamStep runs the full check of the seeded store in a child process
// of this program, when the store is there.
func (b *bench) streamStep(ctx context.Context) error {
	if _, err := os.Stat(seededStore); errors.Is(err, fs.ErrNotExist) {
		progress(b.start, "stream: no seeded store at %s (make bench's go benchmarks seed it); skipped", seededStore)
		return nil
	}
	progress(b.start, "stream: the full log check of %s, in a process of its own", seededStore)
	self, err := os.Executable()
	if err != nil {
		return err
	}
	out, err := exec.CommandContext(ctx, self, "-check-store", seededStore).Output()
	if err != nil {
		return fmt.Errorf("the full check of %s: %w", seededStore, err)
	}
	var s streamed
	if err := json.Unmarshal(out, &s); err != nil {
		return fmt.Errorf("the full check of %s answered %q: %w", seededStore, out, err)
	}
	b.r.streamed = &s
	return nil
}

// checkStore is the child's part: it opens the store in dir, checks its
// log fully against its newest checkpoint, and prints what that took.
func checkStore(ctx context.Context, dir string) error {
	key, err := os.ReadFile(filepath.Join(dir, "signer.key"))
	if err != nil {
		return err
	}
	keys, err := engine.NewKeys(string(key))
	if err != nil {
		return err
	}
	db, err := store.OpenSQLite(ctx, filepath.Join(dir, "sagacity.db"))
	if err != nil {
		return err
	}
	defer db.Close()
	w, err := witness.Open(filepath.Join(dir, "checkpoints"))
	if err != nil {
		return err
	}
	l := tlog.New(db, w, keys, tlog.Options{})
	st, err := db.LogState(ctx)
	if err != nil {
		return err
	}
	s := streamed{Leaves: st.Size}
	if s.RSSOpen, err = peakRSS(); err != nil {
		return err
	}
	began := time.Now()
	problem, err := l.Check(ctx, true)
	if err != nil {
		return err
	}
	if problem != "" {
		return fmt.Errorf("the full check found a problem: %s", problem)
	}
	s.Seconds = time.Since(began).Seconds()
	if s.RSSPeak, err = peakRSS(); err != nil {
		return err
	}
	return json.NewEncoder(os.Stdout).Encode(s)
}

// peakRSS is this process's peak resident set size, in bytes.
func peakRSS() (int64, error) { return procBytes("self", "VmHWM") }

// procBytes reads a size, in bytes, from /proc/<pid>/status (field is
// VmRSS, say).
func procBytes(pid, field string) (int64, error) {
	b, err := os.ReadFile("/proc/" + pid + "/status")
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("no %s in /proc/%s/status", field, pid)
}
