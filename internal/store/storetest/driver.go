package storetest

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/sagacity-go/sagacity/internal/auth"
	"github.com/sagacity-go/sagacity/internal/demo"
	"github.com/sagacity-go/sagacity/internal/engine"
)

// The driver tests (river's riverdrivertest) call each store method
// directly, a test a method, so a store that drifts is caught at the
// method, not only through the engine's scenarios. Tests that must see or
// drop every row of a table (listings, expiry) get a fresh database of
// their own; the others share one, each under keys of its own (drv.id), in
// parallel: a fresh PostgreSQL database costs a migration, and the package
// should stay fast.
var driverTests = []struct {
	name string
	own  bool // needs a database of its own
	fn   func(*testing.T, *drv)
}{
	{"Store.Update", false, testUpdate},
	{"Store.Saga", false, testSaga},
	{"Store.Sagas", true, testSagas},
	{"Store.CountSagas", true, testCountSagas},
	{"Store.Entries", false, testStoreEntries},
	{"Store.Snapshot", false, testSnapshot},
	{"Store.Approvals", true, testApprovals},
	{"Store.InDoubt", true, testStoreInDoubt},
	{"Store.Runners", true, testRunners},
	{"Store.Pending", true, testStorePending},
	{"Store.CountPending", true, testCountPending},
	{"Store.PendingByTool", true, testPendingByTool},
	{"Store.DueApprovals", true, testDueApprovals},
	{"Store.PendingEntries", true, testPendingEntries},
	{"Store.LastExecuted", false, testLastExecuted},
	{"Store.RecordVerified", false, testRecordVerified},
	{"Store.Verifications", false, testVerifications},
	{"Tx.LockSaga", false, testLockSaga},
	{"Tx.LockSagaCall", false, testLockSagaCall},
	{"Tx.LockAs", false, testLockAs},
	{"Tx.CreateSaga", false, testCreateSaga},
	{"Tx.PutSaga", false, testPutSaga},
	{"Tx.Append", false, testAppend},
	{"Tx.Entries", false, testTxEntries},
	{"Tx.Approval", false, testApproval},
	{"Tx.PutApproval", false, testPutApproval},
	{"Tx.PutVotes", false, testPutVotes},
	{"Tx.DeleteApprovals", false, testDeleteApprovals},
	{"Tx.CountApprovals", false, testCountApprovals},
	{"Tx.Call", false, testCall},
	{"Tx.PutCall", false, testPutCall},
	{"Tx.Calls", false, testCalls},
	{"SessionStore.PutSession", true, testPutSession},
	{"SessionStore.Session", false, testSession},
	{"SessionStore.TouchSession", false, testTouchSession},
	{"SessionStore.DeleteSession", false, testDeleteSession},
	{"SessionStore.PutLogin", true, testPutLogin},
	{"SessionStore.TakeLogin", false, testTakeLogin},
	{"demo.Store.StockDemo", false, testStockDemo},
	{"demo.Store.Reserve", false, testReserve},
	{"demo.Store.Release", false, testRelease},
	{"demo.Store.Transfer", false, testTransfer},
	{"DB.Inventory", true, testInventory},
	{"tlog.Store.Sequence", true, testLogSequence},
	{"tlog.Store.LogNodes", true, testLogNodes},
	{"tlog.Store.Leaves", true, testLeaves},
	{"tlog.Tx.Leaves", true, testTxLeaves},
}

// runDriver runs the driver tests in parallel.
func runDriver(t *testing.T, newHarness func(*testing.T) Harness) {
	open := func(t *testing.T) (Harness, DB) {
		h := newHarness(t)
		db := h.Open(t)
		t.Cleanup(db.Close)
		return h, db
	}
	sharedH, sharedDB := open(t) // closed once every test using it is done
	for _, tt := range driverTests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			d := &drv{h: sharedH, db: sharedDB, ns: tt.name + "/"}
			if tt.own {
				d.h, d.db = open(t)
			}
			tt.fn(t, d)
		})
	}
}

// drv is one driver test's database, and the prefix of the keys it writes.
type drv struct {
	h  Harness
	db DB
	ns string
}

// id is a key of this test's own: a saga, session, sign-in, SKU or
// idempotency key.
func (d *drv) id(name string) string { return d.ns + name }

// zone is where the driver tests' times are given: a store must hand them
// back in UTC.
var zone = time.FixedZone("CEST", 2*60*60)

// when is a time n seconds into a driver test, given in zone and with
// nanoseconds, which no store keeps.
func when(n int) time.Time {
	return time.Date(2026, 8, 7, 11, 33, 15, 686364789, zone).Add(time.Duration(n) * time.Second)
}

// stored is what a store gives back for t: UTC, to the microsecond.
func stored(t time.Time) time.Time { return t.Truncate(time.Microsecond).UTC() }

// exact compares times by instant and location, so a time handed back in
// another zone or at another precision differs; and nil slices equal empty
// ones, which the store interfaces do not tell apart.
var exact = []cmp.Option{
	cmp.Comparer(func(a, b time.Time) bool { return a.Equal(b) && a.Location() == b.Location() }),
	cmpopts.EquateEmpty(),
}

// write runs fn in one Update and fails the test when it fails.
func write(t *testing.T, db DB, fn func(engine.Tx) error) {
	t.Helper()
	if err := db.Update(t.Context(), fn); err != nil {
		t.Fatalf("Update: %v", err)
	}
}

// inTx runs fn in an Update that keeps nothing, for reading through a Tx.
func inTx(t *testing.T, db DB, fn func(engine.Tx)) {
	t.Helper()
	done := errors.New("done")
	if err := db.Update(t.Context(), func(tx engine.Tx) error { fn(tx); return done }); !errors.Is(err, done) {
		t.Fatalf("Update: %v, want fn's own error", err)
	}
}

// Rows as the engine would write them.

func mkSaga(id string, st engine.Status, created time.Time) engine.Saga {
	return engine.Saga{ID: id, Status: st, Initiator: "agent-1", HeadHash: engine.ZeroHash,
		CreatedAt: created, UpdatedAt: created.Add(time.Second)}
}

func mkEntry(sagaID string, seq int64, ts time.Time) engine.Entry {
	return engine.Entry{SagaID: sagaID, Seq: seq, ToolName: "reserveInventory", Phase: engine.PhaseIntent,
		Input: fmt.Sprintf(`{"n":%d}`, seq), Payload: "requester=agent-1\nauth=token", Timestamp: ts,
		Hash: fmt.Sprintf("%064x", seq), Leaf: -1}
}

func mkRequest(sagaID string, seq int64, created time.Time) engine.ApprovalRequest {
	input := fmt.Sprintf(`{"amount":"%d","to":"alice"}`, seq)
	return engine.ApprovalRequest{SagaID: sagaID, JournalSeq: seq, ToolName: "sendWireTransfer", Input: input,
		InputHash: engine.PayloadHash(input), Requester: "agent-1", CreatedAt: created, Quorum: 1}
}

func mkCall(sagaID string, seq int64, st engine.CallState, updated time.Time) engine.Call {
	return engine.Call{SagaID: sagaID, Seq: seq, ToolName: "reserveInventory", Input: `{"item":"laptop"}`, Requester: "agent-1",
		State: st, OutcomeSeq: seq + 1, Result: "reserved", StartedAt: updated.Add(-time.Second), UpdatedAt: updated}
}

// The same rows as a store gives them back.

func storedSaga(s engine.Saga) engine.Saga {
	s.CreatedAt, s.UpdatedAt = stored(s.CreatedAt), stored(s.UpdatedAt)
	return s
}

func storedEntries(es ...engine.Entry) []engine.Entry {
	out := slices.Clone(es)
	for i := range out {
		out[i].Timestamp = stored(out[i].Timestamp)
	}
	return out
}

func storedRequests(rs ...engine.ApprovalRequest) []engine.ApprovalRequest {
	out := slices.Clone(rs)
	for i := range out {
		out[i].CreatedAt = stored(out[i].CreatedAt)
		if !out[i].Due.IsZero() {
			out[i].Due = stored(out[i].Due)
		}
	}
	return out
}

func storedCalls(cs ...engine.Call) []engine.Call {
	out := slices.Clone(cs)
	for i := range out {
		out[i].StartedAt, out[i].UpdatedAt = stored(out[i].StartedAt), stored(out[i].UpdatedAt)
	}
	return out
}

// createSagas writes sagas, each in a transaction of its own.
func createSagas(t *testing.T, db DB, sagas ...engine.Saga) {
	t.Helper()
	for _, s := range sagas {
		write(t, db, func(tx engine.Tx) error { _, err := tx.CreateSaga(s); return err })
	}
}

// wantCalls fails unless Tx.Calls(sagaID) is want.
func wantCalls(t *testing.T, db DB, what, sagaID string, want []engine.Call) {
	t.Helper()
	inTx(t, db, func(tx engine.Tx) {
		got, err := tx.Calls(sagaID)
		if diff := cmp.Diff(storedCalls(want...), got, exact...); err != nil || diff != "" {
			t.Errorf("Calls(%s) %s = %v; (-want +got):\n%s", sagaID, what, err, diff)
		}
	})
}

func testUpdate(t *testing.T, d *drv) {
	ctx := t.Context()
	kept, lost := d.id("kept"), d.id("lost")
	keptSaga := mkSaga(kept, engine.Running, when(0))
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
			s.Status, s.HeadSeq = engine.Compensated, 9
			if err := tx.PutSaga(s); err != nil {
				return err
			}
			if _, err := tx.CreateSaga(mkSaga(lost, engine.Running, when(2))); err != nil {
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
		wantKind(t, fmt.Sprintf("Saga(%s) = %+v after a failed Update", lost, got), err, engine.NotFound)
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
			t.Errorf("Update(fn failing with %v) = %v (kind %s), want the same error, kind forbidden", refused, err, kindOf(err))
		}
	})
	t.Run("updates locking one saga run one at a time", func(t *testing.T) {
		// Each Update reads the head, waits, then writes head+1; half of
		// them go through another handle (another process) and half lock
		// with CreateSaga. Any two that overlapped would lose an increment.
		counter := d.id("counter")
		createSagas(t, d.db, mkSaga(counter, engine.Running, when(0)))
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
						lock = func(id string) (engine.Saga, error) { return tx.CreateSaga(mkSaga(id, engine.Running, when(0))) }
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

func testSaga(t *testing.T, d *drv) {
	id := d.id("s")
	s := mkSaga(id, engine.CompensationFailed, when(0))
	s.Ended, s.Reason, s.HeadSeq, s.HeadHash = true, "tool chargeCard failed: card processor down", 7, fmt.Sprintf("%064x", 7)
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
			got, err := d.db.Saga(t.Context(), tt.id)
			wantErr(t, "Saga("+tt.id+")", err, tt.kind)
			if diff := cmp.Diff(tt.want, got, exact...); diff != "" {
				t.Errorf("Saga(%s) (-want +got):\n%s", tt.id, diff)
			}
		})
	}
}

