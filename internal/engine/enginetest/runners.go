package enginetest

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/sagacity-go/sagacity/internal/engine"
	"github.com/sagacity-go/sagacity/internal/httptool"
	"github.com/sagacity-go/sagacity/internal/store/storetest"
	"github.com/sagacity-go/sagacity/internal/testkit"
	"github.com/sagacity-go/sagacity/internal/witness"
	"github.com/sagacity-go/sagacity/wire"
)

// testLiveRunner: an insider who writes the database makes a call that
// its process still runs look cut off, with one edit of the runners
// table. No process takes it for in doubt: the one running it knows it
// runs it, and another has seen the runner's row change, not stand
// still; so none lists it, resolves it or refuses the saga a call, and
// the tool's answer is journaled once it comes. Only a runner whose row
// another process has watched stand still for RunnerGone, on its own
// clock, has its calls in doubt to that process (never to the one
// running them).
func testLiveRunner(t *testing.T, newHarness func(*testing.T) storetest.Harness) {
	ctx := context.Background()
	v := newEnv(t, newHarness)
	// The payout provider: a real HTTP server that holds each payout
	// until the test releases it.
	arrived, release := make(chan string, 2), make(chan struct{}, 2)
	provider := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		arrived <- string(body)
		<-release
		_, _ = io.WriteString(w, "paid")
	}))
	defer provider.Close()
	payout := engine.Tool{Name: "payout", Executor: &httptool.Tool{Name: "payout", Secret: []byte("payout secret"),
		Exec: httptool.Endpoint{URL: provider.URL, Timeout: time.Minute}, Undo: &httptool.Endpoint{URL: provider.URL}}}
	tools := append(v.fx.tools(), payout)
	running, _ := v.engine(v.open(), tools...)
	dir, err := witness.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	beat, stop := context.WithCancel(ctx)
	defer stop()
	// It beats only at its start: to another process it looks gone once
	// watched for RunnerGone.
	if err := (&engine.Heartbeat{Engine: running, Replica: "host-a:/srv/a", Lineage: dir, Every: time.Hour}).Start(beat); err != nil {
		t.Fatal(err)
	}
	// Another replica, on a clock the test moves.
	var clock clock
	other, err := engine.New(v.open(), tools, engine.WithKeys(testkit.Keys(t)), engine.WithClock(clock.now))
	if err != nil {
		t.Fatal(err)
	}
	listed := func(e *engine.Engine, saga string) bool {
		t.Helper()
		calls, err := e.InDoubt(ctx, auditor, -1)
		if err != nil {
			t.Fatalf("InDoubt: %v", err)
		}
		for _, c := range calls {
			if c.SagaID == saga {
				return true
			}
		}
		return false
	}
	pay := func(saga, in string) <-chan engine.CallResult {
		done := make(chan engine.CallResult, 1)
		go func() {
			r, err := running.CallOnce(ctx, agent, saga, engine.Ask{Tool: "payout", Input: in, Key: saga + "-1"})
			if err != nil {
				t.Errorf("the payout of %s: %v", saga, err)
			}
			done <- r
		}()
		if got := <-arrived; got != in {
			t.Fatalf("the provider got %q, want %q", got, in)
		}
		return done
	}

	in := `{"to":"alice","cents":100}`
	done := pay("forged", in)
	if listed(other, "forged") {
		t.Errorf("InDoubt on another process, at its first look: the running payout is listed")
	}
	// The insider's edits: the runner seen a day ago, then not at all.
	for _, edit := range []string{"UPDATE runners SET seen_at = $1", "DELETE FROM runners WHERE seen_at = $1"} {
		v.h.Exec(t, edit, epoch.Add(-24*time.Hour))
		for name, e := range map[string]*engine.Engine{"the process running it": running, "another process": other} {
			if listed(e, "forged") {
				t.Errorf("after %q, InDoubt on %s lists the running payout", edit, name)
			}
			_, err := e.Resolve(ctx, approver, "forged", 1, false, "", "the provider shows no payout")
			testkit.WantKind(t, "Resolve on "+name+" after "+edit, err, engine.Conflict)
			wantCode(t, "the payout again on "+name+" after "+edit,
				second(e.CallOnce(ctx, agent, "forged", engine.Ask{Tool: "payout", Input: in, Key: "forged-1"})),
				engine.Conflict, wire.CodeInProgress)
		}
	}
	if r, err := other.Call(ctx, agent, "forged", "createOrder", "{}"); err != nil || r.Outcome != engine.OutcomeExecuted {
		t.Errorf("another call in the saga, on another process = %+v, %v; want it executed", r, err)
	}
	release <- struct{}{}
	if r := <-done; r.Outcome != engine.OutcomeExecuted || r.Result != "paid" {
		t.Errorf("the payout once the provider answers = %+v; want it executed", r)
	}
	want := []string{"payout INTENT", "createOrder INTENT", "createOrder EXECUTED", "payout EXECUTED"}
	if diff := cmp.Diff(want, v.phases("forged")); diff != "" {
		t.Errorf("journal (-want +got):\n%s", diff)
	}
	if got := v.verify("forged"); !got.Valid {
		t.Errorf("Verify(forged) = %+v", got)
	}

	// A runner whose row another process watches stand still for
	// RunnerGone: its calls are in doubt to that process, not before, and
	// never to the one running them.
	done = pay("silent", in)
	if listed(other, "silent") {
		t.Errorf("InDoubt on another process, at a look: the payout is listed")
	}
	clock.n.Add(int64((engine.RunnerGone - time.Second) / time.Millisecond))
	if listed(other, "silent") {
		t.Errorf("InDoubt on another process, watching for under RunnerGone: the payout is listed")
	}
	clock.n.Add(int64(2 * time.Second / time.Millisecond))
	if !listed(other, "silent") {
		t.Errorf("InDoubt on another process, watching RunnerGone without a beat: the payout is not listed")
	}
	if listed(running, "silent") {
		t.Errorf("InDoubt on the process running it lists the payout")
	}
	_, err = running.Resolve(ctx, approver, "silent", 1, false, "", "the provider shows no payout")
	testkit.WantKind(t, "Resolve on the process running it", err, engine.Conflict)
	release <- struct{}{}
	if r := <-done; r.Outcome != engine.OutcomeExecuted {
		t.Errorf("the payout once the provider answers = %+v; want it executed", r)
	}
}

