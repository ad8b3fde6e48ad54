package engine

import (
	"context"
	"errors"
	"maps"
	"slices"
	"sync"
	"time"
)

// runners is what a process knows of the runners of unsettled calls: the
// calls it runs itself, what it watched of the others' rows, and whose
// retirement it read.
type runners struct {
	mu sync.Mutex
	// running counts, by call, the executions and undos this process is
	// running.
	running map[callRef]int
	// starting counts the requests of this process that journal a call's
	// start (its INTENT, or the claim of its undo) and have not run it
	// yet, by the row they write.
	starting map[started]int
	seen     map[string]sighting
	retired  map[string]bool
	// retiredAt is RunnerSaga's head when retired was read.
	retiredAt int64
}

// callRef names a call.
type callRef struct {
	saga string
	seq  int64
}

// started names a call as the transaction that journals its start
// writes its row: its runner, and when (its updated_at) in microseconds.
// Another process's call that took the same seq is another row.
type started struct {
	callRef
	runner string
	at     int64
}

// startOf is c's started.
func startOf(c Call) started {
	return started{callRef{c.SagaID, c.Seq}, c.Runner, c.UpdatedAt.UnixMicro()}
}

// sighting is what a process watched of a runner's row: the beat it has
// held (zero: no row) since at least since, and still held at last, both
// on the watching process's clock.
type sighting struct {
	at          time.Time
	since, last time.Time
}

// run records that this process runs c (its execution or its undo) until
// the returned func is called.
func (e *Engine) run(c Call) (done func()) {
	done, _ = count(&e.runners, &e.runners.running, callRef{c.SagaID, c.Seq}, false)
	return done
}

// count counts k in *m, under r's lock, until the returned func is
// called; when alone is set, only if *m does not count k already (ok
// false, done nil).
func count[K comparable](r *runners, m *map[K]int, k K, alone bool) (done func(), ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if alone && (*m)[k] > 0 {
		return nil, false
	}
	if *m == nil {
		*m = map[K]int{}
	}
	(*m)[k]++
	return func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		if (*m)[k]--; (*m)[k] <= 0 {
			delete(*m, k)
		}
	}, true
}

// starts is what one request starts in this process: the calls its
// transactions journal as running or compensating, which are this
// process's, never in doubt to it, from before the transaction commits
// until the request ends (by then the process runs them, or never
// will); and those of a transaction whose commit's answer was lost
// (ErrCommitUnknown), which the request's next transaction looks for.
type starts struct {
	e    *Engine
	done []func()
	lost []Call
	own  callRef // the lost call found, which the request runs
}

// hold makes c, which a transaction of the request journals, this
// process's until release.
func (st *starts) hold(c Call) {
	done, _ := count(&st.e.runners, &st.e.runners.starting, startOf(c), false)
	st.done = append(st.done, done)
}

// lose notes that c was journaled by a transaction that did not come
// back committed, and may be kept all the same: its commit's answer was
// lost.
func (st *starts) lose(c Call) { st.lost = append(st.lost, c) }

// find returns, when saga sagaID holds one of the calls lost as it was
// journaled, row for row (this process's runner and the times its
// transaction stamped), that call: its transaction committed, nothing
// ran it, and the request runs it now. The call is then the request's
// to run, and no other request of this process takes it (two requests
// that journaled the same row at the same time, of which only one can
// have committed): ok is false for one that another request runs.
func (st *starts) find(sagaID string, read func(sagaID string, seq int64) (Call, error)) (Call, bool, error) {
	for _, l := range st.lost {
		c, err := read(sagaID, l.Seq)
		if IsKind(err, NotFound) {
			continue
		}
		if err != nil {
			return Call{}, false, err
		}
		if c.Runner != l.Runner || !c.StartedAt.Equal(l.StartedAt) || !c.UpdatedAt.Equal(l.UpdatedAt) || c.State != l.State ||
			c.ToolName != l.ToolName || c.Input != l.Input || c.Requester != l.Requester || c.Request != l.Request {
			continue
		}
		ref := callRef{c.SagaID, c.Seq}
		if st.own == ref {
			return c, true, nil // found before, by a transaction that did not commit
		}
		if done, alone := count(&st.e.runners, &st.e.runners.running, ref, true); alone {
			st.done, st.own = append(st.done, done), ref
			return c, true, nil
		}
	}
	return Call{}, false, nil
}

// again runs try, a transaction of the request that journals the start
// of call *c (try sets it; zero when it starts none), and, when the
// commit's answer was lost, tries again while the store is unavailable
// (see persist), carrying on whether or not the caller waits: the next
// try finds the call if it was kept (find) and the request runs it, or
// journals it anew. Nothing is run twice, and nothing is left journaled
// as running that nobody runs while the store answers.
func (st *starts) again(ctx context.Context, sagaID string, c *Call, try func(context.Context) (Saga, error)) (s Saga, err error) {
	err = st.e.persist(context.WithoutCancel(ctx), "the database went away as a call's start was committed; finding out whether it was", sagaID,
		func() error {
			tctx := ctx
			if len(st.lost) > 0 {
				tctx = context.WithoutCancel(ctx)
			}
			s, err = try(tctx)
			if errors.Is(err, ErrCommitUnknown) && c.Seq != 0 {
				st.lose(*c)
			}
			return err
		}, func(err error) bool { return len(st.lost) > 0 && IsKind(err, Unavailable) })
	return s, err
}

// release ends what the request holds.
func (st *starts) release() {
	for _, done := range st.done {
		done()
	}
}

// retire notes that runner id was retired by this process.
func (r *runners) retire(id string) {
	if id == "" {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.retired == nil {
		r.retired = map[string]bool{}
	}
	r.retired[id] = true
}

// gone returns the runners of unsettled calls this process takes for
// gone: retired, as it read, with no row since; or watched without a beat
// for RunnerGone. Never its own.
func (e *Engine) gone() []string {
	self := e.runnerID()
	r := &e.runners
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for id, s := range r.seen {
		if id != self && ((r.retired[id] && s.at.IsZero()) || s.last.Sub(s.since) >= RunnerGone) {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}

// holds is what a process runs and starts at one moment.
type holds struct {
	running  map[callRef]int
	starting map[started]int
}

// holds returns what this process runs and starts now.
func (e *Engine) holds() holds {
	r := &e.runners
	r.mu.Lock()
	defer r.mu.Unlock()
	return holds{maps.Clone(r.running), maps.Clone(r.starting)}
}

// ours drops from calls, read since was was taken, those this process
// runs or is starting, or did as the read began: it knows they are not in
// doubt, whatever the database says. (A call that ended since may have
// been read before its outcome was written.)
func (e *Engine) ours(calls []Call, was holds) []Call {
	now := e.holds()
	return slices.DeleteFunc(calls, func(c Call) bool {
		ref, st := callRef{c.SagaID, c.Seq}, startOf(c)
		return now.running[ref] > 0 || now.starting[st] > 0 || was.running[ref] > 0 || was.starting[st] > 0
	})
}
