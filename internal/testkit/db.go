package testkit

import (
	"context"
	"crypto/rand"
	stdsql "database/sql"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/sagacity-go/sagacity/internal/engine"
	_ "modernc.org/sqlite" // the sqlite driver, for Exec
)

// DefaultPostgresURL is where tests find PostgreSQL unless
// SAGACITY_TEST_DATABASE_URL says otherwise.
const DefaultPostgresURL = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

var (
	pgOnce sync.Once
	pgErr  error
)

// PostgresURL returns the url of a fresh, empty schema in the test
// PostgreSQL, dropped when the test ends. Without a reachable PostgreSQL
// the test is skipped, after one line on stderr; with CI set it fails.
func PostgresURL(t testing.TB) string {
	t.Helper()
	base := postgresBase(t)
	schema := "t_" + strings.ToLower(rand.Text()[:16])
	Exec(t, base, `CREATE SCHEMA "`+schema+`"`)
	t.Cleanup(func() { Exec(t, base, `DROP SCHEMA "`+schema+`" CASCADE`) })
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}

// postgresBase is the url of the test PostgreSQL; without one reachable
// the test is skipped, or with CI set fails.
func postgresBase(t testing.TB) string {
	t.Helper()
	base := os.Getenv("SAGACITY_TEST_DATABASE_URL")
	if base == "" {
		base = DefaultPostgresURL
	}
	pgOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		c, err := pgx.Connect(ctx, base)
		if err == nil {
			err = c.Ping(ctx)
			c.Close(ctx)
		}
		if err != nil {
			pgErr = fmt.Errorf("PostgreSQL unreachable at %s: %w", base, err)
			if os.Getenv("CI") == "" {
				fmt.Fprintf(os.Stderr, "skipping PostgreSQL runs: %v (set CI=1 to fail instead)\n", pgErr)
			}
		}
	})
	if pgErr != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("CI is set and %v", pgErr)
		}
		t.Skip(pgErr)
	}
	return base
}

// SQLiteURL returns the url of a new database file in the test's temporary
// directory.
func SQLiteURL(t testing.TB) string {
	return "sqlite:" + filepath.Join(t.TempDir(), "sagacity.db")
}

// Exec runs raw SQL ($1-style parameters) on the database at url, behind
// the back of any store open on it: for tampering with what the engine
// wrote.
func Exec(t testing.TB, dbURL, sql string, args ...any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	db := openRaw(ctx, t, dbURL)
	defer db.close()
	if err := db.exec(ctx, sql, args...); err != nil {
		t.Fatalf("Exec(%s): %v", sql, err)
	}
}

// Count runs a query returning one integer, such as SELECT count(*), on
// the database at url, behind the back of any store open on it: for
// checking rows no store method reads.
func Count(t testing.TB, dbURL, sql string, args ...any) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	db := openRaw(ctx, t, dbURL)
	defer db.close()
	var n int64
	if err := db.queryRow(ctx, sql, args...).Scan(&n); err != nil {
		t.Fatalf("Count(%s): %v", sql, err)
	}
	return n
}

// raw is a connection of its own to a test database.
type raw struct {
	exec     func(ctx context.Context, sql string, args ...any) error
	queryRow func(ctx context.Context, sql string, args ...any) interface{ Scan(...any) error }
	close    func()
}

func openRaw(ctx context.Context, t testing.TB, dbURL string) raw {
	t.Helper()
	if path, ok := strings.CutPrefix(dbURL, "sqlite:"); ok {
		db, err := stdsql.Open("sqlite", "file:"+path+"?_time_integer_format=unix_micro&_pragma=busy_timeout(10000)")
		if err != nil {
			t.Fatal(err)
		}
		return raw{
			exec: func(ctx context.Context, sql string, args ...any) error {
				_, err := db.ExecContext(ctx, sql, args...)
				return err
			},
			queryRow: func(ctx context.Context, sql string, args ...any) interface{ Scan(...any) error } {
				return db.QueryRowContext(ctx, sql, args...)
			},
			close: func() { db.Close() },
		}
	}
	c, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	return raw{
		exec: func(ctx context.Context, sql string, args ...any) error {
			_, err := c.Exec(ctx, sql, args...)
			return err
		},
		queryRow: func(ctx context.Context, sql string, args ...any) interface{ Scan(...any) error } {
			return c.QueryRow(ctx, sql, args...)
		},
		close: func() { c.Close(ctx) },
	}
}

var (
	keysOnce sync.Once
	keys     *engine.Keys
)

// Keys is a signing key for tests' engines, made once per test binary.
func Keys(t testing.TB) *engine.Keys {
	keysOnce.Do(func() {
		skey, _, err := engine.GenerateKeys("sagacity.test")
		if err == nil {
			keys, err = engine.NewKeys(skey)
		}
		if err != nil {
			panic(err)
		}
	})
	return keys
}

// NewKeys makes a fresh key pair named name, and says its verifier key:
// a server's own, or one an insider makes under the server's name.
func NewKeys(t testing.TB, name string) (*engine.Keys, string) {
	t.Helper()
	skey, vkey, err := engine.GenerateKeys(name)
	if err != nil {
		t.Fatal(err)
	}
	k, err := engine.NewKeys(skey)
	if err != nil {
		t.Fatal(err)
	}
	return k, vkey
}
