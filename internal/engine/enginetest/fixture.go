// Package enginetest holds the engine's scenarios: each drives a real
// engine, its tools, global log and passkeys, over a fresh database of the
// store under test (storetest.Harness), so it checks the engine's rules
// (the approval gate, compensation, exactly-once resume, tamper evidence)
// on each database, not a mock. internal/engine runs them on SQLite for a
// quick loop, internal/store on PostgreSQL.
package enginetest

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sagacity-go/sagacity/internal/engine"
	"github.com/sagacity-go/sagacity/internal/passkey"
	"github.com/sagacity-go/sagacity/internal/store/storetest"
	"github.com/sagacity-go/sagacity/internal/testkit"
	"github.com/sagacity-go/sagacity/internal/tlog"
	"github.com/sagacity-go/sagacity/internal/witness"
)

// Principals used across the suite.
var (
	agent      = engine.Principal{ID: "agent-1", Auth: "token", Roles: []engine.Role{engine.RoleAgent}}
	otherAgent = engine.Principal{ID: "agent-2", Auth: "token", Roles: []engine.Role{engine.RoleAgent}}
	approver   = engine.Principal{ID: "manager@company.com", Auth: "oidc", Roles: []engine.Role{engine.RoleApprover}}
	auditor    = engine.Principal{ID: "auditor@company.com", Auth: "oidc", Roles: []engine.Role{engine.RoleAuditor}}
)

const transfer = `{"amount":"100","to":"alice"}`

// effects records what the fixture's tools did, in order.
type effects struct {
	mu       sync.Mutex
	log      []string
	transfer atomic.Int64 // executions of sendWireTransfer
}

func (f *effects) add(s string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.log = append(f.log, s)
}

// Log returns what happened so far.
func (f *effects) Log() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.log)
}

// count counts log lines equal to s.
func (f *effects) count(s string) int {
	n := 0
	for _, l := range f.Log() {
		if l == s {
			n++
		}
	}
	return n
}

// tools returns the fixture's tools: the seed's reserveInventory and
// sendWireTransfer, an order and a shipment step (the shipment fails), a
// step whose undo fails, a tool that panics, and a wire transfer whose
// gateway is down.
func (f *effects) tools() []engine.Tool {
	ok := func(result string) func(context.Context, engine.Invocation) (string, error) {
		return func(_ context.Context, inv engine.Invocation) (string, error) {
			f.add("exec " + inv.Tool + " " + inv.Input)
			return result, nil
		}
	}
	undo := func(_ context.Context, inv engine.Invocation, result string) error {
		f.add("undo " + inv.Tool + " " + result)
		return nil
	}
	fail := func(msg string) func(context.Context, engine.Invocation) (string, error) {
		return func(_ context.Context, inv engine.Invocation) (string, error) {
			f.add("exec " + inv.Tool + " " + inv.Input)
			return "", errors.New(msg)
		}
	}
	return []engine.Tool{
		{Name: "reserveInventory", Executor: engine.Funcs{Exec: ok("reserved"), Undo: undo}},
		{Name: "createOrder", Reversibility: engine.Reversible, Executor: engine.Funcs{Exec: ok("order-1"), Undo: undo}},
		{Name: "scheduleShipment", Executor: engine.Funcs{Exec: fail("no carrier available"), Undo: undo}},
		{Name: "chargeCard", Executor: engine.Funcs{Exec: ok("charged"), Undo: func(_ context.Context, inv engine.Invocation, _ string) error {
			f.add("undo " + inv.Tool + " failed")
			return errors.New("card processor down")
		}}},
		{Name: "explode", Executor: engine.Funcs{Exec: func(context.Context, engine.Invocation) (string, error) { panic("boom") }, Undo: undo}},
		{Name: "sendWireTransfer", Reversibility: engine.Irreversible, Executor: engine.Funcs{
			Exec: func(_ context.Context, inv engine.Invocation) (string, error) {
				f.transfer.Add(1)
				f.add("exec " + inv.Tool + " " + inv.Input)
				return "transfer-ok", nil
			}}},
		{Name: "wireViaDownGateway", Reversibility: engine.Irreversible, Executor: engine.Funcs{Exec: fail("payment gateway unreachable")}},
		{Name: "payTyped", Reversibility: engine.Irreversible, Executor: engine.Funcs{Exec: ok("paid")},
			Description: "pays an amount, in whole cents, to a named account",
			InputSchema: []byte(`{"type":"object","properties":{"cents":{"type":"integer","minimum":1},"to":{"type":"string"}},` +
				`"required":["cents","to"],"additionalProperties":false}`)},
	}
}

// clock is a deterministic clock that moves 1ms at every reading.
type clock struct{ n atomic.Int64 }

var epoch = time.Date(2026, 8, 7, 9, 33, 15, 686364000, time.UTC)

func (c *clock) now() time.Time { return epoch.Add(time.Duration(c.n.Add(1)) * time.Millisecond) }

