package store

import (
	"context"
	"database/sql"
	"net/url"

	"github.com/sagacity-go/sagacity/internal/engine"
	_ "modernc.org/sqlite" // registers the "sqlite" driver
)

// OpenSQLite opens (creating it if needed) the database file at path,
// applies pending migrations and returns the embedded default store: one
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
	s := &DB{ping: db.PingContext, close: func() { db.Close() }, sqlStore: sqlStore{db: sqlConn{db}}}
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
		if err := fn(sqlConn{tx}); err != nil {
			_ = tx.Rollback()
			return err
		}
		return tx.Commit()
	}
	s.view = func(ctx context.Context, fn func(conn) error) error {
		// A read-only transaction is a deferred BEGIN: in WAL mode it
		// reads one snapshot and takes no write lock.
		tx, err := db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
		if err != nil {
			return err
		}
		defer tx.Rollback()
		return fn(sqlConn{tx})
	}
	if err := migrate(ctx, s.begin, "sqlite", ""); err != nil {
		db.Close()
		return nil, err
	}
	return s, nil
}

// sqlConn adapts a *sql.DB or *sql.Tx to conn.
type sqlConn struct {
	q interface {
		ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
		QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	}
}

func (c sqlConn) exec(ctx context.Context, query string, args ...any) (int64, error) {
	res, err := c.q.ExecContext(ctx, query, args...)
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
	r, err := c.q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	return sqlRows{r}, nil
}

type sqlRows struct{ *sql.Rows }

func (r sqlRows) Close() { r.Rows.Close() }
