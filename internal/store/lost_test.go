package store

import (
	"context"
	"errors"
	"net/url"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5"
	"github.com/sagacity-go/sagacity/internal/engine"
	"github.com/sagacity-go/sagacity/internal/testkit"
	codes "github.com/sagacity-go/sagacity/wire" // the package's tests declare a const wire
)

// lostAuditor reads what the tests of lost answers left.
var lostAuditor = engine.Principal{ID: "auditor", Roles: []engine.Role{engine.RoleAuditor}}

// answerLost is an engine over PostgreSQL reached through a cutter, on a
// single connection, whose tools count what they run and undo; armed,
// it holds back the database's answer to a batch that carries COMMIT.
type answerLost struct {
	t      *testing.T
	px     *testkit.Cutter
	direct *pgx.Conn
	db     *DB
	e      *engine.Engine

	mu    sync.Mutex
	ran   map[string]int // executions, by input
	undid map[string]int // undos, by input
	armed bool
	skip  int         // COMMIT batches to let by, once armed
	held  chan uint32 // the backend whose answer is held
}

func newAnswerLost(t *testing.T) *answerLost {
	direct := testkit.PostgresURL(t)
	u, err := url.Parse(direct)
	if err != nil {
		t.Fatal(err)
	}
	l := &answerLost{t: t, px: testkit.NewCutter(t, u.Host), ran: map[string]int{}, undid: map[string]int{}, held: make(chan uint32, 1)}
	ctx := context.Background()
	if l.direct, err = pgx.Connect(ctx, direct); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.direct.Close(ctx) })
	u.Host = l.px.Addr()
	q := u.Query()
	q.Set("pool_max_conns", "1") // one connection, whose statements the warm-up prepares
	u.RawQuery = q.Encode()
	if l.db, err = openPostgres(ctx, u.String(), l); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.db.Close)
	run := engine.Funcs{Exec: func(_ context.Context, inv engine.Invocation) (string, error) {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.ran[inv.Input]++
		return "ok", nil
	}, Undo: func(_ context.Context, inv engine.Invocation, _ string) error {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.undid[inv.Input]++
		return nil
	}}
	fails := engine.Funcs{Exec: func(context.Context, engine.Invocation) (string, error) {
		return "", errors.New("no carrier available")
	}}
	tools := []engine.Tool{{Name: "reserveInventory", Executor: run},
		{Name: "sendWireTransfer", Reversibility: engine.Irreversible, Executor: run},
		{Name: "scheduleShipment", Executor: fails}}
	if l.e, err = engine.New(l.db, tools, engine.WithKeys(testkit.Keys(t))); err != nil {
		t.Fatal(err)
	}
	return l
}

func (l *answerLost) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	return ctx
}
func (l *answerLost) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData)     {}
func (l *answerLost) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}
func (l *answerLost) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData)     {}

// TraceBatchStart holds back the answer to the batch armed for, before
// the batch goes out.
func (l *answerLost) TraceBatchStart(ctx context.Context, c *pgx.Conn, d pgx.TraceBatchStartData) context.Context {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.armed && slices.ContainsFunc(d.Batch.QueuedQueries, func(q *pgx.QueuedQuery) bool { return q.SQL == "COMMIT" }) {
		if l.skip > 0 {
			l.skip--
			return ctx
		}
		l.armed = false
		l.px.Hold()
		l.held <- c.PgConn().PID()
	}
	return ctx
}

// arm holds back the answer to the batch that carries COMMIT after skip
// more such.
func (l *answerLost) arm(skip int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.armed, l.skip = true, skip
}

