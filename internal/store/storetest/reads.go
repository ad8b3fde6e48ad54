package storetest

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/sagacity-go/sagacity/internal/engine"
	"github.com/sagacity-go/sagacity/internal/testkit"
	"github.com/sagacity-go/sagacity/wire"
)

// The Store's reads of sagas and their journals.

func testSaga(t *testing.T, d *drv) {
	id := d.id("s")
	s := mkSaga(id, wire.CompensationFailed, when(0))
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
		{"d", 9, wire.Compensated, "agent-1"},
		{"tie-b", 8, wire.Running, "agent-1"},
		{"tie-a", 8, wire.Compensated, "agent-2"},
		{"c", 7, wire.Running, "agent-1"},
		{"café-1", 6, wire.Running, "agent-2"},
		{"cafe-2", 5, wire.Completed, "agent-1"},
		{"50%-off", 4, wire.Running, "agent-1"},
		{"50x-off", 3, wire.Running, "agent-1"},
		{"a_b", 2, wire.Completed, "agent-2"},
		{"axb", 1, wire.Running, "agent-1"},
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
		{"status", engine.SagaFilter{Status: wire.Running, Limit: 20}, []string{"tie-b", "c", "café-1", "50%-off", "50x-off", "axb"}, 6},
		{"status and limit", engine.SagaFilter{Status: wire.Running, Limit: 1}, []string{"tie-b"}, 6},
		{"status none has", engine.SagaFilter{Status: wire.CompensationFailed, Limit: 20}, nil, 0},
		{"after", engine.SagaFilter{After: after(7, "c"), Limit: 20}, all[4:], 10},
		{"after the first of a tie", engine.SagaFilter{After: after(8, "tie-b"), Limit: 3}, []string{"tie-a", "c", "café-1"}, 10},
		{"after, status and limit", engine.SagaFilter{Status: wire.Running, After: after(8, "tie-b"), Limit: 1}, []string{"c"}, 6},
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
		{"initiator, status and limit", engine.SagaFilter{Initiator: "agent-1", Status: wire.Running, Limit: 2}, []string{"tie-b", "c"}, 5},
		{"initiator none is", engine.SagaFilter{Initiator: "agent-9", Limit: 20}, nil, 0},
		{"tool, each saga once", engine.SagaFilter{Tool: "sendWireTransfer", Limit: 20}, []string{"tie-b", "tie-a"}, 2},
		{"tool of decisions", engine.SagaFilter{Tool: engine.GateTool, Limit: 20}, []string{"tie-a"}, 1},
		{"tool and status", engine.SagaFilter{Tool: "reserveInventory", Status: wire.Running, Limit: 20}, []string{"tie-b", "c"}, 2},
		{"tool, after and limit", engine.SagaFilter{Tool: "reserveInventory", After: after(9, "d"), Limit: 1}, []string{"tie-b"}, 3},
		{"tool none has, a prefix of one", engine.SagaFilter{Tool: "reserve", Limit: 20}, nil, 0},
		{"in doubt", engine.SagaFilter{InDoubtBefore: when(100), Limit: 20}, []string{"d", "tie-b", "café-1", "50%-off"}, 4},
		{"in doubt, touched strictly before", engine.SagaFilter{InDoubtBefore: stored(when(20)), Limit: 20}, []string{"tie-b", "50%-off"}, 2},
		{"in doubt before, given in another zone", engine.SagaFilter{InDoubtBefore: stored(when(11)).In(pdt), Limit: 20}, []string{"50%-off"}, 1},
		{"in doubt, none that old", engine.SagaFilter{InDoubtBefore: stored(when(10)), Limit: 20}, nil, 0},
		{"in doubt and initiator", engine.SagaFilter{InDoubtBefore: when(100), Initiator: "agent-2", Limit: 20}, []string{"café-1"}, 1},
		{"in doubt, status, after and limit", engine.SagaFilter{InDoubtBefore: when(100), Status: wire.Running, After: after(8, "tie-b"),
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

func testStoreEntries(t *testing.T, d *drv) {
	id, other := d.id("s"), d.id("other")
	es := []engine.Entry{mkEntry(id, 1, when(1)), mkEntry(id, 2, when(2)), mkEntry(id, 3, when(3))}
	// What the engine journals, byte for byte: JSON with escapes, non-ASCII
	// text, tabs, CR LF, several lines.
	es[2].Input = `{"note":"naïve café — 東京\t\"quoted\" \\ back\\slash"}`
	es[2].Payload = "approver=manager@company.com\r\nreason=line one\nline two\nauth=oidc"
	es[2].Phase, es[2].ToolName = engine.PhaseApproved, engine.GateTool
	otherEntry := mkEntry(other, 1, when(0))
	createSagas(t, d.db, mkSaga(id, wire.Running, when(0)), mkSaga(other, wire.Running, when(0)))
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
	s := mkSaga(id, wire.AwaitingApproval, when(0))
	es := []engine.Entry{mkEntry(id, 1, when(1)), mkEntry(id, 2, when(2)), mkEntry(id, 3, when(3))}
	rs := []engine.ApprovalRequest{mkRequest(id, 2, when(3)), mkRequest(id, 3, when(2))} // seq order is not creation order
	cs := []engine.Call{mkCall(id, 1, engine.CallExecuted, when(4)), mkCall(id, 4, engine.CallRunning, when(1))}
	cs[1].Requester = "agent-2"
	createSagas(t, d.db, s, mkSaga(other, wire.Running, when(0)))
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
		createSagas(t, d.db, mkSaga(w, wire.Running, when(0)))
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
	createSagas(t, d.db, mkSaga(a, wire.Running, when(0)), mkSaga(b, wire.Running, when(0)))
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
				testkit.WantKind(t, what, err, engine.NotFound)
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
