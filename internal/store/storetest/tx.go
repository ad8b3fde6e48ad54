package storetest

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/sagacity-go/sagacity/internal/engine"
	"github.com/sagacity-go/sagacity/internal/testkit"
	"github.com/sagacity-go/sagacity/wire"
)

// Store.Update and its Tx: locks, sagas, the journal and calls.

func testUpdate(t *testing.T, d *drv) {
	ctx := t.Context()
	kept, lost := d.id("kept"), d.id("lost")
	keptSaga := mkSaga(kept, wire.Running, when(0))
	e, r, c := mkEntry(kept, 1, when(1)), mkRequest(kept, 1, when(1)), mkCall(kept, 1, engine.CallRunning, when(1))
	t.Run("commits when fn returns nil", func(t *testing.T) {
		write(t, d.db, func(tx engine.Tx) error {
			_, err := tx.CreateSaga(keptSaga)
			return errors.Join(err, tx.Append(e), tx.PutApproval(r), tx.PutCall(c))
		})
		snap, err := d.db.Snapshot(ctx, kept, true)
		want := engine.Snapshot{Saga: new(storedSaga(keptSaga)), Entries: storedEntries(e), Requests: storedRequests(r), Calls: storedCalls(c)}
		if diff := cmp.Diff(want, snap, exact...); err != nil || diff != "" {
			t.Errorf("Snapshot(%s) after Update = %v; (-want +got):\n%s", kept, err, diff)
		}
		wantCalls(t, d.db, "after Update", kept, []engine.Call{c})
	})
	t.Run("keeps nothing when fn fails", func(t *testing.T) {
		boom := errors.New("boom")
		err := d.db.Update(ctx, func(tx engine.Tx) error {
			s, err := tx.LockSaga(kept)
			if err != nil {
				return err
			}
			s.Status, s.HeadSeq = wire.Compensated, 9
			if err := tx.PutSaga(s); err != nil {
				return err
			}
			if _, err := tx.CreateSaga(mkSaga(lost, wire.Running, when(2))); err != nil {
				return err
			}
			for _, id := range []string{kept, lost} {
				if err := errors.Join(tx.Append(mkEntry(id, 2, when(2))), tx.PutApproval(mkRequest(id, 2, when(2))),
					tx.PutCall(mkCall(id, 2, engine.CallRunning, when(2)))); err != nil {
					return err
				}
			}
			if _, err := tx.DeleteApprovals(kept, 0); err != nil {
				return err
			}
			return boom
		})
		if !errors.Is(err, boom) {
			t.Errorf("Update(fn failing with %v) = %v, want fn's error", boom, err)
		}
		got, err := d.db.Saga(ctx, lost)
		testkit.WantKind(t, fmt.Sprintf("Saga(%s) = %+v after a failed Update", lost, got), err, engine.NotFound)
		for id, want := range map[string]engine.Snapshot{
			kept: {Saga: new(storedSaga(keptSaga)), Entries: storedEntries(e), Requests: storedRequests(r), Calls: storedCalls(c)},
			lost: {},
		} {
			snap, err := d.db.Snapshot(ctx, id, true)
			if diff := cmp.Diff(want, snap, exact...); err != nil || diff != "" {
				t.Errorf("Snapshot(%s) after a failed Update = %v; (-want +got):\n%s", id, err, diff)
			}
		}
		wantCalls(t, d.db, "after a failed Update", kept, []engine.Call{c})
		wantCalls(t, d.db, "after a failed Update", lost, nil)
	})
	t.Run("passes fn's engine error through", func(t *testing.T) {
		refused := engine.Errorf(engine.Forbidden, "not yours")
		err := d.db.Update(ctx, func(engine.Tx) error { return refused })
		if !errors.Is(err, refused) || engine.KindOf(err) != engine.Forbidden {
			t.Errorf("Update(fn failing with %v) = %v (kind %s), want the same error, kind forbidden", refused, err, testkit.KindName(err))
		}
	})
	t.Run("updates locking one saga run one at a time", func(t *testing.T) {
		// Each Update reads the head, waits, then writes head+1; half of
		// them go through another handle (another process) and half lock
		// with CreateSaga. Any two that overlapped would lose an increment.
		counter := d.id("counter")
		createSagas(t, d.db, mkSaga(counter, wire.Running, when(0)))
		other := d.h.Open(t)
		defer other.Close()
		const n = 16
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				db := []DB{d.db, other}[i%2]
				err := db.Update(ctx, func(tx engine.Tx) error {
					lock := tx.LockSaga
					if i%4 >= 2 {
						lock = func(id string) (engine.Saga, error) { return tx.CreateSaga(mkSaga(id, wire.Running, when(0))) }
					}
					s, err := lock(counter)
					if err != nil {
						return err
					}
					time.Sleep(time.Millisecond)
					s.HeadSeq++
					return tx.PutSaga(s)
				})
				if err != nil {
					t.Errorf("Update %d: %v", i, err)
				}
			})
		}
		wg.Wait()
		if s, err := d.db.Saga(ctx, counter); err != nil || s.HeadSeq != n {
			t.Errorf("Saga(%s) after %d locked increments = head seq %d, %v; want %d", counter, n, s.HeadSeq, err, n)
		}
	})
}

