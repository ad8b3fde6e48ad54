package enginetest

import (
	"context"
	"testing"
	"time"

	"github.com/sagacity-go/sagacity/internal/engine"
	"github.com/sagacity-go/sagacity/internal/testkit"
)

// listen runs a Listener for e until the test ends, once it listens.
func (v *env) listen(e *engine.Engine) {
	v.t.Helper()
	l := &engine.Listener{Engine: e}
	if err := l.Start(context.Background()); err != nil {
		v.t.Fatal(err)
	}
	v.t.Cleanup(func() { _ = l.Stop(context.Background()) })
	select {
	case <-l.Started():
	case <-time.After(10 * time.Second):
		v.t.Fatal("the Listener did not start listening in 10s")
	}
}

// awaiting holds Await on the request at seq of saga in e, as p, for up
// to a minute, and returns where its answer will come.
func awaiting(e *engine.Engine, p engine.Principal, saga string, seq int64) <-chan engine.Review {
	ch := make(chan engine.Review, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		r, _ := e.Await(ctx, p, saga, seq)
		ch <- r
	}()
	return ch
}

// testAwait: a held wait ends on the decision, woken through the store
// — by a vote in this process, and on PostgreSQL by a vote another
// process made — and reads the request as it then stands; it ends at its
// deadline still waiting when nobody decides; it is refused where no
// Listener runs, since nothing would wake it.
func testAwait(t *testing.T, v *env) {
	ctx := context.Background()
	seq := v.gate("nobody")
	_, err := v.e.Await(ctx, agent, "nobody", seq)
	testkit.WantKind(t, "Await without a Listener", err, engine.Unavailable)
	v.listen(v.e)

	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if r, err := v.e.Await(short, agent, "nobody", seq); err != nil || !r.Waiting() || r.State != engine.StateUndecided {
		t.Errorf("Await until a deadline nobody decided before = %s (waiting %v), %v; want undecided, still waiting", r.State, r.Waiting(), err)
	}
	if v.e.Held() != 0 {
		t.Errorf("Held() = %d after the wait ended; want 0", v.e.Held())
	}

	for _, tt := range []struct {
		name   string
		decide func(saga string, seq int64) error
		want   engine.RequestState
	}{
		{"approved", func(saga string, seq int64) error { return second(v.e.Approve(ctx, approver, saga, seq, "")) }, engine.StateApproved},
		{"rejected", func(saga string, seq int64) error { return second(v.e.Reject(ctx, approver, saga, seq, "no")) }, engine.StateRejected},
		{"changes-requested", func(saga string, seq int64) error {
			return second(v.e.RequestChanges(ctx, approver, saga, seq, "to bob"))
		}, engine.StateChangesRequested},
	} {
		seq := v.gate(tt.name)
		held := awaiting(v.e, agent, tt.name, seq)
		waitHeld(t, v.e, 1)
		if err := tt.decide(tt.name, seq); err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if r := <-held; r.State != tt.want || r.Waiting() {
			t.Errorf("the wait held across a decision (%s) = %s, waiting %v; want %s", tt.name, r.State, r.Waiting(), tt.want)
		}
	}
	if v.h.Dialect != "postgres" {
		return
	}
	// Two processes: the wait held by one, the vote made by the other.
	other, _ := v.process(v.open())
	v.listen(other)
	seq = v.gate("replicas")
	held := awaiting(other, agent, "replicas", seq)
	waitHeld(t, other, 1)
	v.approve("replicas", seq)
	if r := <-held; r.State != engine.StateApproved {
		t.Errorf("the wait held by another process = %s; want approved", r.State)
	}
}

// waitHeld waits until e holds n waits.
func waitHeld(t *testing.T, e *engine.Engine, n int) {
	t.Helper()
	for range 1000 {
		if e.Held() == n {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("Held() = %d; want %d", e.Held(), n)
}
