package store

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/sagacity-go/sagacity/internal/engine"
)

// Postgres is the store for production and for several replicas sharing
// one database. A saga is locked with SELECT … FOR UPDATE on its row.
type Postgres struct {
	sqlStore
	pool *pgxpool.Pool
}

// OpenPostgres connects to url, applies pending migrations and returns the
// store. Errors: Invalid for a url pgx cannot parse; Unavailable when the
// database cannot be reached.
func OpenPostgres(ctx context.Context, url string) (*Postgres, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		// pgx's message may quote the url, password included.
		return nil, engine.Errorf(engine.Invalid, "cannot parse postgres url %s", Redact(url))
	}
	if _, ok := cfg.ConnConfig.RuntimeParams["statement_timeout"]; !ok {
		cfg.ConnConfig.RuntimeParams["statement_timeout"] = "15s"
	}
	cfg.ConnConfig.RuntimeParams["timezone"] = "UTC"
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, mapErr(err)
	}
	p := &Postgres{pool: pool, sqlStore: sqlStore{db: pgConn{pool}, lock: " FOR UPDATE"}}
	p.begin = func(ctx context.Context, fn func(conn) error) error {
		return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { return fn(pgConn{tx}) })
	}
	if err := migrate(ctx, p.sqlStore, "postgres", "SELECT pg_advisory_xact_lock(7261001)"); err != nil {
		pool.Close()
		return nil, err
	}
	return p, nil
}

// Ping reports whether the database answers.
func (p *Postgres) Ping(ctx context.Context) error { return mapErr(p.pool.Ping(ctx)) }

// Close closes the pool.
func (p *Postgres) Close() { p.pool.Close() }

// pgConn adapts a pool or transaction to conn.
type pgConn struct {
	q interface {
		Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
		Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	}
}

func (c pgConn) exec(ctx context.Context, sql string, args ...any) (int64, error) {
	tag, err := c.q.Exec(ctx, sql, args...)
	return tag.RowsAffected(), err
}

func (c pgConn) query(ctx context.Context, sql string, args ...any) (rows, error) {
	return c.q.Query(ctx, sql, args...)
}
