package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	mrand "math/rand/v2"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	sagacity "github.com/sagacity-go/sagacity/client"
	"github.com/sagacity-go/sagacity/internal/testkit"
)

// TestDatabaseFaults takes PostgreSQL away from a running server: new
// connections refused, backends terminated under load, and the network cut
// while approved wires run.
func TestDatabaseFaults(t *testing.T) {
	t.Run("refused", testRefused)
	t.Run("terminated", testTerminated)
	t.Run("cut during wire", testCutDuringWire)
}

// behindProxy starts the server on a fresh schema reached through a
// cutter.
func behindProxy(t *testing.T, f *fixture) (*server, *testkit.Cutter) {
	t.Helper()
	u, err := url.Parse(testkit.PostgresURL(t))
	if err != nil {
		t.Fatal(err)
	}
	px := testkit.NewCutter(t, u.Host)
	u.Host = px.Addr()
	return f.server("sagacity", u.String()), px
}

// first drops a typed body, keeping the answer.
func first[T any](a answer, _ T) answer { return a }

func readyz(f *fixture, s *server) answer {
	return f.auditor.ask(f.ctx, s, func(ctx context.Context, api *sagacity.Client) error { return api.Ready(ctx) })
}

// testRefused: while the database refuses connections, requests that could
// do nothing answer 503 (never 500, never 404) and /readyz says so; once it
// is back, the same process serves again.
func testRefused(t *testing.T) {
	f := newFixture(t, 60*time.Second)
	srv, px := behindProxy(t, f)
	ctx, agent := f.ctx, f.initiator(0)
	approver, resumer := f.approvers.take(srv), f.agents.take(srv)

	in := `{"amount":"100","to":"alice"}`
	if a, _ := agent.call(ctx, srv, "outage-a", toolReserve, `{"sku":"LAPTOP-13","qty":1}`); !a.is(200) {
		t.Fatalf("%s; want 200", a)
	}
	a, g := agent.call(ctx, srv, "outage-a", toolWire, in)
	if !a.is(202) {
		t.Fatalf("%s; want 202", a)
	}
	if a, _ := approver.approve(ctx, srv, "outage-a", g.JournalSeq); !a.is(200) {
		t.Fatalf("%s; want 200", a)
	}
	a, gb := agent.call(ctx, srv, "outage-b", toolWire, `{"amount":"5","to":"bob"}`)
	if !a.is(202) {
		t.Fatalf("%s; want 202", a)
	}
	before := f.tools.snapshot()

	px.Cut()
	burst := []struct {
		name string
		do   func() answer
	}{
		{"call in a new saga", func() answer { return first(agent.call(ctx, srv, "outage-new", toolReserve, `{"sku":"new","qty":1}`)) }},
		{"call", func() answer { return first(agent.call(ctx, srv, "outage-a", toolReserve, `{"sku":"more","qty":1}`)) }},
		{"gated call", func() answer { return first(agent.call(ctx, srv, "outage-a", toolWire, `{"amount":"7","to":"carol"}`)) }},
		{"approve", func() answer { return first(approver.approve(ctx, srv, "outage-b", gb.JournalSeq)) }},
		{"reject", func() answer { return first(approver.reject(ctx, srv, "outage-b", gb.JournalSeq)) }},
		{"resume", func() answer { return first(resumer.resume(ctx, srv, "outage-a", g.JournalSeq, in)) }},
		{"end", func() answer { return first(agent.end(ctx, srv, "outage-a")) }},
		{"saga", func() answer { return first(f.auditor.saga(ctx, srv, "outage-a")) }},
		{"unknown saga", func() answer { return first(f.auditor.saga(ctx, srv, "outage-nobody")) }},
		{"audit", func() answer { return first(f.auditor.audit(ctx, srv, "outage-a")) }},
		{"verify", func() answer { return first(f.auditor.verify(ctx, srv, "outage-a")) }},
		{"approvals", func() answer { return first(f.auditor.approvals(ctx, srv, "outage-a")) }},
		{"in-doubt", func() answer { return first(f.auditor.inDoubt(ctx, srv, 0)) }},
	}
	got := make([]answer, len(burst))
	parallel(len(burst), len(burst), func(i int) { got[i] = burst[i].do() })
	for i, b := range burst {
		var body struct {
			Error string `json:"error"`
		}
		a := got[i]
		if !a.is(503) || json.Unmarshal([]byte(a.body), &body) != nil || body.Error == "" {
			t.Errorf("%s while the database refuses connections: %s; want 503 with a JSON error (it did nothing)", b.name, a)
		}
	}
	if a := readyz(f, srv); !a.is(503) {
		t.Errorf("%s while the database refuses connections; want 503", a)
	}
	if after := f.tools.snapshot(); fmt.Sprint(after.arrived) != fmt.Sprint(before.arrived) || fmt.Sprint(after.comps) != fmt.Sprint(before.comps) {
		t.Errorf("the tool server was called while the database was down: executions %v → %v, compensations %v → %v",
			before.arrived, after.arrived, before.comps, after.comps)
	}

	px.Restore()
	if !eventually(ctx, 10*time.Second, func() bool { return readyz(f, srv).is(200) }) {
		t.Fatalf("%s 10s after the database came back; want 200", readyz(f, srv))
	}
	if a, r := agent.call(ctx, srv, "outage-new", toolReserve, `{"sku":"new","qty":1}`); !a.is(200) || r.Outcome != "EXECUTED" {
		t.Errorf("call after the database came back: %s; want 200 EXECUTED", a)
	}
	if a, r := resumer.resume(ctx, srv, "outage-a", g.JournalSeq, in); !a.is(200) || r.Result == nil || *r.Result == "" {
		t.Errorf("resume of the approval made before the outage: %s; want 200", a)
	}
	if a, _ := approver.approve(ctx, srv, "outage-b", gb.JournalSeq); !a.is(200) {
		t.Errorf("approve of the request parked before the outage: %s; want 200", a)
	}
	if a, _ := f.auditor.saga(ctx, srv, "outage-nobody"); !a.is(404) {
		t.Errorf("unknown saga after the database came back: %s; want 404", a)
	}
	for _, id := range []string{"outage-a", "outage-b", "outage-new"} {
		if a, v := f.auditor.verify(ctx, srv, id); !a.is(200) || !v.Valid {
			t.Errorf("saga %s: %s; want 200 valid:true", id, a)
		}
	}
	if n := srv.starts(); n != 1 {
		t.Errorf("the server was started %d times, want once: it must recover by itself", n)
	}
}

