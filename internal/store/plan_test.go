package store

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/sagacity-go/sagacity/internal/engine"
	"github.com/sagacity-go/sagacity/internal/testkit"
	"github.com/sagacity-go/sagacity/internal/tlog"
	codes "github.com/sagacity-go/sagacity/wire" // the package's tests declare a const wire
)

// planned is a statement whose plan must reach the journal through an
// index, whatever the journal's size: a scan would make its cost grow
// with the store.
type planned struct {
	name string
	sql  string
	args []any
}

// plannedStatements are the statements of the global log's sequencer,
// checks and proofs, of the sweep of requests whose time ran out, and of
// the pending list's pages, for a dialect.
func plannedStatements(postgres bool) []planned {
	ps := []planned{
		{"unsequenced entries", unsequencedSQL(postgres), []any{2000}},
		{"leaves by index", leavesSQL, []any{0, 2000}},
		{"requests due", dueSQL, []any{time.Now(), 100}},
		{"pending requests' entries", pendingEntriesSQL, []any{"s", 1, 100}},
		{"unratified break-glass executions", unratifiedSQL, []any{100}},
	}
	at := &engine.PendingCursor{CreatedAt: time.Now(), SagaID: "s", JournalSeq: 1}
	for name, f := range map[string]engine.PendingFilter{
		"pending, the first page": {Limit: 50},
		"pending, the next page":  {Limit: 50, After: at},
		"pending, a page before":  {Limit: 50, Before: at},
		"pending, the newest":     {Limit: 50, Last: true},
	} {
		q, args := pendingSQL(f)
		ps = append(ps, planned{name, q, args})
	}
	if postgres {
		return append(ps, planned{"leaves given", sequencePostgres, []any{[]string{"s"}, []int64{1}, []int64{0}}},
			planned{"nodes by id", nodesSQL(true, 2), []any{[]int64{0, 1}, []int64{4, 2}}})
	}
	return append(ps, planned{"a leaf given", sequenceSQLite, []any{0, "s", 1}},
		planned{"nodes by id", nodesSQL(false, 2), []any{0, 4, 1, 2}})
}

// TestPlansSQLite: no statement above scans the journal or the tree in
// SQLite.
func TestPlansSQLite(t *testing.T) {
	url := testkit.SQLiteURL(t)
	db, err := Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	raw, err := sql.Open("sqlite", strings.TrimPrefix(url, "sqlite:"))
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	for _, p := range plannedStatements(false) {
		rows, err := raw.Query("EXPLAIN QUERY PLAN "+p.sql, p.args...)
		if err != nil {
			t.Fatalf("%s: %v", p.name, err)
		}
		var plan []string
		for rows.Next() {
			var id, parent, unused int
			var detail string
			if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
				t.Fatal(err)
			}
			plan = append(plan, detail)
		}
		rows.Close()
		text := strings.Join(plan, "; ")
		// Walking the partial index of entries waiting for a leaf is
		// reading just them, in order.
		rest := strings.ReplaceAll(text, "SCAN journal USING INDEX journal_unsequenced", "")
		rest = strings.ReplaceAll(rest, "SCAN approval_requests USING INDEX approval_requests_due", "")
		// The pending list walks requests in creation order, a page at a
		// time, either way (r is approval_requests, s sagas).
		rest = strings.ReplaceAll(rest, "SCAN r USING INDEX approval_requests_created", "")
		// The banner's list walks the unratified uses' partial index.
		rest = strings.ReplaceAll(rest, "SCAN break_glass USING INDEX break_glass_unratified", "")
		scan := strings.Contains(rest, "SCAN journal") || strings.Contains(rest, "SCAN log_nodes") || strings.Contains(rest, "SCAN approval_requests") ||
			strings.Contains(rest, "SCAN r") || strings.Contains(rest, "SCAN s") || strings.Contains(rest, "SCAN break_glass")
		if scan || strings.Contains(text, "TEMP B-TREE") {
			t.Errorf("%s scans or sorts the journal in SQLite: %s", p.name, text)
		}
	}
}