// wantErr fails unless err is nil, or of kind *k when k is not nil.
func wantErr(t *testing.T, what string, err error, k *engine.Kind) {
	t.Helper()
	if k != nil {
		wantKind(t, what, err, *k)
	} else if err != nil {
		t.Errorf("%s: %v", what, err)
	}
}

// sagaCase is one listing of sagas: the filter, the sagas Sagas returns
// for it (by name, in order), and what CountSagas says, After and Limit
// ignored.
type sagaCase struct {
	name  string
	f     engine.SagaFilter
	want  []string
	count int
}

// sagaListing writes the sagas that Sagas and CountSagas are tested on,
// each in a transaction of its own and not in listing order: ties on
// creation, two initiators, journals with and without a tool, calls in
// doubt and settled, and ids that a LIKE pattern or a byte count would
// misread. It returns them as stored, by name, and the cases to run.
func sagaListing(t *testing.T, d *drv) (map[string]engine.Saga, []sagaCase) {
	t.Helper()
	sagas := []struct {
		name      string
		created   int
		status    engine.Status
		initiator string
	}{ // in listing order
		{"d", 9, engine.Compensated, "agent-1"},
		{"tie-b", 8, engine.Running, "agent-1"},
		{"tie-a", 8, engine.Compensated, "agent-2"},
		{"c", 7, engine.Running, "agent-1"},
		{"café-1", 6, engine.Running, "agent-2"},
		{"cafe-2", 5, engine.Completed, "agent-1"},
		{"50%-off", 4, engine.Running, "agent-1"},
		{"50x-off", 3, engine.Running, "agent-1"},
		{"a_b", 2, engine.Completed, "agent-2"},
		{"axb", 1, engine.Running, "agent-1"},
	}
	byName := map[string]engine.Saga{}
	var all []string
	for _, i := range []int{4, 1, 7, 0, 9, 2, 5, 8, 3, 6} {
		s := mkSaga(d.id(sagas[i].name), sagas[i].status, when(sagas[i].created))
		s.Initiator = sagas[i].initiator
		createSagas(t, d.db, s)
		byName[sagas[i].name] = storedSaga(s)
	}
	for _, s := range sagas {
		all = append(all, s.name)
	}
	entry := func(name string, seq int64, tool string, ph engine.Phase) engine.Entry {
		e := mkEntry(d.id(name), seq, when(10))
		e.ToolName, e.Phase = tool, ph
		return e
	}
	call := func(name string, seq int64, st engine.CallState, updated int) engine.Call {
		return mkCall(d.id(name), seq, st, when(updated))
	}
	write(t, d.db, func(tx engine.Tx) error {
		return errors.Join(
			tx.Append(entry("d", 1, "reserveInventory", engine.PhaseIntent)),
			tx.Append(entry("tie-b", 1, "reserveInventory", engine.PhaseExecuted)),
			tx.Append(entry("tie-b", 2, "sendWireTransfer", engine.PhaseAwaitingApproval)),
			tx.Append(entry("tie-b", 3, "sendWireTransfer", engine.PhaseAwaitingApproval)),
			tx.Append(entry("tie-a", 1, "sendWireTransfer", engine.PhaseAwaitingApproval)),
			tx.Append(entry("tie-a", 2, engine.GateTool, engine.PhaseRejected)),
			tx.Append(entry("c", 1, "reserveInventory", engine.PhaseIntent)),
			// In doubt: running or compensating, by when they were last touched.
			tx.PutCall(call("d", 1, engine.CallCompensating, 20)),
			tx.PutCall(call("tie-b", 4, engine.CallRunning, 15)),
			tx.PutCall(call("café-1", 1, engine.CallRunning, 25)),
			tx.PutCall(call("50%-off", 1, engine.CallRunning, 10)),
			// Settled long ago.
			tx.PutCall(call("tie-b", 1, engine.CallExecuted, 1)),
			tx.PutCall(call("c", 1, engine.CallExecuted, 1)),
			tx.PutCall(call("c", 2, engine.CallFailed, 1)),
			tx.PutCall(call("c", 3, engine.CallCompensated, 1)),
			tx.PutCall(call("c", 4, engine.CallCompensationFailed, 1)),
		)
	})
	after := func(n int, name string) *engine.SagaCursor {
		return &engine.SagaCursor{CreatedAt: stored(when(n)), ID: d.id(name)}
	}
	pdt := time.FixedZone("PDT", -7*60*60)
	return byName, []sagaCase{
		{"all, newest first", engine.SagaFilter{Limit: 20}, all, 10},
		{"limit", engine.SagaFilter{Limit: 2}, []string{"d", "tie-b"}, 10},
		{"status", engine.SagaFilter{Status: engine.Running, Limit: 20}, []string{"tie-b", "c", "café-1", "50%-off", "50x-off", "axb"}, 6},
		{"status and limit", engine.SagaFilter{Status: engine.Running, Limit: 1}, []string{"tie-b"}, 6},
		{"status none has", engine.SagaFilter{Status: engine.CompensationFailed, Limit: 20}, nil, 0},
		{"after", engine.SagaFilter{After: after(7, "c"), Limit: 20}, all[4:], 10},
		{"after the first of a tie", engine.SagaFilter{After: after(8, "tie-b"), Limit: 3}, []string{"tie-a", "c", "café-1"}, 10},
		{"after, status and limit", engine.SagaFilter{Status: engine.Running, After: after(8, "tie-b"), Limit: 1}, []string{"c"}, 6},
		{"after the last", engine.SagaFilter{After: after(1, "axb"), Limit: 20}, nil, 10},
		{"after, given in another zone", engine.SagaFilter{After: &engine.SagaCursor{CreatedAt: stored(when(3)).In(zone), ID: d.id("50x-off")},
			Limit: 20}, []string{"a_b", "axb"}, 10},
		{"id prefix", engine.SagaFilter{IDPrefix: d.id("tie"), Limit: 20}, []string{"tie-b", "tie-a"}, 2},
		{"id prefix that is a whole id", engine.SagaFilter{IDPrefix: d.id("tie-a"), Limit: 20}, []string{"tie-a"}, 1},
		{"id prefix, non-ASCII, counted in characters", engine.SagaFilter{IDPrefix: d.id("café"), Limit: 20}, []string{"café-1"}, 1},
		{"id prefix shared by ASCII and non-ASCII", engine.SagaFilter{IDPrefix: d.id("caf"), Limit: 20}, []string{"café-1", "cafe-2"}, 2},
		{"id prefix, case-sensitive", engine.SagaFilter{IDPrefix: d.id("TIE"), Limit: 20}, nil, 0},
		{"id prefix, % is no wildcard", engine.SagaFilter{IDPrefix: d.id("50%"), Limit: 20}, []string{"50%-off"}, 1},
		{"id prefix, _ is no wildcard", engine.SagaFilter{IDPrefix: d.id("a_"), Limit: 20}, []string{"a_b"}, 1},
		{"id prefix longer than any id", engine.SagaFilter{IDPrefix: d.id("tie-a-"), Limit: 20}, nil, 0},
		{"id prefix of every saga", engine.SagaFilter{IDPrefix: d.ns, Limit: 20}, all, 10},
		{"id prefix, after and limit", engine.SagaFilter{IDPrefix: d.id("c"), After: after(7, "c"), Limit: 1}, []string{"café-1"}, 3},
		{"initiator", engine.SagaFilter{Initiator: "agent-2", Limit: 20}, []string{"tie-a", "café-1", "a_b"}, 3},
		{"initiator, status and limit", engine.SagaFilter{Initiator: "agent-1", Status: engine.Running, Limit: 2}, []string{"tie-b", "c"}, 5},
		{"initiator none is", engine.SagaFilter{Initiator: "agent-9", Limit: 20}, nil, 0},
		{"tool, each saga once", engine.SagaFilter{Tool: "sendWireTransfer", Limit: 20}, []string{"tie-b", "tie-a"}, 2},
		{"tool of decisions", engine.SagaFilter{Tool: engine.GateTool, Limit: 20}, []string{"tie-a"}, 1},
		{"tool and status", engine.SagaFilter{Tool: "reserveInventory", Status: engine.Running, Limit: 20}, []string{"tie-b", "c"}, 2},
		{"tool, after and limit", engine.SagaFilter{Tool: "reserveInventory", After: after(9, "d"), Limit: 1}, []string{"tie-b"}, 3},
		{"tool none has, a prefix of one", engine.SagaFilter{Tool: "reserve", Limit: 20}, nil, 0},
		{"in doubt", engine.SagaFilter{InDoubtBefore: when(100), Limit: 20}, []string{"d", "tie-b", "café-1", "50%-off"}, 4},
		{"in doubt, touched strictly before", engine.SagaFilter{InDoubtBefore: stored(when(20)), Limit: 20}, []string{"tie-b", "50%-off"}, 2},
		{"in doubt before, given in another zone", engine.SagaFilter{InDoubtBefore: stored(when(11)).In(pdt), Limit: 20}, []string{"50%-off"}, 1},
		{"in doubt, none that old", engine.SagaFilter{InDoubtBefore: stored(when(10)), Limit: 20}, nil, 0},
		{"in doubt and initiator", engine.SagaFilter{InDoubtBefore: when(100), Initiator: "agent-2", Limit: 20}, []string{"café-1"}, 1},
		{"in doubt, status, after and limit", engine.SagaFilter{InDoubtBefore: when(100), Status: engine.Running, After: after(8, "tie-b"),
			Limit: 1}, []string{"café-1"}, 3},
	}
}

func testSagas(t *testing.T, d *drv) {
	byName, tests := sagaListing(t, d)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := d.db.Sagas(t.Context(), tt.f)
			var want []engine.Saga
			for _, name := range tt.want {
				want = append(want, byName[name])
			}
			if diff := cmp.Diff(want, got, exact...); err != nil || diff != "" {
				t.Errorf("Sagas(%s) = %v; (-want +got):\n%s", show(tt.f), err, diff)
			}
		})
	}
}

func testCountSagas(t *testing.T, d *drv) {
	_, tests := sagaListing(t, d)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got, err := d.db.CountSagas(t.Context(), tt.f); err != nil || got != tt.count {
				t.Errorf("CountSagas(%s) = %d, %v; want %d", show(tt.f), got, err, tt.count)
			}
		})
	}
}

