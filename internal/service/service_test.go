package service_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/sagacity-go/sagacity/internal/service"
)

// events records what the probes did, in order.
type events struct {
	mu  sync.Mutex
	got []string
}

func (e *events) add(s string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.got = append(e.got, s)
}

func (e *events) list() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.got...)
}

// probe is a service that records its start, the end of its loop and its
// stop; with fail set it cannot start.
type probe struct {
	service.Base
	name string
	ev   *events
	fail error
}

func (p *probe) Start(ctx context.Context) error {
	return p.Run(ctx, service.Work{
		Setup: func(context.Context) error {
			if p.fail != nil {
				return p.fail
			}
			p.ev.add("start " + p.name)
			return nil
		},
		Loops: []service.Loop{func(ctx context.Context, ready func()) {
			ready()
			<-ctx.Done()
			p.ev.add("gone " + p.name)
		}},
		Final: func(context.Context) { p.ev.add("stop " + p.name) },
	})
}

// started reports whether s says it has started, without waiting.
func started(s interface{ Started() <-chan struct{} }) bool {
	select {
	case <-s.Started():
		return true
	default:
		return false
	}
}

// TestLifecycle: StartAll starts in order and StopAll stops in reverse
// order, each service's loop gone before its stop is done and before the
// one before it stops.
func TestLifecycle(t *testing.T) {
	ev := &events{}
	a, b, c := &probe{name: "a", ev: ev}, &probe{name: "b", ev: ev}, &probe{name: "c", ev: ev}
	if err := service.StartAll(t.Context(), a, b, c); err != nil {
		t.Fatalf("StartAll(a, b, c) = %v", err)
	}
	if err := service.WaitStarted(t.Context(), a, b, c); err != nil {
		t.Fatalf("WaitStarted(a, b, c) = %v", err)
	}
	if err := service.StopAll(t.Context(), a, b, c); err != nil {
		t.Fatalf("StopAll(a, b, c) = %v", err)
	}
	want := []string{"start a", "start b", "start c", "gone c", "stop c", "gone b", "stop b", "gone a", "stop a"}
	if diff := cmp.Diff(ev.list(), want); diff != "" {
		t.Errorf("StartAll then StopAll of a, b, c (-got +want):\n%s", diff)
	}
	for _, s := range []*probe{a, b, c} {
		if started(s) {
			t.Errorf("%s says it started after StopAll", s.name)
		}
	}
}

// TestStartAllFails: when a service cannot start, StartAll returns its
// error and stops, in reverse order, those started before it; none after
// it starts.
func TestStartAllFails(t *testing.T) {
	ev := &events{}
	refused := errors.New("the database is down")
	a, b, c, d := &probe{name: "a", ev: ev}, &probe{name: "b", ev: ev}, &probe{name: "c", ev: ev, fail: refused}, &probe{name: "d", ev: ev}
	if err := service.StartAll(t.Context(), a, b, c, d); !errors.Is(err, refused) {
		t.Errorf("StartAll(a, b, c failing, d) = %v; want c's error", err)
	}
	want := []string{"start a", "start b", "gone b", "stop b", "gone a", "stop a"}
	if diff := cmp.Diff(ev.list(), want); diff != "" {
		t.Errorf("StartAll(a, b, c failing, d) (-got +want):\n%s", diff)
	}
	if started(c) || started(d) {
		t.Errorf("after the failed start, c started %v, d started %v; want neither", started(c), started(d))
	}
}

