package store

import (
	"context"
	"unicode/utf8"

	"github.com/sagacity-go/sagacity/internal/engine"
)

// Sagas: their rows, the listings of them, one read whole, and the lock
// a transaction takes on one.

const sagaCols = "id, status, initiator, ended, reason, head_seq, head_hash, running, created_at, updated_at"

func scanSaga(r rows) (engine.Saga, error) { return scanSagaAnd(r) }

// scanSagaAnd reads a saga, and then into more the columns a query
// selects after it.
func scanSagaAnd(r rows, more ...any) (s engine.Saga, err error) {
	ended, head, running := boolCol{col: col{name: "ended"}}, intCol{col: col{name: "head_seq"}}, intCol{col: col{name: "running"}}
	created, updated := timeCol{col: col{name: "created_at"}}, timeCol{col: col{name: "updated_at"}}
	err = r.Scan(append([]any{&s.ID, &s.Status, &s.Initiator, &ended, &s.Reason, &head, &s.HeadHash, &running, &created, &updated}, more...)...)
	s.Ended, s.HeadSeq, s.Running, s.CreatedAt, s.UpdatedAt = ended.v, head.v, running.v, created.v, updated.v
	s.Unreadable = unreadable(&ended.col, &head.col, &running.col, &created.col, &updated.col)
	return s, err
}

func (s *sqlStore) Saga(ctx context.Context, id string) (engine.Saga, error) {
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	return one(ctx, s.db, scanSaga, "saga "+id, "SELECT "+sagaCols+" FROM sagas WHERE id = $1", id)
}

func (s *sqlStore) Sagas(ctx context.Context, f engine.SagaFilter) ([]engine.Saga, error) {
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	w := sagaWhere(f)
	if f.After != nil {
		w.add("(created_at < %s OR (created_at = %[1]s AND id < %s))", f.After.CreatedAt, f.After.ID)
	}
	q := "SELECT " + sagaCols + " FROM sagas" + w.String() + " ORDER BY created_at DESC, id DESC"
	return collect(ctx, s.db, scanSaga, q+w.limit(f.Limit), w.args...)
}

func (s *sqlStore) CountSagas(ctx context.Context, f engine.SagaFilter) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	w := sagaWhere(f)
	return one(ctx, s.db, func(r rows) (n int, err error) { return n, r.Scan(&n) }, "count", "SELECT count(*) FROM sagas"+w.String(), w.args...)
}

func sagaWhere(f engine.SagaFilter) *where {
	w := &where{}
	if f.Status != "" {
		w.add("status = %s", f.Status)
	}
	if f.IDPrefix != "" {
		// substr and its length count characters in both databases, and
		// need no collation that a LIKE pattern or a range would.
		w.add("substr(id, 1, %s) = %s", utf8.RuneCountInString(f.IDPrefix), f.IDPrefix)
	}
	if f.Initiator != "" {
		w.add("initiator = %s", f.Initiator)
	}
	if f.Tool != "" {
		w.add("EXISTS (SELECT 1 FROM journal j WHERE j.saga_id = sagas.id AND j.tool_name = %s)", f.Tool)
	}
	if !f.InDoubtBefore.IsZero() {
		w.add("EXISTS (SELECT 1 FROM calls c WHERE c.saga_id = sagas.id AND c.state IN ('RUNNING', 'COMPENSATING') AND c.updated_at < %s)", f.InDoubtBefore)
	}
	return w
}

func (s *sqlStore) Snapshot(ctx context.Context, sagaID string, calls bool) (engine.Snapshot, error) {
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	var snap engine.Snapshot
	err := s.view(ctx, func(c conn) error {
		snap = engine.Snapshot{}
		sagas, err := collect(ctx, c, scanSaga, "SELECT "+sagaCols+" FROM sagas WHERE id = $1", sagaID)
		if err != nil {
			return err
		}
		if len(sagas) > 0 {
			snap.Saga = &sagas[0]
		}
		if snap.Entries, err = entries(ctx, c, sagaID); err != nil {
			return err
		}
		snap.Requests, err = collect(ctx, c, scanApproval, "SELECT "+approvalCols+
			" FROM approval_requests WHERE saga_id = $1 ORDER BY journal_seq LIMIT $2", sagaID, maxApprovals)
		if err != nil || !calls {
			return err
		}
		snap.Calls, err = collect(ctx, c, scanCall, "SELECT "+callCols+" FROM calls WHERE saga_id = $1 ORDER BY seq", sagaID)
		return err
	})
	return snap, mapErr(err)
}