func testLockSaga(t *testing.T, d *drv) {
	id := d.id("s")
	s := mkSaga(id, wire.Running, when(0))
	createSagas(t, d.db, s)
	tests := []struct {
		name, id string
		want     engine.Saga
		kind     *engine.Kind
	}{
		{"found", id, storedSaga(s), nil},
		{"unknown", d.id("nobody"), engine.Saga{}, new(engine.NotFound)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			inTx(t, d.db, func(tx engine.Tx) {
				got, err := tx.LockSaga(tt.id)
				wantErr(t, "LockSaga("+tt.id+")", err, tt.kind)
				if diff := cmp.Diff(tt.want, got, exact...); diff != "" {
					t.Errorf("LockSaga(%s) (-want +got):\n%s", tt.id, diff)
				}
			})
		})
	}
	// That the lock holds other Updates off is Store.Update's test.
}

func testLockSagaCall(t *testing.T, d *drv) {
	id := d.id("s")
	s := mkSaga(id, wire.Running, when(0))
	createSagas(t, d.db, s)
	write(t, d.db, func(tx engine.Tx) error { return tx.PutCall(mkCall(id, 3, engine.CallCompensating, when(1))) })
	tests := []struct {
		name, id string
		seq      int64
		want     engine.Saga
		state    engine.CallState
		kind     *engine.Kind
	}{
		{"the call's state", id, 3, storedSaga(s), engine.CallCompensating, nil},
		{"no such call", id, 4, storedSaga(s), "", nil},
		{"unknown saga", d.id("nobody"), 3, engine.Saga{}, "", new(engine.NotFound)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			inTx(t, d.db, func(tx engine.Tx) {
				got, state, err := tx.LockSagaCall(tt.id, tt.seq)
				wantErr(t, fmt.Sprintf("LockSagaCall(%s, %d)", tt.id, tt.seq), err, tt.kind)
				if diff := cmp.Diff(tt.want, got, exact...); diff != "" || state != tt.state {
					t.Errorf("LockSagaCall(%s, %d) = state %q, want %q; saga (-want +got):\n%s", tt.id, tt.seq, state, tt.state, diff)
				}
			})
		})
	}
}

func testLockAs(t *testing.T, d *drv) {
	ctx := t.Context()
	id := d.id("s")
	s := storedSaga(mkSaga(id, wire.Running, when(0)))
	createSagas(t, d.db, s)
	write(t, d.db, func(tx engine.Tx) error { return tx.PutCall(mkCall(id, 1, engine.CallRunning, when(1))) })
	moved := s
	moved.HeadSeq, moved.HeadHash = 1, fmt.Sprintf("%064x", 1)
	tests := []struct {
		name    string
		promise engine.Saga
		seq     int64
		want    engine.CallState
		stale   bool
	}{
		{"as written", s, 0, "", false},
		{"with its call", s, 1, engine.CallRunning, false},
		{"its call moved on", s, 1, engine.CallCompensating, true},
		{"no such call", s, 2, engine.CallRunning, true},
		{"another head", moved, 0, "", true},
		{"another status", func() engine.Saga { x := s; x.Status = wire.AwaitingApproval; return x }(), 0, "", true},
		{"ended since", func() engine.Saga { x := s; x.Ended = true; return x }(), 0, "", true},
		{"changed since", func() engine.Saga { x := s; x.UpdatedAt = x.UpdatedAt.Add(time.Microsecond); return x }(), 0, "", true},
		{"no such saga", storedSaga(mkSaga(d.id("nobody"), wire.Running, when(0))), 0, "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := mkEntry(id, 1, when(2))
			err := d.db.Update(ctx, func(tx engine.Tx) error {
				if err := tx.LockAs(tt.promise, tt.seq, tt.want); err != nil {
					return err
				}
				if err := tx.Append(e); err != nil {
					return err
				}
				// A read after the promise sees it checked first.
				_, err := tx.Entries(id)
				return errors.Join(err, errors.New("roll back"))
			})
			if stale := errors.Is(err, engine.ErrStale); stale != tt.stale {
				t.Errorf("Update with LockAs(%s) = %v; stale %v, want %v", tt.name, err, stale, tt.stale)
			}
			if got, _ := d.db.Entries(ctx, id); len(got) != 0 {
				t.Errorf("Entries after a rolled back Update = %+v, want none", got)
			}
		})
	}
}

