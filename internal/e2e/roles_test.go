package e2e

import (
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/sagacity-go/sagacity/internal/testkit"
)

// TestDatabaseRoles follows the production checklist of
// docs/operating.md on PostgreSQL: an owner role and an application role,
// `sagacity migrate` run as the owner (twice at once: each migration is
// applied once), the checklist's GRANT script, and the server as the
// application role. Before the grants it refuses to start, naming that
// checklist; with them it serves a gated call, its approval, the resume,
// verification and the log's checkpoints. The application role cannot
// delete, rewrite or truncate the journal, nor change the schema; and on
// a schema one migration behind, serve and migrate as that role refuse
// in one line naming both versions and `sagacity migrate`.
func TestDatabaseRoles(t *testing.T) {
	f := newFixture(t, 90*time.Second)
	ctx := f.ctx
	roles := testkit.NewRoles(t)
	owner, app, admin := roles.Schema(t)

	type result struct {
		code int
		out  string
	}
	binary(t) // built here, not on the goroutines
	results := make([]result, 2)
	done := make(chan struct{})
	for i := range results {
		go func() {
			results[i].code, results[i].out = f.migrate(owner)
			done <- struct{}{}
		}()
	}
	<-done
	<-done
	last := testkit.Count(t, admin, "SELECT max(version) FROM schema_migrations")
	slices.SortFunc(results, func(a, b result) int { return len(b.out) - len(a.out) })
	migrated, current := results[0], results[1]
	wantLast := fmt.Sprintf(": the schema is at version %d (it was at 0)\n", last)
	if migrated.code != 0 || strings.Count(migrated.out, "applied ") != int(last) || !strings.HasPrefix(migrated.out, "applied 001_") ||
		!strings.HasSuffix(migrated.out, wantLast) {
		t.Errorf("sagacity migrate as the owner, one of two at once: exit %d\n%s\nwant exit 0, %d migrations applied and a last line ending %q",
			migrated.code, migrated.out, last, wantLast)
	}
	wantCurrent := fmt.Sprintf(": the schema is current, at version %d; nothing to apply\n", last)
	if current.code != 0 || strings.Count(current.out, "\n") != 1 || !strings.HasSuffix(current.out, wantCurrent) {
		t.Errorf("sagacity migrate as the owner, the other of two at once: exit %d\n%s\nwant exit 0 and one line ending %q", current.code, current.out, wantCurrent)
	}
	if n := testkit.Count(t, admin, "SELECT count(*) FROM schema_migrations"); n != last {
		t.Errorf("after two migrates at once schema_migrations has %d rows; want %d", n, last)
	}

	out := f.serverRefused("sagacity", app, nil)
	if want := "sagacity: SAGACITY_DATABASE_URL: the search path names no schema this role may use: grant it USAGE on the schema," +
		" as the production checklist in docs/operating.md does"; !strings.Contains(out, want) {
		t.Errorf("serve as the application role before the grants said:\n%s\nwant it to refuse with %q", out, want)
	}
	roles.Grant(t, owner)
	srv := f.server("sagacity", app)
	agent := f.initiator(0)
	if a, _ := agent.call(ctx, srv, "paid", toolReserve, `{"sku":"desk","qty":1}`); !a.is(200) {
		t.Fatalf("call as the application role: %s", a)
	}
	r := f.approvedWire(srv, agent, "paid")
	if a, res := agent.resume(ctx, srv, "paid", r.JournalSeq, wire); !a.is(200) || res.Outcome != "EXECUTED" {
		t.Fatalf("resume as the application role: %s", a)
	}
	f.waitLogged(srv, "paid")
	verified := func(when string) {
		t.Helper()
		if a, v := f.auditor.verify(ctx, srv, "paid"); !a.is(200) || !v.Valid || v.EntryCount != 6 {
			t.Errorf("verify %s: %s; want the 6 entries valid", when, a)
		}
	}
	verified("as the application role")
	if n := f.checkpointsConsistent(srv, "sagacity"); n == 0 {
		t.Error("the server signed no checkpoint as the application role")
	}
	if n := f.tools.snapshot().arrived["/wire"]; n != 1 {
		t.Errorf("the approved wire ran %d times; want once", n)
	}

	conn, err := pgx.Connect(ctx, app)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	entries := testkit.Count(t, admin, "SELECT count(*) FROM journal")
	for _, sql := range []string{
		"DELETE FROM journal",
		"DELETE FROM journal WHERE saga_id = 'paid' AND seq = 4",
		"UPDATE journal SET payload = 'forged' WHERE saga_id = 'paid'",
		"UPDATE journal SET input = '{}', hash = 'x' WHERE saga_id = 'paid' AND seq = 3",
		"TRUNCATE journal",
		"ALTER TABLE journal DISABLE TRIGGER ALL",
		"CREATE TABLE journal_copy (seq BIGINT)",
	} {
		_, err := conn.Exec(ctx, sql)
		if pe, ok := errors.AsType[*pgconn.PgError](err); !ok || pe.Code != "42501" {
			t.Errorf("%s as the application role: %v; want it refused, SQLSTATE 42501", sql, err)
		}
	}
	if n := testkit.Count(t, admin, "SELECT count(*) FROM journal"); n != entries {
		t.Errorf("the journal has %d entries after the application role's attempts; want %d, as before", n, entries)
	}
	verified("after the application role's attempts")

	srv.kill()
	testkit.Exec(t, admin, "DELETE FROM schema_migrations WHERE version = $1", last)
	want := fmt.Sprintf("sagacity: SAGACITY_DATABASE_URL: the schema is at version %d, this server needs %d: run `sagacity migrate` as the schema's owner: ",
		last-1, last)
	out = f.serverRefused("sagacity", app, nil)
	if status, line, _ := strings.Cut(out, " "); status != "(exit" || !strings.HasPrefix(line, "status 1) "+want) || strings.Count(out, "\n") != 1 {
		t.Errorf("serve as the application role on a schema one migration behind said:\n%s\nwant exit status 1 and one line starting %q", out, want)
	}
	if code, out := f.migrate(app); code != 1 || !strings.HasPrefix(out, want) || strings.Count(out, "\n") != 1 {
		t.Errorf("sagacity migrate as the application role on a schema one migration behind: exit %d\n%s\nwant exit 1 and one line starting %q", code, out, want)
	}
}

// migrate runs `sagacity migrate` on dbURL and returns its exit status
// and output.
func (f *fixture) migrate(dbURL string) (int, string) {
	cmd := exec.CommandContext(f.ctx, binary(f.t), "migrate")
	cmd.Env = []string{"SAGACITY_DATABASE_URL=" + dbURL}
	out, err := cmd.CombinedOutput()
	if ee, ok := errors.AsType[*exec.ExitError](err); ok {
		return ee.ExitCode(), string(out)
	} else if err != nil {
		f.t.Errorf("sagacity migrate: %v", err) // not Fatal: it may run on another goroutine
	}
	return 0, string(out)
}