// TestPlansPostgres: every statement the store sends while the engine
// runs its paths (calls executed and gated, approvals, resumes,
// rejections, listings, verification, the log's sequencer, checks and
// proofs) reaches its tables through an index: with sequential scans
// priced out, no plan scans one. (On a small table the planner would scan
// anyway; the test asks whether it could do otherwise.) So the cost of a
// call does not grow with the store.
func TestPlansPostgres(t *testing.T) {
	ctx := context.Background()
	url := testkit.PostgresURL(t)
	var seen trips
	db, err := openPostgres(ctx, url, &seen)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	e, l, err := newBenchEngine(db, testkit.Keys(t), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	workload(t, e, l)
	// Groups form only under load: their statements are explained with
	// the rows of two sagas.
	sql, args := recorded([]*member{recordedMember("a"), recordedMember("b")}, " SELECT id FROM held")
	seen.see(sql, args)
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "SET enable_seqscan = off"); err != nil {
		t.Fatal(err)
	}
	explained := 0
	for sql, args := range seen.seen {
		verb := strings.ToUpper(strings.Fields(sql)[0])
		if verb != "WITH" && verb != "SELECT" && verb != "INSERT" && verb != "UPDATE" && verb != "DELETE" {
			continue // BEGIN, COMMIT, DDL of the migrations
		}
		if strings.Contains(sql, "schema_migrations") || strings.Contains(sql, "pg_advisory") {
			continue
		}
		rows, err := conn.Query(ctx, "EXPLAIN "+sql, args...)
		if err != nil {
			t.Fatalf("EXPLAIN %s: %v", sql, err)
		}
		plan, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		explained++
		if text := strings.Join(plan, "\n"); strings.Contains(text, "Seq Scan") {
			t.Errorf("a statement scans a table:\n%s\n%s", sql, text)
		}
	}
	t.Logf("explained %d statements", explained)
	if explained < 20 {
		t.Errorf("explained %d statements; the workload should reach many more", explained)
	}
}

// workload runs the engine's paths, and its log's, once each.
func workload(t *testing.T, e *engine.Engine, l *tlog.Log) {
	t.Helper()
	ctx := context.Background()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	_, err := e.RecordPolicy(ctx)
	must(err)
	for _, saga := range []string{"a", "b", "c"} {
		_, err := e.Call(ctx, benchAgent, saga, "reserveInventory", "{}")
		must(err)
		_, err = e.Call(ctx, benchAgent, saga, "sendWireTransfer", wire)
		must(err)
	}
	// Votes taken back and a request sent back.
	_, err = e.Approve(ctx, benchApprover, "c", 3, "ok")
	must(err)
	_, err = e.Withdraw(ctx, benchApprover, "c", 3, "not yet")
	must(err)
	_, err = e.RequestChanges(ctx, benchApprover, "c", 3, "smaller")
	must(err)
	_, err = e.Lapse(ctx)
	must(err)
	_, err = e.LapseAll(ctx)
	must(err)
	_, err = e.Approve(ctx, benchApprover, "a", 3, "ok")
	must(err)
	_, err = e.Resume(ctx, benchAgent, "a", 3, wire)
	must(err)
	_, err = e.Reject(ctx, benchApprover, "b", 3, "no")
	must(err)
	_, err = e.End(ctx, benchAgent, "a")
	must(err)
	auditor := engine.Principal{ID: "auditor", Roles: []engine.Role{engine.RoleAuditor, engine.RoleApprover}}
	_, _, err = e.Pending(ctx, auditor, engine.PendingFilter{Limit: 50})
	must(err)
	_, _, err = e.Pending(ctx, auditor, engine.PendingFilter{Limit: 50, ForMe: true})
	must(err)
	// The list's other pages: the next, the previous and the newest.
	at := &engine.PendingCursor{CreatedAt: time.Now(), SagaID: "b", JournalSeq: 2}
	for _, f := range []engine.PendingFilter{{After: at}, {Before: at}, {Last: true}, {Before: at, Approved: new(bool)}} {
		_, _, err = e.Pending(ctx, auditor, f)
		must(err)
	}
	_, err = e.Policies(ctx, auditor)
	must(err)
	_, err = e.Sagas(ctx, auditor, engine.SagaFilter{Limit: 50, Tool: "sendWireTransfer"})
	must(err)
	_, err = e.Verify(ctx, auditor, "a")
	must(err)
	_, err = e.InDoubt(ctx, auditor, 0)
	must(err)
	_, err = e.Backlog(ctx)
	must(err)
	st, err := l.Sequence(ctx, true)
	must(err)
	_, err = l.Check(ctx, true)
	must(err)
	_, _, err = e.Evidence(ctx, auditor, "a", st.Size)
	must(err)
	_, err = e.ConsistencyProof(ctx, auditor, 1, st.Size)
	must(err)
	_, err = e.Review(ctx, auditor, "a", 3)
	must(err)
	_, err = e.History(ctx, auditor, "b")
	must(err)
}

