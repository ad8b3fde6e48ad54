package store

import (
	"context"
	"time"

	"github.com/sagacity-go/sagacity/internal/engine"
)

// Journal entries: appended in a saga's transaction, read in order.

const (
	entryCols = "saga_id, seq, tool_name, phase, input, payload, timestamp, hash"
	entryRead = entryCols + ", leaf" // the sequencer sets leaf, never an insert
	// entryReadJ is entryRead of a journal aliased j.
	entryReadJ = "j.saga_id, j.seq, j.tool_name, j.phase, j.input, j.payload, j.timestamp, j.hash, j.leaf"
)

func scanEntry(r rows) (engine.Entry, error) { return scanEntryAnd(r) }

// scanEntryAnd reads an entry, and then into more the columns a query
// selects after it.
func scanEntryAnd(r rows, more ...any) (e engine.Entry, err error) {
	seq, ts := intCol{col: col{name: "seq"}}, timeCol{col: col{name: "timestamp"}}
	leaf := intCol{col: col{name: "leaf"}, null: -1}
	err = r.Scan(append([]any{&e.SagaID, &seq, &e.ToolName, &e.Phase, &e.Input, &e.Payload, &ts, &e.Hash, &leaf}, more...)...)
	e.Seq, e.Timestamp, e.Leaf = seq.v, ts.v, leaf.v
	e.Unreadable = unreadable(&seq.col, &ts.col, &leaf.col)
	return e, err
}

func (s *sqlStore) Entries(ctx context.Context, sagaID string) ([]engine.Entry, error) {
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	return entries(ctx, s.db, sagaID)
}

func entries(ctx context.Context, c conn, sagaID string) ([]engine.Entry, error) {
	return collect(ctx, c, scanEntry, "SELECT "+entryRead+" FROM journal WHERE saga_id = $1 ORDER BY seq", sagaID)
}

func (s *sqlStore) LastExecuted(ctx context.Context, tool string, before time.Time) (engine.Entry, error) {
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	return one(ctx, s.db, scanEntry, "executed call of "+tool, "SELECT "+entryRead+" FROM journal"+
		" WHERE tool_name = $1 AND phase = 'EXECUTED' AND timestamp < $2 ORDER BY timestamp DESC LIMIT 1", tool, before)
}

func (t *tx) Append(e engine.Entry) error {
	err := t.c.queue(t.ctx, "INSERT INTO journal ("+entryCols+") VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
		e.SagaID, e.Seq, e.ToolName, e.Phase, e.Input, e.Payload, e.Timestamp, e.Hash)
	return mapErr(err)
}

func (t *tx) Entries(sagaID string) ([]engine.Entry, error) { return entries(t.ctx, t.c, sagaID) }
