package store

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/sagacity-go/sagacity/internal/engine"
)

// The SQL both databases share: conn and rows, which each adapts
// (pgConn, sqlConn); sqlStore over them, with tx, the engine.Tx of one
// transaction; and what every concern's statements run through: Update
// and small for writes, collect and one for reads, where for filters.
// mapErr, in errors.go, is the one place their errors become kinds.

// opTimeout bounds one store operation, waiting for a saga's lock included.
const opTimeout = 15 * time.Second

// maxApprovals caps one listing of pending requests.
const maxApprovals = 5000

// conn is what the shared SQL needs from a pool or a transaction. queue
// runs a write whose result nobody reads: a transaction may hold it back
// and send it with the next statement (see pipe), reporting its error
// there; elsewhere it runs at once.
type conn interface {
	exec(ctx context.Context, sql string, args ...any) (int64, error)
	queue(ctx context.Context, sql string, args ...any) error
	query(ctx context.Context, sql string, args ...any) (rows, error)
}

// rows is a result set.
type rows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
	Close()
}

// sqlStore is the engine.Store both databases share.
type sqlStore struct {
	db    conn
	begin func(ctx context.Context, fn func(conn) error) error // a write transaction
	view  func(ctx context.Context, fn func(conn) error) error // a read-only snapshot
	lock  string                                               // appended to the query that locks a saga
	// postgres is set for PostgreSQL: the few statements whose best form
	// differs between the two are chosen by it.
	postgres bool
	group    *group        // commits concurrent Updates together
	pool     *pgxpool.Pool // PostgreSQL's, for a transaction opened mid-way (recorder)
	heard    listeners     // SQLite's: told of changes after each commit (see Listen)
}

// Update commits fn's writes, with those of other sagas' Updates that
// wait at the same time (see group). In PostgreSQL fn runs on a recorder:
// what promises a saga's head and then only writes joins a group as its
// recorded writes; what reads runs in a transaction of its own, opened
// at its first read.
func (s *sqlStore) Update(ctx context.Context, fn func(engine.Tx) error) error {
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	if !s.postgres {
		m := &member{fn: fn}
		if err := s.group.commit(ctx, m); err != nil {
			return mapErr(err)
		}
		s.heard.tell(m.woke)
		return nil
	}
	rec := &recorder{s: s, ctx: ctx}
	err := fn(rec)
	if read, err := rec.end(err); read || err != nil {
		return mapErr(err) // fn's own transaction, or fn's error before it wrote anything
	}
	m := &member{rec: rec}
	if rec.solo || rec.promise == nil {
		return mapErr(s.alone(ctx, m))
	}
	m.key = rec.promise.s.ID
	return mapErr(s.group.commit(ctx, m))
}

// alone commits one member in a transaction of its own: its recorded
// writes, or its fn.
func (s *sqlStore) alone(ctx context.Context, m *member) error {
	return s.begin(ctx, func(c conn) error {
		if m.rec != nil {
			return m.rec.replay(s.tx(ctx, c))
		}
		return m.fn(s.txOf(ctx, c, m))
	})
}

// tx is the engine.Tx of a transaction on c.
func (s *sqlStore) tx(ctx context.Context, c conn) *tx {
	return &tx{ctx: ctx, c: c, lock: s.lock, postgres: s.postgres}
}

// txOf is the engine.Tx of member m's fn on c, which keeps the sagas m's
// fn wakes (starting with none: fn may run again).
func (s *sqlStore) txOf(ctx context.Context, c conn, m *member) *tx {
	t := s.tx(ctx, c)
	m.woke, t.woke = nil, &m.woke
	return t
}

// tx is an engine.Tx over one database transaction.
type tx struct {
	ctx      context.Context
	c        conn
	lock     string
	postgres bool
	woke     *[]string // SQLite: the sagas Wake named, told after the commit
}

// small runs fn in a short transaction of its own, for state outside the
// engine's sagas.
func (s *sqlStore) small(ctx context.Context, fn func(conn) error) error {
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	return mapErr(s.begin(ctx, fn))
}

// collect runs a query and scans every row with scan.
func collect[T any](ctx context.Context, c conn, scan func(rows) (T, error), sql string, args ...any) ([]T, error) {
	r, err := c.query(ctx, sql, args...)
	if err != nil {
		return nil, mapErr(err)
	}
	defer r.Close()
	var out []T
	for r.Next() {
		v, err := scan(r)
		if err != nil {
			return nil, mapErr(err)
		}
		out = append(out, v)
	}
	return out, mapErr(r.Err())
}

// one runs a query that returns at most one row; NotFound when none.
func one[T any](ctx context.Context, c conn, scan func(rows) (T, error), what, sql string, args ...any) (T, error) {
	vs, err := collect(ctx, c, scan, sql, args...)
	if err == nil && len(vs) == 0 {
		err = engine.Errorf(engine.NotFound, "%s not found", what)
	}
	if err != nil {
		var zero T
		return zero, err
	}
	return vs[0], nil
}

// where builds a WHERE clause from conditions, each with one %s where its
// argument's placeholder goes.
type where struct {
	conds []string
	args  []any
}

// add appends a condition; each %s in it takes the next of args.
func (w *where) add(cond string, args ...any) {
	ph := make([]any, len(args))
	for i, a := range args {
		w.args = append(w.args, a)
		ph[i] = fmt.Sprintf("$%d", len(w.args))
	}
	w.conds = append(w.conds, fmt.Sprintf(cond, ph...))
}

func (w *where) String() string {
	if len(w.conds) == 0 {
		return ""
	}
	return " WHERE " + strings.Join(w.conds, " AND ")
}

// limit appends a LIMIT with its argument.
func (w *where) limit(n int) string {
	w.args = append(w.args, n)
	return fmt.Sprintf(" LIMIT $%d", len(w.args))
}

// orNull is a time as a row keeps one that may be none: NULL for zero.
func orNull(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t
}