// show spells out the fields of a filter that are set, and of the cursor
// it points to, for a failure message.
func show(f any) string {
	v := reflect.Indirect(reflect.ValueOf(f))
	if v.Kind() != reflect.Struct || v.Type() == reflect.TypeFor[time.Time]() {
		return fmt.Sprint(v)
	}
	var fields []string
	for i := range v.NumField() {
		if fv := v.Field(i); !fv.IsZero() {
			fields = append(fields, v.Type().Field(i).Name+":"+show(fv.Interface()))
		}
	}
	return "{" + strings.Join(fields, " ") + "}"
}

func testStoreEntries(t *testing.T, d *drv) {
	id, other := d.id("s"), d.id("other")
	es := []engine.Entry{mkEntry(id, 1, when(1)), mkEntry(id, 2, when(2)), mkEntry(id, 3, when(3))}
	// What the engine journals, byte for byte: JSON with escapes, non-ASCII
	// text, tabs, CR LF, several lines.
	es[2].Input = `{"note":"naïve café — 東京\t\"quoted\" \\ back\\slash"}`
	es[2].Payload = "approver=manager@company.com\r\nreason=line one\nline two\nauth=oidc"
	es[2].Phase, es[2].ToolName = engine.PhaseApproved, engine.GateTool
	otherEntry := mkEntry(other, 1, when(0))
	createSagas(t, d.db, mkSaga(id, engine.Running, when(0)), mkSaga(other, engine.Running, when(0)))
	write(t, d.db, func(tx engine.Tx) error {
		return errors.Join(tx.Append(es[2]), tx.Append(otherEntry), tx.Append(es[0]), tx.Append(es[1]))
	})
	tests := []struct {
		name, saga string
		want       []engine.Entry
	}{
		{"ordered by seq, byte for byte", id, storedEntries(es...)},
		{"one saga's only", other, storedEntries(otherEntry)},
		{"unknown saga", d.id("nobody"), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := d.db.Entries(t.Context(), tt.saga)
			if diff := cmp.Diff(tt.want, got, exact...); err != nil || diff != "" {
				t.Errorf("Entries(%s) = %v; (-want +got):\n%s", tt.saga, err, diff)
			}
		})
	}
}

func testSnapshot(t *testing.T, d *drv) {
	ctx := t.Context()
	id, other := d.id("s"), d.id("other")
	s := mkSaga(id, engine.AwaitingApproval, when(0))
	es := []engine.Entry{mkEntry(id, 1, when(1)), mkEntry(id, 2, when(2)), mkEntry(id, 3, when(3))}
	rs := []engine.ApprovalRequest{mkRequest(id, 2, when(3)), mkRequest(id, 3, when(2))} // seq order is not creation order
	cs := []engine.Call{mkCall(id, 1, engine.CallExecuted, when(4)), mkCall(id, 4, engine.CallRunning, when(1))}
	cs[1].Requester = "agent-2"
	createSagas(t, d.db, s, mkSaga(other, engine.Running, when(0)))
	write(t, d.db, func(tx engine.Tx) error {
		return errors.Join(tx.Append(es[2]), tx.Append(es[0]), tx.Append(es[1]), tx.Append(mkEntry(other, 1, when(0))),
			tx.PutApproval(rs[1]), tx.PutApproval(rs[0]), tx.PutApproval(mkRequest(other, 1, when(0))),
			tx.PutCall(cs[1]), tx.PutCall(mkCall(other, 1, engine.CallRunning, when(0))), tx.PutCall(cs[0]))
	})
	tests := []struct {
		name, saga string
		calls      bool
		want       engine.Snapshot
	}{
		{"saga, journal, requests and calls, by seq", id, true, engine.Snapshot{Saga: new(storedSaga(s)), Entries: storedEntries(es...),
			Requests: storedRequests(rs...), Calls: storedCalls(cs...)}},
		{"without calls", id, false, engine.Snapshot{Saga: new(storedSaga(s)), Entries: storedEntries(es...),
			Requests: storedRequests(rs...)}},
		{"unknown saga", d.id("nobody"), true, engine.Snapshot{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := d.db.Snapshot(ctx, tt.saga, tt.calls)
			if diff := cmp.Diff(tt.want, got, exact...); err != nil || diff != "" {
				t.Errorf("Snapshot(%s, calls %v) = %v; (-want +got):\n%s", tt.saga, tt.calls, err, diff)
			}
		})
	}
	t.Run("never half-way through an Update", func(t *testing.T) {
		// Each Update appends an entry and moves the head to it; every
		// snapshot must show a head that is its journal's last entry.
		w := d.id("w")
		createSagas(t, d.db, mkSaga(w, engine.Running, when(0)))
		done := make(chan struct{})
		go func() {
			defer close(done)
			for seq := int64(1); seq <= 30; seq++ {
				err := d.db.Update(ctx, func(tx engine.Tx) error {
					s, err := tx.LockSaga(w)
					if err != nil {
						return err
					}
					e := mkEntry(w, seq, when(int(seq)))
					if err := tx.Append(e); err != nil {
						return err
					}
					s.HeadSeq, s.HeadHash = seq, e.Hash
					return tx.PutSaga(s)
				})
				if err != nil {
					t.Errorf("Update appending seq %d to %s: %v", seq, w, err)
					return
				}
			}
		}()
		defer func() { <-done }()
		for running := true; running; {
			select {
			case <-done:
				running = false
			default:
			}
			snap, err := d.db.Snapshot(ctx, w, false)
			if err != nil {
				t.Errorf("Snapshot(%s) while writing: %v", w, err)
				return
			}
			if n := int64(len(snap.Entries)); snap.Saga == nil || snap.Saga.HeadSeq != n || (n > 0 && snap.Entries[n-1].Seq != n) {
				t.Errorf("Snapshot(%s) while writing = saga %+v with %d entries; want the head at the last entry", w, snap.Saga, n)
				return
			}
		}
	})
}

func testApprovals(t *testing.T, d *drv) {
	a, b := d.id("a"), d.id("b")
	rs := map[string]engine.ApprovalRequest{
		"b/2": mkRequest(b, 2, when(1)),
		"a/5": mkRequest(a, 5, when(2)),
		"b/4": mkRequest(b, 4, when(2)), // created with a/5: the saga breaks the tie
		"a/3": mkRequest(a, 3, when(3)),
	}
	createSagas(t, d.db, mkSaga(a, engine.AwaitingApproval, when(0)), mkSaga(b, engine.AwaitingApproval, when(0)))
	write(t, d.db, func(tx engine.Tx) error {
		return errors.Join(tx.PutApproval(rs["a/3"]), tx.PutApproval(rs["b/4"]), tx.PutApproval(rs["a/5"]), tx.PutApproval(rs["b/2"]))
	})
	tests := []struct {
		name, saga string
		want       []string
	}{
		{"every saga's, oldest first", "", []string{"b/2", "a/5", "b/4", "a/3"}},
		{"one saga's, by seq", a, []string{"a/3", "a/5"}},
		{"another saga's, by seq", b, []string{"b/2", "b/4"}},
		{"unknown saga", d.id("nobody"), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := d.db.Approvals(t.Context(), tt.saga)
			var want []engine.ApprovalRequest
			for _, k := range tt.want {
				want = append(want, rs[k])
			}
			if diff := cmp.Diff(storedRequests(want...), got, exact...); err != nil || diff != "" {
				t.Errorf("Approvals(%q) = %v; (-want +got):\n%s", tt.saga, err, diff)
			}
		})
	}
}

func testStoreInDoubt(t *testing.T, d *drv) {
	a, b := d.id("a"), d.id("b")
	cs := map[string]engine.Call{
		"a/1": mkCall(a, 1, engine.CallRunning, when(3)),
		"a/2": mkCall(a, 2, engine.CallExecuted, when(1)),
		"a/3": mkCall(a, 3, engine.CallCompensating, when(2)),
		"b/1": mkCall(b, 1, engine.CallRunning, when(2)), // touched with a/3: the saga breaks the tie
		"b/2": mkCall(b, 2, engine.CallFailed, when(0)),
		"b/3": mkCall(b, 3, engine.CallCompensated, when(0)),
		"b/4": mkCall(b, 4, engine.CallCompensationFailed, when(0)),
		"b/5": mkCall(b, 5, engine.CallRunning, when(5)),
	}
	for k, r := range map[string]string{"a/1": "r1", "b/5": "r2", "b/4": "r1"} {
		c := cs[k]
		c.Runner = r
		cs[k] = c
	}
	createSagas(t, d.db, mkSaga(a, engine.Running, when(0)), mkSaga(b, engine.Running, when(0)))
	write(t, d.db, func(tx engine.Tx) error {
		var err error
		for _, c := range cs {
			err = errors.Join(err, tx.PutCall(c))
		}
		return err
	})
	tests := []struct {
		name   string
		saga   string
		before time.Time
		gone   []string
		want   []string
	}{
		{"every unsettled call, oldest first", "", when(100), nil, []string{"a/3", "b/1", "a/1", "b/5"}},
		{"touched strictly before", "", stored(when(3)), nil, []string{"a/3", "b/1"}},
		{"before, given in another zone", "", stored(when(4)).In(time.FixedZone("PDT", -7*60*60)), nil, []string{"a/3", "b/1", "a/1"}},
		{"none that old", "", stored(when(2)), nil, nil},
		{"or of a runner gone, settled calls not", "", stored(when(3)), []string{"r1"}, []string{"a/3", "b/1", "a/1"}},
		{"of either runner gone", "", stored(when(2)), []string{"r2", "r1", "r9"}, []string{"a/1", "b/5"}},
		{"of one saga", b, stored(when(3)), []string{"r1", "r2"}, []string{"b/1", "b/5"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := d.db.InDoubt(t.Context(), tt.saga, tt.before, tt.gone)
			var want []engine.Call
			for _, k := range tt.want {
				want = append(want, cs[k])
			}
			if diff := cmp.Diff(storedCalls(want...), got, exact...); err != nil || diff != "" {
				t.Errorf("InDoubt(%q, %v, %v) = %v; (-want +got):\n%s", tt.saga, tt.before, tt.gone, err, diff)
			}
		})
	}
}

