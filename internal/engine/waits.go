package engine

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sagacity-go/sagacity/internal/service"
)

// Waiting for a decision: an agent's call held until people decide (and,
// under a rule that executes on approval, until the server executed it).
// Every Update that changes a request wakes its saga (Tx.Wake, in tell
// and tellOutcome); the store tells the Listener of each commit, across
// processes on PostgreSQL; the Listener wakes the saga's waits, which
// read the request again. Nothing polls the database for a held call.

// waits are the held waits of one process, by saga.
type waits struct {
	mu        sync.Mutex
	by        map[string]map[chan struct{}]struct{}
	listening atomic.Bool // a Listener told the first ""
}

// add holds a wait on saga sagaID: the channel is signalled (coalesced)
// at each change of the saga's requests; done drops it.
func (w *waits) add(sagaID string) (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	w.mu.Lock()
	if w.by == nil {
		w.by = map[string]map[chan struct{}]struct{}{}
	}
	if w.by[sagaID] == nil {
		w.by[sagaID] = map[chan struct{}]struct{}{}
	}
	w.by[sagaID][ch] = struct{}{}
	w.mu.Unlock()
	return ch, func() {
		w.mu.Lock()
		delete(w.by[sagaID], ch)
		if len(w.by[sagaID]) == 0 {
			delete(w.by, sagaID)
		}
		w.mu.Unlock()
	}
}

// wake signals the waits on saga sagaID, or on every saga for "".
func (w *waits) wake(sagaID string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	signal := func(set map[chan struct{}]struct{}) {
		for ch := range set {
			select {
			case ch <- struct{}{}:
			default:
			}
		}
	}
	if sagaID != "" {
		signal(w.by[sagaID])
		return
	}
	for _, set := range w.by {
		signal(set)
	}
}

// Held counts the waits held in this process.
func (e *Engine) Held() int {
	e.waits.mu.Lock()
	defer e.waits.mu.Unlock()
	n := 0
	for _, set := range e.waits.by {
		n += len(set)
	}
	return n
}

// Waiting reports whether an agent waiting on the request should wait
// on: nobody has decided it yet; or it is approved and its rule has the
// server execute it (the execution comes next); or its execution is
// under way and neither finished nor in doubt.
func (r Review) Waiting() bool {
	switch r.State {
	case StateUndecided:
		return true
	case StateApproved:
		return r.Rule != nil && r.Rule.OnApproval
	case StateExecuting:
		return !r.InDoubt
	}
	return false
}

// Await holds until the request at seq of saga sagaID is no longer one
// to wait on (Review.Waiting), or until ctx ends, and returns it as it
// then stands (as Requests reads it: without the journal's verification
// or a reviewer's context, whose reads grow with the store; Waiting
// still true when ctx ended first; ctx's end is not an error). It wakes when an Update changes the
// saga's requests, in any process sharing the database, and reads the
// request again then; an execution under way is read again, too, once
// it could have fallen in doubt. Errors: those of Review; Unavailable
// when no Listener runs, since nothing would wake it.
func (e *Engine) Await(ctx context.Context, p Principal, sagaID string, seq int64) (Review, error) {
	if !e.waits.listening.Load() {
		return Review{}, Errorf(Unavailable, "this server does not listen for decisions: nothing could wake a held call")
	}
	changed, done := e.waits.add(sagaID)
	defer done()
	for {
		r, err := Apart(func() (Review, error) { return e.request(ctx, p, sagaID, seq) })
		if err != nil {
			return Review{}, err
		}
		if !r.Waiting() {
			return r, nil
		}
		var doubt <-chan time.Time
		var t *time.Timer
		if r.State == StateExecuting {
			t = time.NewTimer(max(e.inDoubtAfter, time.Second))
			doubt = t.C
		}
		select {
		case <-changed:
		case <-doubt:
		case <-ctx.Done():
		}
		if t != nil {
			t.Stop()
		}
		if ctx.Err() != nil {
			return r, nil
		}
	}
}

// request is the request at seq of saga sagaID as Requests reads it;
// NotFound when the saga has none there.
func (e *Engine) request(ctx context.Context, p Principal, sagaID string, seq int64) (Review, error) {
	_, reqs, err := e.Requests(ctx, p, sagaID)
	if err != nil {
		return Review{}, err
	}
	for _, r := range reqs {
		if r.Gated.Seq == seq {
			return r, nil
		}
	}
	return Review{}, &Error{Kind: NotFound, Msg: fmt.Sprintf("saga %s has no request at seq=%d", sagaID, seq), SagaID: sagaID, Seq: seq}
}

// doubt sets r.InDoubt for a request whose execution is under way and
// in doubt as this process sees it now.
func (e *Engine) doubt(ctx context.Context, r *Review) error {
	if r.State != StateExecuting {
		return nil
	}
	calls, err := e.inDoubt(r.Saga.ID, e.window(), e.stored(ctx))
	r.InDoubt = slices.ContainsFunc(calls, func(c Call) bool { return c.Seq == r.Resumed.Seq })
	return err
}

// Apart runs fn on a goroutine of its own and returns what it returns.
// The deep stack a read or a call grows goes with that goroutine, and
// the one that then waits, for minutes maybe, keeps the small stack it
// had: most of what a held call costs is its goroutine's stack, and Go
// shrinks a grown one only at a garbage collection.
func Apart[T any](fn func() (T, error)) (T, error) {
	type result struct {
		v   T
		err error
	}
	ch := make(chan result, 1)
	go func() {
		v, err := fn()
		ch <- result{v, err}
	}()
	r := <-ch
	return r.v, r.err
}

// Listener tells this process's held waits (Await) of every change of a
// request, as the store hears of it: a service the server runs.
type Listener struct {
	Engine *Engine
	Logger *slog.Logger
	service.Base
}

// Start listens until Stop or until ctx ends; it has started once the
// store listens.
func (l *Listener) Start(ctx context.Context) error {
	log := cmp.Or(l.Logger, l.Engine.log)
	w := &l.Engine.waits
	return l.Run(ctx, service.Work{Loops: []service.Loop{func(ctx context.Context, ready func()) {
		var once sync.Once
		err := l.Engine.store.Listen(ctx, func(sagaID string) {
			w.wake(sagaID)
			if sagaID == "" {
				once.Do(func() {
					w.listening.Store(true)
					ready()
				})
			}
		})
		w.listening.Store(false)
		if err != nil && ctx.Err() == nil {
			log.Error("listening for decisions stopped", "err", err)
		}
	}}})
}
