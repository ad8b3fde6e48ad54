package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5"
	"github.com/sagacity-go/sagacity/internal/engine"
	"github.com/sagacity-go/sagacity/internal/engine/enginetest"
	"github.com/sagacity-go/sagacity/internal/store/storetest"
	"github.com/sagacity-go/sagacity/internal/testkit"
)

// stores are the two kinds of database, each with a fresh one per call.
var stores = []struct {
	dialect string
	url     func(testing.TB) string
}{{"postgres", testkit.PostgresURL}, {"sqlite", testkit.SQLiteURL}}

// migrationNames are the names of a dialect's migrations, in order, and
// the newest one's number.
func migrationNames(t *testing.T, dialect string) ([]string, int) {
	t.Helper()
	ms, err := loadMigrations(dialect)
	if err != nil || len(ms) == 0 {
		t.Fatalf("loadMigrations(%s) = %d migrations, %v", dialect, len(ms), err)
	}
	var names []string
	for _, m := range ms {
		names = append(names, m.name)
	}
	return names, ms[len(ms)-1].version
}

// openSchema opens the store at url and says what the open found and did.
func openSchema(t *testing.T, ctx context.Context, url string) Schema {
	t.Helper()
	db, err := Open(ctx, url)
	if err != nil {
		t.Fatalf("Open(%s): %v", url, err)
	}
	defer db.Close()
	return db.Schema()
}

// TestMigrate: four processes opening a new database at once apply each
// migration once, one of them all of them, the others finding the schema
// current once they may look; opened again, the store applies nothing.
func TestMigrate(t *testing.T) {
	t.Parallel()
	for _, db := range stores {
		t.Run(db.dialect, func(t *testing.T) {
			t.Parallel()
			names, last := migrationNames(t, db.dialect)
			url := db.url(t)
			got := make([]Schema, 4)
			var wg sync.WaitGroup
			for i := range got {
				wg.Go(func() {
					db, err := Open(t.Context(), url)
					if err != nil {
						t.Errorf("Open(%s), one of four at once: %v", url, err)
						return
					}
					got[i] = db.Schema()
					db.Close()
				})
			}
			wg.Wait()
			slices.SortFunc(got, func(a, b Schema) int { return len(b.Applied) - len(a.Applied) })
			current := Schema{Found: last, Needs: last}
			want := []Schema{{Found: 0, Needs: last, Applied: names}, current, current, current}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("four Opens at once of a new database (-want +got):\n%s", diff)
			}
			if n := testkit.Count(t, url, "SELECT count(DISTINCT version) FROM schema_migrations"); n != int64(len(names)) {
				t.Errorf("schema_migrations records %d versions; want %d", n, len(names))
			}
			if got := openSchema(t, t.Context(), url); !cmp.Equal(got, current) {
				t.Errorf("Open of a current schema = %+v; want %+v", got, current)
			}
			if n := testkit.Count(t, url, "SELECT count(*) FROM schema_migrations"); n != int64(len(names)) {
				t.Errorf("after another Open, schema_migrations has %d rows; want %d", n, len(names))
			}
		})
	}
}

// TestOpenCurrent: opening a current schema writes nothing and takes no
// lock. PostgreSQL is sent the two reads of the version and nothing else;
// a SQLite file whose write lock another process holds opens at once.
func TestOpenCurrent(t *testing.T) {
	t.Parallel()
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		url := testkit.PostgresURL(t)
		_, last := migrationNames(t, "postgres")
		openSchema(t, t.Context(), url)
		var c trips
		db, err := openPostgres(t.Context(), url, &c)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		if got, want := db.Schema(), (Schema{Found: last, Needs: last}); !cmp.Equal(got, want) {
			t.Errorf("openPostgres of a current schema: Schema() = %+v; want %+v", got, want)
		}
		var sent []string
		for sql := range c.seen {
			sent = append(sent, sql)
		}
		slices.Sort(sent)
		want := []string{migrationsTable["postgres"], "SELECT version FROM schema_migrations"}
		if diff := cmp.Diff(want, sent); diff != "" {
			t.Errorf("openPostgres of a current schema sent (-want +got):\n%s", diff)
		}
	})
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		url := testkit.SQLiteURL(t)
		_, last := migrationNames(t, "sqlite")
		openSchema(t, t.Context(), url)
		other, err := sql.Open("sqlite", "file:"+strings.TrimPrefix(url, "sqlite:"))
		if err != nil {
			t.Fatal(err)
		}
		defer other.Close()
		c, err := other.Conn(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := c.ExecContext(t.Context(), "BEGIN IMMEDIATE"); err != nil {
			t.Fatal(err)
		}
		defer func() { _, _ = c.ExecContext(context.Background(), "ROLLBACK") }()
		// Waiting for the lock would take the busy timeout, 10s.
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		defer cancel()
		if got, want := openSchema(t, ctx, url), (Schema{Found: last, Needs: last}); !cmp.Equal(got, want) {
			t.Errorf("Open of a current schema while another process writes: Schema() = %+v; want %+v", got, want)
		}
	})
}

