package store

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/sagacity-go/sagacity/internal/engine"
)

// OpenPostgres connects to url, applies pending migrations and returns the
// store for production and for several replicas sharing one database. A
// saga is locked with SELECT … FOR UPDATE on its row. Errors: Invalid for a url pgx cannot parse; Unavailable when the
// database cannot be reached.
func OpenPostgres(ctx context.Context, url string) (*DB, error) {
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
	snapshot := pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}
	db := &DB{ping: pool.Ping, close: pool.Close, sqlStore: sqlStore{db: pgConn{pool}, lock: " FOR UPDATE", postgres: true,
		begin: func(ctx context.Context, fn func(conn) error) error {
			return pgx.BeginFunc(ctx, beginner{pool}, func(tx pgx.Tx) error { return fn(pgConn{tx}) })
		},
		view: func(ctx context.Context, fn func(conn) error) error {
			return pgx.BeginTxFunc(ctx, pool, snapshot, func(tx pgx.Tx) error { return fn(pgConn{tx}) })
		}}}
	if err := migrate(ctx, db.sqlStore, "postgres", "SELECT pg_advisory_xact_lock(7261001)"); err != nil {
		pool.Close()
		return nil, err
	}
	return db, nil
}

// beginner begins transactions on the pool, and begins again, once, on a
// fresh connection when BEGIN itself fails because the pooled connection
// had died (a restarted or terminated backend): nothing had started, so
// trying again is safe, and one dead connection does not fail a request.
type beginner struct{ pool *pgxpool.Pool }

func (b beginner) Begin(ctx context.Context) (pgx.Tx, error) {
	tx, err := b.pool.Begin(ctx)
	if err != nil && ctx.Err() == nil && engine.IsKind(mapErr(err), engine.Unavailable) {
		tx, err = b.pool.Begin(ctx)
	}
	return tx, err
}

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
