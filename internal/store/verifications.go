package store

import (
	"context"
	"fmt"
	"strings"

	"github.com/sagacity-go/sagacity/internal/engine"
)

// The newest verification of each saga, which the audit page lists.

const verifiedCols = "saga_id, valid, entry_count, break_at, message, head_seq, checked_at"

// RecordVerified keeps v as its saga's newest verification, unless a
// verification from a later moment is kept already: two runs that
// finish out of order leave the later one's.
func (s *sqlStore) RecordVerified(ctx context.Context, v engine.Verified) error {
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	_, err := s.db.exec(ctx, "INSERT INTO verifications ("+verifiedCols+") VALUES ($1, $2, $3, $4, $5, $6, $7)"+
		" ON CONFLICT (saga_id) DO UPDATE SET valid = excluded.valid, entry_count = excluded.entry_count,"+
		" break_at = excluded.break_at, message = excluded.message, head_seq = excluded.head_seq, checked_at = excluded.checked_at"+
		" WHERE verifications.checked_at <= excluded.checked_at",
		v.SagaID, v.Verification.Valid, v.Verification.EntryCount, v.Verification.BreakAtIndex, v.Verification.Message, v.HeadSeq, v.At)
	return mapErr(err)
}

// Verifications returns the newest verification kept of each of the
// sagas named that has one, by saga id.
func (s *sqlStore) Verifications(ctx context.Context, sagaIDs []string) ([]engine.Verified, error) {
	if len(sagaIDs) == 0 {
		return nil, nil
	}
	if len(sagaIDs) > engine.MaxList {
		return nil, engine.Errorf(engine.Invalid, "at most %d sagas at a time", engine.MaxList)
	}
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	ph, args := make([]string, len(sagaIDs)), make([]any, len(sagaIDs))
	for i, id := range sagaIDs {
		ph[i], args[i] = fmt.Sprintf("$%d", i+1), id
	}
	return collect(ctx, s.db, func(r rows) (v engine.Verified, err error) {
		valid, at := boolCol{col: col{name: "valid"}}, timeCol{col: col{name: "checked_at"}}
		var count, brk int64
		err = r.Scan(&v.SagaID, &valid, &count, &brk, &v.Verification.Message, &v.HeadSeq, &at)
		if bad := unreadable(&valid.col, &at.col); err == nil && bad != "" {
			err = fmt.Errorf("verification of saga %s: %s", v.SagaID, bad)
		}
		v.Verification.Valid, v.Verification.EntryCount, v.Verification.BreakAtIndex, v.At = valid.v, int(count), int(brk), at.v
		return v, err
	}, "SELECT "+verifiedCols+" FROM verifications WHERE saga_id IN ("+strings.Join(ph, ", ")+") ORDER BY saga_id", args...)
}