// leastPrivileged is a fresh schema migrated by the roles' owner and
// granted to their application role by the README's script, by the
// urls of the application role and of the superuser.
func leastPrivileged(t *testing.T, roles *testkit.Roles) (app, admin string) {
	t.Helper()
	owner, app, admin := roles.Schema(t)
	openSchema(t, t.Context(), owner)
	roles.Grant(t, owner)
	return app, admin
}

// TestLeastPrivilege: the driver suite, and the scenarios that reach the
// store's statements it does not, pass on a store opened as a role
// granted exactly the GRANT script of docs/operating.md, which covers
// every table and sequence of the schema; on a schema behind, that role
// is refused with one line naming both versions and sagacity migrate, and
// without the grants (to read schema_migrations, to use the schema) with
// one naming that page's checklist.
func TestLeastPrivilege(t *testing.T) {
	t.Parallel()
	roles := testkit.NewRoles(t)
	newHarness := func(t *testing.T) storetest.Harness {
		app, admin := leastPrivileged(t, roles)
		h := storetest.NewHarness(admin, "postgres", Open)
		h.Open = storetest.NewHarness(app, "postgres", Open).Open
		return h
	}
	storetest.Run(t, newHarness)
	// The driver suite calls every table's statements but these: the
	// outbox's (its five tables, the delivery sequence, a refusal), the
	// passkeys' and ceremonies', the grouped commit's, and call_keys'
	// (GroupCommit's keyed calls).
	enginetest.Run(t, newHarness, "Outbox", "OutboxForged", "Passkeys", "GroupCommit")
	t.Run("Grants", func(t *testing.T) {
		t.Parallel()
		_, admin := leastPrivileged(t, roles)
		conn, err := pgx.Connect(t.Context(), admin)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(context.Background())
		var missing string
		err = conn.QueryRow(t.Context(), "SELECT COALESCE(string_agg(c.relname, ', ' ORDER BY c.relname), '')"+
			" FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = current_schema()"+
			" AND ((c.relkind = 'r' AND NOT has_table_privilege($1, c.oid, 'SELECT, INSERT, UPDATE, DELETE'))"+
			" OR (c.relkind = 'S' AND NOT has_sequence_privilege($1, c.oid, 'USAGE')))", roles.App).Scan(&missing)
		if err != nil {
			t.Fatal(err)
		}
		if missing != "" {
			t.Errorf("the README's GRANT script grants the application role nothing on %s", missing)
		}
	})
	t.Run("Behind", func(t *testing.T) {
		t.Parallel()
		app, admin := leastPrivileged(t, roles)
		_, last := migrationNames(t, "postgres")
		testkit.Exec(t, admin, "DELETE FROM schema_migrations WHERE version = $1", last)
		_, err := Open(t.Context(), app)
		want := fmt.Sprintf("the schema is at version %d, this server needs %d: run `sagacity migrate` as the schema's owner: ", last-1, last)
		if err == nil || !engine.IsKind(err, engine.Unavailable) || !strings.HasPrefix(err.Error(), want) ||
			!strings.HasSuffix(err.Error(), "(SQLSTATE 42501)") || strings.Contains(err.Error(), "\n") {
			t.Errorf("Open as the application role of a schema one migration behind = %v; want Unavailable, one line starting %q", err, want)
		}
		if n := testkit.Count(t, admin, "SELECT count(*) FROM schema_migrations"); n != int64(last-1) {
			t.Errorf("after the refusal schema_migrations has %d rows; want %d, as before", n, last-1)
		}
		testkit.Exec(t, admin, "REVOKE SELECT ON schema_migrations FROM "+roles.App)
		_, err = Open(t.Context(), app)
		want = "this role may not read schema_migrations: grant it the privileges the production checklist in docs/operating.md lists: "
		if err == nil || !engine.IsKind(err, engine.Unavailable) || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("Open as a role that may not read schema_migrations = %v; want Unavailable, starting %q", err, want)
		}
		testkit.Exec(t, admin, "REVOKE USAGE ON SCHEMA "+pgx.Identifier{testkit.SchemaOf(t, admin)}.Sanitize()+" FROM "+roles.App)
		if _, err = Open(t.Context(), app); !errors.Is(err, errNoSchema) {
			t.Errorf("Open as a role that may not use the schema = %v; want %v", err, errNoSchema)
		}
	})
}

// TestMigrateTakesItsTime: pending migrations are applied under
// migrateTimeout, not an operation's opTimeout: a migration that rewrites
// every entry of a journal of millions takes longer than that.
func TestMigrateTakesItsTime(t *testing.T) {
	ctx := context.Background()
	db, err := sql.Open("sqlite", "file:"+strings.TrimPrefix(testkit.SQLiteURL(t), "sqlite:"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	cache := &stmts{db: db, m: map[string]*sql.Stmt{}}
	defer cache.close()
	var left time.Duration
	begin := func(ctx context.Context, fn func(conn) error) error {
		if d, ok := ctx.Deadline(); ok {
			left = time.Until(d)
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
	s, err := migrate(ctx, sqlConn{q: db, stmts: cache}, begin, "sqlite", "")
	if err != nil || len(s.Applied) == 0 {
		t.Fatalf("migrate = %+v, %v; want every migration applied", s, err)
	}
	if left <= opTimeout {
		t.Errorf("the migrations were applied with %s left, no more than an operation's %s", left.Round(time.Second), opTimeout)
	}
}
