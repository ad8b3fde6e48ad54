package store

import (
	"context"
	"crypto/rand"
	"errors"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/sagacity-go/sagacity/internal/engine"
	"github.com/sagacity-go/sagacity/internal/testkit"
	codes "github.com/sagacity-go/sagacity/wire" // the package's tests declare a const wire
)

// outage is an engine over PostgreSQL reached through a cutter, with a
// tool that cuts the line as soon as it has done its work: the effect has
// happened and the database is gone before the outcome can be journaled.
type outage struct {
	px       *testkit.Cutter
	db       *DB
	e        *engine.Engine
	executed atomic.Int64
}

func newOutage(t *testing.T, retry time.Duration) *outage {
	direct := testkit.PostgresURL(t)
	u, err := url.Parse(direct)
	if err != nil {
		t.Fatal(err)
	}
	o := &outage{px: testkit.NewCutter(t, u.Host)}
	u.Host = o.px.Addr()
	if o.db, err = Open(context.Background(), u.String()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(o.db.Close)
	tools := []engine.Tool{
		{Name: "ok", Executor: engine.Funcs{Exec: func(context.Context, engine.Invocation) (string, error) { return "fine", nil }}},
		{Name: "cutsTheLine", Executor: engine.Funcs{Exec: func(context.Context, engine.Invocation) (string, error) {
			o.executed.Add(1)
			o.px.Cut()
			return "done", nil
		}}},
	}
	if o.e, err = engine.New(o.db, tools, engine.WithKeys(testkit.Keys(t)), engine.WithOutcomeRetry(retry)); err != nil {
		t.Fatal(err)
	}
	if _, err := o.e.Call(context.Background(), outageAgent, "s", "ok", "{}"); err != nil {
		t.Fatal(err)
	}
	return o
}

var outageAgent = engine.Principal{ID: "agent", Roles: engine.Roles}

func (o *outage) phases(t *testing.T) []string {
	t.Helper()
	es, err := o.e.Journal(context.Background(), outageAgent, "s")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, en := range es {
		got = append(got, en.ToolName+" "+string(en.Phase))
	}
	return got
}

// TestPostgresOutageShort cuts the database off right after a tool ran and
// brings it back a second later: the engine keeps trying to journal the
// outcome, and records it once the database is back. Nobody is told to
// retry a call that happened.
func TestPostgresOutageShort(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	o := newOutage(t, 30*time.Second)
	back := time.AfterFunc(time.Second, o.px.Restore)
	defer back.Stop()
	r, err := o.e.Call(ctx, outageAgent, "s", "cutsTheLine", `{"n":1}`)
	if err != nil || r.Outcome != engine.OutcomeExecuted || r.Result != "done" || o.executed.Load() != 1 {
		t.Fatalf("Call across a short outage = %+v, %v, executed %d; want EXECUTED once", r, err, o.executed.Load())
	}
	want := []string{"ok INTENT", "ok EXECUTED", "cutsTheLine INTENT", "cutsTheLine EXECUTED"}
	if diff := cmp.Diff(want, o.phases(t)); diff != "" {
		t.Errorf("journal after the outage (-want +got):\n%s", diff)
	}
	if v, _ := o.e.Verify(ctx, outageAgent, "s"); !v.Valid {
		t.Errorf("Verify after the outage = %+v, want valid", v)
	}
	if doubt, err := o.e.InDoubt(ctx, outageAgent, 0); err != nil || len(doubt) != 0 {
		t.Errorf("InDoubt = %+v, %v; want none: the outcome was written", doubt, err)
	}
}

// TestPostgresOutageLong cuts the database off in the middle of a call for
// longer than the engine keeps trying: the call is reported IN_DOUBT (not
// "unavailable, try again"), nothing half-written is left, the call is
// listed in doubt rather than lost, and the engine works again once the
// database is back.
func TestPostgresOutageLong(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	o := newOutage(t, 300*time.Millisecond)
	r, err := o.e.Call(ctx, outageAgent, "s", "cutsTheLine", `{"n":1}`)
	if err != nil || r.Outcome != engine.OutcomeInDoubt || !strings.Contains(r.Error, "do not retry") || o.executed.Load() != 1 {
		t.Fatalf("Call losing the database after the tool ran = %+v, %v, executed %d; want IN_DOUBT after one execution",
			r, err, o.executed.Load())
	}
	_, err = o.e.Call(ctx, outageAgent, "s", "ok", "{}")
	if !engine.IsKind(err, engine.Unavailable) {
		t.Errorf("Call while the database is down: %v, want Unavailable", err)
	}
	if err := o.db.Ping(ctx); !engine.IsKind(err, engine.Unavailable) {
		t.Errorf("Ping while the database is down: %v, want Unavailable", err)
	}

	o.px.Restore()
	want := []string{"ok INTENT", "ok EXECUTED", "cutsTheLine INTENT"}
	if diff := cmp.Diff(want, o.phases(t)); diff != "" {
		t.Errorf("journal after the outage (-want +got):\n%s", diff)
	}
	if v, _ := o.e.Verify(ctx, outageAgent, "s"); !v.Valid {
		t.Errorf("Verify after the outage = %+v, want valid: no half-written step", v)
	}
	doubt, err := o.e.InDoubt(ctx, outageAgent, 0)
	if err != nil || len(doubt) != 1 || doubt[0].ToolName != "cutsTheLine" {
		t.Errorf("InDoubt = %+v, %v; want the cut call", doubt, err)
	}
	if r, err := o.e.Call(ctx, outageAgent, "s", "ok", "{}"); err != nil || r.Seq != 4 {
		t.Errorf("Call after the database came back = %+v, %v; want executed at seq 4", r, err)
	}
}

// TestPostgresOwnCallInDoubt cuts the database off after a tool ran, for
// longer than the engine keeps trying to journal its outcome, on a
// process whose runner lives: the call is in doubt to that process at
// once, since it knows that nothing runs it. Sent again under its key it
// answers IN_DOUBT, never "still running"; it is listed in doubt within
// the in-doubt window; and its saga takes no other call until a person
// resolves it.
func TestPostgresOwnCallInDoubt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	o := newOutage(t, 300*time.Millisecond)
	h := &engine.Heartbeat{Engine: o.e, Every: time.Hour}
	if err := h.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = h.Stop(ctx) }()
	ask := engine.Ask{Tool: "cutsTheLine", Input: `{"n":1}`, Key: "cut-1"}
	if r, err := o.e.CallOnce(ctx, outageAgent, "s", ask); err != nil || r.Outcome != engine.OutcomeInDoubt {
		t.Fatalf("CallOnce losing the database after the tool ran = %+v, %v; want IN_DOUBT", r, err)
	}
	o.px.Restore()

	if r, err := o.e.CallOnce(ctx, outageAgent, "s", ask); err != nil || r.Outcome != engine.OutcomeInDoubt || r.Seq != 3 {
		t.Errorf("the call again under its key = %+v, %v; want IN_DOUBT at seq 3", r, err)
	}
	if calls, err := o.e.InDoubt(ctx, outageAgent, -1); err != nil || len(calls) != 1 || calls[0].Seq != 3 {
		t.Errorf("InDoubt within the in-doubt window = %+v, %v; want the call at seq 3", calls, err)
	}
	_, err := o.e.Call(ctx, outageAgent, "s", "ok", "{}")
	if e, ok := errors.AsType[*engine.Error](err); !ok || e.Kind != engine.Conflict || e.Code != codes.CodeInDoubt {
		t.Errorf("another call in the saga: %v; want Conflict %s", err, codes.CodeInDoubt)
	}
	if n := o.executed.Load(); n != 1 {
		t.Errorf("the tool ran %d times, want once", n)
	}
}

