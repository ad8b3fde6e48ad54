package enginetest

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/sagacity-go/sagacity/internal/engine"
	"github.com/sagacity-go/sagacity/internal/testkit"
	"github.com/sagacity-go/sagacity/wire"
)

func testJournal(t *testing.T, v *env) {
	r := v.call("s1", "reserveInventory", `{"item":"laptop"}`)
	want := engine.CallResult{SagaID: "s1", Seq: 1, ToolName: "reserveInventory", Outcome: engine.OutcomeExecuted,
		Result: "reserved", Status: wire.Running}
	if diff := cmp.Diff(want, r); diff != "" {
		t.Errorf("Call result (-want +got):\n%s", diff)
	}
	es := v.journal("s1")
	if len(es) != 2 {
		t.Fatalf("journal has %d entries, want 2", len(es))
	}
	for i, e := range es {
		if e.Seq != int64(i+1) || e.SagaID != "s1" || e.Timestamp.Location() != time.UTC ||
			!e.Timestamp.Equal(e.Timestamp.Truncate(time.Microsecond)) || e.Hash != engine.Hash(prevHash(es, i), e) {
			t.Errorf("entry %d = %+v: want seq %d, UTC µs timestamp and a hash chained on the one before", i, e, i+1)
		}
	}
	if es[0].Phase != engine.PhaseIntent || es[0].Payload != "requester=agent-1\nauth=token" || es[1].Phase != engine.PhaseExecuted ||
		es[1].Payload != "reserved" || es[1].Input != `{"item":"laptop"}` {
		t.Errorf("journal = %+v, want INTENT (naming its requester) then EXECUTED with the input and result", es)
	}
	if got := v.verify("s1"); !got.Valid || got.EntryCount != 2 || got.Message != "all 2 entries verified" {
		t.Errorf("Verify = %+v, want all 2 entries verified", got)
	}
	if got := v.verify("nobody"); got != (engine.Verification{Valid: true, BreakAtIndex: -1, Message: "empty journal"}) {
		t.Errorf("Verify(unknown saga) = %+v, want empty journal", got)
	}
	if es := v.journal("nobody"); len(es) != 0 {
		t.Errorf("Journal(unknown saga) = %v, want empty", es)
	}
	s, err := v.e.Lookup(context.Background(), auditor, "s1")
	if err != nil || s.Initiator != agent.ID || s.HeadSeq != 2 || s.HeadHash != es[1].Hash || s.Status != wire.Running {
		t.Errorf("Lookup(s1) = %+v, %v; want initiator %s, head seq 2 with the last hash, RUNNING", s, err, agent.ID)
	}
	_, err = v.e.Lookup(context.Background(), auditor, "nobody")
	testkit.WantKind(t, "Lookup(unknown)", err, engine.NotFound)
}

func prevHash(es []engine.Entry, i int) string {
	if i == 0 {
		return engine.ZeroHash
	}
	return es[i-1].Hash
}

