// Package service is the one lifecycle of a server's background services
// (the heartbeat, recovery, lapses, notices, the relay, the log's checker
// and sequencer, the MCP gateway's watcher): each is started, says when it
// has, and is stopped, waiting until its goroutines are gone. The
// composition (internal/app) lists them in the order they start, and serve
// and the tests run that list with StartAll and StopAll.
package service

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Service is a background service.
type Service interface {
	// Start starts the service, which then runs until Stop or until ctx
	// ends. It returns once the service runs, or with the error that
	// kept it from starting. Starting a service that runs does nothing.
	Start(ctx context.Context) error
	// Started is closed once the service has started and made its first
	// pass; open again once it is stopped.
	Started() <-chan struct{}
	// Stop stops the service and waits until its goroutines are gone, or
	// until ctx ends (then ctx's error: the service is still told to
	// stop, and a later Stop waits again). Stopping a service that does
	// not run does nothing.
	Stop(ctx context.Context) error
}

// StartAll starts the services in order, each once Start of the one
// before it returned: a service may count on those before it (the
// heartbeat has registered this process before recovery runs calls).
// When one cannot start, StartAll stops those it started, in reverse
// order, and returns that one's error.
func StartAll(ctx context.Context, svcs ...Service) error {
	for i, s := range svcs {
		if err := s.Start(ctx); err != nil {
			return errors.Join(err, StopAll(ctx, svcs[:i]...))
		}
	}
	return nil
}

// StopAll stops the services in reverse order, one at a time: a service
// stops only once every service after it has, so the log's sequencer,
// listed before the services that write to the journal, signs its last
// checkpoint after they are gone. Every service is told to stop, even
// once ctx has ended; the errors are joined.
func StopAll(ctx context.Context, svcs ...Service) error {
	var errs []error
	for _, s := range slices.Backward(svcs) {
		if err := s.Stop(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// WaitStarted waits until every service has started (see Started), or
// until ctx ends (then ctx's error). A test waits so that the services'
// first passes, run on what the test has not yet written, are over
// before it starts.
func WaitStarted(ctx context.Context, svcs ...Service) error {
	for _, s := range svcs {
		select {
		case <-s.Started():
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// A Loop is a goroutine of a service: it runs until ctx ends, and calls
// ready once it has made its first pass.
type Loop func(ctx context.Context, ready func())

// Every is a loop that runs pass at once and then every d.
func Every(d time.Duration, pass func(ctx context.Context)) Loop {
	return func(ctx context.Context, ready func()) {
		t := time.NewTicker(d)
		defer t.Stop()
		for {
			pass(ctx)
			ready()
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}
}

// After is a loop that runs pass every d, the first time after d.
func After(d time.Duration, pass func(ctx context.Context)) Loop {
	return func(ctx context.Context, ready func()) {
		ready()
		t := time.NewTicker(d)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			pass(ctx)
		}
	}
}

// Work is what a service runs.
type Work struct {
	// Setup, when set, runs first, in Start's goroutine: its error is
	// Start's, and then nothing runs.
	Setup func(ctx context.Context) error
	// Loops run each in a goroutine of its own.
	Loops []Loop
	// Final, when set, runs in Stop once the loops are gone, bounded by
	// Stop's ctx: the service's own shutdown.
	Final func(ctx context.Context)
}

// Base gives the service that embeds it Started and Stop; the service's
// Start calls Run. Its zero value is a service that does not run.
type Base struct {
	mu      sync.Mutex
	started chan struct{} // closed once every loop made its first pass
	stopped chan struct{} // closed once every loop is gone; nil while not running
	cancel  context.CancelFunc
	final   func(ctx context.Context)
}

// Run starts w unless the service runs: its setup, then its loops, with
// a context that ends with ctx or at Stop. It returns the setup's error.
func (b *Base) Run(ctx context.Context, w Work) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.stopped != nil {
		return nil
	}
	ctx, cancel := context.WithCancel(ctx)
	if w.Setup != nil {
		if err := w.Setup(ctx); err != nil {
			cancel()
			return err
		}
	}
	started := b.startedLocked()
	stopped := make(chan struct{})
	b.stopped, b.cancel, b.final = stopped, cancel, w.Final
	var pending atomic.Int64
	pending.Add(int64(len(w.Loops)))
	if len(w.Loops) == 0 {
		close(started)
	}
	var wg sync.WaitGroup
	for _, l := range w.Loops {
		// A loop that ends before its first pass counts as started too:
		// nobody waits for it for ever.
		ready := sync.OnceFunc(func() {
			if pending.Add(-1) == 0 {
				close(started)
			}
		})
		wg.Go(func() {
			defer ready()
			l(ctx, ready)
		})
	}
	go func() {
		wg.Wait()
		close(stopped)
	}()
	return nil
}

// Started is closed once the service has started and each of its loops
// made its first pass.
func (b *Base) Started() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.startedLocked()
}

// startedLocked is Started; callers hold b.mu. The channel is made by
// whoever asks first, so that one asked for before Start is the one
// Start closes.
func (b *Base) startedLocked() chan struct{} {
	if b.started == nil {
		b.started = make(chan struct{})
	}
	return b.started
}

// Stop ends the loops, waits until they are gone or ctx ends, and then
// runs the work's Final.
func (b *Base) Stop(ctx context.Context) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.stopped == nil {
		return nil
	}
	b.cancel()
	select {
	case <-b.stopped:
	case <-ctx.Done():
		select {
		case <-b.stopped: // gone as ctx ended
		default:
			return ctx.Err()
		}
	}
	if b.final != nil {
		b.final(ctx)
	}
	b.started, b.stopped, b.cancel, b.final = nil, nil, nil, nil
	return nil
}
