package store

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/sagacity-go/sagacity/internal/engine"
)

// OpenPostgres connects to url, applies pending migrations (see Open) and
// returns the store for production and for several replicas sharing one
// database. A saga is locked with SELECT … FOR UPDATE on its row. Errors:
// Invalid for a url pgx cannot parse; Unavailable when the database cannot
// be reached, or this role may not use its schema as Open says.
func OpenPostgres(ctx context.Context, url string) (*DB, error) { return openPostgres(ctx, url, nil) }

// defaultMaxConns is the pool's size unless the url's pool_max_conns says
// otherwise: pgxpool's default (the number of CPUs, at least 4) would
// queue concurrent sagas in the process, where PostgreSQL would commit
// them together (one WAL flush for many commits).
const defaultMaxConns = 32

// openPostgres is OpenPostgres, with tracer seeing every statement and
// batch the store sends (tests count round trips).
func openPostgres(ctx context.Context, url string, tracer pgx.QueryTracer) (*DB, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		// pgx's message may quote the url, password included.
		return nil, engine.Errorf(engine.Invalid, "cannot parse postgres url %s", Redact(url))
	}
	if _, ok := cfg.ConnConfig.RuntimeParams["statement_timeout"]; !ok {
		cfg.ConnConfig.RuntimeParams["statement_timeout"] = "15s"
	}
	cfg.ConnConfig.RuntimeParams["timezone"] = "UTC"
	cfg.ConnConfig.Tracer = tracer
	// A connection whose backend was terminated, or whose server went
	// away, while it sat in the pool is not handed out: its first round
	// trip would fail, and when that trip carries a COMMIT nobody could
	// tell whether it ran.
	cfg.PrepareConn = func(_ context.Context, c *pgx.Conn) (bool, error) { return !closedWhileIdle(c.PgConn().Conn()), nil }
	if !strings.Contains(url, "pool_max_conns") {
		cfg.MaxConns = defaultMaxConns
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, mapErr(err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, connectProblem(err)
	}
	snapshot := pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}
	db := &DB{ping: pool.Ping, close: pool.Close, sqlStore: sqlStore{db: pgConn{pool}, lock: " FOR UPDATE", postgres: true, pool: pool,
		begin: func(ctx context.Context, fn func(conn) error) error { return pipelined(ctx, pool, fn) },
		view: func(ctx context.Context, fn func(conn) error) error {
			return pgx.BeginTxFunc(ctx, pool, snapshot, func(tx pgx.Tx) error { return fn(pgConn{tx}) })
		}}}
	db.group = &group{slots: groupSlotsPostgres, most: groupMost, alone: db.alone, together: db.togetherPostgres}
	scripts := func(ctx context.Context, fn func(conn) error) error {
		return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { return fn(pgConn{tx}) })
	}
	if db.schema, err = migrate(ctx, db.db, scripts, "postgres", "SELECT pg_advisory_xact_lock(7261001)"); err != nil {
		pool.Close()
		return nil, err
	}
	return db, nil
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

func (c pgConn) queue(ctx context.Context, sql string, args ...any) error {
	_, err := c.exec(ctx, sql, args...)
	return err
}

func (c pgConn) query(ctx context.Context, sql string, args ...any) (rows, error) {
	return c.q.Query(ctx, sql, args...)
}

// connectProblem says in one line why the first connection failed, and
// what to change: pgx's own message lists every address and TLS attempt,
// each on a line of its own.
func connectProblem(err error) error {
	if pe, ok := errors.AsType[*pgconn.PgError](err); ok {
		fix := map[string]string{
			"28000": "create the role, or fix the user in the URL",
			"28P01": "check the user and password in the URL",
			"3D000": "create the database (createdb), or fix the database name in the URL",
			"53300": "PostgreSQL has too many connections: raise max_connections or lower pool_max_conns",
			"57P03": "PostgreSQL is starting up or shutting down: try again shortly",
		}[pe.Code]
		if fix != "" {
			fix = "; " + fix
		}
		return &engine.Error{Kind: engine.Unavailable, Msg: fmt.Sprintf("PostgreSQL refused the connection: %s (SQLSTATE %s)%s", pe.Message, pe.Code, fix)}
	}
	if oe, ok := errors.AsType[*net.OpError](err); ok && oe.Addr != nil {
		return &engine.Error{Kind: engine.Unavailable, Msg: fmt.Sprintf("cannot reach PostgreSQL at %s: %v; is it running, and listening there?", oe.Addr, oe.Err)}
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return &engine.Error{Kind: engine.Unavailable, Msg: "PostgreSQL did not answer in time; check the host in the URL and the network (connect_timeout sets the wait)"}
	}
	var lines []string
	for l := range strings.SplitSeq(err.Error(), "\n") {
		if l = strings.TrimSuffix(strings.TrimSpace(l), ":"); l != "" && !slices.Contains(lines, l) {
			lines = append(lines, l)
		}
	}
	return &engine.Error{Kind: engine.Unavailable, Msg: "cannot connect to PostgreSQL: " + strings.Join(lines, ": ")}
}
