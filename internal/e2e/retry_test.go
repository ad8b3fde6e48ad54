package e2e

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	sagacity "github.com/sagacity-go/sagacity/client"
	"github.com/sagacity-go/sagacity/internal/testkit"
)

// retryRounds is how many times each store's server is killed under a
// call that its agent then sends again.
const retryRounds = 20

// TestRetryAfterKill is the agent's side of exactly once. Each round, a
// slow call is cut off by kill -9 while its tool runs; the agent (the Go
// client, as it does by default) sends it again under its key while the
// server is down and once it is back. The tool ran once; the retry
// answers IN_DOUBT for the call it made; the in-doubt listing has it at
// once, under the key the tool was handed; the key with other bytes is
// 422; the saga takes no other call until a person resolves it. Then the
// answer to a call is lost on its way back (the load balancer in front
// drops it): the retry answers the first call's outcome, and the tool
// ran once.
func TestRetryAfterKill(t *testing.T) {
	t.Run("postgres", func(t *testing.T) {
		dbURL, settle := killablePostgres(t)
		retryAgainAndAgain(t, "postgres", dbURL, settle)
	})
	t.Run("sqlite", func(t *testing.T) {
		retryAgainAndAgain(t, "sqlite", testkit.SQLiteURL(t), func(*fixture) {})
	})
}

func retryAgainAndAgain(t *testing.T, name, dbURL string, settle func(*fixture)) {
	start := time.Now()
	f := newFixture(t, 80*time.Second)
	srv := f.server("sagacity", dbURL)
	lb := newBalancer(t, srv)
	ctx := f.ctx
	for round := range retryRounds {
		agent := f.initiator(round)
		saga := fmt.Sprintf("retry-%s-%d", name, round)
		in := fmt.Sprintf(`{"sku":"%s","qty":1}`, saga)
		callKey := "payout-" + strconv.Itoa(round)

		// The call hangs in its tool, and the server is killed.
		f.tools.slow.Store(int64(5 * time.Second))
		type result struct {
			a answer
			r sagacity.CallResult
		}
		done := make(chan result, 1)
		go func() {
			a, r := agent.callWithKey(ctx, lb, 40*time.Second, saga, toolReserve, in, callKey)
			done <- result{a, r}
		}()
		if !eventually(ctx, 10*time.Second, func() bool { return len(f.tools.snapshot().keysFor(in)) > 0 }) {
			t.Fatalf("round %d: the slow call never reached its tool", round)
		}
		srv.kill()
		f.tools.slow.Store(0)
		f.tools.quiesce(ctx, t)
		settle(f)
		srv.start()
		got := <-done
		toolKey := key(saga, 1)
		if !got.a.is(202) || got.r.Outcome != sagacity.InDoubt || got.r.JournalSeq != 1 {
			t.Errorf("round %d: the call sent again after the restart: %s; want 202 IN_DOUBT for its seq 1", round, got.a)
		}
		eff := f.tools.snapshot()
		if keys := eff.keysFor(in); len(keys) != 1 || keys[0] != toolKey || eff.execs[toolKey] != 1 {
			t.Errorf("round %d: the tool was handed %v (%d executions); want it run once, under %s", round, keys, eff.execs[toolKey], toolKey)
		}
		a, calls := f.auditor.inDoubt(ctx, srv, -1)
		listed := false
		for _, c := range calls {
			listed = listed || (c.SagaID == saga && c.JournalSeq == 1 && c.IdempotencyKey == toolKey)
		}
		if !a.is(200) || !listed {
			t.Errorf("round %d: in-doubt with its default window, at once after the restart: %s; want %s/1 under key %s", round, a, saga, toolKey)
		}
		if a, _ := agent.callWithKey(ctx, srv, -1, saga, toolReserve, strings.Replace(in, `"qty":1`, `"qty":2`, 1), callKey); !a.is(422) ||
			!strings.Contains(a.body, `"code":"KEY_REUSED"`) || !strings.Contains(a.body, `"journalSeq":1`) {
			t.Errorf("round %d: the key with other bytes: %s; want 422 KEY_REUSED naming seq 1", round, a)
		}
		if a, _ := agent.call(ctx, srv, saga, toolReserve, in+" "); !a.is(409) || !strings.Contains(a.body, `"code":"IN_DOUBT"`) {
			t.Errorf("round %d: a new call while one is in doubt: %s; want 409 IN_DOUBT", round, a)
		}
		approver := f.approvers.take(srv)
		if a, s := approver.resolve(ctx, srv, saga, 1, true, "the warehouse shows it reserved"); !a.is(200) || s.Status != sagacity.Running {
			t.Errorf("round %d: resolve: %s; want 200 RUNNING", round, a)
		}
		if a, r := agent.callWithKey(ctx, lb, 0, saga, toolReserve, in, callKey); !a.is(200) || r.Outcome != sagacity.Executed || r.JournalSeq != 1 {
			t.Errorf("round %d: the call again, once resolved: %s; want its resolution, EXECUTED at seq 1", round, a)
		}

		// The answer is lost on its way back: the retry answers the first
		// call's outcome.
		lost := fmt.Sprintf(`{"sku":"%s-lost","qty":1}`, saga)
		lostKey := "lost-" + strconv.Itoa(round)
		lb.drop(lostKey)
		a, r := agent.callWithKey(ctx, lb, 20*time.Second, saga, toolReserve, lost, lostKey)
		want := `{"done":"reserve","key":"` + key(saga, 3) + `"}`
		if !a.is(200) || r.Outcome != sagacity.Executed || r.JournalSeq != 3 || r.Result == nil || *r.Result != want {
			t.Errorf("round %d: a call whose answer was lost, sent again: %s; want 200 EXECUTED at seq 3 with %s", round, a, want)
		}
		if n := lb.dropped(lostKey); n != 1 {
			t.Errorf("round %d: the balancer dropped %d answers; want the first", round, n)
		}
		if eff := f.tools.snapshot(); eff.execs[key(saga, 3)] != 1 || len(eff.keysFor(lost)) != 1 {
			t.Errorf("round %d: the call whose answer was lost ran %d times; want once", round, eff.execs[key(saga, 3)])
		}
		if a, v := f.auditor.verify(ctx, srv, saga); !a.is(200) || !v.Valid {
			t.Errorf("round %d: %s; want the journal to verify", round, a)
		}
		if t.Failed() {
			t.Fatalf("stopped after round %d of %d", round+1, retryRounds)
		}
	}
	t.Logf("%d kills under a call sent again, in %s", retryRounds, time.Since(start).Round(time.Millisecond))
}

