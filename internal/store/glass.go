package store

import (
	"context"
	"time"

	"github.com/sagacity-go/sagacity/internal/engine"
)

// The break-glass executions not ratified yet, for the console's banner
// and the metrics: an index of the journal's break-glass and
// ratification entries, written in the transactions that journal them.

const glassCols = "saga_id, journal_seq, tool_name, broken_by, reason, used_at, ratify_by, ratified_at"

func (t *tx) PutGlassUse(u engine.GlassUse) error {
	return mapErr(t.c.queue(t.ctx, "INSERT INTO break_glass ("+glassCols+") VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
		u.SagaID, u.JournalSeq, u.ToolName, u.By, u.Reason, u.At, u.RatifyBy, orNull(u.RatifiedAt)))
}

func (t *tx) RatifyGlass(sagaID string, seq int64, at time.Time) error {
	return mapErr(t.c.queue(t.ctx, "UPDATE break_glass SET ratified_at = $3 WHERE saga_id = $1 AND journal_seq = $2", sagaID, seq, at))
}

// Unratified returns the break-glass executions not ratified yet, the
// oldest first, at most limit.
func (s *sqlStore) Unratified(ctx context.Context, limit int) ([]engine.GlassUse, error) {
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	return collect(ctx, s.db, func(r rows) (u engine.GlassUse, err error) {
		at, by := timeCol{col: col{name: "used_at"}}, timeCol{col: col{name: "ratify_by"}}
		ratified := nullTime{col: col{name: "ratified_at"}}
		if err = r.Scan(&u.SagaID, &u.JournalSeq, &u.ToolName, &u.By, &u.Reason, &at, &by, &ratified); err != nil {
			return u, err
		}
		if bad := unreadable(&at.col, &by.col, &ratified.col); bad != "" {
			return u, engine.Errorf(engine.Internal, "the break-glass execution of saga %s seq=%d: %s", u.SagaID, u.JournalSeq, bad)
		}
		u.At, u.RatifyBy, u.RatifiedAt = at.v, by.v, ratified.v
		return u, nil
	}, unratifiedSQL, limit)
}

// unratifiedSQL lists the unratified uses through their partial index:
// what every console page reads costs the uses waiting, never the table.
const unratifiedSQL = "SELECT " + glassCols + " FROM break_glass WHERE ratified_at IS NULL ORDER BY used_at, saga_id, journal_seq LIMIT $1"