// testRunners: Register records a runner and removes the row of the one
// it retires and of those unseen for a day; Runners reads the runners of
// unsettled calls as their rows have them, none for a runner without
// one; Beat is NotFound once the row is gone.
func testRunners(t *testing.T, d *drv) {
	ctx := t.Context()
	r := func(id string, seen time.Time) engine.Runner {
		return engine.Runner{ID: id, Replica: "host:/cp", StartedAt: stored(when(0)), SeenAt: stored(seen)}
	}
	for _, x := range []engine.Runner{r("old", when(1)), r("stale", when(2)), r("live", when(3))} {
		if err := d.db.Register(ctx, x, ""); err != nil {
			t.Fatalf("Register(%s): %v", x.ID, err)
		}
	}
	a := d.id("a")
	createSagas(t, d.db, mkSaga(a, engine.Running, when(0)))
	write(t, d.db, func(tx engine.Tx) error {
		var err error
		for i, runner := range []string{"old", "live", "gone", "live", "settled"} {
			c := mkCall(a, int64(i+1), engine.CallRunning, when(0))
			if runner == "settled" {
				c.State = engine.CallExecuted
			}
			c.Runner = runner
			err = errors.Join(err, tx.PutCall(c))
		}
		return err
	})
	got, err := d.db.Runners(ctx)
	want := []engine.Runner{{ID: "gone"}, r("live", when(3)), r("old", when(1))}
	if diff := cmp.Diff(want, got); err != nil || diff != "" {
		t.Errorf("Runners = %v; (-want +got):\n%s", err, diff)
	}
	// A process that retires "old" registers a day after "stale" beat.
	next := r("next", when(2).Add(24*time.Hour+time.Second))
	next.StartedAt = next.SeenAt
	if err := d.db.Register(ctx, next, "old"); err != nil {
		t.Fatal(err)
	}
	got, err = d.db.Runners(ctx)
	want = []engine.Runner{{ID: "gone"}, r("live", when(3)), {ID: "old"}}
	if diff := cmp.Diff(want, got); err != nil || diff != "" {
		t.Errorf("Runners after one retired old = %v; (-want +got):\n%s", err, diff)
	}
	wantKind(t, "Beat of the stale runner", d.db.Beat(ctx, "stale", when(9)), engine.NotFound)
	if err := d.db.Beat(ctx, "live", when(9)); err != nil {
		t.Errorf("Beat(live): %v", err)
	}
	if err := d.db.Retire(ctx, "live"); err != nil {
		t.Errorf("Retire(live): %v", err)
	}
	wantKind(t, "Beat of a runner removed", d.db.Beat(ctx, "live", when(10)), engine.NotFound)
}

// pendingCase is one listing of pending requests: the filter, the requests
// Pending returns for it (as saga/seq, in order), and what CountPending
// says, After and Limit ignored.
type pendingCase struct {
	name  string
	f     engine.PendingFilter
	want  []string
	count int
}

// pendingListing writes the requests that Pending and CountPending are
// tested on, with the journals that approve, re-plan and refuse them, and
// returns them as Pending gives them back, by saga/seq, and the cases to
// run.
func pendingListing(t *testing.T, d *drv) (map[string]engine.Pending, []pendingCase) {
	t.Helper()
	a, b, c := d.id("a"), d.id("b"), d.id("c")
	for _, s := range []struct{ id, initiator string }{{b, "agent-b"}, {c, "agent-a"}, {a, "agent-a"}} {
		saga := mkSaga(s.id, engine.AwaitingApproval, when(0))
		saga.Initiator = s.initiator
		createSagas(t, d.db, saga)
	}
	req := func(saga string, seq int64, tool string, created int) engine.ApprovalRequest {
		r := mkRequest(saga, seq, when(created))
		r.ToolName = tool
		return r
	}
	rs := map[string]engine.ApprovalRequest{
		"a/1":  req(a, 1, "sendWireTransfer", 1),
		"a/2":  req(a, 2, "chargeCard", 2), // created with b/3, b/4 and c/1: the saga, then the seq, breaks the tie
		"b/3":  req(b, 3, "sendWireTransfer", 2),
		"b/4":  req(b, 4, "chargeCard", 2),
		"c/1":  req(c, 1, "sendWireTransfer", 2),
		"a/3":  req(a, 3, "sendWireTransfer", 4),
		"c/12": req(c, 12, "sendWireTransfer", 7),
	}
	// Their rules and votes: a/3 and c/12 are approved; b/3 and b/4
	// wait for a second approval under rule "two" of policy p2, a/1 and
	// c/1 for any vote under rule "large" of policy p1; b/3 is due.
	set := func(k, policy, rule string, quorum int, voters ...string) {
		r := rs[k]
		r.Policy, r.Rule, r.Quorum, r.Voters = policy, rule, quorum, voters
		rs[k] = r
	}
	set("a/3", "", "", 1, "manager@company.com")
	set("c/12", "", "", 1, "cfo@company.com")
	set("b/3", "p2", "two", 2, "manager@company.com")
	set("b/4", "p2", "two", 2, "a_b%c\\d")
	set("a/1", "p1", "large", 1)
	set("c/1", "p1", "large", 1)
	b3 := rs["b/3"]
	b3.Due = when(9)
	rs["b/3"] = b3
	gated := func(r engine.ApprovalRequest) engine.Entry {
		e := mkEntry(r.SagaID, r.JournalSeq, r.CreatedAt)
		e.ToolName, e.Phase, e.Input = r.ToolName, engine.PhaseAwaitingApproval, r.Input
		return e
	}
	entry := func(saga string, seq int64, at int, tool string, ph engine.Phase, input, payload string) engine.Entry {
		e := mkEntry(saga, seq, when(at))
		e.ToolName, e.Phase, e.Input, e.Payload = tool, ph, input, payload
		return e
	}
	okA, okC := "approver=manager@company.com\nreason=invoice checked\nauth=oidc", "approver=cfo@company.com\nreason=ok\nauth=oidc"
	write(t, d.db, func(tx engine.Tx) error {
		err := errors.Join(
			// a/3 re-plans a/1 and is approved; a/2 is rejected, which is
			// no approval, and no refusal of its tool.
			tx.Append(entry(a, 4, 6, engine.GateTool, engine.PhaseApproved, "seq=3", okA)),
			tx.Append(entry(a, 5, 7, engine.GateTool, engine.PhaseRejected, "seq=2", "approver=manager@company.com\nreason=no\nauth=oidc")),
			// b/3 re-plans b/1, whose resume was refused.
			tx.Append(entry(b, 1, 1, "sendWireTransfer", engine.PhaseAwaitingApproval, `{"amount":"1","to":"alice"}`, "requester=agent-1")),
			tx.Append(entry(b, 2, 1, "sendWireTransfer", engine.PhaseRejected, "seq=1", engine.RefusedNoApproval)),
			// c/12 re-plans c/1 and is approved; c/1 is not, though
			// "seq=12" starts with "seq=1".
			tx.Append(entry(c, 13, 8, engine.GateTool, engine.PhaseApproved, "seq=12", okC)),
		)
		for _, r := range rs {
			err = errors.Join(err, tx.PutApproval(r), tx.Append(gated(r)))
		}
		return err
	})
	want := map[string]engine.Pending{}
	for k, r := range rs {
		p := engine.Pending{ApprovalRequest: storedRequests(r)[0], Initiator: "agent-a"}
		if r.SagaID == b {
			p.Initiator = "agent-b"
		}
		want[k] = p
	}
	mark := func(k string, f func(*engine.Pending)) { p := want[k]; f(&p); want[k] = p }
	mark("a/3", func(p *engine.Pending) { p.Replanned = true })
	mark("b/3", func(p *engine.Pending) { p.Replanned, p.Refused = true, true })
	mark("c/12", func(p *engine.Pending) { p.Replanned = true })
	mark("a/1", func(p *engine.Pending) { p.Later = true })
	mark("c/1", func(p *engine.Pending) { p.Later = true })
	voter := func(id string, rules ...engine.RuleRef) *engine.Voter { return &engine.Voter{ID: id, Rules: rules} }
	large, two, legacy := engine.RuleRef{Policy: "p1", Rule: "large"}, engine.RuleRef{Policy: "p2", Rule: "two"}, engine.RuleRef{}

	after := func(n int, saga string, seq int64) *engine.PendingCursor {
		return &engine.PendingCursor{CreatedAt: stored(when(n)), SagaID: d.id(saga), JournalSeq: seq}
	}
	all := []string{"a/1", "a/2", "b/3", "b/4", "c/1", "a/3", "c/12"}
	return want, []pendingCase{
		{"all, oldest first, ties by saga then seq", engine.PendingFilter{Limit: 20}, all, 7},
		{"limit", engine.PendingFilter{Limit: 3}, all[:3], 7},
		{"tool", engine.PendingFilter{Tool: "chargeCard", Limit: 20}, []string{"a/2", "b/4"}, 2},
		{"tool none has", engine.PendingFilter{Tool: "reserveInventory", Limit: 20}, nil, 0},
		{"one saga", engine.PendingFilter{SagaID: c, Limit: 20}, []string{"c/1", "c/12"}, 2},
		{"unknown saga", engine.PendingFilter{SagaID: d.id("nobody"), Limit: 20}, nil, 0},
		{"initiator", engine.PendingFilter{Initiator: "agent-b", Limit: 20}, []string{"b/3", "b/4"}, 2},
		{"initiator, not requester", engine.PendingFilter{Initiator: "agent-1", Limit: 20}, nil, 0},
		{"approved", engine.PendingFilter{Approved: &yes, Limit: 20}, []string{"a/3", "c/12"}, 2},
		{"undecided", engine.PendingFilter{Approved: &no, Limit: 20}, all[:5], 5},
		{"tool, initiator and undecided", engine.PendingFilter{Tool: "sendWireTransfer", Initiator: "agent-a", Approved: &no, Limit: 20},
			[]string{"a/1", "c/1"}, 2},
		{"after", engine.PendingFilter{After: after(1, "a", 1), Limit: 20}, all[1:], 7},
		{"after, the next in the saga created with it", engine.PendingFilter{After: after(2, "b", 3), Limit: 20}, all[3:], 7},
		{"after, the next saga created with it", engine.PendingFilter{After: after(2, "b", 4), Limit: 20}, all[4:], 7},
		{"after the last of a tie", engine.PendingFilter{After: after(2, "c", 1), Limit: 20}, all[5:], 7},
		{"after one no longer pending", engine.PendingFilter{After: after(2, "a", 9), Limit: 20}, all[2:], 7},
		{"after the last", engine.PendingFilter{After: after(7, "c", 12), Limit: 20}, nil, 7},
		{"after, given in another zone", engine.PendingFilter{After: &engine.PendingCursor{CreatedAt: stored(when(2)).In(zone),
			SagaID: b, JournalSeq: 4}, Limit: 20}, all[4:], 7},
		{"after, undecided and limit", engine.PendingFilter{Approved: &no, After: after(2, "b", 3), Limit: 1}, []string{"b/4"}, 5},
		// Backwards: the page just before a request, or the newest, still
		// oldest first.
		{"last", engine.PendingFilter{Last: true, Limit: 3}, all[4:], 7},
		{"last, more than there are", engine.PendingFilter{Last: true, Limit: 20}, all, 7},
		{"last, one saga", engine.PendingFilter{SagaID: c, Last: true, Limit: 1}, []string{"c/12"}, 2},
		{"last, undecided", engine.PendingFilter{Approved: &no, Last: true, Limit: 2}, []string{"b/4", "c/1"}, 5},
		{"before", engine.PendingFilter{Before: after(4, "a", 3), Limit: 20}, all[:5], 7},
		{"before, the one before in the saga created with it", engine.PendingFilter{Before: after(2, "b", 4), Limit: 1}, []string{"b/3"}, 7},
		{"before, the saga before created with it", engine.PendingFilter{Before: after(2, "b", 3), Limit: 20}, all[:2], 7},
		{"before, a page that ends in a tie", engine.PendingFilter{Before: after(4, "a", 3), Limit: 3}, all[2:5], 7},
		{"before the first of a tie", engine.PendingFilter{Before: after(2, "a", 2), Limit: 20}, all[:1], 7},
		{"before one no longer pending", engine.PendingFilter{Before: after(2, "a", 9), Limit: 20}, all[:2], 7},
		{"before the first", engine.PendingFilter{Before: after(1, "a", 1), Limit: 20}, nil, 7},
		{"before, given in another zone", engine.PendingFilter{Before: &engine.PendingCursor{CreatedAt: stored(when(2)).In(zone),
			SagaID: b, JournalSeq: 4}, Limit: 20}, all[:3], 7},
		{"before, undecided and limit", engine.PendingFilter{Approved: &no, Before: after(7, "c", 12), Limit: 2}, []string{"b/4", "c/1"}, 5},
		{"waiting for a voter of every rule", engine.PendingFilter{Voter: voter("someone", large, two, legacy), Limit: 20},
			[]string{"a/1", "a/2", "b/3", "b/4", "c/1"}, 5},
		{"waiting for a voter of one rule", engine.PendingFilter{Voter: voter("someone", two), Limit: 20}, []string{"b/3", "b/4"}, 2},
		{"not what they voted on", engine.PendingFilter{Voter: voter("manager@company.com", two, legacy), Limit: 20}, []string{"a/2", "b/4"}, 2},
		{"a voter whose name holds LIKE's wildcards", engine.PendingFilter{Voter: voter("a_b%c\\d", two), Limit: 20}, []string{"b/3"}, 1},
		{"a name that only matches as a pattern", engine.PendingFilter{Voter: voter("axb%c\\d", two), Limit: 20}, []string{"b/3", "b/4"}, 2},
		{"not what they started", engine.PendingFilter{Voter: voter("agent-a", large, two), Limit: 20}, []string{"b/3", "b/4"}, 2},
		{"not what they asked for", engine.PendingFilter{Voter: voter("agent-1", large, two), Limit: 20}, nil, 0},
		{"a voter of no rule", engine.PendingFilter{Voter: voter("someone"), Limit: 20}, nil, 0},
	}
}