// TestStopWaits: Stop returns only once the service's goroutines are
// gone; with a context that ends first, it says so, and a later Stop
// waits again and finishes the stop.
func TestStopWaits(t *testing.T) {
	release, gone := make(chan struct{}), make(chan struct{})
	final := 0
	s := &service.Base{}
	err := s.Run(t.Context(), service.Work{
		Loops: []service.Loop{func(ctx context.Context, ready func()) {
			ready()
			<-ctx.Done()
			<-release // still winding down after being told to stop
			close(gone)
		}},
		Final: func(context.Context) { final++ },
	})
	if err != nil {
		t.Fatal(err)
	}
	ended, cancel := context.WithCancel(t.Context())
	cancel()
	if err := s.Stop(ended); !errors.Is(err, context.Canceled) {
		t.Errorf("Stop with an ended context while the loop runs = %v; want context.Canceled", err)
	}
	if final != 0 {
		t.Errorf("Final ran %d times before the loop was gone; want 0", final)
	}
	close(release)
	if err := s.Stop(t.Context()); err != nil {
		t.Fatalf("Stop = %v", err)
	}
	select {
	case <-gone:
	default:
		t.Error("Stop returned while the loop still ran")
	}
	if final != 1 {
		t.Errorf("Final ran %d times after the stop; want once", final)
	}
}

// TestStartStop: a service says it started only once its loops made their
// first pass; starting it twice runs it once; stopping it before it
// started, or twice, does nothing; the end of Start's context ends its
// loops; once stopped it starts again.
func TestStartStop(t *testing.T) {
	var mu sync.Mutex
	loops, finals := 0, 0
	first := make(chan struct{})
	s := &service.Base{}
	start := func(ctx context.Context) error {
		return s.Run(ctx, service.Work{
			Loops: []service.Loop{service.Every(time.Hour, func(context.Context) {
				mu.Lock()
				loops++
				n := loops
				mu.Unlock()
				if n == 1 {
					<-first // the first pass takes its time
				}
			})},
			Final: func(context.Context) { finals++ },
		})
	}
	if err := s.Stop(t.Context()); err != nil || started(s) {
		t.Errorf("Stop before Start = %v, started %v; want nil, not started", err, started(s))
	}
	before := s.Started() // asked for before the start: closed by it
	if err := start(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := start(t.Context()); err != nil {
		t.Errorf("Start of a running service = %v; want nil", err)
	}
	if started(s) {
		t.Error("the service says it started during its first pass")
	}
	close(first)
	<-before
	mu.Lock()
	if loops != 1 {
		t.Errorf("passes after starting twice = %d; want 1 (one loop)", loops)
	}
	mu.Unlock()
	for i := range 2 {
		if err := s.Stop(t.Context()); err != nil {
			t.Errorf("Stop %d = %v; want nil", i+1, err)
		}
	}
	if finals != 1 || started(s) {
		t.Errorf("after two stops Final ran %d times, started %v; want once, not started", finals, started(s))
	}

	ctx, cancel := context.WithCancel(t.Context())
	gone := make(chan struct{})
	if err := s.Run(ctx, service.Work{Loops: []service.Loop{func(ctx context.Context, ready func()) {
		defer close(gone)
		ready()
		<-ctx.Done()
	}}}); err != nil {
		t.Fatalf("Start after Stop = %v", err)
	}
	<-s.Started()
	cancel()
	<-gone // ends with Start's context; the test hangs otherwise
	if err := s.Stop(t.Context()); err != nil {
		t.Errorf("Stop after Start's context ended = %v; want nil", err)
	}
}

// TestLoops: Every makes its first pass before it says it is ready, After
// says so at once and passes only once its interval is up.
func TestLoops(t *testing.T) {
	for _, tt := range []struct {
		name     string
		loop     func(time.Duration, func(context.Context)) service.Loop
		atReady  int // passes made when ready is called
		interval time.Duration
	}{
		{"Every", service.Every, 1, time.Hour},
		{"After", service.After, 0, time.Hour},
	} {
		t.Run(tt.name, func(t *testing.T) {
			passes := 0
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			readyAt := make(chan int, 1)
			l := tt.loop(tt.interval, func(context.Context) { passes++ })
			done := make(chan struct{})
			go func() {
				defer close(done)
				l(ctx, func() {
					select {
					case readyAt <- passes:
					default:
					}
				})
			}()
			if got := <-readyAt; got != tt.atReady {
				t.Errorf("%s: passes when ready = %d; want %d", tt.name, got, tt.atReady)
			}
			cancel()
			<-done
		})
	}
}