// testTerminated terminates the server's PostgreSQL backends again and
// again while eight workers drive sagas: no answer is a 500, and nothing
// the client was told is lost.
func testTerminated(t *testing.T) {
	f := newFixture(t, 70*time.Second)
	direct, tagged, app := taggedPostgres(t)
	srv := f.server("sagacity", tagged)
	conn, err := pgx.Connect(f.ctx, direct)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(f.ctx)

	d := newDriver(f, srv, 8, "term")
	d.faults = true
	var stop atomic.Bool
	done := make(chan struct{})
	go func() {
		d.run(&stop)
		close(done)
	}()
	terminated := 0
	for range 15 {
		time.Sleep(100*time.Millisecond + mrand.N(100*time.Millisecond)) // load between faults
		rows, err := conn.Query(f.ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
			WHERE datname = current_database() AND pid <> pg_backend_pid() AND application_name = $1`, app)
		if err != nil {
			t.Fatal(err)
		}
		killed, err := pgx.CollectRows(rows, pgx.RowTo[bool])
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range killed {
			if k {
				terminated++
			}
		}
	}
	time.Sleep(300 * time.Millisecond) // load after the last fault
	stop.Store(true)
	<-done
	d.check(true)
	d.check(false)
	t.Logf("%d backends terminated: %s", terminated, d.statsLine())
	if terminated == 0 {
		t.Errorf("no backend with application_name=%s was terminated; the suite tested nothing", app)
	}
}

// testCutDuringWire cuts the database while approved wires (and gateway
// calls) run at the tool server, for two seconds. The target behaviour: the
// server retries writing the outcome and answers 200 once the database is
// back, or 202 IN_DOUBT when its retries run out; never 503 ("try again")
// after the tool ran. Each effect happened once, and once the database is
// back every journal verifies and every call is EXECUTED, none in doubt.
func testCutDuringWire(t *testing.T) {
	f := newFixture(t, 80*time.Second)
	srv, px := behindProxy(t, f)
	ctx := f.ctx
	const resumes, calls = 12, 4
	type job struct {
		saga, input string
		seq         int64 // the gated seq of a resume
		a           answer
		outcome     sagacity.Outcome
	}
	jobs := make([]*job, resumes+calls)
	parallel(8, len(jobs), func(i int) {
		x := &job{saga: fmt.Sprintf("cut-%d", i)}
		jobs[i] = x
		agent := f.initiator(i)
		if a, _ := agent.call(ctx, srv, x.saga, toolReserve, fmt.Sprintf(`{"sku":"cut-%d","qty":1}`, i)); !a.is(200) {
			t.Errorf("%s; want 200", a)
		}
		if i >= resumes {
			x.input = fmt.Sprintf(`{"sku":"cut-%d-slow","qty":2}`, i)
			return
		}
		x.input = fmt.Sprintf(`{"amount":"%d","to":"cut-%d"}`, 100+i, i)
		a, r := agent.call(ctx, srv, x.saga, toolWire, x.input)
		if !a.is(202) {
			t.Errorf("%s; want 202", a)
		}
		x.seq = r.JournalSeq
		if c := f.approvers.take(srv); c == nil {
			t.Errorf("no decision budget left")
		} else if a, _ := c.approve(ctx, srv, x.saga, x.seq); !a.is(200) {
			t.Errorf("%s; want 200", a)
		}
	})
	if t.Failed() {
		t.FailNow()
	}

	before := f.tools.snapshot()
	f.tools.slow.Store(int64(300 * time.Millisecond))
	var wg sync.WaitGroup
	for i, x := range jobs {
		wg.Go(func() {
			if i < resumes {
				c := f.agents.take(srv)
				if c == nil {
					t.Errorf("no decision budget left to resume %s/%d", x.saga, x.seq)
					return
				}
				var r sagacity.ResumeResult
				x.a, r = c.resume(ctx, srv, x.saga, x.seq, x.input)
				x.outcome = r.Outcome
				return
			}
			var r sagacity.CallResult
			x.a, r = f.initiator(i).call(ctx, srv, x.saga, toolReserve, x.input)
			x.outcome = r.Outcome
		})
	}
	running := func() bool {
		now := f.tools.snapshot()
		return now.arrived["/wire"]-before.arrived["/wire"] == resumes && now.arrived["/reserve"]-before.arrived["/reserve"] == calls
	}
	if !eventually(ctx, 10*time.Second, running) {
		t.Fatalf("the tool server did not receive the %d wires and %d calls within 10s: %v", resumes, calls, f.tools.snapshot().arrived)
	}
	px.Cut()
	if a, _ := f.initiator(0).call(ctx, srv, "cut-fresh", toolReserve, `{"sku":"fresh","qty":1}`); !a.is(503) {
		t.Errorf("a new call while the database is cut: %s; want 503 (it did nothing)", a)
	}
	time.Sleep(2 * time.Second) // the outage
	px.Restore()
	wg.Wait()
	f.tools.slow.Store(0)

	eff := f.tools.snapshot()
	for i, x := range jobs {
		what := fmt.Sprintf("resume of %s/%d", x.saga, x.seq)
		if i >= resumes {
			what = "call of " + toolReserve + " in " + x.saga
		}
		if !(x.a.is(200) && x.outcome == "EXECUTED") && !(x.a.is(202) && x.outcome == "IN_DOUBT") {
			t.Errorf("%s, whose tool ran while the database was cut for 2s: %s; want 200 once the outcome is written, or 202 IN_DOUBT; never 503 after the tool ran",
				what, x.a)
		}
		if keys := eff.keysFor(x.input); len(keys) != 1 || eff.execs[keys[0]] != 1 {
			t.Errorf("%s: the tool ran under keys %v (%v); want one key, executed once", what, keys, counts(eff, keys))
		}
	}

	// After recovery: every journal verifies and every call has its outcome.
	executed := func(x *job) bool {
		_, es := f.auditor.audit(ctx, srv, x.saga)
		tool := toolWire
		if x.seq == 0 {
			tool = toolReserve
		}
		in := find(es, func(e sagacity.Entry) bool { return e.Phase == "INTENT" && e.ToolName == tool && e.Input == x.input })
		return in != nil && outcome(es, in.Seq, tool, x.input) != nil && outcome(es, in.Seq, tool, x.input).Phase == "EXECUTED"
	}
	eventually(ctx, 10*time.Second, func() bool {
		for _, x := range jobs {
			if !executed(x) {
				return false
			}
		}
		return true
	})
	_, doubt := f.auditor.inDoubt(ctx, srv, 0)
	for _, x := range jobs {
		if a, v := f.auditor.verify(ctx, srv, x.saga); !a.is(200) || !v.Valid {
			t.Errorf("saga %s: %s; want 200 valid:true", x.saga, a)
		}
		if !executed(x) {
			_, es := f.auditor.audit(ctx, srv, x.saga)
			t.Errorf("saga %s, 10s after the database came back: the journal has no EXECUTED for %s; want the outcome written:\n%s", x.saga, x.input, journalText(es))
		}
		for _, c := range doubt {
			if c.SagaID == x.saga {
				t.Errorf("saga %s: in-doubt lists %+v after recovery; want nothing in doubt", x.saga, c)
			}
		}
	}
}
