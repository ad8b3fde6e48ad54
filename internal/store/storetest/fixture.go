package storetest

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/sagacity-go/sagacity/internal/engine"
	"github.com/sagacity-go/sagacity/internal/testkit"
)

// The driver tests' fixture: a test's database and key prefix, its times,
// and rows as the engine writes them and as a store gives them back.

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

// wantErr fails unless err is nil, or of kind *k when k is not nil.
func wantErr(t *testing.T, what string, err error, k *engine.Kind) {
	t.Helper()
	if k != nil {
		testkit.WantKind(t, what, err, *k)
	} else if err != nil {
		t.Errorf("%s: %v", what, err)
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