func testStorePending(t *testing.T, d *drv) {
	byKey, tests := pendingListing(t, d)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := d.db.Pending(t.Context(), tt.f)
			var want []engine.Pending
			for _, k := range tt.want {
				want = append(want, byKey[k])
			}
			if diff := cmp.Diff(want, got, exact...); err != nil || diff != "" {
				t.Errorf("Pending(%s) = %v; (-want +got):\n%s", show(tt.f), err, diff)
			}
		})
	}
}

func testCountPending(t *testing.T, d *drv) {
	_, tests := pendingListing(t, d)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got, err := d.db.CountPending(t.Context(), tt.f); err != nil || got != tt.count {
				t.Errorf("CountPending(%s) = %d, %v; want %d", show(tt.f), got, err, tt.count)
			}
		})
	}
}

func testPendingByTool(t *testing.T, d *drv) {
	if got, err := d.db.PendingByTool(t.Context()); err != nil || len(got) != 0 {
		t.Fatalf("PendingByTool of an empty store = %+v, %v; want none", got, err)
	}
	a, b := d.id("a"), d.id("b")
	request := func(saga string, seq int64, tool string, created time.Time) engine.ApprovalRequest {
		r := mkRequest(saga, seq, created)
		r.ToolName = tool
		return r
	}
	createSagas(t, d.db, mkSaga(a, engine.AwaitingApproval, when(0)), mkSaga(b, engine.AwaitingApproval, when(0)))
	write(t, d.db, func(tx engine.Tx) error {
		return errors.Join(
			tx.PutApproval(request(a, 2, "sendWireTransfer", when(5))),
			tx.PutApproval(request(a, 4, "sendWireTransfer", when(3).In(time.FixedZone("PDT", -7*60*60)))), // the oldest, written later
			tx.PutApproval(request(b, 2, "sendWireTransfer", when(9))),
			tx.PutApproval(request(b, 4, "chargeCard", when(7))),
		)
	})
	want := []engine.ToolPending{
		{Tool: "chargeCard", Count: 1, Oldest: stored(when(7))},
		{Tool: "sendWireTransfer", Count: 3, Oldest: stored(when(3))},
	}
	got, err := d.db.PendingByTool(t.Context())
	if diff := cmp.Diff(want, got, exact...); err != nil || diff != "" {
		t.Errorf("PendingByTool = %v; (-want +got):\n%s", err, diff)
	}
	write(t, d.db, func(tx engine.Tx) error { _, err := tx.DeleteApprovals(b, 4); return err })
	got, err = d.db.PendingByTool(t.Context())
	if diff := cmp.Diff(want[1:], got, exact...); err != nil || diff != "" {
		t.Errorf("PendingByTool after chargeCard's request was dropped = %v; (-want +got):\n%s", err, diff)
	}
}

func testLastExecuted(t *testing.T, d *drv) {
	// Tools of this test's own: the question spans every saga.
	transfer, card := d.id("sendWireTransfer"), d.id("chargeCard")
	a, b := d.id("a"), d.id("b")
	entry := func(saga string, seq int64, at int, tool string, ph engine.Phase) engine.Entry {
		e := mkEntry(saga, seq, when(at))
		e.ToolName, e.Phase = tool, ph
		return e
	}
	// The newest is not the one with the highest seq.
	sent := entry(a, 2, 6, transfer, engine.PhaseExecuted)
	sent.Payload = "sent\nreference=WT-77"
	es := map[string]engine.Entry{
		"b/1": entry(b, 1, 1, transfer, engine.PhaseIntent),
		"b/2": entry(b, 2, 2, transfer, engine.PhaseExecuted),
		"b/3": entry(b, 3, 3, transfer, engine.PhaseIntent),
		"b/4": entry(b, 4, 4, transfer, engine.PhaseExecuted),
		"b/5": entry(b, 5, 5, transfer, engine.PhaseFailed),
		"a/1": entry(a, 1, 5, transfer, engine.PhaseIntent),
		"a/2": sent,
		"b/6": entry(b, 6, 7, transfer, engine.PhaseCompensated),
		"b/7": entry(b, 7, 8, card, engine.PhaseExecuted),
		"a/3": entry(a, 3, 9, engine.GateTool, engine.PhaseExecuted), // a resolution
	}
	createSagas(t, d.db, mkSaga(a, engine.Running, when(0)), mkSaga(b, engine.Running, when(0)))
	write(t, d.db, func(tx engine.Tx) error {
		var err error
		for _, e := range es {
			err = errors.Join(err, tx.Append(e))
		}
		return err
	})
	tests := []struct {
		name   string
		tool   string
		before time.Time
		want   string // "" for NotFound
	}{
		{"the newest, in any saga", transfer, when(100), "a/2"},
		{"strictly before", transfer, stored(when(6)), "b/4"},
		{"strictly before, again", transfer, stored(when(4)), "b/2"},
		{"before, given in another zone", transfer, stored(when(5)).In(time.FixedZone("PDT", -7*60*60)), "b/4"},
		{"none that old", transfer, stored(when(2)), ""},
		{"another tool", card, when(100), "b/7"},
		{"a tool never executed", d.id("reserveInventory"), when(100), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := d.db.LastExecuted(t.Context(), tt.tool, tt.before)
			what := fmt.Sprintf("LastExecuted(%s, %v)", tt.tool, tt.before)
			var want engine.Entry
			if tt.want == "" {
				wantKind(t, what, err, engine.NotFound)
			} else {
				want = storedEntries(es[tt.want])[0]
				wantErr(t, what, err, nil)
			}
			if diff := cmp.Diff(want, got, exact...); diff != "" {
				t.Errorf("%s (-want +got):\n%s", what, diff)
			}
		})
	}
}

func testLockSaga(t *testing.T, d *drv) {
	id := d.id("s")
	s := mkSaga(id, engine.Running, when(0))
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
	s := mkSaga(id, engine.Running, when(0))
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
	s := storedSaga(mkSaga(id, engine.Running, when(0)))
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
		{"another status", func() engine.Saga { x := s; x.Status = engine.AwaitingApproval; return x }(), 0, "", true},
		{"ended since", func() engine.Saga { x := s; x.Ended = true; return x }(), 0, "", true},
		{"changed since", func() engine.Saga { x := s; x.UpdatedAt = x.UpdatedAt.Add(time.Microsecond); return x }(), 0, "", true},
		{"no such saga", storedSaga(mkSaga(d.id("nobody"), engine.Running, when(0))), 0, "", true},
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
	s := mkSaga(id, engine.Running, when(0))
	again := mkSaga(id, engine.Completed, when(9))
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
	s := mkSaga(id, engine.Running, when(0))
	createSagas(t, d.db, s)
	put := engine.Saga{ID: id, Status: engine.Compensated, Initiator: "agent-2", Ended: true,
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
	createSagas(t, d.db, mkSaga(id, engine.Running, when(0)))
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
			wantKind(t, fmt.Sprintf("Append(%+v) at a taken seq", forged), appendErr, engine.Conflict)
		}
		wantKind(t, "Update of an Append at a taken seq", err, engine.Conflict)
		if got, err := d.db.Entries(ctx, id); err != nil || !cmp.Equal(storedEntries(e), got, exact...) {
			t.Errorf("Entries(%s) after a conflicting Append = %+v, %v; want the first entry unchanged", id, got, err)
		}
	})
}

