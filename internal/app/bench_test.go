package app_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sagacity-go/sagacity/internal/engine"
	"github.com/sagacity-go/sagacity/internal/testkit"
)

// BenchmarkGateway measures agent gateway calls over real HTTP: an executed
// COMPENSATABLE call (which also calls a signed HTTP tool server) and a
// gated IRREVERSIBLE call, on SQLite and PostgreSQL. "seq" sends one call
// at a time and reports latency percentiles; "par8" keeps 8 callers busy
// and reports throughput.
func BenchmarkGateway(b *testing.B) {
	for _, st := range []struct {
		name string
		url  func(testing.TB) string
	}{{"sqlite", testkit.SQLiteURL}, {"postgres", testkit.PostgresURL}} {
		for _, tc := range []struct{ name, tool, code string }{
			{"executed", "reserveInventory", "200"}, {"gated", "sendWireTransfer", "202"},
		} {
			b.Run(st.name+"/"+tc.name+"/seq", func(b *testing.B) {
				e := newAPI(b, st.url(b), envOptions{inDoubtAfter: time.Hour}) // eight callers share a saga: a call running is not in doubt
				var lat []time.Duration
				for i := 0; b.Loop(); i++ {
					start := time.Now()
					r := e.call(fmt.Sprintf("b-%d", i/50), tc.tool, `{"sku":"LAPTOP-13","qty":1}`)
					lat = append(lat, time.Since(start))
					if fmt.Sprint(r.code) != tc.code {
						b.Fatalf("call = %d %s, want %s", r.code, r.body, tc.code)
					}
				}
				report(b, lat)
			})
			b.Run(st.name+"/"+tc.name+"/par8", func(b *testing.B) {
				e := newAPI(b, st.url(b), envOptions{inDoubtAfter: time.Hour}) // eight callers share a saga: a call running is not in doubt
				var n atomic.Int64
				var mu sync.Mutex
				var lat []time.Duration
				b.SetParallelism(4) // GOMAXPROCS is 2 here: 8 callers
				b.RunParallel(func(pb *testing.PB) {
					var mine []time.Duration
					for pb.Next() {
						i := n.Add(1)
						start := time.Now()
						r := e.call(fmt.Sprintf("p-%d", i/50), tc.tool, `{"sku":"LAPTOP-13","qty":1}`)
						mine = append(mine, time.Since(start))
						if fmt.Sprint(r.code) != tc.code {
							b.Errorf("call = %d %s, want %s", r.code, r.body, tc.code)
							return
						}
					}
					mu.Lock()
					lat = append(lat, mine...)
					mu.Unlock()
				})
				report(b, lat)
			})
		}
	}
}

// The console benchmark's data: benchPending pending requests, one per
// saga, and one saga whose journal holds benchJournal entries.
const (
	benchPending = 10_000
	benchJournal = 10_000
	benchSaga    = "journal-10k"
)

// BenchmarkConsole measures the console's pending approvals page and one
// saga's timeline page beside the JSON endpoints that serve the same data,
// on SQLite and PostgreSQL, with benchPending pending requests and a
// benchJournal-entry journal in the store. Each request is one real HTTP
// GET, signed in to the console or anonymous on the API (dev mode); it
// reports latency percentiles and the response's size. The approvals
// endpoint answers everything up to its cap, so sagas-api shows a page of
// the API's own size. The timeline page verifies the whole journal.
// Loading the data takes seconds; -v shows how many.
func BenchmarkConsole(b *testing.B) {
	for _, st := range []struct {
		name string
		url  func(testing.TB) string
	}{{"sqlite", testkit.SQLiteURL}, {"postgres", testkit.PostgresURL}} {
		// Loaded here, once per store, only when one of its cases runs.
		b.Run(st.name, func(b *testing.B) {
			env := newAPI(b, st.url(b), envOptions{inDoubtAfter: time.Hour})
			start := time.Now()
			loadConsoleData(b, env)
			b.Logf("%s: %d pending requests and a %d-entry journal loaded in %s",
				st.name, benchPending, benchJournal, time.Since(start).Round(time.Millisecond))
			session := env.session(b, "alice@example.com")
			for _, tc := range []struct {
				name, path string
				page       bool // a console page: send the session cookie
				check      func(body string) error
			}{
				{"pending-page", "/", true, contains(fmt.Sprintf("Pending approvals (%d)", benchPending))},
				{"pending-api", "/sagacity/approvals", false, jsonCount("", 5000)}, // the store's cap
				{"sagas-api", "/sagacity/sagas?limit=50", false, jsonCount("sagas", 50)},
				{"timeline-page", "/saga?id=" + benchSaga, true, contains("✓ verified")},
				{"journal-api", "/sagacity/audit/" + benchSaga, false, lines(benchJournal)},
			} {
				b.Run(tc.name, func(b *testing.B) {
					e := *env // failures belong to this benchmark
					e.t = b
					var headers []string
					if tc.page {
						headers = []string{"Cookie", session.String()}
					}
					get := func() response {
						r := e.do("GET", tc.path, "", "", headers...)
						if r.code != 200 {
							b.Fatalf("GET %s = %d %.300s, want 200", tc.path, r.code, r.body)
						}
						return r
					}
					if err := tc.check(get().body); err != nil {
						b.Fatalf("GET %s: %v", tc.path, err)
					}
					var lat []time.Duration
					size := 0
					for b.Loop() {
						start := time.Now()
						r := get()
						lat = append(lat, time.Since(start))
						size = len(r.body)
					}
					report(b, lat)
					b.ReportMetric(float64(size), "B/page")
				})
			}
		})
	}
}