func (t *tx) LockSaga(id string) (engine.Saga, error) {
	return one(t.ctx, t.c, scanSaga, "saga "+id, "SELECT "+sagaCols+" FROM sagas WHERE id = $1"+t.lock, id)
}

func (t *tx) LockSagaCall(id string, seq int64) (engine.Saga, engine.CallState, error) {
	var state engine.CallState
	s, err := one(t.ctx, t.c, func(r rows) (engine.Saga, error) { return scanSagaAnd(r, &state) }, "saga "+id,
		"SELECT "+sagaCols+", COALESCE((SELECT state FROM calls WHERE saga_id = $1 AND seq = $2), '')"+
			" FROM sagas WHERE id = $1"+t.lock, id, seq)
	return s, state, err
}

func (t *tx) LockAs(s engine.Saga, seq int64, want engine.CallState) error {
	if !t.postgres {
		// In the process, reading costs no round trip: compare.
		got, state, err := t.LockSagaCall(s.ID, seq)
		if err != nil && !engine.IsKind(err, engine.NotFound) {
			return err
		}
		if err != nil || got.Status != s.Status || got.Ended != s.Ended || got.Reason != s.Reason || got.HeadSeq != s.HeadSeq ||
			got.HeadHash != s.HeadHash || got.Running != s.Running || !got.UpdatedAt.Equal(s.UpdatedAt) || (seq > 0 && state != want) {
			return errStale
		}
		return nil
	}
	// Sent with the writes that follow; it locks the row, and when the
	// row is not as promised it divides by zero, which fails the
	// transaction before its COMMIT (see mapErr).
	q := "SELECT 1 / (SELECT count(*)::int FROM (SELECT 1 FROM sagas WHERE id = $1 AND status = $2 AND ended = $3" +
		" AND reason = $4 AND head_seq = $5 AND head_hash = $6 AND updated_at = $7 AND running = $8"
	args := []any{s.ID, s.Status, s.Ended, s.Reason, s.HeadSeq, s.HeadHash, s.UpdatedAt, s.Running}
	if seq > 0 {
		q += " AND EXISTS (SELECT 1 FROM calls WHERE saga_id = $1 AND seq = $9 AND state = $10)"
		args = append(args, seq, want)
	}
	return t.c.queue(t.ctx, q+" FOR UPDATE) AS promised)", args...)
}

func (t *tx) CreateSaga(s engine.Saga) (engine.Saga, error) {
	// Most calls are to a saga that exists: lock it, and only when there
	// is none insert it (two writers that both find none are ordered by
	// the insert's conflict) and lock it then.
	if got, err := t.LockSaga(s.ID); !engine.IsKind(err, engine.NotFound) {
		return got, err
	}
	if err := t.c.queue(t.ctx, "INSERT INTO sagas ("+sagaCols+") VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)"+
		" ON CONFLICT (id) DO NOTHING",
		s.ID, s.Status, s.Initiator, s.Ended, s.Reason, s.HeadSeq, s.HeadHash, s.Running, s.CreatedAt, s.UpdatedAt); err != nil {
		return engine.Saga{}, mapErr(err)
	}
	return t.LockSaga(s.ID)
}

func (t *tx) PutSaga(s engine.Saga) error {
	err := t.c.queue(t.ctx, "UPDATE sagas SET status = $2, ended = $3, reason = $4, head_seq = $5, head_hash = $6,"+
		" running = $7, updated_at = $8 WHERE id = $1", s.ID, s.Status, s.Ended, s.Reason, s.HeadSeq, s.HeadHash, s.Running, s.UpdatedAt)
	return mapErr(err)
}