// balancer stands in front of a server as a load balancer does, at one
// address across its restarts: 502 while the server is down. It can drop
// the first answer to a call under a given idempotency key, closing the
// connection once the server has answered.
type balancer struct {
	ts  *httptest.Server
	srv *server

	mu    sync.Mutex
	drops map[string]int // idempotency key → answers to drop
	gone  map[string]int // idempotency key → answers dropped
}

func newBalancer(t *testing.T, srv *server) *balancer {
	b := &balancer{srv: srv, drops: map[string]int{}, gone: map[string]int{}}
	proxy := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			u, _ := url.Parse(srv.URL())
			r.SetURL(u)
		},
		// Nothing to log: the client sees the 502.
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, _ error) { w.WriteHeader(http.StatusBadGateway) },
	}
	b.ts = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		k, _ := strconv.Unquote(r.Header.Get("Idempotency-Key"))
		if !b.take(k) {
			proxy.ServeHTTP(w, r)
			return
		}
		rec := httptest.NewRecorder()
		proxy.ServeHTTP(rec, r)
		_, _ = io.Copy(io.Discard, rec.Result().Body)
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			conn.Close() // the server answered; the client never hears it
		}
	}))
	t.Cleanup(b.ts.Close)
	return b
}

func (b *balancer) URL() string        { return b.ts.URL }
func (b *balancer) generation() string { return b.srv.generation() }

// drop makes the balancer drop the next answer to a call under key.
func (b *balancer) drop(key string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.drops[key]++
}

// take reports whether to drop this answer to key, counting it.
func (b *balancer) take(key string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if key == "" || b.drops[key] == 0 {
		return false
	}
	b.drops[key]--
	b.gone[key]++
	return true
}

func (b *balancer) dropped(key string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.gone[key]
}
