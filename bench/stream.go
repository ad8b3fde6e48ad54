package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
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

// streamed is the server's checks of a seeded store, run in a process of
// its own so that its peak RSS is its own.
type streamed struct {
	Leaves  int64   `json:"leaves"`
	Seconds float64 `json:"seconds"` // the full check
	Cheap   float64 `json:"cheap"`   // the cheap check, from the tree's nodes, in seconds
	RSSOpen int64   `json:"rssOpen"` // peak RSS, in bytes, once the store was open
	RSSPeak int64   `json:"rssPeak"` // peak RSS after the checks
}

// streamStep checks each seeded store (seeding it the first time) in a
// child process of this program.
func (b *bench) streamStep(ctx context.Context) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	for _, size := range b.c.stream {
		dir, err := b.ensureStore(ctx, size)
		if err != nil {
			return err
		}
		progress(b.start, "stream: the checks of %s, in a process of its own", dir)
		out, err := exec.CommandContext(ctx, self, "-check-store", dir).Output()
		if ee, ok := errors.AsType[*exec.ExitError](err); ok {
			return fmt.Errorf("the checks of %s: %w: %s", dir, err, strings.TrimSpace(string(ee.Stderr)))
		} else if err != nil {
			return fmt.Errorf("the checks of %s: %w", dir, err)
		}
		var s streamed
		if err := json.Unmarshal(out, &s); err != nil {
			return fmt.Errorf("the checks of %s answered %q: %w", dir, out, err)
		}
		b.r.streamed = append(b.r.streamed, s)
	}
	if n := len(b.r.streamed); n > 1 {
		first, last := b.r.streamed[0], b.r.streamed[n-1]
		r := float64(last.RSSPeak) / float64(first.RSSPeak)
		b.r.figures = append(b.r.figures, figure{
			name:  fmt.Sprintf("peak RSS of the full log check from SQLite, %s entries / %s (%s sagas each)", count(int(last.Leaves)), count(int(first.Leaves)), count(streamSagas)),
			goal:  noGrowth(1.1),
			ratio: spread{r, r, r},
			sides: fmt.Sprintf("%s entries %.0f MiB vs %s entries %.0f MiB", count(int(last.Leaves)), float64(last.RSSPeak)/(1<<20), count(int(first.Leaves)), float64(first.RSSPeak)/(1<<20)),
		})
	}
	return nil
}

// checkStore is the child's part: it opens the store in dir, checks its
// log against its newest checkpoint, from the tree's nodes and then fully,
// and prints what that took.
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
	for _, full := range []bool{false, true} {
		began := time.Now()
		problem, err := l.Check(ctx, full)
		if err != nil {
			return err
		}
		if problem != "" {
			return fmt.Errorf("the check (full: %t) found a problem: %s", full, problem)
		}
		if full {
			s.Seconds = time.Since(began).Seconds()
		} else {
			s.Cheap = time.Since(began).Seconds()
		}
	}
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