func testCreateSaga(t *testing.T, d *drv) {
	ctx := t.Context()
	id := d.id("s")
	s := mkSaga(id, wire.Running, when(0))
	again := mkSaga(id, wire.Completed, when(9))
	again.Initiator, again.Ended, again.HeadSeq = "agent-2", true, 3
	tests := []struct {
		name string
		put  engine.Saga
	}{
		{"new", s},
		{"existing is kept", again},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got engine.Saga
			write(t, d.db, func(tx engine.Tx) (err error) { got, err = tx.CreateSaga(tt.put); return err })
			if diff := cmp.Diff(storedSaga(s), got, exact...); diff != "" {
				t.Errorf("CreateSaga(%+v); want the first one stored (-want +got):\n%s", tt.put, diff)
			}
			if got, err := d.db.Saga(ctx, id); err != nil || !cmp.Equal(storedSaga(s), got, exact...) {
				t.Errorf("Saga(%s) after CreateSaga(%+v) = %+v, %v; want %+v", id, tt.put, got, err, storedSaga(s))
			}
		})
	}
	// That it locks the saga is Store.Update's test.
}

func testPutSaga(t *testing.T, d *drv) {
	id := d.id("s")
	s := mkSaga(id, wire.Running, when(0))
	createSagas(t, d.db, s)
	put := engine.Saga{ID: id, Status: wire.Compensated, Initiator: "agent-2", Ended: true,
		Reason: "aborted by agent-1: user cancelled", HeadSeq: 4, HeadHash: fmt.Sprintf("%064x", 4),
		CreatedAt: when(7), UpdatedAt: when(8)}
	write(t, d.db, func(tx engine.Tx) error {
		if _, err := tx.LockSaga(id); err != nil {
			return err
		}
		return tx.PutSaga(put)
	})
	// Initiator and CreatedAt are not mutable.
	want := storedSaga(put)
	want.Initiator, want.CreatedAt = s.Initiator, stored(s.CreatedAt)
	got, err := d.db.Saga(t.Context(), id)
	if diff := cmp.Diff(want, got, exact...); err != nil || diff != "" {
		t.Errorf("Saga(%s) after PutSaga(%+v) = %v; want the mutable fields changed (-want +got):\n%s", id, put, err, diff)
	}
}

func testAppend(t *testing.T, d *drv) {
	ctx := t.Context()
	id := d.id("s")
	createSagas(t, d.db, mkSaga(id, wire.Running, when(0)))
	e := mkEntry(id, 1, when(1))
	t.Run("appends", func(t *testing.T) {
		write(t, d.db, func(tx engine.Tx) error { return tx.Append(e) })
		if got, err := d.db.Entries(ctx, id); err != nil || !cmp.Equal(storedEntries(e), got, exact...) {
			t.Errorf("Entries(%s) after Append(%+v) = %+v, %v; want it", id, e, got, err)
		}
	})
	t.Run("seq taken", func(t *testing.T) {
		forged := mkEntry(id, 1, when(2))
		forged.Payload = "approver=mallory"
		// The conflict is Append's, or, from a store that sends writes
		// with the next statement, the transaction's.
		var appendErr error
		err := d.db.Update(ctx, func(tx engine.Tx) error { appendErr = tx.Append(forged); return appendErr })
		if appendErr != nil {
			testkit.WantKind(t, fmt.Sprintf("Append(%+v) at a taken seq", forged), appendErr, engine.Conflict)
		}
		testkit.WantKind(t, "Update of an Append at a taken seq", err, engine.Conflict)
		if got, err := d.db.Entries(ctx, id); err != nil || !cmp.Equal(storedEntries(e), got, exact...) {
			t.Errorf("Entries(%s) after a conflicting Append = %+v, %v; want the first entry unchanged", id, got, err)
		}
	})
}

func testTxEntries(t *testing.T, d *drv) {
	id := d.id("s")
	createSagas(t, d.db, mkSaga(id, wire.Running, when(0)))
	committed := mkEntry(id, 2, when(2))
	write(t, d.db, func(tx engine.Tx) error { return tx.Append(committed) })
	inTx(t, d.db, func(tx engine.Tx) {
		own := []engine.Entry{mkEntry(id, 3, when(3)), mkEntry(id, 1, when(1))}
		for _, e := range own {
			if err := tx.Append(e); err != nil {
				t.Fatalf("Append(%+v): %v", e, err)
			}
		}
		tests := []struct {
			name, saga string
			want       []engine.Entry
		}{
			{"its own writes with the committed, by seq", id, storedEntries(own[1], committed, own[0])},
			{"unknown saga", d.id("nobody"), nil},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				got, err := tx.Entries(tt.saga)
				if diff := cmp.Diff(tt.want, got, exact...); err != nil || diff != "" {
					t.Errorf("Tx.Entries(%s) = %v; (-want +got):\n%s", tt.saga, err, diff)
				}
			})
		}
	})
}

