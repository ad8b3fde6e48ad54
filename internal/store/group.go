package store

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sagacity-go/sagacity/internal/engine"
)

// Group commit. Calls of different sagas that wait to write at the same
// time are committed by one transaction: while a store's commit slots are
// all taken, the Updates that arrive wait together, and the first slot
// to free up commits all of them at once (up to most). Alone, an Update
// takes a free slot and commits at once, as it would without grouping:
// a group is whatever waits, never a timer. Every caller learns its own
// outcome, and only once the transaction that holds its writes has
// committed.
//
// How a group is committed is the dialect's (togetherPostgres,
// togetherSQLite); when that transaction fails as a whole, nothing of it
// was kept, and each member commits again alone, so one member's failure
// is its own.

// The sizes of groups: PostgreSQL commits groupSlotsPostgres at once
// (each a connection of the pool; a read-write transaction that is not
// grouped takes one of its own), SQLite one, its single writer; a group
// holds at most groupMost members. Two slots let one group's WAL flush
// overlap the next group's statement; more only split the waiting calls
// into smaller groups that compete for PostgreSQL's cores: with 32 sagas
// at once on two cores an executed call took 1.8x the floor's time with
// one or two slots, 2.1x with four and 2.4x with eight (make bench).
const (
	groupSlotsPostgres = 2
	groupMost          = 64
)

// group gathers Updates while its slots are taken.
type group struct {
	slots int // transactions committing at once
	most  int // members one transaction takes at most
	// alone commits one member in a transaction of its own.
	alone func(ctx context.Context, m *member) error
	// together commits two or more members, setting each one's err.
	together func(ctx context.Context, ms []*member)

	mu      sync.Mutex
	busy    int
	waiting []*member

	groups, members atomic.Int64 // transactions of two members or more, and their members
}

// Grouped counts the transactions that committed two Updates or more
// (whether each of them kept its writes or failed alone), and those
// Updates.
func (d *DB) Grouped() (transactions, members int64) {
	return d.group.groups.Load(), d.group.members.Load()
}

// member is one Update in a group.
type member struct {
	// key is the saga whose head the member promised (Tx.LockAs); a
	// group holds one member of each key, "" meaning any number.
	key  string
	fn   func(engine.Tx) error
	rec  *recorder // its writes, when recorded (PostgreSQL)
	woke []string  // SQLite: the sagas its fn woke (Tx.Wake)
	err  error
	done chan struct{}
}

// commit commits m, alone when a slot is free, else with whatever else
// is waiting when one frees up, and returns m's outcome.
func (g *group) commit(ctx context.Context, m *member) error {
	g.mu.Lock()
	if g.busy < g.slots {
		g.busy++
		g.mu.Unlock()
		m.err = g.alone(ctx, m)
		g.next()
		return m.err
	}
	m.done = make(chan struct{})
	g.waiting = append(g.waiting, m)
	g.mu.Unlock()
	<-m.done // a group's transaction is bounded by opTimeout
	return m.err
}

// next gives the slot a transaction just left to what waits, or frees it.
func (g *group) next() {
	g.mu.Lock()
	ms := g.take()
	if len(ms) == 0 {
		g.busy--
	}
	g.mu.Unlock()
	if len(ms) > 0 {
		go g.run(ms)
	}
}

// run commits members that waited, tells them, and passes the slot on.
// Their own contexts are not used: they may end while the transaction
// runs, and its outcome must still reach each of them.
func (g *group) run(ms []*member) {
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	if len(ms) == 1 {
		ms[0].err = g.alone(ctx, ms[0])
	} else {
		g.together(ctx, ms)
		g.groups.Add(1)
		g.members.Add(int64(len(ms)))
	}
	cancel()
	for _, m := range ms {
		close(m.done)
	}
	g.next()
}

// take removes and returns the oldest waiting members, at most most and
// at most one of each key; g.mu is held.
func (g *group) take() []*member {
	var ms []*member
	keys := map[string]bool{}
	rest := g.waiting[:0]
	for _, m := range g.waiting {
		if len(ms) < g.most && (m.key == "" || !keys[m.key]) {
			ms, keys[m.key] = append(ms, m), true
		} else {
			rest = append(rest, m)
		}
	}
	clear(g.waiting[len(rest):])
	g.waiting = rest
	return ms
}

// retryAlone commits each member again in a transaction of its own, at
// the same time: the transaction that held them together failed and kept
// nothing.
func retryAlone(ctx context.Context, g *group, ms []*member) {
	var wg sync.WaitGroup
	for _, m := range ms {
		wg.Go(func() { m.err = g.alone(ctx, m) })
	}
	wg.Wait()
}