// loadConsoleData fills e's store through an engine of its own over the
// same store, with the fixture's tool names but tools that do nothing:
// benchPending gated calls of sendWireTransfer, one saga each, from a few
// goroutines, and benchJournal/2 executed calls of reserveInventory in
// saga benchSaga (an INTENT and an EXECUTED entry each), beside them. The
// engine writes every entry, so every hash chain is its own and verifies.
func loadConsoleData(b *testing.B, e *apiEnv) {
	b.Helper()
	noop := engine.Funcs{Exec: func(context.Context, engine.Invocation) (string, error) { return `{"reserved":1}`, nil }}
	eng, err := engine.New(e.db, []engine.Tool{
		{Name: "reserveInventory", Reversibility: engine.Compensatable, Executor: noop},
		{Name: "sendWireTransfer", Reversibility: engine.Irreversible, Executor: noop},
	}, engine.WithKeys(testkit.Keys(b)))
	if err != nil {
		b.Fatal(err)
	}
	agent := engine.Principal{ID: "token:bench-agent", Name: "bench-agent", Auth: "token", Roles: []engine.Role{engine.RoleAgent}}
	ctx := b.Context()
	var (
		wg   sync.WaitGroup
		next atomic.Int64
		mu   sync.Mutex
		errs []error
	)
	fail := func(err error) {
		mu.Lock()
		defer mu.Unlock()
		errs = append(errs, err)
	}
	failed := func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(errs) > 0
	}
	for range 4 {
		wg.Go(func() {
			for i := next.Add(1); i <= benchPending && !failed(); i = next.Add(1) {
				input := fmt.Sprintf(`{"amount":%d,"currency":"EUR","iban":"DE89370400440532013000","reference":"INV-%05d"}`, 100+i%9000, i)
				r, err := eng.Call(ctx, agent, fmt.Sprintf("wire-%05d", i), "sendWireTransfer", input)
				if err == nil && r.Outcome != engine.OutcomeAwaitingApproval {
					err = fmt.Errorf("gated call %d: outcome %s, want %s", i, r.Outcome, engine.OutcomeAwaitingApproval)
				}
				if err != nil {
					fail(err)
				}
			}
		})
	}
	wg.Go(func() {
		for i := 0; i < benchJournal/2 && !failed(); i++ {
			r, err := eng.Call(ctx, agent, benchSaga, "reserveInventory", `{"sku":"LAPTOP-13","qty":1}`)
			if err == nil && r.Outcome != engine.OutcomeExecuted {
				err = fmt.Errorf("call %d in %s: outcome %s, want %s", i, benchSaga, r.Outcome, engine.OutcomeExecuted)
			}
			if err != nil {
				fail(err)
			}
		}
	})
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		b.Fatalf("loading the console's data: %v", err)
	}
}

// contains checks that a body holds s.
func contains(s string) func(string) error {
	return func(body string) error {
		if !strings.Contains(body, s) {
			return fmt.Errorf("body does not contain %q", s)
		}
		return nil
	}
}

// jsonCount checks that a JSON body's list (the body itself when key is
// "", else the object's member key) has n items.
func jsonCount(key string, n int) func(string) error {
	return func(body string) error {
		raw := json.RawMessage(body)
		var err error
		if key != "" {
			var m map[string]json.RawMessage
			err = json.Unmarshal(raw, &m)
			raw = m[key]
		}
		var list []json.RawMessage
		if err == nil {
			err = json.Unmarshal(raw, &list)
		}
		if err != nil {
			return fmt.Errorf("want %d items: %w", n, err)
		}
		if len(list) != n {
			return fmt.Errorf("got %d items, want %d", len(list), n)
		}
		return nil
	}
}

// lines checks that an NDJSON body has n lines.
func lines(n int) func(string) error {
	return func(body string) error {
		if got := strings.Count(body, "\n"); got != n {
			return fmt.Errorf("got %d lines, want %d", got, n)
		}
		return nil
	}
}

// report adds calls per second and latency percentiles to the benchmark line.
func report(b *testing.B, lat []time.Duration) {
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	pct := func(p float64) float64 { return float64(lat[int(float64(len(lat)-1)*p)].Microseconds()) / 1000 }
	b.ReportMetric(float64(len(lat))/b.Elapsed().Seconds(), "calls/s")
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
	b.ReportMetric(0, "ns/op")
}
