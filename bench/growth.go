package main

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
)

// seed fills the (migrated, empty) store at dbURL with entries journal
// entries in one statement a table: sagas of sagaLength executed calls,
// each an INTENT and an EXECUTED entry and a settled calls row, an hour
// old, the rows the engine would have written but for the hashes, which
// are not chained: calls never read an old saga's journal, and verifying
// one is not timed here. ANALYZE then gives the planner the statistics
// autovacuum would after such a load: without them, the sequencer's
// query for entries without a leaf plans for an empty table and times out
// on a million.
func seed(ctx context.Context, dbURL string, entries int) error {
	c, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return err
	}
	defer c.Close(ctx)
	perSaga := 2 * sagaLength
	epoch := time.Now().Add(-time.Hour).UTC()
	for _, q := range []string{
		`INSERT INTO sagas (id, status, initiator, head_seq, head_hash, created_at, updated_at)
		 SELECT 'seed-' || s, 'RUNNING', 'token:agent', $3, encode(sha256(int8send(s)), 'hex'), $1::timestamptz, $1::timestamptz
		 FROM generate_series(0, ($2 - 1) / $3) s`,
		`INSERT INTO journal (saga_id, seq, tool_name, phase, input, payload, timestamp, hash)
		 SELECT 'seed-' || i / $3, i % $3 + 1, 'reserveInventory',
		        CASE WHEN i % 2 = 0 THEN 'INTENT' ELSE 'EXECUTED' END, '{"item":"laptop"}',
		        CASE WHEN i % 2 = 0 THEN E'requester=token:agent\nauth=token' ELSE 'ok' END,
		        $1::timestamptz + i * interval '1 microsecond', encode(sha256(int8send(i)), 'hex')
		 FROM generate_series(0, $2 - 1) i`,
		`INSERT INTO calls (saga_id, seq, tool_name, input, requester, state, outcome_seq, result, started_at, updated_at)
		 SELECT 'seed-' || i / $3, i % $3 + 1, 'reserveInventory', '{"item":"laptop"}', 'token:agent', 'EXECUTED',
		        i % $3 + 2, 'ok', $1::timestamptz + i * interval '1 microsecond', $1::timestamptz + (i + 1) * interval '1 microsecond'
		 FROM generate_series(0, $2 - 1, 2) i`,
	} {
		if _, err := c.Exec(ctx, q, epoch, entries, perSaga); err != nil {
			return err
		}
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
