// Package store persists sagas, their journals, pending approvals and calls
// in PostgreSQL (through pgx) or in an embedded SQLite file. Both run the
// same SQL through a thin adapter each, and both pass the conformance suite
// in storetest, so the embedded default cannot drift from PostgreSQL. It
// also keeps auth's sessions and demo's ledger, in their packages' types:
// it adapts them, it does not own them.
package store

import (
	"context"
	"strings"

	"github.com/sagacity-go/sagacity/internal/auth"
	"github.com/sagacity-go/sagacity/internal/demo"
	"github.com/sagacity-go/sagacity/internal/engine"
)

// DB is an open store: an engine.Store, an auth.SessionStore and a
// demo.Store.
type DB struct {
	sqlStore
	ping   func(context.Context) error
	close  func()
	schema Schema
}

var (
	_ engine.Store      = (*DB)(nil)
	_ auth.SessionStore = (*DB)(nil)
	_ demo.Store        = (*DB)(nil)
)

// Ping reports whether the database answers; Unavailable when not.
func (d *DB) Ping(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	return mapErr(d.ping(ctx))
}

// Close releases the database.
func (d *DB) Close() { d.close() }

// Schema says what opening the store found of its schema, and what it did
// to it.
func (d *DB) Schema() Schema { return d.schema }

// Open opens the store named by url: "postgres://…" (or "postgresql://…")
// or "sqlite:<path>". It reads the schema's version first, writing
// nothing: on a current schema it runs no DDL and takes no lock, so a role
// granted only the privileges the server's statements need can open it.
// Pending migrations it applies before returning. Errors are Invalid for a
// url it cannot use, and Unavailable for a database it cannot reach, a
// schema this role may not use or read the version of (the error names
// the production checklist in docs/operating.md), or one behind that it may not migrate (the
// error names both versions and `sagacity migrate`).
func Open(ctx context.Context, url string) (*DB, error) {
	switch {
	case strings.HasPrefix(url, "postgres://"), strings.HasPrefix(url, "postgresql://"):
		return OpenPostgres(ctx, url)
	case strings.HasPrefix(url, "sqlite:"):
		return OpenSQLite(ctx, strings.TrimPrefix(url, "sqlite:"))
	}
	return nil, engine.Errorf(engine.Invalid, "database url must start with postgres:// or sqlite: (got %q)", Redact(url))
}

// Redact hides a password in a database url.
func Redact(url string) string {
	scheme, rest, ok := strings.Cut(url, "://")
	if !ok {
		return url
	}
	at := strings.LastIndex(rest, "@")
	if user, _, hasPass := strings.Cut(rest[:max(at, 0)], ":"); at > 0 && hasPass {
		return scheme + "://" + user + ":xxxxx" + rest[at:]
	}
	return url
}