func testTxEntries(t *testing.T, d *drv) {
	id := d.id("s")
	createSagas(t, d.db, mkSaga(id, engine.Running, when(0)))
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

func testApproval(t *testing.T, d *drv) {
	id := d.id("s")
	r := mkRequest(id, 3, when(1))
	createSagas(t, d.db, mkSaga(id, engine.AwaitingApproval, when(0)))
	write(t, d.db, func(tx engine.Tx) error { return tx.PutApproval(r) })
	tests := []struct {
		name, saga string
		seq        int64
		want       engine.ApprovalRequest
		kind       *engine.Kind
	}{
		{"found", id, 3, storedRequests(r)[0], nil},
		{"unknown seq", id, 2, engine.ApprovalRequest{}, new(engine.NotFound)},
		{"unknown saga", d.id("nobody"), 3, engine.ApprovalRequest{}, new(engine.NotFound)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			inTx(t, d.db, func(tx engine.Tx) {
				got, err := tx.Approval(tt.saga, tt.seq)
				what := fmt.Sprintf("Approval(%s, %d)", tt.saga, tt.seq)
				wantErr(t, what, err, tt.kind)
				if diff := cmp.Diff(tt.want, got, exact...); diff != "" {
					t.Errorf("%s (-want +got):\n%s", what, diff)
				}
			})
		})
	}
}

func testPutApproval(t *testing.T, d *drv) {
	id := d.id("s")
	r := mkRequest(id, 3, when(1))
	r.Input = "{\"amount\":\"100\",\r\n \"to\":\"名前\"}" // the exact bytes the agent sent
	r.InputHash = engine.PayloadHash(r.Input)
	r.Rule, r.Policy, r.Quorum, r.Due, r.Reason = "large", engine.PayloadHash("policy"), 3, when(600), "invoice 77, due Friday"
	createSagas(t, d.db, mkSaga(id, engine.AwaitingApproval, when(0)))
	write(t, d.db, func(tx engine.Tx) error { return tx.PutApproval(r) })
	inTx(t, d.db, func(tx engine.Tx) {
		if got, err := tx.Approval(id, 3); err != nil || !cmp.Equal(storedRequests(r)[0], got, exact...) {
			t.Errorf("Approval(%s, 3) after PutApproval(%+v) = %+v, %v; want it", id, r, got, err)
		}
	})
	if got, err := d.db.Approvals(t.Context(), id); err != nil || !cmp.Equal(storedRequests(r), got, exact...) {
		t.Errorf("Approvals(%s) after PutApproval(%+v) = %+v, %v; want it", id, r, got, err)
	}
}

// testPutVotes: who stands behind a request and when it is due, kept
// as written, and nothing else of the row changed; no voters and no due
// time read back as none.
func testPutVotes(t *testing.T, d *drv) {
	id := d.id("s")
	r := mkRequest(id, 3, when(1))
	r.Quorum, r.Due = 2, when(60)
	createSagas(t, d.db, mkSaga(id, engine.AwaitingApproval, when(0)))
	write(t, d.db, func(tx engine.Tx) error {
		return errors.Join(tx.PutApproval(r), tx.PutApproval(mkRequest(id, 5, when(2))))
	})
	for _, tt := range []struct {
		name   string
		voters []string
		due    time.Time
	}{
		{"one vote", []string{"https://idp.example.com#alice"}, when(60)},
		{"quorum, a grant", []string{"https://idp.example.com#alice", "token:bob"}, when(7200)},
		{"withdrawn, no deadline", nil, time.Time{}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			write(t, d.db, func(tx engine.Tx) error { return tx.PutVotes(id, 3, tt.voters, tt.due) })
			want := r
			want.Voters, want.Due = tt.voters, tt.due
			got, err := d.db.Approvals(t.Context(), id)
			if err != nil || len(got) != 2 || !cmp.Equal(storedRequests(want, mkRequest(id, 5, when(2))), got, exact...) {
				t.Errorf("Approvals(%s) after PutVotes(%v, %v) = %+v, %v;\n(-want +got):\n%s", id, tt.voters, tt.due, got, err,
					cmp.Diff(storedRequests(want, mkRequest(id, 5, when(2))), got, exact...))
			}
		})
	}
}

// testDueApprovals: the requests due at or before a time, soonest first;
// none that has no due time.
func testDueApprovals(t *testing.T, d *drv) {
	id := d.id("s")
	createSagas(t, d.db, mkSaga(id, engine.AwaitingApproval, when(0)))
	rs := []engine.ApprovalRequest{mkRequest(id, 1, when(1)), mkRequest(id, 2, when(1)), mkRequest(id, 3, when(1)), mkRequest(id, 4, when(1))}
	rs[0].Due, rs[1].Due, rs[3].Due = when(30), when(10), when(20)
	write(t, d.db, func(tx engine.Tx) error {
		return errors.Join(tx.PutApproval(rs[0]), tx.PutApproval(rs[1]), tx.PutApproval(rs[2]), tx.PutApproval(rs[3]))
	})
	mine := func(got []engine.ApprovalRequest) []int64 {
		var seqs []int64
		for _, r := range got {
			if r.SagaID == id {
				seqs = append(seqs, r.JournalSeq)
			}
		}
		return seqs
	}
	for _, tt := range []struct {
		name  string
		at    time.Time
		limit int
		want  []int64
	}{
		{"every one due", when(100), 10, []int64{2, 4, 1}},
		{"due at that very time", stored(when(20)), 10, []int64{2, 4}},
		{"given in another zone", stored(when(20)).In(time.FixedZone("PDT", -7*60*60)), 10, []int64{2, 4}},
		{"none yet", when(5), 10, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := d.db.DueApprovals(t.Context(), tt.at, tt.limit)
			if err != nil || !slices.Equal(mine(got), tt.want) {
				t.Errorf("DueApprovals(%v, %d) = %v, %v; want seqs %v", tt.at, tt.limit, mine(got), err, tt.want)
			}
		})
	}
}

// testPendingEntries: the AWAITING_APPROVAL entries of the pending
// requests, by saga and seq, without their input, a page at a time after
// a key; whatever the rows' own columns say, and none for an entry no row
// stands for.
func testPendingEntries(t *testing.T, d *drv) {
	a, b := d.id("a"), d.id("b")
	createSagas(t, d.db, mkSaga(a, engine.AwaitingApproval, when(0)), mkSaga(b, engine.AwaitingApproval, when(0)))
	gated := func(saga string, seq int64) engine.Entry {
		en := mkEntry(saga, seq, when(int(seq)))
		en.ToolName, en.Phase, en.Payload = "sendWireTransfer", engine.PhaseAwaitingApproval, "requester=agent-1\nrule=large\npolicy="+engine.ZeroHash
		return en
	}
	es := []engine.Entry{mkEntry(a, 1, when(1)), gated(a, 2), gated(a, 3), gated(a, 4), gated(b, 1)}
	rs := []engine.ApprovalRequest{mkRequest(a, 2, when(2)), mkRequest(a, 4, when(4)), mkRequest(b, 1, when(1))}
	rs[1].Due, rs[1].Quorum, rs[1].Rule = when(9999), 7, "small" // what the journal says decides, not these
	write(t, d.db, func(tx engine.Tx) error {
		var errs []error
		for _, en := range es {
			errs = append(errs, tx.Append(en))
		}
		for _, r := range rs {
			errs = append(errs, tx.PutApproval(r))
		}
		return errors.Join(errs...)
	})
	want := storedEntries(es[1], es[3], es[4]) // a/3 has no row
	for i := range want {
		want[i].Input = ""
	}
	for _, tt := range []struct {
		name  string
		after engine.RequestKey
		limit int
		want  []engine.Entry
	}{
		{"all", engine.RequestKey{}, 10, want},
		{"a page", engine.RequestKey{}, 2, want[:2]},
		{"the next page", engine.RequestKey{SagaID: a, JournalSeq: 4}, 2, want[2:]},
		{"after a seq of the saga", engine.RequestKey{SagaID: a, JournalSeq: 2}, 10, want[1:]},
		{"after the last", engine.RequestKey{SagaID: b, JournalSeq: 1}, 10, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := d.db.PendingEntries(t.Context(), tt.after, tt.limit)
			if diff := cmp.Diff(tt.want, got, exact...); err != nil || diff != "" {
				t.Errorf("PendingEntries(%+v, %d): %v (-want +got)\n%s", tt.after, tt.limit, err, diff)
			}
		})
	}
}

func testDeleteApprovals(t *testing.T, d *drv) {
	tests := []struct {
		name string
		seq  int64
		n    int
		left []int64
	}{
		{"one", 4, 1, []int64{2, 6}},
		{"all", 0, 3, nil},
		{"none at that seq", 5, 0, []int64{2, 4, 6}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			saga, other := d.id(fmt.Sprint("s", i)), d.id(fmt.Sprint("other", i))
			createSagas(t, d.db, mkSaga(saga, engine.AwaitingApproval, when(0)), mkSaga(other, engine.AwaitingApproval, when(0)))
			write(t, d.db, func(tx engine.Tx) error {
				return errors.Join(tx.PutApproval(mkRequest(saga, 2, when(1))), tx.PutApproval(mkRequest(saga, 4, when(1))),
					tx.PutApproval(mkRequest(saga, 6, when(1))), tx.PutApproval(mkRequest(other, 4, when(1))))
			})
			var n int
			write(t, d.db, func(tx engine.Tx) (err error) { n, err = tx.DeleteApprovals(saga, tt.seq); return err })
			if n != tt.n {
				t.Errorf("DeleteApprovals(%s, %d) = %d, want %d", saga, tt.seq, n, tt.n)
			}
			var want []engine.ApprovalRequest
			for _, seq := range tt.left {
				want = append(want, mkRequest(saga, seq, when(1)))
			}
			if got, err := d.db.Approvals(t.Context(), saga); err != nil || !cmp.Equal(storedRequests(want...), got, exact...) {
				t.Errorf("Approvals(%s) after DeleteApprovals(%s, %d) = %+v, %v; want seqs %v", saga, saga, tt.seq, got, err, tt.left)
			}
			if got, err := d.db.Approvals(t.Context(), other); err != nil || len(got) != 1 {
				t.Errorf("Approvals(%s) after DeleteApprovals(%s, %d) = %+v, %v; want its one request kept", other, saga, tt.seq, got, err)
			}
		})
	}
	t.Run("saga with none", func(t *testing.T) {
		var n int
		write(t, d.db, func(tx engine.Tx) (err error) { n, err = tx.DeleteApprovals(d.id("nobody"), 0); return err })
		if n != 0 {
			t.Errorf("DeleteApprovals(%s, 0) = %d, want 0", d.id("nobody"), n)
		}
	})
}

