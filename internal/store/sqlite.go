package store

import (
	"context"
	"database/sql"
	"net/url"
	"strings"
	"sync"

	"github.com/sagacity-go/sagacity/internal/engine"
	_ "modernc.org/sqlite" // registers the "sqlite" driver
)

// OpenSQLite opens (creating it if needed) the database file at path,
// applies pending migrations (see Open) and returns the embedded default
// store: one
// file in WAL mode, pure Go. Writes take SQLite's single write lock up
// front (BEGIN IMMEDIATE), which serialises every saga, also across
// processes sharing the file. Errors: Invalid for an
// empty path; Unavailable when the file cannot be opened.
func OpenSQLite(ctx context.Context, path string) (*DB, error) {
	if path == "" {
		return nil, engine.Errorf(engine.Invalid, "sqlite database url needs a path, as in sqlite:sagacity.db")
	}
	q := url.Values{}
	q.Set("_txlock", "immediate")
	q.Set("_time_integer_format", "unix_micro")
	q.Set("_inttotime", "1")
	q.Add("_pragma", "busy_timeout(10000)")
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous(FULL)")
	q.Add("_pragma", "foreign_keys(1)")
	db, err := sql.Open("sqlite", "file:"+path+"?"+q.Encode())
	if err != nil {
		return nil, mapErr(err)
	}
	writer := make(chan struct{}, 1) // writers in this process queue here instead of busy-waiting
	cache := &stmts{db: db, m: map[string]*sql.Stmt{}}
	s := &DB{ping: db.PingContext, close: func() { cache.close(); db.Close() }, sqlStore: sqlStore{db: sqlConn{q: db, stmts: cache}}}
	s.begin = func(ctx context.Context, fn func(conn) error) error {
		select {
		case writer <- struct{}{}:
			defer func() { <-writer }()
		case <-ctx.Done():
			return ctx.Err()
		}
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		if err := fn(sqlConn{q: tx, tx: tx, stmts: cache}); err != nil {
			_ = tx.Rollback()
			return err
		}
		return tx.Commit()
	}
	s.group = &group{slots: 1, most: groupMost, alone: s.alone, together: s.togetherSQLite} // one writer: what waits for it goes together
	s.view = func(ctx context.Context, fn func(conn) error) error {
		// A read-only transaction is a deferred BEGIN: in WAL mode it
		// reads one snapshot and takes no write lock.
		tx, err := db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
		if err != nil {
			return err
		}
		defer func() { _ = tx.Rollback() }()
		return fn(sqlConn{q: tx, tx: tx, stmts: cache})
	}
	if s.schema, err = migrate(ctx, s.db, s.begin, "sqlite", ""); err != nil {
		db.Close()
		return nil, err
	}
	return s, nil
}

// sqlConn adapts a *sql.DB or *sql.Tx to conn, running the statements
// worth it prepared, from stmts.
type sqlConn struct {
	q interface {
		ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
		QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	}
	tx    *sql.Tx // nil outside a transaction
	stmts *stmts
}

// stmt returns query prepared, in the transaction when there is one, or
// nil when it is not kept prepared.
func (c sqlConn) stmt(ctx context.Context, query string) *sql.Stmt {
	st := c.stmts.of(ctx, query)
	if st == nil || c.tx == nil {
		return st
	}
	return c.tx.StmtContext(ctx, st)
}

func (c sqlConn) exec(ctx context.Context, query string, args ...any) (int64, error) {
	var res sql.Result
	var err error
	if st := c.stmt(ctx, query); st != nil {
		res, err = st.ExecContext(ctx, args...)
	} else {
		res, err = c.q.ExecContext(ctx, query, args...)
	}
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

func (c sqlConn) queue(ctx context.Context, query string, args ...any) error {
	_, err := c.exec(ctx, query, args...)
	return err
}

func (c sqlConn) query(ctx context.Context, query string, args ...any) (rows, error) {
	var r *sql.Rows
	var err error
	if st := c.stmt(ctx, query); st != nil {
		r, err = st.QueryContext(ctx, args...)
	} else {
		r, err = c.q.QueryContext(ctx, query, args...)
	}
	if err != nil {
		return nil, err
	}
	return sqlRows{r}, nil
}

// stmts keeps statements prepared: SQLite takes about as long to parse a
// statement as to run it. Statements built for a batch of rows (many
// parameters), long ones and scripts are not kept, which bounds it.
type stmts struct {
	db *sql.DB
	mu sync.Mutex
	m  map[string]*sql.Stmt
}

// maxKept bounds how many statements stmts keeps prepared.
const maxKept = 256

// of returns query prepared, or nil when it is not kept prepared.
func (c *stmts) of(ctx context.Context, query string) *sql.Stmt {
	if len(query) > 2048 || strings.Contains(query, ";") || strings.Count(query, "?")+strings.Count(query, "$") > 24 {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if st, ok := c.m[query]; ok {
		return st
	}
	if len(c.m) >= maxKept {
		return nil
	}
	st, err := c.db.PrepareContext(ctx, query)
	if err != nil {
		// Say, a table a migration creates in its transaction: the
		// statement runs unprepared, and whatever is wrong with it is
		// reported then.
		return nil
	}
	c.m[query] = st
	return st
}

func (c *stmts) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, st := range c.m {
		st.Close()
	}
}

type sqlRows struct{ *sql.Rows }

func (r sqlRows) Close() { r.Rows.Close() }
