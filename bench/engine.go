package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/sagacity-go/sagacity/internal/engine"
	"github.com/sagacity-go/sagacity/internal/store"
	"github.com/sagacity-go/sagacity/internal/tlog"
	"github.com/sagacity-go/sagacity/internal/witness"
)

// The engine's side, in-process, as cmd/web runs it: the global log on,
// with a checkpoint every 1000 leaves or 10s (the server's defaults) and
// the server's sequencer appending to it every 200ms in a goroutine of
// its own.
const (
	checkpointEvery    = 1000
	checkpointInterval = 10 * time.Second
)

// The tools, both no-ops so that only the engine is timed: an executed
// call runs reserveInventory; a gated call asks for sendWireTransfer.
const (
	toolExecuted = "reserveInventory"
	toolGated    = "sendWireTransfer"
	callInput    = `{"item":"laptop"}`
	sagaLength   = 50 // calls a saga, as internal/store's benchmarks make them
)

var agent = engine.Principal{ID: "token:agent", Name: "agent", Auth: "token", Roles: []engine.Role{engine.RoleAgent}}

// benchEngine is an engine over its own store.
type benchEngine struct {
	*engine.Engine
	log  *tlog.Log
	db   *store.DB
	stop func() error // stops the sequencer loop, if it runs
}

// openEngine opens the store at dbURL and an engine over it, signing with
// keys and keeping checkpoints in a new directory under dir.
func openEngine(ctx context.Context, dbURL string, keys *engine.Keys, dir string) (*benchEngine, error) {
	db, err := store.Open(ctx, dbURL)
	if err != nil {
		return nil, err
	}
	cpDir, err := os.MkdirTemp(dir, "checkpoints-")
	if err != nil {
		db.Close()
		return nil, err
	}
	w, err := witness.Open(cpDir)
	if err != nil {
		db.Close()
		return nil, err
	}
	ok := engine.Funcs{Exec: func(context.Context, engine.Invocation) (string, error) { return "ok", nil }}
	tools := []engine.Tool{{Name: toolExecuted, Reversibility: engine.Compensatable, Executor: ok},
		{Name: toolGated, Reversibility: engine.Irreversible, Executor: ok}}
	l := tlog.New(db, w, keys, tlog.Options{Every: checkpointEvery, Interval: checkpointInterval})
	if err := l.Claim(ctx); err != nil {
		db.Close()
		return nil, err
	}
	e, err := engine.New(db, tools, engine.WithKeys(keys), engine.WithLog(l),
		engine.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	if err != nil {
		db.Close()
		return nil, err
	}
	return &benchEngine{Engine: e, log: l, db: db, stop: func() error { return nil }}, nil
}

// sequence runs the server's sequencer until close: an error is left for
// the next tick, as the server does; a benchmark whose log stops growing
// fails its final Sequence in close.
func (e *benchEngine) sequence(ctx context.Context) error {
	s := &tlog.Sequencer{Log: e.log, Logger: slog.New(slog.DiscardHandler)}
	if err := s.Start(ctx); err != nil {
		return err
	}
	e.stop = func() error { return s.Stop(context.WithoutCancel(ctx)) }
	return nil
}

// close stops the sequencer, appends what it had not yet, and closes the
// store.
func (e *benchEngine) close(ctx context.Context) error {
	err := e.stop()
	_, serr := e.log.Sequence(ctx, true)
	e.db.Close()
	return errors.Join(err, serr)
}

// call is an op making engine calls of tool, a new saga every sagaLength
// calls of a worker, each checked for the outcome it must have.
func (e *benchEngine) call(tool string) op {
	want := engine.OutcomeExecuted
	if tool == toolGated {
		want = engine.OutcomeAwaitingApproval
	}
	return func(ctx context.Context, w worker, i int) error {
		r, err := e.Call(ctx, agent, fmt.Sprintf("%s-%d", w.ID, i/sagaLength), tool, callInput)
		if err == nil && r.Outcome != want {
			err = fmt.Errorf("%s: outcome %s %s, want %s", tool, r.Outcome, r.Error, want)
		}
		return err
	}
}
