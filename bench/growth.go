package main

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/sagacity-go/sagacity/internal/engine"
)

// seed fills the (migrated, empty) store at dbURL with entries journal
// entries: sagas of sagaLength executed calls, each an INTENT and an
// EXECUTED entry (chained, as the engine writes them: the log's
// sequencer gives a leaf to nothing else) and a settled calls row, an
// hour old. The journal goes in with COPY, the rest in one statement a
// table. ANALYZE then gives the planner the statistics autovacuum would
// after such a load: without them, the sequencer's query for entries
// without a leaf plans for an empty table and times out on a million.
func seed(ctx context.Context, dbURL string, entries int) error {
	c, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return err
	}
	defer c.Close(ctx)
	perSaga := 2 * sagaLength
	epoch := time.Now().Add(-time.Hour).UTC().Truncate(time.Microsecond)
	rows := make([][]any, 0, entries)
	heads := map[string]string{}
	prev := engine.ZeroHash
	for i := range entries {
		e := engine.Entry{SagaID: fmt.Sprintf("seed-%d", i/perSaga), Seq: int64(i%perSaga + 1), ToolName: toolExecuted,
			Phase: engine.PhaseIntent, Input: callInput, Payload: "requester=token:agent\nauth=token",
			Timestamp: epoch.Add(time.Duration(i) * time.Microsecond)}
		if i%2 == 1 {
			e.Phase, e.Payload = engine.PhaseExecuted, "ok"
		}
		if e.Seq == 1 {
			prev = engine.ZeroHash
		}
		e.Hash = engine.Hash(prev, e)
		prev, heads[e.SagaID] = e.Hash, e.Hash
		rows = append(rows, []any{e.SagaID, e.Seq, e.ToolName, string(e.Phase), e.Input, e.Payload, e.Timestamp, e.Hash})
	}
	ids, hashes := make([]string, 0, len(heads)), make([]string, 0, len(heads))
	for id, h := range heads {
		ids, hashes = append(ids, id), append(hashes, h)
	}
	if _, err := c.Exec(ctx, `INSERT INTO sagas (id, status, initiator, head_seq, head_hash, created_at, updated_at)
		 SELECT id, 'RUNNING', 'token:agent', $2, h, $1::timestamptz, $1::timestamptz FROM unnest($3::text[], $4::text[]) AS v(id, h)`,
		epoch, perSaga, ids, hashes); err != nil {
		return err
	}
	cols := []string{"saga_id", "seq", "tool_name", "phase", "input", "payload", "timestamp", "hash"}
	if _, err := c.CopyFrom(ctx, pgx.Identifier{"journal"}, cols, pgx.CopyFromRows(rows)); err != nil {
		return err
	}
	if _, err := c.Exec(ctx, `INSERT INTO calls (saga_id, seq, tool_name, input, requester, state, outcome_seq, result, started_at, updated_at)
		 SELECT 'seed-' || i / $3, i % $3 + 1, 'reserveInventory', '{"item":"laptop"}', 'token:agent', 'EXECUTED',
		        i % $3 + 2, 'ok', $1::timestamptz + i * interval '1 microsecond', $1::timestamptz + (i + 1) * interval '1 microsecond'
		 FROM generate_series(0, $2 - 1, 2) i`, epoch, entries, perSaga); err != nil {
		return err
	}
	_, err = c.Exec(ctx, "ANALYZE")
	return err
}

// vacuum does what autovacuum would have done by the time a store grew
// that large: clear the rows the sequencer's updates left dead and
// refresh the planner's statistics.
func vacuum(ctx context.Context, dbURL string) error {
	c, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return err
	}
	defer c.Close(ctx)
	_, err = c.Exec(ctx, "VACUUM ANALYZE")
	return err
}
