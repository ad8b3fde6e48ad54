package store

import (
	"context"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"

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

// migrate applies the dialect's pending migrations in one transaction
// that begin runs (one that sends each script as it is: a script holds
// several statements), recording each in schema_migrations. lock, when
// set, is run first so that replicas starting together migrate one at a
// time.
func migrate(ctx context.Context, begin func(context.Context, func(conn) error) error, dialect, lock string) error {
	ms, err := loadMigrations(dialect)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	return mapErr(begin(ctx, func(c conn) error {
		if lock != "" {
			if _, err := c.exec(ctx, lock); err != nil {
				return err
			}
		}
		if _, err := c.exec(ctx, "CREATE TABLE IF NOT EXISTS schema_migrations"+
			" (version INTEGER PRIMARY KEY, name TEXT NOT NULL)"); err != nil {
			return err
		}
		applied, err := collect(ctx, c, func(r rows) (v int, err error) { return v, r.Scan(&v) },
			"SELECT version FROM schema_migrations")
		if err != nil {
			return err
		}
		done := map[int]bool{}
		for _, v := range applied {
			done[v] = true
		}
		for _, m := range ms {
			if done[m.version] {
				continue
			}
			if _, err := c.exec(ctx, m.sql); err != nil {
				return fmt.Errorf("migration %s: %w", m.name, err)
			}
			if _, err := c.exec(ctx, "INSERT INTO schema_migrations (version, name) VALUES ($1, $2)", m.version, m.name); err != nil {
				return err
			}
		}
		return nil
	}))
}
