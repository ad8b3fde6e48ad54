package engine

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"time"

	"github.com/sagacity-go/sagacity/evidence"
	"github.com/sagacity-go/sagacity/internal/service"
	"golang.org/x/mod/sumdb/note"
)

// A call runs in one server process, its runner. When the process dies
// mid-call (kill -9, a crash, a lost machine), the call's outcome is
// never journaled: it is in doubt. Whoever can write the database can
// write its runners table too, so nothing there alone makes a call in
// doubt: a process never takes a call it runs itself for one in doubt; it
// takes another process for gone only once it has watched that process's
// row for RunnerGone, on its own clock, without seeing it beat; or at
// once when the process's retirement is journaled, signed, in RunnerSaga
// by the process that took its place, which knows whom it replaces from
// its checkpoint directory (Lineage), never from the database. A call of
// its own that it neither runs nor is starting (a commit whose answer was
// lost, an outcome it could not journal) it takes for one in doubt at
// once: it knows that no process runs it. The in-doubt window still
// covers a call that may yet finish on a live process.

// Runner is a server process that runs calls.
type Runner struct {
	ID string
	// Replica names, for people reading the table, the deployment the
	// process is one start of (its host and checkpoint directory).
	Replica   string
	StartedAt time.Time
	// SeenAt is when the process last beat, as its row says; zero for a
	// runner that has no row.
	SeenAt time.Time
}

// RunnerGone is how long a process watches another's row without a beat
// before it takes that runner's calls as in doubt; and how long ago a
// row may say its runner was seen before a relay takes over its
// deliveries.
const RunnerGone = 10 * time.Second

// RunnerSaga is the saga whose journal holds the retirement of every
// process that a process of its replica replaced, each signed with the
// server's key. No agent may call in it.
const RunnerSaga = "sagacity:runners"

// RunnerRetired names the entries of RunnerSaga.
const RunnerRetired = "runner-retired"

// Lineage keeps, outside the database, the runner of the newest process
// of a replica: what the next one to start retires. The checkpoint
// directory keeps it (witness.Dir), where an insider who writes the
// database cannot name another process for a successor to retire.
type Lineage interface {
	// Runner returns the runner recorded; "" when none is.
	Runner() (string, error)
	// SetRunner records id, durably, in place of the one before.
	SetRunner(id string) error
}

// runnerID is the runner the engine's calls are journaled under; "" until
// a Heartbeat registered it.
func (e *Engine) runnerID() string {
	if id := e.runner.Load(); id != nil {
		return *id
	}
	return ""
}

// beatEvery is how often a process records in its runner's row that it
// lives: well inside RunnerGone, so a few missed beats go unnoticed.
const beatEvery = 2 * time.Second

// Heartbeat registers the engine's process as a runner and beats every
// Every (default beatEvery), watching the runners of unsettled calls as
// it does: a service the server starts before it takes calls. Lineage
// (none: the process retires nobody) names the process it replaces.
// Logger defaults to the engine's.
type Heartbeat struct {
	Engine  *Engine
	Replica string
	Lineage Lineage
	Every   time.Duration
	Logger  *slog.Logger
	service.Base
}