// testConcurrentAppends gates 8×10 calls at once on one saga: each appends
// exactly one entry, so the journal must hold seq 1..80 and verify.
func testConcurrentAppends(t *testing.T, v *env) {
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, 80)
	for g := range 8 {
		wg.Go(func() {
			for i := range 10 {
				if _, err := v.e.Call(ctx, agent, "busy", "sendWireTransfer", fmt.Sprintf(`{"g":%d,"i":%d}`, g, i)); err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("concurrent Call: %v", err)
	}
	es := v.journal("busy")
	if len(es) != 80 {
		t.Fatalf("journal has %d entries, want 80", len(es))
	}
	for i, e := range es {
		if e.Seq != int64(i+1) {
			t.Fatalf("entry %d has seq %d, want %d", i, e.Seq, i+1)
		}
	}
	if got := v.verify("busy"); !got.Valid || got.EntryCount != 80 {
		t.Errorf("Verify = %+v, want 80 entries verified", got)
	}
	if n := v.pending("busy"); n != 80 {
		t.Errorf("%d pending requests, want 80", n)
	}
}

// testTampering changes each column of one journal row with SQL, and
// deletes rows, and expects Verify to point at the right entry.
// testTampering is the tamper matrix: each change an insider with write
// access could make to a saga's rows behind the engine's back (every
// column of a journal row, rows deleted, inserted or reordered, the saga's
// head, the pending request) is reported by Verify at the right entry, and
// refused by Resume: Conflict, nothing journaled, the tool not called,
// the request kept.
func testTampering(t *testing.T, v *env) {
	// 4 entries: reserve INTENT, EXECUTED, wire AWAITING_APPROVAL, APPROVED.
	build := func(saga string) {
		v.gate(saga)
		v.approve(saga, 3)
	}
	forged := func(saga string) []any {
		es := v.journal(saga)
		f := engine.Entry{SagaID: saga, Seq: 5, ToolName: engine.GateTool, Phase: engine.PhaseApproved, Input: "seq=3",
			Payload: "approver=mallory", Timestamp: epoch}
		return []any{f.Seq, f.ToolName, f.Phase, f.Input, f.Payload, f.Timestamp, engine.Hash(es[3].Hash, f)}
	}
	mismatch := func(seq, i int) string { return fmt.Sprintf("hash mismatch at seq=%d (entry %d)", seq, i) }
	request := "approval request at seq=3 does not match the journal (entry 2)"
	tests := []struct {
		name    string
		dialect string // "" for both stores
		sql     string
		args    func(saga string) []any
		breakAt int
		msg     string
	}{
		{"saga_id", "", "UPDATE journal SET saga_id = 'other' WHERE saga_id = $1 AND seq = 2", nil, 1, mismatch(3, 1)},
		{"seq", "", "UPDATE journal SET seq = 9 WHERE saga_id = $1 AND seq = 2", nil, 1, mismatch(3, 1)},
		{"tool_name", "", "UPDATE journal SET tool_name = 'releaseInventory' WHERE saga_id = $1 AND seq = 2", nil, 1, mismatch(2, 1)},
		{"phase", "", "UPDATE journal SET phase = 'FAILED' WHERE saga_id = $1 AND seq = 2", nil, 1, mismatch(2, 1)},
		{"input", "", `UPDATE journal SET input = '{"item":"laptops"}' WHERE saga_id = $1 AND seq = 2`, nil, 1, mismatch(2, 1)},
		{"gated input", "", `UPDATE journal SET input = '{"amount":"100","to":"mallory"}' WHERE saga_id = $1 AND seq = 3`, nil, 2, mismatch(3, 2)},
		{"payload", "", "UPDATE journal SET payload = 'approver=mallory' WHERE saga_id = $1 AND seq = 4", nil, 3, mismatch(4, 3)},
		{"timestamp", "", "UPDATE journal SET timestamp = $2 WHERE saga_id = $1 AND seq = 3",
			func(string) []any { return []any{epoch.Add(-time.Hour)} }, 2, mismatch(3, 2)},
		{"timestamp not a time", "", "UPDATE journal SET timestamp = 'infinity' WHERE saga_id = $1 AND seq = 3", nil, 2,
			"unreadable entry at seq=3 (entry 2): column timestamp does not hold a value of its type"},
		{"seq not a number", "sqlite", "UPDATE journal SET seq = 'x' WHERE saga_id = $1 AND seq = 4", nil, 3,
			"unreadable entry at seq=0 (entry 3): column seq does not hold a value of its type"},
		{"hash", "", "UPDATE journal SET hash = $2 WHERE saga_id = $1 AND seq = 2",
			func(string) []any { return []any{engine.ZeroHash} }, 1, mismatch(2, 1)},
		{"first row deleted", "", "DELETE FROM journal WHERE saga_id = $1 AND seq = 1", nil, 0, mismatch(2, 0)},
		{"middle row deleted", "", "DELETE FROM journal WHERE saga_id = $1 AND seq = 2", nil, 1, mismatch(3, 1)},
		{"tail row deleted", "", "DELETE FROM journal WHERE saga_id = $1 AND seq = 4", nil, 3,
			"journal truncated: it ends at seq=3 but the saga's head is seq=4"},
		{"all rows deleted", "", "DELETE FROM journal WHERE saga_id = $1", nil, 0,
			"journal truncated: it ends at seq=0 but the saga's head is seq=4"},
		{"row inserted at the tail", "", "INSERT INTO journal (saga_id, seq, tool_name, phase, input, payload, timestamp, hash)" +
			" VALUES ($1, $2, $3, $4, $5, $6, $7, $8)", forged, 4, "head mismatch at seq=5 (entry 4): the saga records head seq=4 hash="},
		{"first row moved last", "", "UPDATE journal SET seq = 5 WHERE saga_id = $1 AND seq = 1", nil, 0, mismatch(2, 0)},
		{"head seq", "", "UPDATE sagas SET head_seq = 3 WHERE id = $1", nil, 3, "head mismatch at seq=4 (entry 3): the saga records head seq=3"},
		{"head hash", "", "UPDATE sagas SET head_hash = $2 WHERE id = $1",
			func(string) []any { return []any{engine.ZeroHash} }, 3, "head mismatch at seq=4 (entry 3)"},
		{"head seq not a number", "sqlite", "UPDATE sagas SET head_seq = 'x' WHERE id = $1", nil, 4,
			"saga record unreadable: column head_seq does not hold a value of its type"},
		{"request input", "", `UPDATE approval_requests SET input = '{"amount":"100","to":"mallory"}' WHERE saga_id = $1`, nil, 2, request},
		{"request input and hash", "", "UPDATE approval_requests SET input = $2, input_hash = $3 WHERE saga_id = $1",
			func(string) []any {
				return []any{`{"amount":"100","to":"mallory"}`, engine.PayloadHash(`{"amount":"100","to":"mallory"}`)}
			}, 2, request},
		{"request hash emptied", "", "UPDATE approval_requests SET input_hash = '' WHERE saga_id = $1", nil, 2, request},
		{"request tool", "", "UPDATE approval_requests SET tool_name = 'reserveInventory' WHERE saga_id = $1", nil, 2, request},
	}
	v.call("other", "sendWireTransfer", "{}") // one entry: seq 2 is free for the moved row
	for i, tt := range tests {
		if tt.dialect != "" && tt.dialect != v.h.Dialect {
			continue
		}
		t.Run(tt.name, func(t *testing.T) {
			saga := fmt.Sprintf("t%d", i)
			build(saga)
			if got := v.verify(saga); !got.Valid {
				t.Fatalf("Verify before tampering = %+v", got)
			}
			args := []any{saga}
			if tt.args != nil {
				args = append(args, tt.args(saga)...)
			}
			v.h.Exec(t, tt.sql, args...)
			got := v.verify(saga)
			if got.Valid || got.BreakAtIndex != tt.breakAt || !strings.HasPrefix(got.Message, tt.msg) {
				t.Errorf("Verify = %+v, want broken at index %d: %q", got, tt.breakAt, tt.msg)
			}
			before := len(v.journal(saga))
			wires := v.fx.transfer.Load()
			// The tampered request row's bytes, when there is one, or the
			// approved ones: either way nothing runs.
			for _, payload := range []string{transfer, `{"amount":"100","to":"mallory"}`} {
				_, err := v.e.Resume(context.Background(), approver, saga, 3, payload)
				if !engine.IsKind(err, engine.Conflict) && !engine.IsKind(err, engine.NotFound) {
					t.Errorf("Resume(%s) on a tampered saga: error = %v, want a conflict", payload, err)
				}
			}
			if n := len(v.journal(saga)); n != before || v.fx.transfer.Load() != wires {
				t.Errorf("after refusing a tampered saga: %d entries (was %d), wire ran %d more times; want nothing journaled or run",
					n, before, v.fx.transfer.Load()-wires)
			}
		})
	}
}

// testVerifyWhileWriting verifies a saga over and over while calls,
// requests and decisions are written to it: verification reads one
// snapshot, so a journal being written is never reported broken.
func testVerifyWhileWriting(t *testing.T, v *env) {
	ctx := context.Background()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 60 {
			v.call("w", "reserveInventory", fmt.Sprintf(`{"n":%d}`, i))
			if i%10 == 0 {
				v.approve("w", v.call("w", "sendWireTransfer", transfer).Seq)
			}
		}
	}()
	checks, broken := 0, 0
	for running := true; running; checks++ {
		select {
		case <-done:
			running = false
		default:
		}
		got, err := v.e.Verify(ctx, auditor, "w")
		if err != nil {
			t.Fatalf("Verify while writing: %v", err)
		}
		if !got.Valid {
			broken++
			t.Errorf("Verify while writing = %+v, want valid", got)
		}
	}
	if got := v.verify("w"); !got.Valid || got.EntryCount != 132 {
		t.Errorf("Verify after writing = %+v, want all 132 entries verified", got)
	}
	t.Logf("%d verifications while writing, %d false alarms", checks, broken)
}
