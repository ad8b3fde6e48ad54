// Package parallel runs independent checks of a sequence on every core.
package parallel

import (
	"runtime"
	"sync"
	"sync/atomic"
)

// First returns the least i in [0, n) for which ok is false, or n when
// ok holds for every i, calling ok on every core: each goroutine takes
// the next chunk of indices in turn (so none waits on a slower other),
// with a state of its own from state (a reused buffer, say), and no chunk
// after a failure already found is checked. ok must not depend on the
// order of its calls.
func First[S any](n, chunk int, state func() S, ok func(s S, i int) bool) int {
	var next, first atomic.Int64 // the next chunk's first index; the least failure found
	first.Store(int64(n))
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), (n+chunk-1)/chunk) {
		wg.Go(func() {
			s := state()
			for {
				lo := int(next.Add(int64(chunk))) - chunk
				if int64(lo) >= first.Load() {
					return // n, or a failure before this chunk
				}
				for i := lo; i < min(lo+chunk, n); i++ {
					if !ok(s, i) {
						lower(&first, int64(i))
						break
					}
				}
			}
		})
	}
	wg.Wait()
	return int(first.Load())
}

// lower sets a to v when v is less.
func lower(a *atomic.Int64, v int64) {
	for old := a.Load(); v < old && !a.CompareAndSwap(old, v); old = a.Load() {
	}
}
