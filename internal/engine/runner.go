package engine

import (
	"cmp"
	"context"
	"crypto/rand"
	"log/slog"
	"time"
)

// A call runs in one server process, its runner. When the process dies
// mid-call (kill -9, a crash, a lost machine), the call's outcome is
// never journaled: it is in doubt. Each process registers itself as a
// runner and beats while it lives, so that its cut-off calls are in doubt
// as soon as it is gone, not only once the in-doubt window has passed
// (which still covers a call that may yet finish on a live process).

// Runner is a server process that runs calls.
type Runner struct {
	ID string
	// Replica names the deployment the process is one start of: a
	// process retires its replica's earlier runners when it starts.
	Replica   string
	StartedAt time.Time
	SeenAt    time.Time
}

// RunnerGone is how long a runner may go unseen before its calls are in
// doubt.
const RunnerGone = 10 * time.Second

// runnerID is the runner the engine's calls are journaled under; "" until
// a Heartbeat registered it.
func (e *Engine) runnerID() string {
	if id := e.runner.Load(); id != nil {
		return *id
	}
	return ""
}

// Heartbeat registers the engine's process as a runner of Replica and
// beats every Every (default 2s): a service the server starts before it
// takes calls. Logger defaults to the engine's.
type Heartbeat struct {
	Engine  *Engine
	Replica string
	Every   time.Duration
	Logger  *slog.Logger
}

// Start registers the runner, retiring the replica's earlier ones (whose
// unsettled calls are then in doubt at once), and beats until ctx ends;
// then it retires the runner, and done is closed. Cancel ctx only once
// the calls in flight have finished. Errors: Unavailable when the store
// is, at the registration.
func (h Heartbeat) Start(ctx context.Context) (done <-chan struct{}, err error) {
	e, log := h.Engine, cmp.Or(h.Logger, h.Engine.log)
	now := e.now()
	id := rand.Text()
	if err := e.store.Register(ctx, Runner{ID: id, Replica: h.Replica, StartedAt: now, SeenAt: now}); err != nil {
		return nil, err
	}
	e.runner.Store(&id)
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		t := time.NewTicker(cmp.Or(h.Every, 2*time.Second))
		defer t.Stop()
		failing := false
		for {
			select {
			case <-ctx.Done():
				rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
				defer cancel()
				if err := e.store.Retire(rctx, id); err != nil {
					log.Warn("retiring this process's runner; other servers take its calls as in doubt once it is unseen", "err", err)
				}
				return
			case <-t.C:
			}
			err := e.store.Beat(ctx, id, e.now())
			if IsKind(err, NotFound) {
				// Another process of the replica started and retired this
				// one: two processes share a replica's name.
				err = e.store.Register(ctx, Runner{ID: id, Replica: h.Replica, StartedAt: now, SeenAt: e.now()})
				log.Error("this process's runner was retired by another process of replica "+h.Replica+
					"; give each replica its own checkpoint directory", "err", err)
			}
			if err != nil && !failing && ctx.Err() == nil {
				log.Warn("recording that this process lives failed; trying again", "err", err)
			}
			failing = err != nil
		}
	}()
	return stopped, nil
}
