package parallel

import (
	"runtime"
	"sync/atomic"
	"testing"
)

// TestFirst: the least failing index, wherever it is in its chunk and
// whatever fails after it, on one core or several; n when nothing fails;
// each goroutine keeps its state; nothing after a failure found in an
// earlier chunk need be checked, and nothing before it is skipped.
func TestFirst(t *testing.T) {
	for _, procs := range []int{1, 2, 4} {
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
		const n, chunk = 1000, 16
		for _, fails := range [][]int{nil, {0}, {15}, {16}, {17}, {999}, {500, 20}, {20, 500}, {3, 4, 5, 990}} {
			want := n
			for _, f := range fails {
				want = min(want, f)
			}
			var checked [n]atomic.Bool
			got := First(n, chunk, func() *int { return new(int) }, func(calls *int, i int) bool {
				*calls++ // a state of its own: the race detector would see it shared
				checked[i].Store(true)
				for _, f := range fails {
					if i == f {
						return false
					}
				}
				return true
			})
			if got != want {
				t.Errorf("GOMAXPROCS=%d, failing at %v: First = %d, want %d", procs, fails, got, want)
			}
			for i := range want {
				if !checked[i].Load() {
					t.Errorf("GOMAXPROCS=%d, failing at %v: %d was not checked", procs, fails, i)
				}
			}
		}
	}
	if got := First(0, 8, func() int { return 0 }, func(int, int) bool { return false }); got != 0 {
		t.Errorf("First of nothing = %d, want 0", got)
	}
}
