package store

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/sagacity-go/sagacity/internal/engine"
)

// pipe is a PostgreSQL write transaction on one connection that sends its
// statements in as few round trips as their results allow: BEGIN goes out
// with the first statement, and writes whose results nobody reads (queue)
// wait for the next statement whose result is read, or for COMMIT. A
// queued write's error is the error of that later statement; either way
// the transaction fails and keeps nothing. Statements run in the order
// they were given.
type pipe struct {
	c      *pgxpool.Conn
	queued []statement
	begun  bool // BEGIN has been sent
	// first is set when the first round trip failed before COMMIT:
	// nothing of fn had run yet, so fn may run again on another
	// connection.
	first bool
}

type statement struct {
	sql  string
	args []any
	read func(rows) error // reads its rows, when set (queueRead)
}

// result takes q's result from br.
func (q statement) result(br pgx.BatchResults) error {
	if q.read == nil {
		_, err := br.Exec()
		return err
	}
	r, err := br.Query()
	if err != nil {
		return err
	}
	return readRows(r, q.read)
}

// readRows reads r with read and closes it: read's error, or r's.
func readRows(r rows, read func(rows) error) error {
	err := read(r)
	r.Close()
	if err == nil {
		err = r.Err()
	}
	return err
}

// send sends the queued statements, with BEGIN before them the first time,
// and sql after them, and reads the queued statements' results; the
// caller reads sql's.
func (p *pipe) send(ctx context.Context, sql string, args []any) (pgx.BatchResults, error) {
	b := &pgx.Batch{}
	queued := p.queued
	if !p.begun {
		queued = append([]statement{{sql: "BEGIN"}}, queued...)
	}
	for _, q := range queued {
		b.Queue(q.sql, q.args...)
	}
	b.Queue(sql, args...)
	p.queued = nil
	firstTrip := !p.begun
	p.begun = true
	br := p.c.SendBatch(ctx, b)
	for _, q := range queued {
		if err := q.result(br); err != nil {
			br.Close()
			p.first = firstTrip
			return nil, err
		}
	}
	return br, nil
}

func (p *pipe) queue(_ context.Context, sql string, args ...any) error {
	p.queued = append(p.queued, statement{sql: sql, args: args})
	return nil
}

// queueRead is queue for a statement whose rows read reads when they
// come, with the next round trip; an error of read's fails that trip.
func (p *pipe) queueRead(sql string, read func(rows) error, args ...any) {
	p.queued = append(p.queued, statement{sql: sql, args: args, read: read})
}

func (p *pipe) exec(ctx context.Context, sql string, args ...any) (int64, error) {
	br, err := p.send(ctx, sql, args)
	if err != nil {
		return 0, err
	}
	tag, err := br.Exec()
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return tag.RowsAffected(), err
}

func (p *pipe) query(ctx context.Context, sql string, args ...any) (rows, error) {
	br, err := p.send(ctx, sql, args)
	if err != nil {
		return nil, err
	}
	r, err := br.Query()
	if err != nil {
		br.Close()
		return nil, err
	}
	return batchRows{r, br}, nil
}

// batchRows are the rows of a batch's last statement; closing them
// closes the batch.
type batchRows struct {
	pgx.Rows
	br pgx.BatchResults
}

func (r batchRows) Close() {
	r.Rows.Close()
	r.br.Close()
}

// commit sends what is queued and COMMIT. A transaction that had failed
// answers COMMIT with ROLLBACK, which is an error here. When the trip
// fails otherwise than by the server's refusal, the transaction may have
// committed before the connection died, and the error says so (see
// uncommitted).
func (p *pipe) commit(ctx context.Context) error {
	if !p.begun && len(p.queued) == 0 {
		return nil // nothing was written or read
	}
	br, err := p.send(ctx, "COMMIT", nil)
	if err != nil {
		if !unsent(err) {
			p.first = false // never run fn again after a trip that carried COMMIT
		}
		return uncommitted(err)
	}
	tag, err := br.Exec()
	br.Close() // COMMIT answered is kept, whatever the connection does next
	if err == nil && tag.String() == "ROLLBACK" {
		err = pgx.ErrTxCommitRollback
	}
	return uncommitted(err)
}

// rollback ends a transaction that failed. If it cannot, the connection
// is not idle and the pool destroys it on release.
func (p *pipe) rollback(ctx context.Context) {
	if !p.begun {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_, _ = p.c.Exec(ctx, "ROLLBACK")
}

// openPipe starts a transaction on a connection of pool; nothing is sent
// until its first statement.
func openPipe(ctx context.Context, pool *pgxpool.Pool) (*pipe, error) {
	c, err := pool.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	return &pipe{c: c}, nil
}

// end commits, when err is nil, or rolls back, releases the connection
// and returns the transaction's outcome.
func (p *pipe) end(ctx context.Context, err error) error {
	if err == nil {
		err = p.commit(ctx)
	}
	if err != nil {
		p.rollback(ctx)
	}
	p.c.Release()
	return err
}

// again reports whether a transaction that failed with err may run again
// on another connection: its first round trip failed because the
// connection had died (a restarted or terminated backend), so nothing of
// it had run.
func (p *pipe) again(ctx context.Context, err error) bool {
	return err != nil && p.first && ctx.Err() == nil && engine.IsKind(mapErr(err), engine.Unavailable)
}

// pipelined runs fn in a pipe on a connection of pool and commits. When
// the first round trip fails on a dead connection, fn runs once more on
// a fresh one: one dead pooled connection does not fail a request.
func pipelined(ctx context.Context, pool *pgxpool.Pool, fn func(conn) error) error {
	for attempt := 0; ; attempt++ {
		p, err := openPipe(ctx, pool)
		if err != nil {
			return err
		}
		err = p.end(ctx, fn(p))
		if attempt == 0 && p.again(ctx, err) {
			continue
		}
		return err
	}
}
