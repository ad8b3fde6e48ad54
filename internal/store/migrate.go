package store

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/sagacity-go/sagacity/internal/engine"
	"github.com/sagacity-go/sagacity/migrations"
)

// migration is one numbered SQL file.
type migration struct {
	version int
	name    string
	sql     string
}

// loadMigrations reads a dialect's files, ordered by number. Names must be
// NNN_description.sql with distinct numbers.
func loadMigrations(dialect string) ([]migration, error) {
	files, err := fs.Glob(migrations.FS, dialect+"/*.sql")
	if err != nil {
		return nil, err
	}
	var ms []migration
	seen := map[int]string{}
	for _, f := range files {
		name := path.Base(f)
		num, _, ok := strings.Cut(name, "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v <= 0 {
			return nil, fmt.Errorf("migration %s: name must start with a positive number and _", f)
		}
		if prev, dup := seen[v]; dup {
			return nil, fmt.Errorf("migrations %s and %s share number %d", prev, name, v)
		}
		seen[v] = name
		b, err := fs.ReadFile(migrations.FS, f)
		if err != nil {
			return nil, err
		}
		ms = append(ms, migration{version: v, name: name, sql: string(b)})
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].version < ms[j].version })
	return ms, nil
}

// Schema is what opening a store found of its schema, and what it did to
// it.
type Schema struct {
	// Found is the version the database was at: the number of its newest
	// migration applied, 0 for a new database.
	Found int
	// Needs is the version this binary needs: the number of its newest
	// migration.
	Needs int
	// Applied names the migrations this open applied, in order; none when
	// the schema was current.
	Applied []string
}

// migrationsTable asks a dialect's catalog whether there is a schema to
// work in (PostgreSQL's search path may name none this role may use) and
// counts the schema_migrations table where CREATE TABLE would put it:
// reading the catalog needs no privilege, and creates nothing.
var migrationsTable = map[string]string{
	"postgres": "SELECT current_schema() IS NOT NULL, count(*) FROM pg_catalog.pg_tables" +
		" WHERE schemaname = current_schema() AND tablename = 'schema_migrations'",
	"sqlite": "SELECT 1, count(*) FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'",
}

// errNoSchema is the error of a role whose search path names no schema it
// may use.
var errNoSchema = engine.Errorf(engine.Unavailable, "the search path names no schema this role may use:"+
	" grant it USAGE on the schema, as the production checklist in docs/operating.md does, or name the schema (search_path)")

// PostgreSQL's code of a privilege refused.
const insufficientPrivilege = "42501"

// migrateTimeout bounds applying the pending migrations, and waiting for
// another process that applies them: a migration may rewrite every row
// of the journal, which takes as long as the store is large, far beyond
// an operation's opTimeout.
const migrateTimeout = time.Hour

// migrate brings the dialect's schema up to date. It first reads the
// versions applied through c, with no lock and no write: a schema that is
// current is left alone, so a role granted only what the server's
// statements need starts. Otherwise it applies the pending migrations in
// one transaction that begin runs (one that sends each script as it is: a
// script holds several statements), recording each in schema_migrations.
// lock, when set, is run first in it, so that replicas starting together
// migrate one at a time; each reads the versions again under it. A role
// that may not change the schema gets Unavailable, naming the versions and
// `sagacity migrate`.
func migrate(ctx context.Context, c conn, begin func(context.Context, func(conn) error) error, dialect, lock string) (Schema, error) {
	ms, err := loadMigrations(dialect)
	if err != nil {
		return Schema{}, err
	}
	read, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	var s Schema
	if len(ms) > 0 {
		s.Needs = ms[len(ms)-1].version
	}
	done, err := applied(read, c, dialect)
	if pe, ok := errors.AsType[*pgconn.PgError](err); ok && pe.Code == insufficientPrivilege {
		return Schema{}, &engine.Error{Kind: engine.Unavailable, Err: pe,
			Msg: "this role may not read schema_migrations: grant it the privileges the production checklist in docs/operating.md lists"}
	} else if err != nil {
		return Schema{}, err
	}
	s.Found = newest(done)
	if len(pending(ms, done)) == 0 {
		return s, nil
	}
	ctx, cancel = context.WithTimeout(ctx, migrateTimeout)
	defer cancel()
	err = begin(ctx, func(c conn) error {
		if lock != "" {
			if _, err := c.exec(ctx, lock); err != nil {
				return err
			}
		}
		// Another process may have migrated while this one waited.
		done, err := applied(ctx, c, dialect)
		if err != nil {
			return err
		}
		s.Found = newest(done)
		todo := pending(ms, done)
		if len(todo) == 0 {
			return nil
		}
		if len(done) == 0 {
			if _, err := c.exec(ctx, "CREATE TABLE IF NOT EXISTS schema_migrations"+
				" (version INTEGER PRIMARY KEY, name TEXT NOT NULL)"); err != nil {
				return err
			}
		}
		for _, m := range todo {
			if _, err := c.exec(ctx, m.sql); err != nil {
				return fmt.Errorf("migration %s: %w", m.name, err)
			}
			if _, err := c.exec(ctx, "INSERT INTO schema_migrations (version, name) VALUES ($1, $2)", m.version, m.name); err != nil {
				return err
			}
			s.Applied = append(s.Applied, m.name)
		}
		return nil
	})
	if pe, ok := errors.AsType[*pgconn.PgError](err); ok && pe.Code == insufficientPrivilege {
		return Schema{}, &engine.Error{Kind: engine.Unavailable, Err: err,
			Msg: fmt.Sprintf("the schema is at version %d, this server needs %d: run `sagacity migrate` as the schema's owner", s.Found, s.Needs)}
	}
	if err != nil {
		return Schema{}, mapErr(err)
	}
	return s, nil
}

// applied reads the versions of the migrations applied, creating nothing:
// a database without schema_migrations has none.
func applied(ctx context.Context, c conn, dialect string) ([]int, error) {
	type catalog struct {
		schema bool
		tables int
	}
	cat, err := one(ctx, c, func(r rows) (c catalog, err error) { return c, r.Scan(&c.schema, &c.tables) },
		"catalog", migrationsTable[dialect])
	switch {
	case err != nil:
		return nil, err
	case !cat.schema:
		return nil, errNoSchema
	case cat.tables == 0:
		return nil, nil
	}
	return collect(ctx, c, func(r rows) (v int, err error) { return v, r.Scan(&v) }, "SELECT version FROM schema_migrations")
}

// pending are the migrations of ms whose versions are not in done.
func pending(ms []migration, done []int) []migration {
	var todo []migration
	for _, m := range ms {
		if !slices.Contains(done, m.version) {
			todo = append(todo, m)
		}
	}
	return todo
}

// newest is the highest of versions, 0 for none.
func newest(versions []int) int {
	n := 0
	for _, v := range versions {
		n = max(n, v)
	}
	return n
}
