package engine

import (
	"context"
	"time"
)

// Store is the persistence the engine needs. Implementations map their
// errors to engine kinds: a missing row is NotFound, an unreachable database
// Unavailable.
type Store interface {
	// Update runs fn in one write transaction and commits it when fn
	// returns nil; otherwise nothing fn wrote is kept. Updates that lock
	// the same saga (Tx.LockSaga, Tx.CreateSaga) run one at a time, across
	// processes sharing the database.
	Update(ctx context.Context, fn func(Tx) error) error

	// Saga returns one saga; NotFound when absent.
	Saga(ctx context.Context, id string) (Saga, error)
	// Sagas lists sagas, newest first.
	Sagas(ctx context.Context, f SagaFilter) ([]Saga, error)
	// Entries returns a saga's journal ordered by seq; empty for an unknown saga.
	Entries(ctx context.Context, sagaID string) ([]Entry, error)
	// Snapshot reads a saga's row, journal and pending requests in one
	// read transaction, so a saga being written is never seen half-way.
	Snapshot(ctx context.Context, sagaID string) (Snapshot, error)
	// Approvals lists pending requests: every saga's ordered by creation
	// when sagaID is "", else one saga's ordered by seq.
	Approvals(ctx context.Context, sagaID string) ([]ApprovalRequest, error)
	// InDoubt lists calls that are running or compensating and were last
	// touched before the given time, oldest first.
	InDoubt(ctx context.Context, before time.Time) ([]Call, error)
}

// Snapshot is one saga as of one moment.
type Snapshot struct {
	Saga     *Saga // nil when the saga has no row
	Entries  []Entry
	Requests []ApprovalRequest // pending, ordered by seq
}

// SagaFilter selects sagas for Store.Sagas. Sagas come newest first
// (CreatedAt, then ID, descending); After continues a listing after the
// given saga.
type SagaFilter struct {
	Status Status // "" for all
	Limit  int
	After  *SagaCursor
}

// SagaCursor is the position of one saga in a listing.
type SagaCursor struct {
	CreatedAt time.Time
	ID        string
}

// Tx is a write transaction. It carries the context given to Store.Update.
type Tx interface {
	// LockSaga reads a saga and holds it until the transaction ends;
	// NotFound when absent.
	LockSaga(id string) (Saga, error)
	// CreateSaga inserts s unless a saga with its ID exists, then locks and
	// returns the stored saga.
	CreateSaga(s Saga) (Saga, error)
	// PutSaga updates a locked saga's mutable fields.
	PutSaga(s Saga) error

	// Append inserts a journal entry; Conflict if its seq is taken.
	Append(e Entry) error
	// Entries returns a saga's journal ordered by seq.
	Entries(sagaID string) ([]Entry, error)

	// Approval returns one pending request; NotFound when absent.
	Approval(sagaID string, seq int64) (ApprovalRequest, error)
	// PutApproval stores a pending request.
	PutApproval(r ApprovalRequest) error
	// DeleteApprovals drops a saga's pending requests: the one at seq, or
	// all of them when seq is 0. It returns how many it dropped.
	DeleteApprovals(sagaID string, seq int64) (int, error)
	// CountApprovals counts a saga's pending requests.
	CountApprovals(sagaID string) (int, error)

	// Call returns one call; NotFound when absent.
	Call(sagaID string, seq int64) (Call, error)
	// PutCall inserts or updates a call.
	PutCall(c Call) error
	// Calls returns a saga's calls in any of the given states, ordered by seq.
	Calls(sagaID string, states ...CallState) ([]Call, error)
}