// committed waits until the backend whose answer is held has committed
// and answered, which query (on another connection) tells by returning
// true and the backend by standing idle, and returns its pid.
func (l *answerLost) committed(query string, args ...any) uint32 {
	l.t.Helper()
	var pid uint32
	select {
	case pid = <-l.held:
	case <-time.After(10 * time.Second):
		l.t.Fatal("no batch was held")
	}
	ctx := context.Background()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var kept bool
		var state string
		if err := l.direct.QueryRow(ctx, query, args...).Scan(&kept); err != nil {
			l.t.Fatal(err)
		}
		err := l.direct.QueryRow(ctx, "SELECT coalesce(state, '') FROM pg_stat_activity WHERE pid = $1", pid).Scan(&state)
		if err != nil {
			l.t.Fatal(err)
		}
		if kept && state == "idle" {
			return pid
		}
		if time.Now().After(deadline) {
			l.t.Fatalf("the held batch was not committed and answered (%s: %v, backend %s)", query, kept, state)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// terminate terminates backend pid, as an operator or a restart would,
// and lets its FATAL error through in place of the answer it had sent.
func (l *answerLost) terminate(pid uint32) {
	l.t.Helper()
	if _, err := l.direct.Exec(context.Background(), "SELECT pg_terminate_backend($1)", pid); err != nil {
		l.t.Fatal(err)
	}
	l.px.Drop()
}

// cut loses the held answer with the connection.
func (l *answerLost) cut() {
	l.px.Cut()
	l.px.Restore()
}

// grouped runs fns at once, each an engine call whose first transaction
// the store commits in one group: the commit slots are taken until all
// of them wait, and then one is let go. The returned func waits for fns.
func (l *answerLost) grouped(fns ...func()) (wait func()) {
	g := l.db.group
	g.mu.Lock()
	slots := g.slots
	g.slots = 0
	g.mu.Unlock()
	var wg sync.WaitGroup
	for _, f := range fns {
		wg.Go(f)
	}
	for {
		g.mu.Lock()
		n := len(g.waiting)
		if n == len(fns) {
			g.slots, g.busy = slots, g.busy+1 // as a transaction that just ended
		}
		g.mu.Unlock()
		if n == len(fns) {
			break
		}
		time.Sleep(time.Millisecond)
	}
	g.next()
	return wg.Wait
}

// check asserts that the tool ran once with each of inputs, and that
// the sagas' journals verify and have these phases, with nothing in
// doubt.
func (l *answerLost) check(inputs []string, journals map[string][]string) {
	l.t.Helper()
	ctx := context.Background()
	l.mu.Lock()
	for _, in := range inputs {
		if n := l.ran[in]; n != 1 {
			l.t.Errorf("the tool ran %d times with %s, want once", n, in)
		}
	}
	l.mu.Unlock()
	for saga, want := range journals {
		es, err := l.e.Journal(ctx, lostAuditor, saga)
		if err != nil {
			l.t.Fatal(err)
		}
		var got []string
		for _, en := range es {
			got = append(got, string(en.Phase))
		}
		if diff := cmp.Diff(want, got); diff != "" {
			l.t.Errorf("journal of %s (-want +got):\n%s", saga, diff)
		}
		if v, err := l.e.Verify(ctx, lostAuditor, saga); err != nil || !v.Valid {
			l.t.Errorf("Verify(%s) = %+v, %v; want valid", saga, v, err)
		}
	}
	if doubt, err := l.e.InDoubt(ctx, lostAuditor, 0); err != nil || len(doubt) != 0 {
		l.t.Errorf("InDoubt = %+v, %v; want none", doubt, err)
	}
}

// TestPostgresCommitAnswerLost loses the database's answer to a commit
// that it made, exactly then: the backend terminated once it had
// committed a group of two calls' INTENTs (the FATAL error comes in place
// of the answer); the connection cut once it had committed one call's
// INTENT, a resume's, or a compensation's claim of an undo. The commit is
// not made again as if it had not run, and no answer says "still
// running" of a call nobody runs: each request finds what it started,
// runs its tool (or undo) once and answers what it did.
func TestPostgresCommitAnswerLost(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	call := func(e *engine.Engine, saga, input string) (engine.CallResult, error) {
		return e.CallOnce(ctx, benchAgent, saga, engine.Ask{Tool: "reserveInventory", Input: input, Key: "key-" + input})
	}
	executed := func(t *testing.T, what string, r engine.CallResult, err error) {
		t.Helper()
		if err != nil || r.Outcome != engine.OutcomeExecuted || r.Result != "ok" {
			var code string
			if e, ok := errors.AsType[*engine.Error](err); ok {
				code = string(e.Code)
			}
			t.Errorf("%s whose commit's answer was lost = %+v, %v (code %q); want EXECUTED", what, r, err, code)
		}
	}
	intents := "SELECT count(*) = $2 FROM journal WHERE phase = 'INTENT' AND input = ANY($1)"

	t.Run("grouped, backend terminated", func(t *testing.T) {
		t.Parallel()
		l := newAnswerLost(t)
		for _, saga := range []string{"a", "b"} { // the engine knows both heads
			if _, err := call(l.e, saga, `{"`+saga+`":1}`); err != nil {
				t.Fatal(err)
			}
		}
		// A group of the two prepares its statements on the connection.
		warm := func(saga string) func() {
			return func() {
				if r, err := call(l.e, saga, `{"`+saga+`":2}`); err != nil || r.Outcome != engine.OutcomeExecuted {
					t.Errorf("the warm-up call in %s = %+v, %v", saga, r, err)
				}
			}
		}
		l.grouped(warm("a"), warm("b"))()
		before, _ := l.db.Grouped()

		l.arm(0)
		var ra, rb engine.CallResult
		var ea, eb error
		wait := l.grouped(func() { ra, ea = call(l.e, "a", `{"a":3}`) }, func() { rb, eb = call(l.e, "b", `{"b":3}`) })
		l.terminate(l.committed(intents, []string{`{"a":3}`, `{"b":3}`}, 2))
		wait()
		if after, _ := l.db.Grouped(); after != before+1 {
			t.Fatalf("%d groups committed, want 1: the two INTENTs were not committed together", after-before)
		}
		executed(t, "the call in a", ra, ea)
		executed(t, "the call in b", rb, eb)
		three := []string{"INTENT", "EXECUTED", "INTENT", "EXECUTED", "INTENT", "EXECUTED"}
		l.check([]string{`{"a":3}`, `{"b":3}`}, map[string][]string{"a": three, "b": three})
	})

	t.Run("alone, connection cut", func(t *testing.T) {
		t.Parallel()
		l := newAnswerLost(t)
		for _, in := range []string{`{"c":1}`, `{"c":2}`} { // the second call writes as the third will
			if _, err := call(l.e, "c", in); err != nil {
				t.Fatal(err)
			}
		}
		l.arm(0)
		done := make(chan struct{})
		var r engine.CallResult
		var err error
		go func() { r, err = call(l.e, "c", `{"c":3}`); close(done) }()
		l.committed(intents, []string{`{"c":3}`}, 1)
		l.cut()
		<-done
		executed(t, "the call", r, err)
		l.check([]string{`{"c":3}`}, map[string][]string{"c": {"INTENT", "EXECUTED", "INTENT", "EXECUTED", "INTENT", "EXECUTED"}})
	})

	t.Run("resume, connection cut", func(t *testing.T) {
		t.Parallel()
		l := newAnswerLost(t)
		gated := func(saga, in string) int64 {
			t.Helper()
			r, err := l.e.Call(ctx, benchAgent, saga, "sendWireTransfer", in)
			if err != nil || r.Outcome != engine.OutcomeAwaitingApproval {
				t.Fatalf("Call(%s, sendWireTransfer) = %+v, %v", saga, r, err)
			}
			if _, err := l.e.Approve(ctx, benchApprover, saga, r.Seq, "ok"); err != nil {
				t.Fatal(err)
			}
			return r.Seq
		}
		warm := gated("w", `{"w":1}`) // a resume's statements, prepared
		if _, err := l.e.Resume(ctx, benchAgent, "w", warm, `{"w":1}`); err != nil {
			t.Fatal(err)
		}
		seq := gated("r", `{"r":1}`)
		l.arm(0)
		done := make(chan struct{})
		var r engine.ResumeResult
		var err error
		go func() { r, err = l.e.Resume(ctx, benchAgent, "r", seq, `{"r":1}`); close(done) }()
		l.committed(intents, []string{`{"r":1}`}, 1)
		l.cut()
		<-done
		executed(t, "the resume", r.Call, err)
		l.check([]string{`{"w":1}`, `{"r":1}`}, map[string][]string{"r": {"AWAITING_APPROVAL", "APPROVED", "INTENT", "EXECUTED"}})
	})

	t.Run("undo's claim, connection cut", func(t *testing.T) {
		t.Parallel()
		l := newAnswerLost(t)
		failing := func(saga string) engine.CallResult {
			r, err := l.e.CallOnce(ctx, benchAgent, saga, engine.Ask{Tool: "scheduleShipment", Input: `{"` + saga + `":2}`, Key: saga + "-ship"})
			if err != nil || r.Outcome != engine.OutcomeFailed {
				t.Errorf("the failing call in %s = %+v, %v", saga, r, err)
			}
			return r
		}
		for _, saga := range []string{"w", "u"} {
			if _, err := call(l.e, saga, `{"`+saga+`":1}`); err != nil {
				t.Fatal(err)
			}
		}
		failing("w") // a compensation's statements, prepared
		l.arm(2)     // past the failing call's INTENT and FAILED, to the claim of the undo
		done := make(chan engine.CallResult, 1)
		go func() { done <- failing("u") }()
		l.committed("SELECT count(*) = $2 FROM calls WHERE state = 'COMPENSATING' AND input = ANY($1)", []string{`{"u":1}`}, 1)
		l.cut()
		if r := <-done; r.Status != codes.Compensated {
			t.Errorf("the failing call whose undo's claim lost its answer = %+v; want its saga COMPENSATED", r)
		}
		l.mu.Lock()
		if n := l.undid[`{"u":1}`]; n != 1 {
			t.Errorf("the step was undone %d times, want once", n)
		}
		l.mu.Unlock()
		l.check([]string{`{"u":1}`}, map[string][]string{"u": {"INTENT", "EXECUTED", "INTENT", "FAILED", "COMPENSATED"}})
	})
}