func testCountApprovals(t *testing.T, d *drv) {
	three, one := d.id("three"), d.id("one")
	createSagas(t, d.db, mkSaga(three, engine.AwaitingApproval, when(0)), mkSaga(one, engine.AwaitingApproval, when(0)),
		mkSaga(d.id("none"), engine.Running, when(0)))
	write(t, d.db, func(tx engine.Tx) error {
		return errors.Join(tx.PutApproval(mkRequest(three, 1, when(1))), tx.PutApproval(mkRequest(three, 2, when(1))),
			tx.PutApproval(mkRequest(three, 3, when(1))), tx.PutApproval(mkRequest(one, 1, when(1))))
	})
	for _, tt := range []struct {
		saga string
		want int
	}{{"three", 3}, {"one", 1}, {"none", 0}, {"nobody", 0}} {
		t.Run(tt.saga, func(t *testing.T) {
			inTx(t, d.db, func(tx engine.Tx) {
				if got, err := tx.CountApprovals(d.id(tt.saga)); err != nil || got != tt.want {
					t.Errorf("CountApprovals(%s) = %d, %v; want %d", d.id(tt.saga), got, err, tt.want)
				}
			})
		})
	}
}

func testCall(t *testing.T, d *drv) {
	id := d.id("s")
	c := mkCall(id, 3, engine.CallExecuted, when(2))
	createSagas(t, d.db, mkSaga(id, engine.Running, when(0)))
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
	createSagas(t, d.db, mkSaga(id, engine.Running, when(0)))
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
	createSagas(t, d.db, mkSaga(id, engine.Running, when(0)), mkSaga(other, engine.Running, when(0)))
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

// Sessions and sign-ins, as auth writes them.

func mkSession(idHash string, created time.Time) auth.Session {
	return auth.Session{IDHash: idHash, Principal: engine.Principal{ID: "https://id.example.com#u1", Name: "Ann Example",
		Auth: "oidc", Roles: []engine.Role{engine.RoleApprover, engine.RoleAuditor}},
		CreatedAt: created, SeenAt: created, ExpiresAt: created.Add(auth.AbsoluteTimeout), Seal: "seal-" + idHash}
}

func storedSession(s auth.Session) auth.Session {
	s.CreatedAt, s.SeenAt, s.ExpiresAt = stored(s.CreatedAt), stored(s.SeenAt), stored(s.ExpiresAt)
	return s
}

func mkLogin(idHash string, created time.Time) auth.Login {
	return auth.Login{IDHash: idHash, State: "state-" + idHash, Nonce: "nonce-" + idHash, Verifier: "verifier-" + idHash,
		ReturnTo: "/sagas/x%2Fy?decided=approved", CreatedAt: created, Seal: "seal-" + idHash}
}

func storedLogin(l auth.Login) auth.Login {
	l.CreatedAt = stored(l.CreatedAt)
	return l
}

// putSession stores a session and fails the test when it cannot.
func putSession(t *testing.T, db DB, s auth.Session) {
	t.Helper()
	if err := db.PutSession(t.Context(), s); err != nil {
		t.Fatalf("PutSession(%+v): %v", s, err)
	}
}

// wantSession fails unless Session(idHash) is want, or NotFound and the
// zero Session for nil.
func wantSession(t *testing.T, db DB, idHash string, want *auth.Session) {
	t.Helper()
	got, err := db.Session(t.Context(), idHash)
	if want == nil {
		wantKind(t, fmt.Sprintf("Session(%s)", idHash), err, engine.NotFound)
		if diff := cmp.Diff(auth.Session{}, got, exact...); diff != "" {
			t.Errorf("Session(%s) = a session; want the zero Session (-want +got):\n%s", idHash, diff)
		}
		return
	}
	if diff := cmp.Diff(storedSession(*want), got, exact...); err != nil || diff != "" {
		t.Errorf("Session(%s) = %v; (-want +got):\n%s", idHash, err, diff)
	}
}

func testPutSession(t *testing.T, d *drv) {
	h1 := d.id("h1")
	t.Run("stores", func(t *testing.T) {
		s := mkSession(h1, when(0))
		putSession(t, d.db, s)
		wantSession(t, d.db, h1, &s)
	})
	t.Run("a principal without roles", func(t *testing.T) {
		s := mkSession(d.id("h2"), when(0))
		s.Principal = engine.Principal{ID: "dev", Auth: "dev"}
		putSession(t, d.db, s)
		wantSession(t, d.db, s.IDHash, &s)
	})
	t.Run("a principal in groups", func(t *testing.T) {
		s := mkSession(d.id("h3"), when(0))
		s.Principal.Groups = []string{"finance-leads", "payments, EU", "Zahlungsfreigabe"}
		putSession(t, d.db, s)
		wantSession(t, d.db, s.IDHash, &s)
	})
	t.Run("the provider's word on the sign-in", func(t *testing.T) {
		s := mkSession(d.id("h4"), when(0))
		s.Principal.Issuer, s.Principal.Subject, s.Principal.AuthTime = "https://id.example.com", "u1", when(-30).Truncate(time.Second).UTC()
		s.Principal.SignIn = &engine.SignIn{Token: "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJ1MSJ9.c2ln", ClientID: "sagacity",
			Key: `{"kty":"RSA","kid":"k1","n":"AQAB","e":"AQAB"}`, KeyID: "NzbLsXh8uDCcd-6MNwXF4W_7noWXFZAfHkxZsRGC9Xs", Reauth: true}
		putSession(t, d.db, s)
		wantSession(t, d.db, s.IDHash, &s)
	})
	t.Run("id taken", func(t *testing.T) {
		s := mkSession(h1, when(1))
		s.Principal.ID = "mallory"
		wantKind(t, fmt.Sprintf("PutSession(%+v) under a taken id", s), d.db.PutSession(t.Context(), s), engine.Conflict)
		wantSession(t, d.db, h1, new(mkSession(h1, when(0))))
	})
	t.Run("drops expired sessions", func(t *testing.T) {
		// Sessions that ended before the new one's creation go; one ending
		// at that instant and one still live stay.
		expired, ending, live := mkSession(d.id("expired"), when(0)), mkSession(d.id("ending"), when(0)), mkSession(d.id("live"), when(0))
		expired.ExpiresAt, ending.ExpiresAt, live.ExpiresAt = when(10), when(20), when(30)
		for _, s := range []auth.Session{expired, ending, live} {
			putSession(t, d.db, s)
		}
		s := mkSession(d.id("new"), stored(when(20)))
		putSession(t, d.db, s)
		wantSession(t, d.db, expired.IDHash, nil)
		wantSession(t, d.db, ending.IDHash, &ending)
		wantSession(t, d.db, live.IDHash, &live)
		wantSession(t, d.db, s.IDHash, &s)
	})
}

func testSession(t *testing.T, d *drv) {
	s := mkSession(d.id("h1"), when(0))
	putSession(t, d.db, s)
	tests := []struct {
		name, idHash string
		want         *auth.Session
	}{
		{"found", s.IDHash, &s},
		{"unknown", d.id("nobody"), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { wantSession(t, d.db, tt.idHash, tt.want) })
	}
}

func testTouchSession(t *testing.T, d *drv) {
	s, other := mkSession(d.id("h1"), when(0)), mkSession(d.id("h2"), when(0))
	putSession(t, d.db, s)
	putSession(t, d.db, other)
	if err := d.db.TouchSession(t.Context(), s.IDHash, when(90), "seal-touched"); err != nil {
		t.Fatalf("TouchSession(%s, %v): %v", s.IDHash, when(90), err)
	}
	touched := s
	touched.SeenAt, touched.Seal = when(90), "seal-touched"
	wantSession(t, d.db, s.IDHash, &touched)
	wantSession(t, d.db, other.IDHash, &other)
}

func testDeleteSession(t *testing.T, d *drv) {
	s, other := mkSession(d.id("h1"), when(0)), mkSession(d.id("h2"), when(0))
	putSession(t, d.db, s)
	putSession(t, d.db, other)
	for _, tt := range []struct{ name, idHash string }{{"deletes", s.IDHash}, {"again", s.IDHash}, {"unknown", d.id("nobody")}} {
		t.Run(tt.name, func(t *testing.T) {
			if err := d.db.DeleteSession(t.Context(), tt.idHash); err != nil {
				t.Errorf("DeleteSession(%s) = %v, want nil", tt.idHash, err)
			}
			wantSession(t, d.db, s.IDHash, nil)
			wantSession(t, d.db, other.IDHash, &other)
		})
	}
}

// putLogin stores a sign-in and fails the test when it cannot.
func putLogin(t *testing.T, db DB, l auth.Login, staleBefore time.Time) {
	t.Helper()
	if err := db.PutLogin(t.Context(), l, staleBefore); err != nil {
		t.Fatalf("PutLogin(%+v, %v): %v", l, staleBefore, err)
	}
}

// wantTake fails unless TakeLogin(idHash) is want, or NotFound and the
// zero Login for nil.
func wantTake(t *testing.T, db DB, idHash string, want *auth.Login) {
	t.Helper()
	got, err := db.TakeLogin(t.Context(), idHash)
	if want == nil {
		wantKind(t, fmt.Sprintf("TakeLogin(%s)", idHash), err, engine.NotFound)
		if diff := cmp.Diff(auth.Login{}, got, exact...); diff != "" {
			t.Errorf("TakeLogin(%s) = a sign-in; want the zero Login (-want +got):\n%s", idHash, diff)
		}
		return
	}
	if diff := cmp.Diff(storedLogin(*want), got, exact...); err != nil || diff != "" {
		t.Errorf("TakeLogin(%s) = %v; (-want +got):\n%s", idHash, err, diff)
	}
}

func testPutLogin(t *testing.T, d *drv) {
	t.Run("stores", func(t *testing.T) {
		l := mkLogin(d.id("l1"), when(0))
		putLogin(t, d.db, l, when(-600))
		wantTake(t, d.db, l.IDHash, &l)
	})
	t.Run("a step-up and a re-authentication", func(t *testing.T) {
		for _, l := range []auth.Login{mkLogin(d.id("l3"), when(0)), mkLogin(d.id("l4"), when(0))} {
			if l.IDHash == d.id("l3") {
				l.MaxAge = 15 * time.Minute
			} else {
				l.Reauth = true
			}
			putLogin(t, d.db, l, when(-600))
			wantTake(t, d.db, l.IDHash, &l)
		}
	})
	t.Run("id taken", func(t *testing.T) {
		l := mkLogin(d.id("l2"), when(0))
		putLogin(t, d.db, l, when(-600))
		forged := mkLogin(l.IDHash, when(1))
		forged.ReturnTo = "/elsewhere"
		wantKind(t, fmt.Sprintf("PutLogin(%+v) under a taken id", forged), d.db.PutLogin(t.Context(), forged, when(-600)), engine.Conflict)
		wantTake(t, d.db, l.IDHash, &l)
	})
	t.Run("drops stale sign-ins", func(t *testing.T) {
		// Sign-ins created before staleBefore go; one created at that
		// instant stays.
		stale, edge := mkLogin(d.id("stale"), when(0)), mkLogin(d.id("edge"), when(10))
		putLogin(t, d.db, stale, when(-600))
		putLogin(t, d.db, edge, when(-600))
		l := mkLogin(d.id("new"), when(20))
		putLogin(t, d.db, l, stored(when(10)))
		wantTake(t, d.db, stale.IDHash, nil)
		wantTake(t, d.db, edge.IDHash, &edge)
		wantTake(t, d.db, l.IDHash, &l)
	})
}

func testTakeLogin(t *testing.T, d *drv) {
	l, other := mkLogin(d.id("l1"), when(0)), mkLogin(d.id("l2"), when(0))
	putLogin(t, d.db, l, when(-600))
	putLogin(t, d.db, other, when(-600))
	// In order: each step sees what the ones before did.
	steps := []struct {
		name, idHash string
		want         *auth.Login
	}{
		{"takes", l.IDHash, &l},
		{"usable once", l.IDHash, nil},
		{"unknown", d.id("nobody"), nil},
		{"another is kept", other.IDHash, &other},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) { wantTake(t, d.db, st.idHash, st.want) })
	}
}

