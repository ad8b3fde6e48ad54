package storetest

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/sagacity-go/sagacity/internal/engine"
	"github.com/sagacity-go/sagacity/wire"
)

// The Tx's pending requests and their votes.

func testApproval(t *testing.T, d *drv) {
	id := d.id("s")
	r := mkRequest(id, 3, when(1))
	createSagas(t, d.db, mkSaga(id, wire.AwaitingApproval, when(0)))
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
	createSagas(t, d.db, mkSaga(id, wire.AwaitingApproval, when(0)))
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
	createSagas(t, d.db, mkSaga(id, wire.AwaitingApproval, when(0)))
	write(t, d.db, func(tx engine.Tx) error {
		return errors.Join(tx.PutApproval(r), tx.PutApproval(mkRequest(id, 5, when(2))))
	})
	for _, tt := range []struct {
		name   string
		voters []string
		quorum int
		due    time.Time
	}{
		{"one vote", []string{"https://idp.example.com#alice"}, 2, when(60)},
		{"quorum, a grant", []string{"https://idp.example.com#alice", "token:bob"}, 2, when(7200)},
		{"withdrawn, no deadline", nil, 2, time.Time{}},
		{"thresholds: one more needed", []string{"token:carol"}, 3, when(60)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			write(t, d.db, func(tx engine.Tx) error { return tx.PutVotes(id, 3, tt.voters, tt.quorum, tt.due) })
			want := r
			want.Voters, want.Quorum, want.Due = tt.voters, tt.quorum, tt.due
			got, err := d.db.Approvals(t.Context(), id)
			if err != nil || len(got) != 2 || !cmp.Equal(storedRequests(want, mkRequest(id, 5, when(2))), got, exact...) {
				t.Errorf("Approvals(%s) after PutVotes(%v, %v) = %+v, %v;\n(-want +got):\n%s", id, tt.voters, tt.due, got, err,
					cmp.Diff(storedRequests(want, mkRequest(id, 5, when(2))), got, exact...))
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
			createSagas(t, d.db, mkSaga(saga, wire.AwaitingApproval, when(0)), mkSaga(other, wire.AwaitingApproval, when(0)))
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
	createSagas(t, d.db, mkSaga(three, wire.AwaitingApproval, when(0)), mkSaga(one, wire.AwaitingApproval, when(0)),
		mkSaga(d.id("none"), wire.Running, when(0)))
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
