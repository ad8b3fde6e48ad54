package main

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// A worker is one of a load's goroutines. ID is unique across the whole
// run, so that a worker's sagas are its own: two workers never contend
// for one saga's lock, as two agents running their own sagas would not.
type worker struct {
	N  int    // its index in this load, 0..concurrency-1
	ID string // unique in the run
}

var workerSeq atomic.Int64

// An op makes a worker's ith operation.
type op func(ctx context.Context, w worker, i int) error

// load makes n operations with concurrency workers taking them from one
// budget, and returns the wall time per operation.
func load(ctx context.Context, concurrency, n int, do op) (time.Duration, error) {
	var left atomic.Int64
	left.Store(int64(n))
	errs := make(chan error, concurrency)
	var wg sync.WaitGroup
	start := time.Now()
	for k := range concurrency {
		w := worker{N: k, ID: fmt.Sprintf("w%d", workerSeq.Add(1))}
		wg.Go(func() {
			for i := 0; left.Add(-1) >= 0; i++ {
				if err := do(ctx, w, i); err != nil {
					errs <- err
					left.Store(0) // the others stop too
					return
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	close(errs)
	if err := <-errs; err != nil {
		return 0, err
	}
	return elapsed / time.Duration(n), nil
}

// A contender is one side of a comparison: it makes n operations and
// returns the time per operation.
type contender struct {
	name string
	run  func(ctx context.Context, n int) (time.Duration, error)
}

// loaded is a contender making n operations of do with concurrency
// workers.
func loaded(name string, concurrency int, do op) contender {
	return contender{name, func(ctx context.Context, n int) (time.Duration, error) { return load(ctx, concurrency, n, do) }}
}

// rounds runs the contenders against each other: a warm-up of n/10
// operations each, then, in each of r rounds, n operations of each, one
// contender after the other, the order rotating from round to round so
// that none always runs first (right after another's writes, or on a
// cooler cache). Each round measures all of them within seconds of each
// other, so the machine's drift mostly cancels out of a round's ratio. It
// returns per[round][contender], the time per operation.
func rounds(ctx context.Context, r, n int, cs ...contender) ([][]time.Duration, error) {
	for _, c := range cs {
		if _, err := c.run(ctx, max(n/10, 1)); err != nil {
			return nil, fmt.Errorf("%s, warming up: %w", c.name, err)
		}
	}
	per := make([][]time.Duration, r)
	for round := range r {
		per[round] = make([]time.Duration, len(cs))
		for k := range cs {
			i := (round + k) % len(cs)
			d, err := cs[i].run(ctx, n)
			if err != nil {
				return nil, fmt.Errorf("%s, round %d: %w", cs[i].name, round+1, err)
			}
			per[round][i] = d
		}
	}
	return per, nil
}

// spread is a median with its range.
type spread struct{ med, lo, hi float64 }

func spreadOf(xs []float64) spread {
	s := slices.Clone(xs)
	slices.Sort(s)
	med := s[len(s)/2]
	if len(s)%2 == 0 {
		med = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return spread{med, s[0], s[len(s)-1]}
}

// ratios is f of each round's times per operation.
func ratios(per [][]time.Duration, f func(t []time.Duration) float64) []float64 {
	out := make([]float64, len(per))
	for i, t := range per {
		out[i] = f(t)
	}
	return out
}

// column is contender k's time per operation in every round.
func column(per [][]time.Duration, k int) []float64 {
	out := make([]float64, len(per))
	for i, t := range per {
		out[i] = float64(t[k])
	}
	return out
}