// The demo's inventory and ledger.

// stock is this test's dock and laptop, with the given quantities
// available.
func (d *drv) stock(dock, laptop int64) []demo.Item {
	return []demo.Item{
		{SKU: d.id("DOCK-USB4"), Name: "USB4 dock", OnHand: 8, Available: dock},
		{SKU: d.id("LAPTOP-13"), Name: "13-inch laptop", OnHand: 12, Available: laptop},
	}
}

func stockDemo(t *testing.T, db DB, items []demo.Item) {
	t.Helper()
	if err := db.StockDemo(t.Context(), items); err != nil {
		t.Fatalf("StockDemo(%+v): %v", items, err)
	}
}

// wantInventory fails unless this test's lines of Inventory are want.
func wantInventory(t *testing.T, d *drv, what string, want []demo.Item) {
	t.Helper()
	got, err := d.db.Inventory(t.Context())
	got = slices.DeleteFunc(got, func(it demo.Item) bool { return !strings.HasPrefix(it.SKU, d.ns) })
	if diff := cmp.Diff(want, got, exact...); err != nil || diff != "" {
		t.Errorf("Inventory() %s = %v; (-want +got):\n%s", what, err, diff)
	}
}

func testStockDemo(t *testing.T, d *drv) {
	monitor := demo.Item{SKU: d.id("MONITOR-27"), Name: "27-inch monitor", OnHand: 30}
	renamed := d.stock(0, 0)[0]
	renamed.Name, renamed.OnHand = "renamed", 99
	// In order: each step sees what the ones before stocked.
	steps := []struct {
		name  string
		items []demo.Item
		want  []demo.Item
	}{
		{"nothing", nil, nil},
		{"adds", []demo.Item{d.stock(0, 0)[1], d.stock(0, 0)[0]}, d.stock(8, 12)},
		{"keeps the items it has", []demo.Item{renamed, monitor},
			append(d.stock(8, 12), demo.Item{SKU: monitor.SKU, Name: monitor.Name, OnHand: 30, Available: 30})},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			stockDemo(t, d.db, st.items)
			wantInventory(t, d, fmt.Sprintf("after StockDemo(%+v)", st.items), st.want)
		})
	}
}

func testInventory(t *testing.T, d *drv) {
	ctx := t.Context()
	// The whole listing: this test has a database of its own.
	wantAll := func(t *testing.T, what string, want []demo.Item) {
		t.Helper()
		got, err := d.db.Inventory(ctx)
		if diff := cmp.Diff(want, got, exact...); err != nil || diff != "" {
			t.Errorf("Inventory() %s = %v; (-want +got):\n%s", what, err, diff)
		}
	}
	t.Run("empty", func(t *testing.T) { wantAll(t, "of an empty store", nil) })
	t.Run("by SKU, less what is held", func(t *testing.T) {
		// Stocked in reverse, and named in another order.
		monitor := demo.Item{SKU: d.id("MONITOR-27"), Name: "27-inch monitor", OnHand: 30}
		stockDemo(t, d.db, []demo.Item{monitor, d.stock(0, 0)[1], d.stock(0, 0)[0]})
		laptop, dock := d.id("LAPTOP-13"), d.id("DOCK-USB4")
		for _, r := range []struct {
			key, sku string
			qty      int64
		}{{"k1", laptop, 2}, {"k2", laptop, 3}, {"k3", dock, 1}} {
			if _, err := d.db.Reserve(ctx, d.id(r.key), r.sku, r.qty, when(1)); err != nil {
				t.Fatalf("Reserve(%s, %s, %d): %v", d.id(r.key), r.sku, r.qty, err)
			}
		}
		if err := d.db.Release(ctx, d.id("k1")); err != nil {
			t.Fatalf("Release(%s): %v", d.id("k1"), err)
		}
		monitor.Available = 30
		wantAll(t, "with 3 laptops and 1 dock held", append(d.stock(7, 9), monitor))
	})
}

func testReserve(t *testing.T, d *drv) {
	stockDemo(t, d.db, d.stock(0, 0))
	dock, laptop := d.id("DOCK-USB4"), d.id("LAPTOP-13")
	// In order: each step sees what the ones before held.
	steps := []struct {
		name, key, sku string
		qty            int64
		left           int64
		kind           *engine.Kind
		dock, laptop   int64 // available afterwards
	}{
		{"holds", "k1", dock, 3, 5, nil, 5, 12},
		{"same key again changes nothing", "k1", dock, 3, 5, nil, 5, 12},
		{"more than available", "k2", dock, 6, 0, new(engine.Conflict), 5, 12},
		{"all that is available", "k2", dock, 5, 0, nil, 0, 12},
		{"none available", "k3", dock, 1, 0, new(engine.Conflict), 0, 12},
		{"unknown SKU", "k4", d.id("NOPE"), 1, 0, new(engine.NotFound), 0, 12},
		{"another SKU", "k5", laptop, 12, 0, nil, 0, 0},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			left, err := d.db.Reserve(t.Context(), d.id(st.key), st.sku, st.qty, when(1))
			what := fmt.Sprintf("Reserve(%s, %s, %d)", d.id(st.key), st.sku, st.qty)
			wantErr(t, what, err, st.kind)
			if err == nil && left != st.left {
				t.Errorf("%s = %d, want %d left", what, left, st.left)
			}
			wantInventory(t, d, "after "+what, d.stock(st.dock, st.laptop))
		})
	}
	t.Run("one reservation a key", func(t *testing.T) {
		q := "SELECT count(*) FROM demo_reservations WHERE idempotency_key = $1 AND sku = $2 AND qty = $3 AND created_at = $4"
		if n := d.h.Count(t, q, d.id("k1"), dock, 3, stored(when(1))); n != 1 {
			t.Errorf("reservations of 3 %s under %s after reserving them twice = %d, want 1", dock, d.id("k1"), n)
		}
		if n := d.h.Count(t, "SELECT count(*) FROM demo_reservations WHERE idempotency_key LIKE $1", d.ns+"%"); n != 3 {
			t.Errorf("reservations = %d, want 3 (k1, k2, k5)", n)
		}
	})
}

func testRelease(t *testing.T, d *drv) {
	ctx := t.Context()
	stockDemo(t, d.db, d.stock(0, 0))
	for _, r := range []struct {
		key string
		qty int64
	}{{"k1", 3}, {"k2", 2}} {
		if _, err := d.db.Reserve(ctx, d.id(r.key), d.id("DOCK-USB4"), r.qty, when(1)); err != nil {
			t.Fatalf("Reserve(%s, %s, %d): %v", d.id(r.key), d.id("DOCK-USB4"), r.qty, err)
		}
	}
	// In order: each step sees what the ones before released.
	steps := []struct {
		name, key string
		dock      int64 // available afterwards
	}{
		{"returns the reservation", "k1", 6},
		{"twice changes nothing", "k1", 6},
		{"never reserved changes nothing", "nope", 6},
		{"another", "k2", 8},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			if err := d.db.Release(ctx, d.id(st.key)); err != nil {
				t.Errorf("Release(%s) = %v, want nil", d.id(st.key), err)
			}
			wantInventory(t, d, "after Release("+d.id(st.key)+")", d.stock(st.dock, 12))
		})
	}
}

func testTransfer(t *testing.T, d *drv) {
	ctx := t.Context()
	// In order: each step sees what the ones before booked.
	steps := []struct {
		name, key, beneficiary, amount string
		at                             time.Time
		rows                           int64 // this test's rows in the ledger afterwards
	}{
		{"books", "k1", "alice", "100.00", when(0), 1},
		{"same key again books nothing", "k1", "mallory", "999999", when(1), 1},
		{"another key books again", "k2", "alice", "100.00", when(2), 2},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			what := fmt.Sprintf("Transfer(%s, %s, %s)", d.id(st.key), st.beneficiary, st.amount)
			if err := d.db.Transfer(ctx, d.id(st.key), st.beneficiary, st.amount, st.at); err != nil {
				t.Errorf("%s = %v, want nil", what, err)
			}
			if n := d.h.Count(t, "SELECT count(*) FROM demo_ledger WHERE idempotency_key LIKE $1", d.ns+"%"); n != st.rows {
				t.Errorf("ledger rows after %s = %d, want %d", what, n, st.rows)
			}
		})
	}
	t.Run("the first booking a key is kept", func(t *testing.T) {
		for _, st := range steps[:1] {
			q := "SELECT count(*) FROM demo_ledger WHERE idempotency_key = $1 AND beneficiary = $2 AND amount = $3 AND created_at = $4"
			if n := d.h.Count(t, q, d.id(st.key), st.beneficiary, st.amount, stored(st.at)); n != 1 {
				t.Errorf("ledger rows for %s as first booked (%s, %s at %v) = %d, want 1", d.id(st.key), st.beneficiary, st.amount, stored(st.at), n)
			}
		}
	})
}