func testCall(t *testing.T, d *drv) {
	id := d.id("s")
	c := mkCall(id, 3, engine.CallExecuted, when(2))
	createSagas(t, d.db, mkSaga(id, wire.Running, when(0)))
	write(t, d.db, func(tx engine.Tx) error { return tx.PutCall(c) })
	tests := []struct {
		name, saga string
		seq        int64
		want       engine.Call
		kind       *engine.Kind
	}{
		{"found", id, 3, storedCalls(c)[0], nil},
		{"unknown seq", id, 1, engine.Call{}, new(engine.NotFound)},
		{"unknown saga", d.id("nobody"), 3, engine.Call{}, new(engine.NotFound)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			inTx(t, d.db, func(tx engine.Tx) {
				got, err := tx.Call(tt.saga, tt.seq)
				what := fmt.Sprintf("Call(%s, %d)", tt.saga, tt.seq)
				wantErr(t, what, err, tt.kind)
				if diff := cmp.Diff(tt.want, got, exact...); diff != "" {
					t.Errorf("%s (-want +got):\n%s", what, diff)
				}
			})
		})
	}
}

func testPutCall(t *testing.T, d *drv) {
	id := d.id("s")
	createSagas(t, d.db, mkSaga(id, wire.Running, when(0)))
	running := mkCall(id, 1, engine.CallRunning, when(1))
	running.Requester, running.OutcomeSeq, running.Result = "https://id.example.com#ü1", 0, ""
	settled := engine.Call{SagaID: id, Seq: 1, ToolName: "other", Input: "{}", Requester: "mallory", State: engine.CallExecuted,
		OutcomeSeq: 2, Result: "reserved\nline two", StartedAt: when(5), UpdatedAt: when(6)}
	// Tool, input, requester and start belong to the INTENT and do not change.
	updated := settled
	updated.ToolName, updated.Input, updated.Requester, updated.StartedAt = running.ToolName, running.Input, running.Requester, running.StartedAt
	tests := []struct {
		name      string
		put, want engine.Call
	}{
		{"inserts", running, running},
		{"updates state, outcome, result and time", settled, updated},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			write(t, d.db, func(tx engine.Tx) error { return tx.PutCall(tt.put) })
			wantCalls(t, d.db, fmt.Sprintf("after PutCall(%+v)", tt.put), id, []engine.Call{tt.want})
		})
	}
}

func testCalls(t *testing.T, d *drv) {
	id, other := d.id("s"), d.id("other")
	cs := map[int64]engine.Call{
		1: mkCall(id, 1, engine.CallRunning, when(1)),
		2: mkCall(id, 2, engine.CallExecuted, when(2)),
		3: mkCall(id, 3, engine.CallCompensated, when(3)),
		4: mkCall(id, 4, engine.CallRunning, when(4)),
		5: mkCall(id, 5, engine.CallFailed, when(5)),
	}
	createSagas(t, d.db, mkSaga(id, wire.Running, when(0)), mkSaga(other, wire.Running, when(0)))
	write(t, d.db, func(tx engine.Tx) error {
		return errors.Join(tx.PutCall(cs[4]), tx.PutCall(cs[2]), tx.PutCall(cs[5]), tx.PutCall(cs[1]), tx.PutCall(cs[3]),
			tx.PutCall(mkCall(other, 1, engine.CallRunning, when(1))))
	})
	tests := []struct {
		name, saga string
		states     []engine.CallState
		want       []int64
	}{
		{"all, by seq", id, nil, []int64{1, 2, 3, 4, 5}},
		{"one state", id, []engine.CallState{engine.CallRunning}, []int64{1, 4}},
		{"several states", id, []engine.CallState{engine.CallFailed, engine.CallRunning}, []int64{1, 4, 5}},
		{"a state none is in", id, []engine.CallState{engine.CallCompensating}, nil},
		{"unknown saga", d.id("nobody"), nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var want []engine.Call
			for _, seq := range tt.want {
				want = append(want, cs[seq])
			}
			inTx(t, d.db, func(tx engine.Tx) {
				got, err := tx.Calls(tt.saga, tt.states...)
				if diff := cmp.Diff(storedCalls(want...), got, exact...); err != nil || diff != "" {
					t.Errorf("Calls(%s, %v) = %v; (-want +got):\n%s", tt.saga, tt.states, err, diff)
				}
			})
		})
	}
}
