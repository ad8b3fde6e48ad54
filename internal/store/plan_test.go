package store

import (
	"context"
	"database/sql"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/sagacity-go/sagacity/internal/store/storetest"
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
// checks and proofs, for a dialect.
func plannedStatements(postgres bool) []planned {
	ps := []planned{
		{"unsequenced entries", unsequencedSQL(postgres), []any{2000}},
		{"leaves by index", "SELECT leaf, saga_id, seq, hash FROM journal WHERE leaf >= $1 AND leaf < $2 ORDER BY leaf", []any{0, 2000}},
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
	url := storetest.SQLiteURL(t)
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
		scan := strings.Contains(rest, "SCAN journal") || strings.Contains(rest, "SCAN log_nodes")
		if scan || strings.Contains(text, "TEMP B-TREE") {
			t.Errorf("%s scans or sorts the journal in SQLite: %s", p.name, text)
		}
	}
}

// TestPlansPostgres: with sequential scans priced out, no statement above
// reads the journal or the tree without an index in PostgreSQL: an index
// it can use exists. (On a small table the planner would scan anyway.)
func TestPlansPostgres(t *testing.T) {
	url := storetest.PostgresURL(t)
	db, err := Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "SET enable_seqscan = off"); err != nil {
		t.Fatal(err)
	}
	for _, p := range plannedStatements(true) {
		rows, err := conn.Query(ctx, "EXPLAIN "+p.sql, p.args...)
		if err != nil {
			t.Fatalf("%s: %v", p.name, err)
		}
		plan, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		text := strings.Join(plan, "\n")
		if strings.Contains(text, "Seq Scan on journal") || strings.Contains(text, "Seq Scan on log_nodes") {
			t.Errorf("%s scans the journal in PostgreSQL:\n%s", p.name, text)
		}
	}
}
