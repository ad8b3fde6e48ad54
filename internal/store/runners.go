package store

import (
	"context"
	"time"

	"github.com/sagacity-go/sagacity/internal/engine"
)

// Runners: the processes that run calls, and their heartbeats.

const runnerCols = "id, replica, started_at, seen_at"

// runnersKept is how long a runner that was never retired (its process
// died, and no process of its replica started since) is kept: its calls
// are in doubt either way.
const runnersKept = 24 * time.Hour

func (s *sqlStore) Register(ctx context.Context, r engine.Runner, retires string) error {
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	return mapErr(s.begin(ctx, func(c conn) error {
		if _, err := c.exec(ctx, "DELETE FROM runners WHERE id = $1 OR seen_at < $2", retires, r.StartedAt.Add(-runnersKept)); err != nil {
			return err
		}
		_, err := c.exec(ctx, "INSERT INTO runners ("+runnerCols+") VALUES ($1, $2, $3, $4)"+
			" ON CONFLICT (id) DO UPDATE SET seen_at = excluded.seen_at", r.ID, r.Replica, r.StartedAt, r.SeenAt)
		return err
	}))
}

// runnersSQL reads the runners of the unsettled calls, through the
// index of those calls.
const runnersSQL = "SELECT DISTINCT c.runner, COALESCE(r.replica, ''), r.started_at, r.seen_at" +
	" FROM calls AS c LEFT JOIN runners AS r ON r.id = c.runner" +
	" WHERE c.state IN ('RUNNING', 'COMPENSATING') AND c.runner <> '' ORDER BY c.runner"

func (s *sqlStore) Runners(ctx context.Context) ([]engine.Runner, error) {
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	return collect(ctx, s.db, func(r rows) (x engine.Runner, err error) {
		// A time that does not read is none: no beat.
		started, seen := nullTime{col: col{name: "started_at"}}, nullTime{col: col{name: "seen_at"}}
		err = r.Scan(&x.ID, &x.Replica, &started, &seen)
		x.StartedAt, x.SeenAt = started.v, seen.v
		return x, err
	}, runnersSQL)
}

func (s *sqlStore) Beat(ctx context.Context, id string, t time.Time) error {
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	n, err := s.db.exec(ctx, "UPDATE runners SET seen_at = $2 WHERE id = $1", id, t)
	if err == nil && n == 0 {
		return engine.Errorf(engine.NotFound, "runner %s not found", id)
	}
	return mapErr(err)
}

func (s *sqlStore) Retire(ctx context.Context, id string) error {
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	_, err := s.db.exec(ctx, "DELETE FROM runners WHERE id = $1", id)
	return mapErr(err)
}