// heldDoubts is a store whose InDoubt, once told to, hands what it read
// to the test and returns it only when the test says so.
type heldDoubts struct {
	storetest.DB
	read chan []engine.Call
	free chan struct{}
}

func (h *heldDoubts) InDoubt(ctx context.Context, sagaID string, before time.Time, gone []string) ([]engine.Call, error) {
	calls, err := h.DB.InDoubt(ctx, sagaID, before, gone)
	if h.read != nil {
		h.read <- calls
		<-h.free
	}
	return calls, err
}

// testReadAsItEnds: a call that its process runs is in doubt to it only
// once it knows nothing runs it. A call whose execution ends, its outcome
// journaled, while the process reads which calls are unsettled, is read
// still running; the process, which no longer runs it, does not list it
// in doubt for that.
func testReadAsItEnds(t *testing.T, v *env) {
	ctx := context.Background()
	started, release := make(chan struct{}), make(chan struct{})
	slow := engine.Tool{Name: "slowPayout", Executor: engine.Funcs{Exec: func(context.Context, engine.Invocation) (string, error) {
		close(started)
		<-release
		return "paid", nil
	}}}
	db := &heldDoubts{DB: v.open()}
	e, _ := v.engine(db, append(v.fx.tools(), slow)...)
	h := &engine.Heartbeat{Engine: e, Every: time.Hour}
	if err := h.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = h.Stop(ctx) }()
	ran := make(chan engine.CallResult, 1)
	go func() {
		r, err := e.CallOnce(ctx, agent, "payout", engine.Ask{Tool: "slowPayout", Input: "{}", Key: "payout-1"})
		if err != nil {
			t.Errorf("the payout: %v", err)
		}
		ran <- r
	}()
	<-started

	db.read, db.free = make(chan []engine.Call), make(chan struct{})
	listed := make(chan []engine.Call, 1)
	go func() {
		calls, err := e.InDoubt(ctx, auditor, -1)
		if err != nil {
			t.Errorf("InDoubt: %v", err)
		}
		listed <- calls
	}()
	if read := <-db.read; len(read) != 1 || read[0].ToolName != "slowPayout" {
		t.Errorf("the store's InDoubt, given this process's runner, read %+v; want the running payout", read)
	}
	close(release)
	if r := <-ran; r.Outcome != engine.OutcomeExecuted {
		t.Errorf("the payout = %+v; want it executed", r)
	}
	close(db.free)
	if calls := <-listed; len(calls) != 0 {
		t.Errorf("InDoubt read as the payout ended = %+v; want none: its process ran it", calls)
	}
}

// testRestart closes the store and opens it again: sagas, journals and
// pending approvals survive and stay resumable.
func testRestart(t *testing.T, newHarness func(*testing.T) storetest.Harness) {
	ctx := context.Background()
	v := newEnv(t, newHarness)
	seq := v.gate("pending")
	v.approve("pending", seq)
	v.gate("unapproved")
	v.call("done", "createOrder", "{}")
	if _, err := v.e.End(ctx, agent, "done"); err != nil {
		t.Fatal(err)
	}
	beforeSagas, _ := v.e.Sagas(ctx, auditor, engine.SagaFilter{})
	beforeJournal := v.journal("pending")
	beforeReqs, _ := v.e.Approvals(ctx, approver, "")
	v.db.Close()

	v.db = v.open()
	v.e, v.log = v.engine(v.db)
	afterSagas, _ := v.e.Sagas(ctx, auditor, engine.SagaFilter{})
	afterReqs, _ := v.e.Approvals(ctx, approver, "")
	if len(beforeSagas) != 3 || len(beforeReqs) != 2 {
		t.Fatalf("before restart: %d sagas, %d requests; want 3 and 2", len(beforeSagas), len(beforeReqs))
	}
	for _, d := range []string{cmp.Diff(beforeSagas, afterSagas), cmp.Diff(beforeJournal, v.journal("pending")), cmp.Diff(beforeReqs, afterReqs)} {
		if d != "" {
			t.Errorf("state changed across restart (-before +after):\n%s", d)
		}
	}
	res, err := v.e.Resume(ctx, approver, "pending", seq, transfer)
	if err != nil || res.Result != "transfer-ok" {
		t.Errorf("Resume after restart = %+v, %v; want executed", res, err)
	}
	if got := v.verify("pending"); !got.Valid {
		t.Errorf("Verify after restart = %+v", got)
	}
}

