package tlog_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/sagacity-go/sagacity/internal/engine"
	"github.com/sagacity-go/sagacity/internal/store"
	"github.com/sagacity-go/sagacity/internal/testkit"
	"github.com/sagacity-go/sagacity/internal/tlog"
	"github.com/sagacity-go/sagacity/internal/witness"
)

// stores runs fn on a fresh PostgreSQL schema and a fresh SQLite file.
func stores(t *testing.T, fn func(t *testing.T, dbURL string)) {
	t.Run("sqlite", func(t *testing.T) { t.Parallel(); fn(t, testkit.SQLiteURL(t)) })
	t.Run("postgres", func(t *testing.T) { t.Parallel(); fn(t, testkit.PostgresURL(t)) })
}

// logged is a log over the database at dbURL, publishing to the
// checkpoint directory dir, and an engine writing to it.
func logged(t *testing.T, dbURL string, dir *witness.Dir) (*tlog.Log, *engine.Engine) {
	t.Helper()
	db, err := store.Open(t.Context(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	lg := tlog.New(db, dir, testkit.Keys(t), tlog.Options{Interval: 24 * time.Hour})
	if err := lg.Claim(t.Context()); err != nil {
		t.Fatal(err)
	}
	ok := engine.Funcs{Exec: func(context.Context, engine.Invocation) (string, error) { return "done", nil }}
	e, err := engine.New(db, []engine.Tool{{Name: "reserve", Reversibility: engine.Reversible, Executor: ok}},
		engine.WithKeys(testkit.Keys(t)), engine.WithLog(lg))
	if err != nil {
		t.Fatal(err)
	}
	return lg, e
}

// call writes a call's entries to the journal.
func call(t *testing.T, e *engine.Engine, saga string) {
	t.Helper()
	agent := engine.Principal{ID: "agent", Auth: engine.AuthToken, Roles: []engine.Role{engine.RoleAgent}}
	if _, err := e.Call(t.Context(), agent, saga, "reserve", `{}`); err != nil {
		t.Fatal(err)
	}
}

func checkpoints(t *testing.T) *witness.Dir {
	t.Helper()
	d, err := witness.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return d
}

var quiet = slog.New(slog.DiscardHandler)

// TestSequencerStop: stopping the sequencer signs a checkpoint covering
// every entry written before the stop, though none was due (the log's
// shutdown); a sequencer stopped without having started signs nothing.
func TestSequencerStop(t *testing.T) {
	stores(t, func(t *testing.T, dbURL string) {
		lg, e := logged(t, dbURL, checkpoints(t))
		status := func() engine.LogStatus {
			t.Helper()
			st, err := lg.Status(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			return st
		}
		// It never ticks: only its stop signs.
		s := &tlog.Sequencer{Log: lg, Every: 24 * time.Hour, Logger: quiet}
		call(t, e, "before")
		if err := s.Stop(t.Context()); err != nil {
			t.Fatalf("Stop before Start = %v", err)
		}
		if st := status(); st.Checkpoint.Size != 0 {
			t.Errorf("after a Stop before Start, the newest checkpoint has size %d; want none signed", st.Checkpoint.Size)
		}
		if err := s.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		call(t, e, "during")
		if err := s.Stop(t.Context()); err != nil {
			t.Fatalf("Stop = %v", err)
		}
		if st := status(); st.Size < 4 || st.Checkpoint.Size != st.Size {
			t.Errorf("after Stop, the log has %d leaves and the newest checkpoint size %d; want one checkpoint covering both calls' entries",
				st.Size, st.Checkpoint.Size)
		}
	})
}

// TestCheckerStart: the checker compares the database with the newest
// checkpoint before Start returns, so that a database behind it (here a
// new one beside the checkpoint directory of another) halts executions
// before the server takes its first request; a database that cannot be
// read keeps the checker from starting.
func TestCheckerStart(t *testing.T) {
	stores(t, func(t *testing.T, dbURL string) {
		dir := checkpoints(t)
		signed, e := logged(t, testkit.SQLiteURL(t), dir)
		call(t, e, "signed")
		if _, err := signed.Sequence(t.Context(), true); err != nil {
			t.Fatal(err)
		}
		behind, _ := logged(t, dbURL, dir)
		c := &tlog.Checker{Log: behind, Every: 24 * time.Hour, FullEvery: 24 * time.Hour, Logger: quiet}
		if err := c.Start(t.Context()); err != nil {
			t.Fatalf("Start = %v", err)
		}
		defer func() { _ = c.Stop(t.Context()) }()
		if got := behind.Halted(); !strings.Contains(got, "fewer than the") {
			t.Errorf("as Start returns over a database behind the newest checkpoint, Halted = %q; want the rollback named", got)
		}

		db, err := store.Open(t.Context(), dbURL)
		if err != nil {
			t.Fatal(err)
		}
		db.Close()
		down := &tlog.Checker{Log: tlog.New(db, dir, testkit.Keys(t), tlog.Options{}), Logger: quiet}
		if err := down.Start(t.Context()); err == nil {
			_ = down.Stop(t.Context())
			t.Error("Start over a closed database = nil; want the check's error")
		}
	})
}
