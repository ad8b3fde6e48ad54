package store

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/sagacity-go/sagacity/internal/engine"
)

// Calls of tools, their states, the keys they were asked under, and
// those in doubt.

const callCols = "saga_id, seq, tool_name, input, requester, state, outcome_seq, result, started_at, updated_at, request_seq, runner"

func scanCall(r rows) (c engine.Call, err error) {
	err = r.Scan(&c.SagaID, &c.Seq, &c.ToolName, &c.Input, &c.Requester, &c.State, &c.OutcomeSeq, &c.Result, &c.StartedAt, &c.UpdatedAt,
		&c.Request, &c.Runner)
	c.StartedAt, c.UpdatedAt = c.StartedAt.UTC(), c.UpdatedAt.UTC()
	return c, err
}

func (s *sqlStore) InDoubt(ctx context.Context, sagaID string, before time.Time, gone []string) ([]engine.Call, error) {
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	return inDoubtCalls(ctx, s.db, sagaID, before, gone)
}

// inDoubtCalls lists calls in doubt, of one saga or all: unsettled, and
// still since before, or run by one of the runners gone.
func inDoubtCalls(ctx context.Context, c conn, sagaID string, before time.Time, gone []string) ([]engine.Call, error) {
	q, args := "SELECT "+callCols+" FROM calls WHERE state IN ('RUNNING', 'COMPENSATING') AND (updated_at < $1", []any{before, maxApprovals}
	if len(gone) > 0 {
		ph := make([]string, len(gone))
		for i, id := range gone {
			ph[i], args = fmt.Sprintf("$%d", len(args)+1), append(args, id)
		}
		q += " OR runner IN (" + strings.Join(ph, ", ") + ")"
	}
	q += ")"
	if sagaID != "" {
		q, args = q+fmt.Sprintf(" AND saga_id = $%d", len(args)+1), append(args, sagaID)
	}
	return collect(ctx, c, scanCall, q+" ORDER BY updated_at, saga_id, seq LIMIT $2", args...)
}

func (s *sqlStore) CallKey(ctx context.Context, sagaID, key string) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	return one(ctx, s.db, func(r rows) (seq int64, err error) { return seq, r.Scan(&seq) }, "call under the key",
		"SELECT seq FROM call_keys WHERE saga_id = $1 AND key = $2", sagaID, key)
}

func (t *tx) Call(sagaID string, seq int64) (engine.Call, error) {
	return one(t.ctx, t.c, scanCall, "call", "SELECT "+callCols+" FROM calls WHERE saga_id = $1 AND seq = $2", sagaID, seq)
}

// callUpsert makes an insert of calls update those that exist.
const callUpsert = " ON CONFLICT (saga_id, seq) DO UPDATE SET state = excluded.state, outcome_seq = excluded.outcome_seq," +
	" result = excluded.result, updated_at = excluded.updated_at, runner = excluded.runner"

func (t *tx) PutCall(c engine.Call) error {
	err := t.c.queue(t.ctx, "INSERT INTO calls ("+callCols+") VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)"+
		callUpsert,
		c.SagaID, c.Seq, c.ToolName, c.Input, c.Requester, c.State, c.OutcomeSeq, c.Result, c.StartedAt, c.UpdatedAt,
		c.Request, c.Runner)
	return mapErr(err)
}

func (t *tx) Calls(sagaID string, states ...engine.CallState) ([]engine.Call, error) {
	q := "SELECT " + callCols + " FROM calls WHERE saga_id = $1"
	args := []any{sagaID}
	if len(states) > 0 {
		ph := make([]string, len(states))
		for i, st := range states {
			args = append(args, st)
			ph[i] = fmt.Sprintf("$%d", i+2)
		}
		q += " AND state IN (" + strings.Join(ph, ", ") + ")"
	}
	return collect(t.ctx, t.c, scanCall, q+" ORDER BY seq", args...)
}

func (t *tx) InDoubt(sagaID string, before time.Time, gone []string) ([]engine.Call, error) {
	return inDoubtCalls(t.ctx, t.c, sagaID, before, gone)
}

func (t *tx) PutCallKey(sagaID, key string, seq int64) error {
	err := t.c.queue(t.ctx, "INSERT INTO call_keys (saga_id, key, seq) VALUES ($1, $2, $3)", sagaID, key, seq)
	return mapErr(err)
}