// testInDoubt leaves a call between INTENT and its outcome, as a crash
// would, and expects it listed, never re-executed.
func testInDoubt(t *testing.T, newHarness func(*testing.T) storetest.Harness) {
	ctx := context.Background()
	v := newEnv(t, newHarness)
	started, release := make(chan struct{}), make(chan struct{})
	doomed := v.h.Open(t)
	hang := engine.Tool{Name: "hang", Executor: engine.Funcs{Exec: func(context.Context, engine.Invocation) (string, error) {
		close(started)
		<-release
		return "too late", nil
	}}}
	e2, err := engine.New(doomed, []engine.Tool{hang}, engine.WithKeys(testkit.Keys(t)), engine.WithClock(clk.now), engine.WithOutcomeRetry(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan engine.CallResult, 1)
	go func() {
		r, err := e2.Call(ctx, agent, "crash", "hang", `{"n":1}`)
		if err != nil {
			t.Errorf("Call whose store went away: %v, want no error: the outcome is IN_DOUBT", err)
		}
		done <- r
	}()
	<-started
	calls, err := v.e.InDoubt(ctx, auditor, 0)
	if err != nil || len(calls) != 1 || calls[0].SagaID != "crash" || calls[0].Seq != 1 || calls[0].State != engine.CallRunning {
		t.Fatalf("InDoubt() while running = %+v, %v; want the hanging call", calls, err)
	}
	doomed.Close() // the process dies before it can journal the outcome
	close(release)
	if r := <-done; r.Outcome != engine.OutcomeInDoubt || r.Status != wire.Running {
		t.Errorf("Call whose store went away = %+v, want outcome IN_DOUBT and the saga's status as its INTENT left it, RUNNING", r)
	}

	calls, err = v.e.InDoubt(ctx, auditor, 0)
	if err != nil || len(calls) != 1 || !calls[0].Unsettled() {
		t.Fatalf("InDoubt() after the crash = %+v, %v; want the call", calls, err)
	}
	if old, _ := v.e.InDoubt(ctx, auditor, time.Hour); len(old) != 0 {
		t.Errorf("InDoubt(older than an hour) = %v, want none", old)
	}
	if got := v.phases("crash"); !cmp.Equal(got, []string{"hang INTENT"}) {
		t.Errorf("journal = %v, want only the INTENT", got)
	}
	if got := v.verify("crash"); !got.Valid {
		t.Errorf("Verify = %+v, want valid", got)
	}
	if st := v.status("crash"); st != wire.Running {
		t.Errorf("status = %s, want RUNNING: the call is in doubt", st)
	}

	// Which sagas have a call in doubt is the engine's to say, by its own
	// window and clock: a cut-off the caller sets is not taken.
	v.call("calm", "reserveInventory", `{"item":"pen"}`)
	ids := func(e *engine.Engine, f engine.SagaFilter) []string {
		t.Helper()
		f.Limit = 20
		sagas, err := e.Sagas(ctx, auditor, f)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, s := range sagas {
			out = append(out, s.ID)
		}
		slices.Sort(out)
		return out
	}
	later := time.Now().Add(time.Hour)
	if got := ids(v.e, engine.SagaFilter{InDoubt: true, InDoubtBefore: later}); len(got) != 0 {
		t.Errorf("sagas in doubt within the 10-minute window, the caller's cut-off an hour ahead = %v; want none", got)
	}
	if got := ids(v.e, engine.SagaFilter{InDoubtBefore: later}); !slices.Equal(got, []string{"calm", "crash"}) {
		t.Errorf("sagas with only the caller's cut-off set = %v; want every saga, the cut-off not taken", got)
	}
	short, err := engine.New(v.db, v.fx.tools(), engine.WithKeys(testkit.Keys(t)), engine.WithClock(clk.now), engine.WithInDoubtAfter(time.Nanosecond))
	if err != nil {
		t.Fatal(err)
	}
	if got := ids(short, engine.SagaFilter{InDoubt: true}); !slices.Equal(got, []string{"crash"}) {
		t.Errorf("sagas in doubt by a window of 1ns = %v; want the crashed call's", got)
	}
}