// env is one test's engine over a fresh database.
type env struct {
	t   *testing.T
	h   storetest.Harness
	db  storetest.DB
	e   *engine.Engine
	log *tlog.Log // e's global log
	fx  *effects
	w   *witness.Dir // the checkpoints, outside the database
	// opts are the engine's options besides its keys, clock and log.
	opts []engine.Option
}

func newEnv(t *testing.T, newHarness func(t *testing.T) storetest.Harness) *env {
	h := newHarness(t)
	w, err := witness.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	v := &env{t: t, h: h, fx: &effects{}, w: w}
	v.db = v.open()
	v.e, v.log = v.engine(v.db)
	return v
}

// open opens a handle closed at the end of the test.
func (v *env) open() storetest.DB {
	db := v.h.Open(v.t)
	v.t.Cleanup(db.Close)
	return db
}

var clk clock

// rp is the relying party of the suite's passkeys, on the page origin
// (the software authenticators' origin).
var rp, _ = passkey.New(origin)

const origin = "http://localhost:8080"

// engine makes an engine over db, as a server starting would, with its
// global log; the log's key is recorded in the database the first time.
func (v *env) engine(db storetest.DB, tools ...engine.Tool) (*engine.Engine, *tlog.Log) {
	e, l := v.process(db, tools...)
	if err := l.Claim(context.Background()); err != nil {
		v.t.Fatal(err)
	}
	return e, l
}

// process is engine without the claim of the key: a server restarted on
// a database whatever it now records.
func (v *env) process(db storetest.DB, tools ...engine.Tool) (*engine.Engine, *tlog.Log) {
	if tools == nil {
		tools = v.fx.tools()
	}
	// Checkpoints are signed when a test sequences the log, never by time.
	l := tlog.New(db, v.w, testkit.Keys(v.t), tlog.Options{Every: 1, Interval: 24 * time.Hour, Now: clk.now})
	e, err := engine.New(db, tools, append([]engine.Option{engine.WithKeys(testkit.Keys(v.t)), engine.WithClock(clk.now),
		engine.WithLog(l), engine.WithPasskeys(rp, passkey.Check)}, v.opts...)...)
	if err != nil {
		v.t.Fatal(err)
	}
	return e, l
}

func (v *env) call(saga, tool, input string) engine.CallResult {
	v.t.Helper()
	r, err := v.e.Call(context.Background(), agent, saga, tool, input)
	if err != nil {
		v.t.Fatalf("Call(%s, %s, %s): %v", saga, tool, input, err)
	}
	return r
}

// gate runs the seed's scenario up to the gate: reserveInventory executed,
// sendWireTransfer gated. It returns the seq to approve.
func (v *env) gate(saga string) int64 {
	v.t.Helper()
	v.call(saga, "reserveInventory", `{"item":"laptop"}`)
	r := v.call(saga, "sendWireTransfer", transfer)
	if r.Outcome != engine.OutcomeAwaitingApproval {
		v.t.Fatalf("Call(sendWireTransfer) outcome = %s, want AWAITING_APPROVAL", r.Outcome)
	}
	return r.Seq
}

func (v *env) approve(saga string, seq int64) {
	v.t.Helper()
	if _, err := v.e.Approve(context.Background(), approver, saga, seq, ""); err != nil {
		v.t.Fatalf("Approve(%s, %d): %v", saga, seq, err)
	}
}

func (v *env) journal(saga string) []engine.Entry {
	v.t.Helper()
	es, err := v.e.Journal(context.Background(), auditor, saga)
	if err != nil {
		v.t.Fatalf("Journal(%s): %v", saga, err)
	}
	return es
}

// phases renders a journal as "tool PHASE" lines.
func (v *env) phases(saga string) []string {
	var out []string
	for _, e := range v.journal(saga) {
		out = append(out, e.ToolName+" "+string(e.Phase))
	}
	return out
}

func (v *env) status(saga string) engine.Status {
	v.t.Helper()
	s, err := v.e.Lookup(context.Background(), auditor, saga)
	if err != nil {
		v.t.Fatalf("Lookup(%s): %v", saga, err)
	}
	return s.Status
}

func (v *env) pending(saga string) int {
	v.t.Helper()
	rs, err := v.e.Approvals(context.Background(), approver, saga)
	if err != nil {
		v.t.Fatalf("Approvals(%s): %v", saga, err)
	}
	return len(rs)
}

func (v *env) verify(saga string) engine.Verification {
	v.t.Helper()
	r, err := v.e.Verify(context.Background(), auditor, saga)
	if err != nil {
		v.t.Fatalf("Verify(%s): %v", saga, err)
	}
	return r
}

func (v *env) review(saga string, seq int64) engine.Review {
	v.t.Helper()
	r, err := v.e.Review(context.Background(), auditor, saga, seq)
	if err != nil {
		v.t.Fatalf("Review(%s, %d): %v", saga, seq, err)
	}
	return r
}
