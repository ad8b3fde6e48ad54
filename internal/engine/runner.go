package engine

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
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