// togetherSQLite commits members in one transaction, each in a savepoint
// of its own: a member whose fn fails is rolled back to its savepoint and
// fails alone. SQLite runs each statement at once, in the process, so a
// member may read what it likes.
func (s *sqlStore) togetherSQLite(ctx context.Context, ms []*member) {
	err := s.begin(ctx, func(c conn) error {
		for _, m := range ms {
			if _, err := c.exec(ctx, "SAVEPOINT grouped"); err != nil {
				return err
			}
			if m.err = m.fn(s.txOf(ctx, c, m)); m.err != nil {
				m.woke = nil
				if _, err := c.exec(ctx, "ROLLBACK TO grouped"); err != nil {
					return err
				}
			}
			if _, err := c.exec(ctx, "RELEASE grouped"); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		retryAlone(ctx, s.group, ms)
	}
}

// recorder is the Tx a PostgreSQL Update's fn runs on. It records fn's
// calls instead of sending them while fn only writes: when fn promised
// one saga's head (LockAs first) and then only wrote, its writes can be
// sent together with other members'. When fn reads, the recorder opens a
// transaction, makes the calls recorded so far on it and passes that
// read and every later call on to it: fn runs once either way.
type recorder struct {
	s   *sqlStore
	ctx context.Context
	p   *pipe // the transaction, once fn read
	on  *tx   // its Tx

	solo    bool // fn wrote what cannot be grouped: it commits alone
	promise *promised
	ops     []func(engine.Tx) error // every call, to replay
	rest    []func(engine.Tx) error // the writes other than entries, calls and the head
	entries []engine.Entry
	calls   []engine.Call
	saga    *engine.Saga // the head as the last PutSaga left it
}

type promised struct {
	s    engine.Saga
	seq  int64
	want engine.CallState
}

var _ engine.Tx = (*recorder)(nil)

// read makes a read on the transaction, opening it first with the calls
// recorded so far. When the connection proves dead on the first round
// trip, nothing of the transaction ran: it is opened once more, on a
// fresh connection.
func (r *recorder) read(f func(engine.Tx) error) error {
	if r.on != nil {
		return f(r.on)
	}
	for attempt := 0; ; attempt++ {
		p, err := openPipe(r.ctx, r.s.pool)
		if err != nil {
			return err
		}
		r.p, r.on = p, r.s.tx(r.ctx, p)
		if err = r.replay(r.on); err == nil {
			err = f(r.on)
		}
		if err == nil || attempt > 0 || !p.again(r.ctx, err) {
			return err
		}
		_ = p.end(r.ctx, err)
		r.p, r.on = nil, nil
	}
}

// end ends fn's transaction with fn's outcome, if fn read.
func (r *recorder) end(err error) (read bool, _ error) {
	if r.p == nil {
		return false, err
	}
	return true, r.p.end(r.ctx, err)
}

// write records a write that is not an entry, a call or the head, or
// makes it once there is a transaction.
func (r *recorder) write(op func(engine.Tx) error) error {
	if r.on != nil {
		return op(r.on)
	}
	r.ops, r.rest = append(r.ops, op), append(r.rest, op)
	return nil
}

// mine notes a write of saga id: writes of another saga than the
// promised one make the member solo.
func (r *recorder) mine(id string) {
	if r.promise == nil || r.promise.s.ID != id {
		r.solo = true
	}
}

// replay makes the recorded calls on t.
func (r *recorder) replay(t engine.Tx) error {
	for _, op := range r.ops {
		if err := op(t); err != nil {
			return err
		}
	}
	return nil
}

func (r *recorder) LockAs(s engine.Saga, seq int64, want engine.CallState) error {
	op := func(t engine.Tx) error { return t.LockAs(s, seq, want) }
	if r.on != nil {
		return op(r.on)
	}
	if len(r.ops) > 0 {
		r.solo = true
	}
	r.promise, r.ops = &promised{s, seq, want}, append(r.ops, op)
	return nil
}

func (r *recorder) PutSaga(s engine.Saga) error {
	op := func(t engine.Tx) error { return t.PutSaga(s) }
	if r.on != nil {
		return op(r.on)
	}
	r.mine(s.ID)
	r.saga, r.ops = &s, append(r.ops, op)
	return nil
}

func (r *recorder) Append(e engine.Entry) error {
	op := func(t engine.Tx) error { return t.Append(e) }
	if r.on != nil {
		return op(r.on)
	}
	r.mine(e.SagaID)
	r.entries, r.ops = append(r.entries, e), append(r.ops, op)
	return nil
}

func (r *recorder) PutCall(c engine.Call) error {
	op := func(t engine.Tx) error { return t.PutCall(c) }
	if r.on != nil {
		return op(r.on)
	}
	r.mine(c.SagaID)
	for _, o := range r.calls {
		if o.Seq == c.Seq {
			r.solo = true // one upsert may not touch a row twice
		}
	}
	r.calls, r.ops = append(r.calls, c), append(r.ops, op)
	return nil
}

func (r *recorder) PutApproval(a engine.ApprovalRequest) error {
	return r.write(func(t engine.Tx) error { return t.PutApproval(a) })
}

func (r *recorder) PutVotes(sagaID string, seq int64, voters []string, quorum int, due time.Time) error {
	return r.write(func(t engine.Tx) error { return t.PutVotes(sagaID, seq, voters, quorum, due) })
}

func (r *recorder) PutPasskey(k engine.Passkey) error {
	return r.write(func(t engine.Tx) error { return t.PutPasskey(k) })
}

func (r *recorder) RemovePasskey(id string, at time.Time) error {
	return r.write(func(t engine.Tx) error { return t.RemovePasskey(id, at) })
}

func (r *recorder) SetSignCount(id string, n uint32) error {
	return r.write(func(t engine.Tx) error { return t.SetSignCount(id, n) })
}

func (r *recorder) PutCallKey(sagaID, key string, seq int64) error {
	return r.write(func(t engine.Tx) error { return t.PutCallKey(sagaID, key, seq) })
}

func (r *recorder) Notify(ev engine.OutboxEvent, to []engine.Recipient) error {
	return r.write(func(t engine.Tx) error { return t.Notify(ev, to) })
}

func (r *recorder) PutEscalation(sagaID string, seq int64, steps int, next time.Time) error {
	return r.write(func(t engine.Tx) error { return t.PutEscalation(sagaID, seq, steps, next) })
}

func (r *recorder) PutGlassUse(u engine.GlassUse) error {
	return r.write(func(t engine.Tx) error { return t.PutGlassUse(u) })
}

func (r *recorder) RatifyGlass(sagaID string, seq int64, at time.Time) error {
	return r.write(func(t engine.Tx) error { return t.RatifyGlass(sagaID, seq, at) })
}

func (r *recorder) LockSaga(id string) (s engine.Saga, err error) {
	err = r.read(func(t engine.Tx) (err error) { s, err = t.LockSaga(id); return err })
	return s, err
}

func (r *recorder) LockSagaCall(id string, seq int64) (s engine.Saga, state engine.CallState, err error) {
	err = r.read(func(t engine.Tx) (err error) { s, state, err = t.LockSagaCall(id, seq); return err })
	return s, state, err
}

func (r *recorder) CreateSaga(in engine.Saga) (s engine.Saga, err error) {
	err = r.read(func(t engine.Tx) (err error) { s, err = t.CreateSaga(in); return err })
	return s, err
}

func (r *recorder) Entries(sagaID string) (es []engine.Entry, err error) {
	err = r.read(func(t engine.Tx) (err error) { es, err = t.Entries(sagaID); return err })
	return es, err
}

func (r *recorder) Approval(sagaID string, seq int64) (a engine.ApprovalRequest, err error) {
	err = r.read(func(t engine.Tx) (err error) { a, err = t.Approval(sagaID, seq); return err })
	return a, err
}

func (r *recorder) DeleteApprovals(sagaID string, seq int64) (n int, err error) {
	err = r.read(func(t engine.Tx) (err error) { n, err = t.DeleteApprovals(sagaID, seq); return err })
	return n, err
}

func (r *recorder) CountApprovals(sagaID string) (n int, err error) {
	err = r.read(func(t engine.Tx) (err error) { n, err = t.CountApprovals(sagaID); return err })
	return n, err
}

func (r *recorder) Call(sagaID string, seq int64) (c engine.Call, err error) {
	err = r.read(func(t engine.Tx) (err error) { c, err = t.Call(sagaID, seq); return err })
	return c, err
}

func (r *recorder) Calls(sagaID string, states ...engine.CallState) (cs []engine.Call, err error) {
	err = r.read(func(t engine.Tx) (err error) { cs, err = t.Calls(sagaID, states...); return err })
	return cs, err
}

func (r *recorder) InDoubt(sagaID string, before time.Time, gone []string) (cs []engine.Call, err error) {
	err = r.read(func(t engine.Tx) (err error) { cs, err = t.InDoubt(sagaID, before, gone); return err })
	return cs, err
}

func (r *recorder) Passkey(id string) (k engine.Passkey, err error) {
	err = r.read(func(t engine.Tx) (err error) { k, err = t.Passkey(id); return err })
	return k, err
}

func (r *recorder) Told(thread string) (ms []engine.Member, err error) {
	err = r.read(func(t engine.Tx) (err error) { ms, err = t.Told(thread); return err })
	return ms, err
}

// RetryDelivery and EnableEndpoint say whether they changed a row: reads.

func (r *recorder) RetryDelivery(id int64, at time.Time) error {
	return r.read(func(t engine.Tx) error { return t.RetryDelivery(id, at) })
}

func (r *recorder) EnableEndpoint(name string) error {
	return r.read(func(t engine.Tx) error { return t.EnableEndpoint(name) })
}
