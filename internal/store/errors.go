package store

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/sagacity-go/sagacity/internal/engine"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// errStale is the error of a transaction whose promise that a saga was
// unchanged did not hold (tx.LockAs).
var errStale = &engine.Error{Kind: engine.Conflict, Msg: "the saga changed; try again", Err: engine.ErrStale}

// errKeyTaken is the error of a call under an idempotency key the saga
// has given a call already (tx.PutCallKey).
var errKeyTaken = &engine.Error{Kind: engine.Conflict, Msg: "the idempotency key is taken", Err: engine.ErrKeyTaken}

// refused reports whether PostgreSQL refused a transaction that failed
// with err: it answered a statement, or COMMIT, with an error that ends
// the transaction and not the connection, or COMMIT with ROLLBACK. It
// then kept nothing. A FATAL error (a terminated backend, a server
// shutting down) or a lost connection says no such thing: the server may
// have run everything it was sent before it went.
func refused(err error) bool {
	if pe, ok := errors.AsType[*pgconn.PgError](err); ok {
		return cmp.Or(pe.SeverityUnlocalized, pe.Severity) == "ERROR"
	}
	return errors.Is(err, pgx.ErrTxCommitRollback)
}

// unsent reports whether a trip failed with err before pgx sent any of
// its statements (preparing one of them failed).
func unsent(err error) bool {
	_, ok := errors.AsType[pgx.ErrPreprocessingBatch](err)
	return ok
}

// uncommitted is the error of a PostgreSQL trip that carried COMMIT and
// failed with err: unless the server refused it, or the trip never left,
// the transaction may have committed, and the error wraps
// engine.ErrCommitUnknown.
func uncommitted(err error) error {
	if err == nil || refused(err) || unsent(err) {
		return err
	}
	return &engine.Error{Kind: engine.Unavailable, Msg: "database unavailable", Err: fmt.Errorf("%w: %w", engine.ErrCommitUnknown, err)}
}

// PostgreSQL's codes of a division by zero and of a unique violation.
const (
	divisionByZero  = "22012"
	uniqueViolation = "23505"
)

// mapErr is the one place database errors become engine kinds. Engine
// errors pass through; the cause stays attached for logs, never for users.
func mapErr(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := errors.AsType[*engine.Error](err); ok {
		return err
	}
	kind := engine.Internal
	if _, ok := errors.AsType[*pgconn.ConnectError](err); ok {
		// Whatever the server said while connecting (no such database,
		// no such role, too many clients, starting up), there is no
		// database to work with.
		kind = engine.Unavailable
	} else if pe, ok := errors.AsType[*pgconn.PgError](err); ok {
		if pe.Code == divisionByZero {
			return errStale // only a broken promise divides (tx.LockAs)
		}
		if pe.Code == uniqueViolation && pe.TableName == "call_keys" {
			return errKeyTaken
		}
		kind = pgKind(pe.Code)
	} else if se, ok := errors.AsType[*sqlite.Error](err); ok {
		if se.Code() == sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY && strings.Contains(se.Error(), "call_keys.") {
			return errKeyTaken
		}
		kind = sqliteKind(se.Code())
	} else if unreachable(err) {
		kind = engine.Unavailable
	}
	switch kind {
	case engine.Unavailable:
		return &engine.Error{Kind: kind, Msg: "database unavailable", Err: err}
	case engine.Conflict:
		return &engine.Error{Kind: kind, Msg: "conflicting write, try again", Err: err}
	}
	return &engine.Error{Kind: kind, Msg: "internal error", Err: err}
}

// unreachable reports whether err means the database could not be reached
// or the connection was lost, as opposed to a bug in a query.
func unreachable(err error) bool {
	var ne net.Error
	var ce *pgconn.ConnectError
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) ||
		errors.As(err, &ne) || errors.As(err, &ce) || pgconn.Timeout(err) || pgconn.SafeToRetry(err) ||
		closed(err.Error())
}

// closed matches the errors of a pool or database that was closed under a
// running operation; neither driver exports them.
func closed(msg string) bool {
	return strings.HasSuffix(msg, "sql: database is closed") || strings.HasSuffix(msg, "closed pool")
}

func pgKind(code string) engine.Kind {
	switch {
	case code == uniqueViolation || code == "40001" || code == "40P01": // unique violation, serialization, deadlock
		return engine.Conflict
	case len(code) == 5 && (code[:2] == "08" || code[:2] == "53" || code[:2] == "57" || code[:2] == "28" || code[:2] == "3D"):
		// connection exception, insufficient resources, operator
		// intervention, invalid authorization, no such database
		return engine.Unavailable
	case code == "42P01" || code == "3F000":
		// no such table or schema: the database was dropped or is not
		// Sagacity's; nothing can be served from it
		return engine.Unavailable
	}
	return engine.Internal
}

func sqliteKind(code int) engine.Kind {
	switch code {
	case sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY, sqlite3.SQLITE_CONSTRAINT_UNIQUE:
		return engine.Conflict
	}
	switch code & 0xff {
	case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED, sqlite3.SQLITE_FULL, sqlite3.SQLITE_IOERR,
		sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_READONLY, sqlite3.SQLITE_NOTADB, sqlite3.SQLITE_CORRUPT:
		return engine.Unavailable
	}
	return engine.Internal
}
