package storetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sagacity-go/sagacity/internal/engine"
	"github.com/sagacity-go/sagacity/wire"
)

// heard listens on db until the test ends, and returns what it hears,
// once it listens (it told "").
func heard(t *testing.T, db DB) <-chan string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ch := make(chan string, 64)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = db.Listen(ctx, func(id string) { ch <- id })
	}()
	t.Cleanup(func() { cancel(); <-done })
	select {
	case id := <-ch:
		if id != "" {
			t.Fatalf("Listen told %q first; want \"\", that it listens", id)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Listen did not start listening in 10s")
	}
	return ch
}

// next is the next saga heard, or "(nothing)" after wait.
func next(ch <-chan string, wait time.Duration) string {
	select {
	case id := <-ch:
		return id
	case <-time.After(wait):
		return "(nothing)"
	}
}

// testListen: a Wake is told to Listen once its Update commits, and never
// when it rolls back; on PostgreSQL, to a listener on another handle
// (another process) as well.
func testListen(t *testing.T, d *drv) {
	ctx := t.Context()
	here := heard(t, d.db)
	var there <-chan string
	if d.h.Dialect == "postgres" {
		other := d.h.Open(t)
		t.Cleanup(other.Close)
		there = heard(t, other)
	}
	kept, lost := d.id("kept"), d.id("lost")
	if err := d.db.Update(ctx, func(tx engine.Tx) error {
		_, err := tx.CreateSaga(mkSaga(lost, wire.Running, when(0)))
		return errors.Join(err, tx.Wake(lost), errors.New("boom"))
	}); err == nil {
		t.Fatal("an Update whose fn fails succeeded")
	}
	write(t, d.db, func(tx engine.Tx) error {
		_, err := tx.CreateSaga(mkSaga(kept, wire.Running, when(0)))
		return errors.Join(err, tx.Wake(kept))
	})
	for name, ch := range map[string]<-chan string{"this handle": here, "another handle": there} {
		if ch == nil {
			continue
		}
		if got := next(ch, 10*time.Second); got != kept {
			t.Errorf("%s heard %q first; want %q, the committed Update's saga (never %q, rolled back)", name, got, kept, lost)
		}
		if got := next(ch, 200*time.Millisecond); got != "(nothing)" {
			t.Errorf("%s heard %q after the one commit; want nothing more", name, got)
		}
	}
}

// testListenLost: on PostgreSQL, a listener whose connection is lost (its
// backend terminated) listens again and says so (""), since it may have
// missed commits meanwhile, and hears what commits after.
func testListenLost(t *testing.T, d *drv) {
	if d.h.Dialect != "postgres" {
		return // SQLite's listeners are the process's own: nothing to lose
	}
	ch := heard(t, d.db)
	// This store's listener alone: its channel names its schema.
	d.h.Exec(t, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND query = 'LISTEN "sagacity_requests.' || current_schema() || '"'`)
	if got := next(ch, 10*time.Second); got != "" {
		t.Fatalf("after its connection was lost the listener told %q; want \"\", that it listens again", got)
	}
	after := d.id("after")
	write(t, d.db, func(tx engine.Tx) error {
		_, err := tx.CreateSaga(mkSaga(after, wire.Running, when(0)))
		return errors.Join(err, tx.Wake(after))
	})
	if got := next(ch, 10*time.Second); got != after {
		t.Errorf("the listener, listening again, heard %q; want %q", got, after)
	}
}