// TestPostgresDropped drops the database under a running store, and then
// points a store at a role that does not exist: whatever PostgreSQL says
// while connecting, the store reports it Unavailable (503), never an
// internal error (500).
func TestPostgresDropped(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	base := testkit.PostgresURL(t)
	name := "sgc_dropped_" + strings.ToLower(rand.Text()[:12])
	testkit.Exec(t, base, "CREATE DATABASE "+name)
	t.Cleanup(func() { testkit.Exec(t, base, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)") })
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	u.Path, u.RawQuery = "/"+name, ""
	db, err := Open(ctx, u.String())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Sagas(ctx, engine.SagaFilter{Limit: 1}); err != nil {
		t.Fatal(err)
	}
	testkit.Exec(t, base, "DROP DATABASE "+name+" WITH (FORCE)")
	for range 2 { // the first call may meet a connection the drop cut
		_, err = db.Sagas(ctx, engine.SagaFilter{Limit: 1})
	}
	if !engine.IsKind(err, engine.Unavailable) {
		t.Errorf("Sagas on a dropped database: %v (kind %v), want Unavailable", err, engine.KindOf(err))
	}
	if err := db.Ping(ctx); !engine.IsKind(err, engine.Unavailable) {
		t.Errorf("Ping on a dropped database: %v, want Unavailable", err)
	}

	u.Path, u.User = "/test", url.User("no_such_role_"+name)
	if _, err := Open(ctx, u.String()); !engine.IsKind(err, engine.Unavailable) {
		t.Errorf("Open as a role that does not exist: %v (kind %v), want Unavailable", err, engine.KindOf(err))
	}
}
