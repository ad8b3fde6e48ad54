package server_test

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sagacity-go/sagacity/internal/store/storetest"
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
	}{{"sqlite", storetest.SQLiteURL}, {"postgres", storetest.PostgresURL}} {
		for _, tc := range []struct{ name, tool, code string }{
			{"executed", "reserveInventory", "200"}, {"gated", "sendWireTransfer", "202"},
		} {
			b.Run(st.name+"/"+tc.name+"/seq", func(b *testing.B) {
				e := newAPI(b, st.url(b), envOptions{})
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
				e := newAPI(b, st.url(b), envOptions{})
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