// wire is an input of sendWireTransfer.
const wire = `{"amount":"100","to":"alice"}`

// plannedAfter migrates a new PostgreSQL store, runs setup on it (its
// rows, ANALYZE, settings) and returns how PostgreSQL then plans sql.
func plannedAfter(t *testing.T, setup []string, sql string, args ...any) string {
	t.Helper()
	ctx := context.Background()
	url := testkit.PostgresURL(t)
	db, err := Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	for _, q := range setup {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	rows, err := conn.Query(ctx, "EXPLAIN "+sql, args...)
	if err != nil {
		t.Fatal(err)
	}
	plan, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return strings.Join(plan, "\n")
}

// recordedMember is a member of a group, as a call of saga id records it:
// its promise, an entry, its call and its new head.
func recordedMember(id string) *member {
	at := time.Now()
	was := engine.Saga{ID: id, Status: codes.Running, HeadSeq: 1, HeadHash: "h1", UpdatedAt: at}
	now := was
	now.HeadSeq, now.HeadHash = 2, "h2"
	return &member{key: id, rec: &recorder{promise: &promised{s: was, seq: 1, want: engine.CallRunning}, saga: &now,
		entries: []engine.Entry{{SagaID: id, Seq: 2, ToolName: "t", Phase: engine.PhaseExecuted, Timestamp: at, Hash: "h2"}},
		calls:   []engine.Call{{SagaID: id, Seq: 1, ToolName: "t", State: engine.CallExecuted, OutcomeSeq: 2, StartedAt: at, UpdatedAt: at}}}}
}

// TestGroupYoungStore: the group statement looks each member's call up by
// its key even in a plan made while the calls table was small. A server's
// connections keep a prepared statement's generic plan until autovacuum
// next analyzes the table, a minute or more on a store that just started
// to grow; asked as EXISTS under an OR, such a plan hashed the whole calls
// table once a statement: a millisecond or two a group by 10,000 calls,
// 15% of an executed call's time at 32 sagas at once in make bench.
func TestGroupYoungStore(t *testing.T) {
	ms := make([]*member, 8)
	for i := range ms {
		ms[i] = recordedMember(fmt.Sprintf("s%d", i))
	}
	sql, args := recorded(ms, " SELECT id FROM held")
	text := plannedAfter(t, []string{
		"INSERT INTO sagas (id, status, initiator, head_hash, created_at, updated_at) SELECT 's' || g, 'RUNNING', 'a', '', now(), now() FROM generate_series(0, 19) g",
		"INSERT INTO calls (saga_id, seq, tool_name, state, started_at, updated_at) SELECT 's' || (i / 30), i % 30 + 1, 't', 'EXECUTED', now(), now() FROM generate_series(0, 599) i",
		"ANALYZE",
		"SET plan_cache_mode = force_generic_plan",
	}, sql, args...)
	if strings.Contains(text, "Seq Scan on calls") || !strings.Contains(text, "calls_pkey") {
		t.Errorf("the group statement does not look its members' calls up by key:\n%s", text)
	}
}