// Start retires the runner Lineage names (its calls are in doubt at once,
// to every process once it has read the retirement), registers this
// process's runner and records it in Lineage, and beats until Stop or
// until ctx ends; then it removes the runner's row. Stop it only once the
// calls in flight have finished. Errors: Unavailable when the store is;
// Internal when Lineage cannot be read or written.
func (h *Heartbeat) Start(ctx context.Context) error {
	e, log := h.Engine, cmp.Or(h.Logger, h.Engine.log)
	var id string
	var since time.Time
	register := func(ctx context.Context) (err error) {
		var before string
		if h.Lineage != nil {
			if before, err = h.Lineage.Runner(); err != nil {
				return &Error{Kind: Internal, Msg: "reading which process ran before this one", Err: err}
			}
		}
		since, id = e.now(), rand.Text()
		if before != "" {
			if err := e.retire(ctx, before, id); err != nil {
				return fmt.Errorf("retiring the process before this one: %w", err)
			}
		}
		if err := e.store.Register(ctx, Runner{ID: id, Replica: h.Replica, StartedAt: since, SeenAt: since}, before); err != nil {
			return fmt.Errorf("registering this process: %w", err)
		}
		if h.Lineage != nil {
			if err := h.Lineage.SetRunner(id); err != nil {
				return &Error{Kind: Internal, Msg: "recording this process's runner", Err: err}
			}
		}
		e.runner.Store(&id)
		e.runners.retire(before)
		if err := e.watch(ctx); err != nil {
			log.Warn("reading the runners of unsettled calls failed; trying again", "err", err)
		}
		return nil
	}
	beat := func(ctx context.Context, ready func()) {
		ready()
		t := time.NewTicker(cmp.Or(h.Every, beatEvery))
		defer t.Stop()
		failing := false
		for {
			select {
			case <-ctx.Done():
				rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
				defer cancel()
				if err := e.store.Retire(rctx, id); err != nil {
					log.Warn("removing this process's runner; other servers take its calls as in doubt once it is unseen", "err", err)
				}
				return
			case <-t.C:
			}
			err := e.store.Beat(ctx, id, e.now())
			if IsKind(err, NotFound) {
				// Another process started with this one's checkpoint
				// directory and retired it.
				err = e.store.Register(ctx, Runner{ID: id, Replica: h.Replica, StartedAt: since, SeenAt: e.now()}, "")
				log.Error("this process's runner was retired by another process started with its checkpoint directory"+
					"; give each replica its own", "err", err)
			}
			if err == nil {
				err = e.watch(ctx)
			}
			if err != nil && !failing && ctx.Err() == nil {
				log.Warn("recording that this process lives failed; trying again", "err", err)
			}
			failing = err != nil
		}
	}
	return h.Run(ctx, service.Work{Setup: register, Loops: []service.Loop{beat}})
}

// retire journals, signed, that runner id was retired by runner by.
// Errors: Unavailable when the store is.
func (e *Engine) retire(ctx context.Context, id, by string) error {
	sig, err := e.keys.Sign(evidence.RetiredNote(id, by))
	if err != nil {
		return fmt.Errorf("signing a runner's retirement: %w", err)
	}
	return e.journalOwn(ctx, RunnerSaga, RunnerRetired, func(tx Tx, s *Saga) error {
		_, err := e.append(tx, s, RunnerRetired, PhaseExecuted, id,
			Lines{{KeyRetiredBy, by}, {KeyReceipt, base64.StdEncoding.EncodeToString([]byte(sig))}}.String())
		return err
	})
}

// Retired reads RunnerSaga's entries: the runners whose retirement the
// key v signed. An entry it did not sign retires nobody.
func Retired(entries []Entry, v note.Verifier) map[string]bool {
	out := map[string]bool{}
	for _, en := range entries {
		signed, err := base64.StdEncoding.DecodeString(en.Field(KeyReceipt))
		if err != nil || en.ToolName != RunnerRetired || en.Phase != PhaseExecuted {
			continue
		}
		if n, err := note.Open(signed, note.VerifierList(v)); err == nil && n.Text == evidence.RetiredNote(en.Input, en.Field(KeyRetiredBy)) {
			out[en.Input] = true
		}
	}
	return out
}

// watch reads the runners of unsettled calls and notes what their rows
// hold, and reads the retirements RunnerSaga holds when one of them has
// no row and is not known retired. Errors: Unavailable when the store is.
func (e *Engine) watch(ctx context.Context) error {
	start := e.now()
	rs, err := e.store.Runners(ctx)
	if err != nil {
		return err
	}
	end := e.now()
	r := &e.runners
	r.mu.Lock()
	unknown := slices.ContainsFunc(rs, func(x Runner) bool { return x.SeenAt.IsZero() && !r.retired[x.ID] })
	since := r.retiredAt
	r.mu.Unlock()
	var retired map[string]bool
	var head int64
	if unknown {
		s, err := e.store.Saga(ctx, RunnerSaga)
		switch {
		case IsKind(err, NotFound):
		case err != nil:
			return err
		case s.HeadSeq != since:
			entries, err := e.store.Entries(ctx, RunnerSaga)
			if err != nil {
				return err
			}
			retired, head = Retired(entries, e.keys.Verifier()), s.HeadSeq
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if retired != nil {
		if r.retired == nil {
			r.retired = map[string]bool{}
		}
		maps.Copy(r.retired, retired)
		r.retiredAt = head
	}
	seen := make(map[string]sighting, len(rs))
	for _, x := range rs {
		s, ok := r.seen[x.ID]
		if !ok || !s.at.Equal(x.SeenAt) {
			// A beat, or a row come or gone: watched anew from when the
			// read ended, the latest it may have happened.
			s = sighting{at: x.SeenAt, since: end}
		}
		// The row held it when the read began, or later.
		if start.After(s.last) {
			s.last = start
		}
		seen[x.ID] = s
	}
	r.seen = seen
	return nil
}
