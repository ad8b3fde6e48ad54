// Package store persists sagas, their journals, pending approvals and calls
// in PostgreSQL (through pgx) or in an embedded SQLite file. Both run the
// same SQL through a thin adapter each, and both pass the conformance suite
// in storetest, so the embedded default cannot drift from PostgreSQL. It
// also keeps auth's sessions and demo's ledger, in their packages' types:
// it adapts them, it does not own them.
package store

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5/pgxpool"
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

// opTimeout bounds one store operation, waiting for a saga's lock included.
const opTimeout = 15 * time.Second

// maxApprovals caps one listing of pending requests.
const maxApprovals = 5000

// conn is what the shared SQL needs from a pool or a transaction. queue
// runs a write whose result nobody reads: a transaction may hold it back
// and send it with the next statement (see pipe), reporting its error
// there; elsewhere it runs at once.
type conn interface {
	exec(ctx context.Context, sql string, args ...any) (int64, error)
	queue(ctx context.Context, sql string, args ...any) error
	query(ctx context.Context, sql string, args ...any) (rows, error)
}

// rows is a result set.
type rows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
	Close()
}

// sqlStore is the engine.Store both databases share.
type sqlStore struct {
	db    conn
	begin func(ctx context.Context, fn func(conn) error) error // a write transaction
	view  func(ctx context.Context, fn func(conn) error) error // a read-only snapshot
	lock  string                                               // appended to the query that locks a saga
	// postgres is set for PostgreSQL: the few statements whose best form
	// differs between the two are chosen by it.
	postgres bool
	group    *group        // commits concurrent Updates together
	pool     *pgxpool.Pool // PostgreSQL's, for a transaction opened mid-way (recorder)
}

const (
	sagaCols  = "id, status, initiator, ended, reason, head_seq, head_hash, running, created_at, updated_at"
	entryCols = "saga_id, seq, tool_name, phase, input, payload, timestamp, hash"
	entryRead = entryCols + ", leaf" // the sequencer sets leaf, never an insert
	// entryReadJ is entryRead of a journal aliased j.
	entryReadJ   = "j.saga_id, j.seq, j.tool_name, j.phase, j.input, j.payload, j.timestamp, j.hash, j.leaf"
	approvalCols = "saga_id, journal_seq, tool_name, input, input_hash, requester, created_at, rule, policy, quorum, reason, voters, due_at," +
		" escalated, escalate_at"
	callCols   = "saga_id, seq, tool_name, input, requester, state, outcome_seq, result, started_at, updated_at, request_seq, runner"
	runnerCols = "id, replica, started_at, seen_at"
)

func scanSaga(r rows) (engine.Saga, error) { return scanSagaAnd(r) }

// scanSagaAnd reads a saga, and then into more the columns a query
// selects after it.
func scanSagaAnd(r rows, more ...any) (s engine.Saga, err error) {
	ended, head, running := boolCol{col: col{name: "ended"}}, intCol{col: col{name: "head_seq"}}, intCol{col: col{name: "running"}}
	created, updated := timeCol{col: col{name: "created_at"}}, timeCol{col: col{name: "updated_at"}}
	err = r.Scan(append([]any{&s.ID, &s.Status, &s.Initiator, &ended, &s.Reason, &head, &s.HeadHash, &running, &created, &updated}, more...)...)
	s.Ended, s.HeadSeq, s.Running, s.CreatedAt, s.UpdatedAt = ended.v, head.v, running.v, created.v, updated.v
	s.Unreadable = unreadable(&ended.col, &head.col, &running.col, &created.col, &updated.col)
	return s, err
}

func scanEntry(r rows) (engine.Entry, error) { return scanEntryAnd(r) }

// scanEntryAnd reads an entry, and then into more the columns a query
// selects after it.
func scanEntryAnd(r rows, more ...any) (e engine.Entry, err error) {
	seq, ts := intCol{col: col{name: "seq"}}, timeCol{col: col{name: "timestamp"}}
	leaf := intCol{col: col{name: "leaf"}, null: -1}
	err = r.Scan(append([]any{&e.SagaID, &seq, &e.ToolName, &e.Phase, &e.Input, &e.Payload, &ts, &e.Hash, &leaf}, more...)...)
	e.Seq, e.Timestamp, e.Leaf = seq.v, ts.v, leaf.v
	e.Unreadable = unreadable(&seq.col, &ts.col, &leaf.col)
	return e, err
}

func scanApproval(r rows) (engine.ApprovalRequest, error) { return scanApprovalAnd(r) }

// scanApprovalAnd reads a pending request, and then into more the
// columns a query selects after it.
func scanApprovalAnd(r rows, more ...any) (a engine.ApprovalRequest, err error) {
	var voters string
	due, escalate := nullTime{col: col{name: "due_at"}}, nullTime{col: col{name: "escalate_at"}}
	err = r.Scan(append([]any{&a.SagaID, &a.JournalSeq, &a.ToolName, &a.Input, &a.InputHash, &a.Requester, &a.CreatedAt,
		&a.Rule, &a.Policy, &a.Quorum, &a.Reason, &voters, &due, &a.Escalated, &escalate}, more...)...)
	a.CreatedAt, a.Voters, a.Due, a.EscalateAt = a.CreatedAt.UTC(), splitVoters(voters), due.v, escalate.v
	if bad := unreadable(&due.col, &escalate.col); err == nil && bad != "" {
		err = fmt.Errorf("approval request %s/%d: %s", a.SagaID, a.JournalSeq, bad)
	}
	return a, err
}

// joinVoters writes who stands behind a request as its row keeps them:
// each between line breaks, so that one is found with LIKE.
func joinVoters(vs []string) string {
	if len(vs) == 0 {
		return ""
	}
	return "\n" + strings.Join(vs, "\n") + "\n"
}

func splitVoters(s string) []string {
	if s = strings.Trim(s, "\n"); s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

// orNull is a time as a row keeps one that may be none: NULL for zero.
func orNull(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t
}

func scanCall(r rows) (c engine.Call, err error) {
	err = r.Scan(&c.SagaID, &c.Seq, &c.ToolName, &c.Input, &c.Requester, &c.State, &c.OutcomeSeq, &c.Result, &c.StartedAt, &c.UpdatedAt,
		&c.Request, &c.Runner)
	c.StartedAt, c.UpdatedAt = c.StartedAt.UTC(), c.UpdatedAt.UTC()
	return c, err
}

// collect runs a query and scans every row with scan.
func collect[T any](ctx context.Context, c conn, scan func(rows) (T, error), sql string, args ...any) ([]T, error) {
	r, err := c.query(ctx, sql, args...)
	if err != nil {
		return nil, mapErr(err)
	}
	defer r.Close()
	var out []T
	for r.Next() {
		v, err := scan(r)
		if err != nil {
			return nil, mapErr(err)
		}
		out = append(out, v)
	}
	return out, mapErr(r.Err())
}

// one runs a query that returns at most one row; NotFound when none.
func one[T any](ctx context.Context, c conn, scan func(rows) (T, error), what, sql string, args ...any) (T, error) {
	vs, err := collect(ctx, c, scan, sql, args...)
	if err == nil && len(vs) == 0 {
		err = engine.Errorf(engine.NotFound, "%s not found", what)
	}
	if err != nil {
		var zero T
		return zero, err
	}
	return vs[0], nil
}

// Update commits fn's writes, with those of other sagas' Updates that
// wait at the same time (see group). In PostgreSQL fn runs on a recorder:
// what promises a saga's head and then only writes joins a group as its
// recorded writes; what reads runs in a transaction of its own, opened
// at its first read.
func (s *sqlStore) Update(ctx context.Context, fn func(engine.Tx) error) error {
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	if !s.postgres {
		return mapErr(s.group.commit(ctx, &member{fn: fn}))
	}
	rec := &recorder{s: s, ctx: ctx}
	err := fn(rec)
	if read, err := rec.end(err); read || err != nil {
		return mapErr(err) // fn's own transaction, or fn's error before it wrote anything
	}
	m := &member{rec: rec}
	if rec.solo || rec.promise == nil {
		return mapErr(s.alone(ctx, m))
	}
	m.key = rec.promise.s.ID
	return mapErr(s.group.commit(ctx, m))
}

// alone commits one member in a transaction of its own: its recorded
// writes, or its fn.
func (s *sqlStore) alone(ctx context.Context, m *member) error {
	return s.begin(ctx, func(c conn) error {
		if m.rec != nil {
			return m.rec.replay(s.tx(ctx, c))
		}
		return m.fn(s.tx(ctx, c))
	})
}

// tx is the engine.Tx of a transaction on c.
func (s *sqlStore) tx(ctx context.Context, c conn) *tx {
	return &tx{ctx: ctx, c: c, lock: s.lock, postgres: s.postgres}
}

func (s *sqlStore) Saga(ctx context.Context, id string) (engine.Saga, error) {
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	return one(ctx, s.db, scanSaga, "saga "+id, "SELECT "+sagaCols+" FROM sagas WHERE id = $1", id)
}

// where builds a WHERE clause from conditions, each with one %s where its
// argument's placeholder goes.
type where struct {
	conds []string
	args  []any
}

// add appends a condition; each %s in it takes the next of args.
func (w *where) add(cond string, args ...any) {
	ph := make([]any, len(args))
	for i, a := range args {
		w.args = append(w.args, a)
		ph[i] = fmt.Sprintf("$%d", len(w.args))
	}
	w.conds = append(w.conds, fmt.Sprintf(cond, ph...))
}

func (w *where) String() string {
	if len(w.conds) == 0 {
		return ""
	}
	return " WHERE " + strings.Join(w.conds, " AND ")
}

// limit appends a LIMIT with its argument.
func (w *where) limit(n int) string {
	w.args = append(w.args, n)
	return fmt.Sprintf(" LIMIT $%d", len(w.args))
}

func (s *sqlStore) Sagas(ctx context.Context, f engine.SagaFilter) ([]engine.Saga, error) {
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	w := sagaWhere(f)
	if f.After != nil {
		w.add("(created_at < %s OR (created_at = %[1]s AND id < %s))", f.After.CreatedAt, f.After.ID)
	}
	q := "SELECT " + sagaCols + " FROM sagas" + w.String() + " ORDER BY created_at DESC, id DESC"
	return collect(ctx, s.db, scanSaga, q+w.limit(f.Limit), w.args...)
}

func (s *sqlStore) CountSagas(ctx context.Context, f engine.SagaFilter) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	w := sagaWhere(f)
	return one(ctx, s.db, func(r rows) (n int, err error) { return n, r.Scan(&n) }, "count", "SELECT count(*) FROM sagas"+w.String(), w.args...)
}

func sagaWhere(f engine.SagaFilter) *where {
	w := &where{}
	if f.Status != "" {
		w.add("status = %s", f.Status)
	}
	if f.IDPrefix != "" {
		// substr and its length count characters in both databases, and
		// need no collation that a LIKE pattern or a range would.
		w.add("substr(id, 1, %s) = %s", utf8.RuneCountInString(f.IDPrefix), f.IDPrefix)
	}
	if f.Initiator != "" {
		w.add("initiator = %s", f.Initiator)
	}
	if f.Tool != "" {
		w.add("EXISTS (SELECT 1 FROM journal j WHERE j.saga_id = sagas.id AND j.tool_name = %s)", f.Tool)
	}
	if !f.InDoubtBefore.IsZero() {
		w.add("EXISTS (SELECT 1 FROM calls c WHERE c.saga_id = sagas.id AND c.state IN ('RUNNING', 'COMPENSATING') AND c.updated_at < %s)", f.InDoubtBefore)
	}
	return w
}

// pendingFrom is what Pending and CountPending select from: each pending
// request with its saga.
const pendingFrom = " FROM approval_requests r JOIN sagas s ON s.id = r.saga_id"

func pendingWhere(f engine.PendingFilter) *where {
	w := &where{}
	if f.Tool != "" {
		w.add("r.tool_name = %s", f.Tool)
	}
	if f.SagaID != "" {
		w.add("r.saga_id = %s", f.SagaID)
	}
	if f.Initiator != "" {
		w.add("s.initiator = %s", f.Initiator)
	}
	switch {
	case f.Approved == nil:
	case *f.Approved:
		w.add("r.votes >= r.quorum")
	default:
		w.add("r.votes < r.quorum")
	}
	if v := f.Voter; v != nil {
		// Short of its quorum, neither asked for nor started by the voter,
		// not voted on by them, and under a rule they are an approver of.
		w.add("r.votes < r.quorum AND r.requester <> %s AND s.initiator <> %[1]s AND r.voters NOT LIKE %s ESCAPE '\\'",
			v.ID, "%\n"+likeEscaper.Replace(v.ID)+"\n%")
		rules := make([]string, 0, len(v.Rules))
		var args []any
		for _, rr := range v.Rules {
			rules, args = append(rules, "(r.policy = %s AND r.rule = %s)"), append(args, rr.Policy, rr.Rule)
		}
		if len(rules) == 0 {
			rules = []string{"1 = 0"}
		}
		w.add("("+strings.Join(rules, " OR ")+")", args...)
	}
	return w
}

// likeEscaper escapes what LIKE reads as patterns.
var likeEscaper = strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`)

func (s *sqlStore) Pending(ctx context.Context, f engine.PendingFilter) ([]engine.Pending, error) {
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	q, args := pendingSQL(f)
	ps, err := collect(ctx, s.db, func(r rows) (p engine.Pending, err error) {
		replanned, refused, later := boolCol{col: col{name: "replanned"}}, boolCol{col: col{name: "refused"}}, boolCol{col: col{name: "later"}}
		p.ApprovalRequest, err = scanApprovalAnd(r, &p.Initiator, &replanned, &refused, &later)
		p.Replanned, p.Refused, p.Later = replanned.v, refused.v, later.v
		return p, err
	}, q, args...)
	if f.Backward() {
		slices.Reverse(ps) // read newest first, shown oldest first
	}
	return ps, err
}

// pendingSQL is the statement of a page of Pending: read forwards in the
// index of requests by creation (created_at, saga_id, journal_seq), or
// backwards through the same index for Before and Last.
func pendingSQL(f engine.PendingFilter) (string, []any) {
	w := pendingWhere(f)
	order := " ORDER BY r.created_at, r.saga_id, r.journal_seq"
	if f.Backward() {
		order = " ORDER BY r.created_at DESC, r.saga_id DESC, r.journal_seq DESC"
	}
	if c := f.After; c != nil {
		w.add("(r.created_at > %s OR (r.created_at = %[1]s AND (r.saga_id > %s OR (r.saga_id = %[2]s AND r.journal_seq > %s))))",
			c.CreatedAt, c.SagaID, c.JournalSeq)
	}
	if c := f.Before; c != nil {
		w.add("(r.created_at < %s OR (r.created_at = %[1]s AND (r.saga_id < %s OR (r.saga_id = %[2]s AND r.journal_seq < %s))))",
			c.CreatedAt, c.SagaID, c.JournalSeq)
	}
	q := "SELECT r.saga_id, r.journal_seq, r.tool_name, r.input, r.input_hash, r.requester, r.created_at, r.rule, r.policy," +
		" r.quorum, r.reason, r.voters, r.due_at, r.escalated, r.escalate_at, s.initiator," +
		" EXISTS (SELECT 1 FROM journal p WHERE p.saga_id = r.saga_id AND p.phase = 'AWAITING_APPROVAL'" +
		" AND p.tool_name = r.tool_name AND p.seq < r.journal_seq)," +
		" EXISTS (SELECT 1 FROM journal x WHERE x.saga_id = r.saga_id AND x.phase = 'REJECTED' AND x.tool_name = r.tool_name)," +
		" EXISTS (SELECT 1 FROM journal l WHERE l.saga_id = r.saga_id AND l.phase = 'AWAITING_APPROVAL'" +
		" AND l.tool_name = r.tool_name AND l.seq > r.journal_seq)" +
		pendingFrom + w.String() + order
	q += w.limit(min(f.Limit, maxApprovals))
	return q, w.args
}

// DueApprovals lists pending requests due at or before t, the soonest
// first, at most limit.
func (s *sqlStore) DueApprovals(ctx context.Context, t time.Time, limit int) ([]engine.ApprovalRequest, error) {
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	return collect(ctx, s.db, scanApproval, dueSQL, t, min(limit, maxApprovals))
}

// dueSQL lists pending requests due by $1, at most $2: through the
// partial index of those with a due time, whatever waits.
const dueSQL = "SELECT " + approvalCols + " FROM approval_requests WHERE due_at <= $1 ORDER BY due_at LIMIT $2"

func (s *sqlStore) PendingEntries(ctx context.Context, after engine.RequestKey, limit int) ([]engine.Entry, error) {
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	return collect(ctx, s.db, scanEntry, pendingEntriesSQL, after.SagaID, after.JournalSeq, min(limit, maxApprovals))
}

// pendingEntriesSQL reads the entries of the pending requests after ($1,
// $2), at most $3: through both primary keys, a page at a time. The
// input, which may be large and which the sweep does not read, is left
// out.
const pendingEntriesSQL = "SELECT j.saga_id, j.seq, j.tool_name, j.phase, '', j.payload, j.timestamp, j.hash, j.leaf" +
	" FROM approval_requests r JOIN journal j ON j.saga_id = r.saga_id AND j.seq = r.journal_seq" +
	" WHERE (r.saga_id, r.journal_seq) > ($1, $2) ORDER BY r.saga_id, r.journal_seq LIMIT $3"

func (s *sqlStore) CountPending(ctx context.Context, f engine.PendingFilter) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	w := pendingWhere(f)
	return one(ctx, s.db, func(r rows) (n int, err error) { return n, r.Scan(&n) }, "count",
		"SELECT count(*)"+pendingFrom+w.String(), w.args...)
}

func (s *sqlStore) PendingByTool(ctx context.Context) ([]engine.ToolPending, error) {
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	return collect(ctx, s.db, func(r rows) (p engine.ToolPending, err error) {
		oldest := timeCol{col: col{name: "created_at"}}
		if err = r.Scan(&p.Tool, &p.Count, &oldest); err == nil && oldest.bad {
			err = fmt.Errorf("the oldest request of %s has no time of creation", p.Tool)
		}
		p.Oldest = oldest.v
		return p, err
	}, "SELECT tool_name, count(*), min(created_at) FROM approval_requests GROUP BY tool_name ORDER BY tool_name LIMIT $1", maxApprovals)
}

func (s *sqlStore) LastExecuted(ctx context.Context, tool string, before time.Time) (engine.Entry, error) {
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	return one(ctx, s.db, scanEntry, "executed call of "+tool, "SELECT "+entryRead+" FROM journal"+
		" WHERE tool_name = $1 AND phase = 'EXECUTED' AND timestamp < $2 ORDER BY timestamp DESC LIMIT 1", tool, before)
}

func (s *sqlStore) Entries(ctx context.Context, sagaID string) ([]engine.Entry, error) {
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	return entries(ctx, s.db, sagaID)
}

func entries(ctx context.Context, c conn, sagaID string) ([]engine.Entry, error) {
	return collect(ctx, c, scanEntry, "SELECT "+entryRead+" FROM journal WHERE saga_id = $1 ORDER BY seq", sagaID)
}

func (s *sqlStore) Snapshot(ctx context.Context, sagaID string, calls bool) (engine.Snapshot, error) {
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	var snap engine.Snapshot
	err := s.view(ctx, func(c conn) error {
		snap = engine.Snapshot{}
		sagas, err := collect(ctx, c, scanSaga, "SELECT "+sagaCols+" FROM sagas WHERE id = $1", sagaID)
		if err != nil {
			return err
		}
		if len(sagas) > 0 {
			snap.Saga = &sagas[0]
		}
		if snap.Entries, err = entries(ctx, c, sagaID); err != nil {
			return err
		}
		snap.Requests, err = collect(ctx, c, scanApproval, "SELECT "+approvalCols+
			" FROM approval_requests WHERE saga_id = $1 ORDER BY journal_seq LIMIT $2", sagaID, maxApprovals)
		if err != nil || !calls {
			return err
		}
		snap.Calls, err = collect(ctx, c, scanCall, "SELECT "+callCols+" FROM calls WHERE saga_id = $1 ORDER BY seq", sagaID)
		return err
	})
	return snap, mapErr(err)
}

func (s *sqlStore) Approvals(ctx context.Context, sagaID string) ([]engine.ApprovalRequest, error) {
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	if sagaID == "" {
		return collect(ctx, s.db, scanApproval, "SELECT "+approvalCols+
			" FROM approval_requests ORDER BY created_at, saga_id, journal_seq LIMIT $1", maxApprovals)
	}
	return collect(ctx, s.db, scanApproval, "SELECT "+approvalCols+
		" FROM approval_requests WHERE saga_id = $1 ORDER BY journal_seq LIMIT $2", sagaID, maxApprovals)
}

func (s *sqlStore) InDoubt(ctx context.Context, sagaID string, before time.Time, gone []string) ([]engine.Call, error) {
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	return inDoubtCalls(ctx, s.db, sagaID, before, gone)
}

// inDoubtCalls lists calls in doubt, of one saga or all: unsettled, and
// still since before, or run by one of the runners gone.
func inDoubtCalls(ctx context.Context, c conn, sagaID string, before time.Time, gone []string) ([]engine.Call, error) {
	q, args := "SELECT "+callCols+" FROM calls WHERE state IN ('RUNNING', 'COMPENSATING') AND (updated_at < $1", []any{before, maxApprovals}
	if len(gone) > 0 {
		ph := make([]string, len(gone))
		for i, id := range gone {
			ph[i], args = fmt.Sprintf("$%d", len(args)+1), append(args, id)
		}
		q += " OR runner IN (" + strings.Join(ph, ", ") + ")"
	}
	q += ")"
	if sagaID != "" {
		q, args = q+fmt.Sprintf(" AND saga_id = $%d", len(args)+1), append(args, sagaID)
	}
	return collect(ctx, c, scanCall, q+" ORDER BY updated_at, saga_id, seq LIMIT $2", args...)
}

func (s *sqlStore) CallKey(ctx context.Context, sagaID, key string) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	return one(ctx, s.db, func(r rows) (seq int64, err error) { return seq, r.Scan(&seq) }, "call under the key",
		"SELECT seq FROM call_keys WHERE saga_id = $1 AND key = $2", sagaID, key)
}

// runnersKept is how long a runner that was never retired (its process
// died, and no process of its replica started since) is kept: its calls
// are in doubt either way.
const runnersKept = 24 * time.Hour

func (s *sqlStore) Register(ctx context.Context, r engine.Runner, retires string) error {
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	return mapErr(s.begin(ctx, func(c conn) error {
		if _, err := c.exec(ctx, "DELETE FROM runners WHERE id = $1 OR seen_at < $2", retires, r.StartedAt.Add(-runnersKept)); err != nil {
			return err
		}
		_, err := c.exec(ctx, "INSERT INTO runners ("+runnerCols+") VALUES ($1, $2, $3, $4)"+
			" ON CONFLICT (id) DO UPDATE SET seen_at = excluded.seen_at", r.ID, r.Replica, r.StartedAt, r.SeenAt)
		return err
	}))
}

// runnersSQL reads the runners of the unsettled calls, through the
// index of those calls.
const runnersSQL = "SELECT DISTINCT c.runner, COALESCE(r.replica, ''), r.started_at, r.seen_at" +
	" FROM calls AS c LEFT JOIN runners AS r ON r.id = c.runner" +
	" WHERE c.state IN ('RUNNING', 'COMPENSATING') AND c.runner <> '' ORDER BY c.runner"

func (s *sqlStore) Runners(ctx context.Context) ([]engine.Runner, error) {
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	return collect(ctx, s.db, func(r rows) (x engine.Runner, err error) {
		// A time that does not read is none: no beat.
		started, seen := nullTime{col: col{name: "started_at"}}, nullTime{col: col{name: "seen_at"}}
		err = r.Scan(&x.ID, &x.Replica, &started, &seen)
		x.StartedAt, x.SeenAt = started.v, seen.v
		return x, err
	}, runnersSQL)
}

func (s *sqlStore) Beat(ctx context.Context, id string, t time.Time) error {
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	n, err := s.db.exec(ctx, "UPDATE runners SET seen_at = $2 WHERE id = $1", id, t)
	if err == nil && n == 0 {
		return engine.Errorf(engine.NotFound, "runner %s not found", id)
	}
	return mapErr(err)
}

func (s *sqlStore) Retire(ctx context.Context, id string) error {
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	_, err := s.db.exec(ctx, "DELETE FROM runners WHERE id = $1", id)
	return mapErr(err)
}

// tx is an engine.Tx over one database transaction.
type tx struct {
	ctx      context.Context
	c        conn
	lock     string
	postgres bool
}

func (t *tx) LockSaga(id string) (engine.Saga, error) {
	return one(t.ctx, t.c, scanSaga, "saga "+id, "SELECT "+sagaCols+" FROM sagas WHERE id = $1"+t.lock, id)
}

func (t *tx) LockSagaCall(id string, seq int64) (engine.Saga, engine.CallState, error) {
	var state engine.CallState
	s, err := one(t.ctx, t.c, func(r rows) (engine.Saga, error) { return scanSagaAnd(r, &state) }, "saga "+id,
		"SELECT "+sagaCols+", COALESCE((SELECT state FROM calls WHERE saga_id = $1 AND seq = $2), '')"+
			" FROM sagas WHERE id = $1"+t.lock, id, seq)
	return s, state, err
}

func (t *tx) LockAs(s engine.Saga, seq int64, want engine.CallState) error {
	if !t.postgres {
		// In the process, reading costs no round trip: compare.
		got, state, err := t.LockSagaCall(s.ID, seq)
		if err != nil && !engine.IsKind(err, engine.NotFound) {
			return err
		}
		if err != nil || got.Status != s.Status || got.Ended != s.Ended || got.Reason != s.Reason || got.HeadSeq != s.HeadSeq ||
			got.HeadHash != s.HeadHash || got.Running != s.Running || !got.UpdatedAt.Equal(s.UpdatedAt) || (seq > 0 && state != want) {
			return errStale
		}
		return nil
	}
	// Sent with the writes that follow; it locks the row, and when the
	// row is not as promised it divides by zero, which fails the
	// transaction before its COMMIT (see mapErr).
	q := "SELECT 1 / (SELECT count(*)::int FROM (SELECT 1 FROM sagas WHERE id = $1 AND status = $2 AND ended = $3" +
		" AND reason = $4 AND head_seq = $5 AND head_hash = $6 AND updated_at = $7 AND running = $8"
	args := []any{s.ID, s.Status, s.Ended, s.Reason, s.HeadSeq, s.HeadHash, s.UpdatedAt, s.Running}
	if seq > 0 {
		q += " AND EXISTS (SELECT 1 FROM calls WHERE saga_id = $1 AND seq = $9 AND state = $10)"
		args = append(args, seq, want)
	}
	return t.c.queue(t.ctx, q+" FOR UPDATE) AS promised)", args...)
}

func (t *tx) CreateSaga(s engine.Saga) (engine.Saga, error) {
	// Most calls are to a saga that exists: lock it, and only when there
	// is none insert it (two writers that both find none are ordered by
	// the insert's conflict) and lock it then.
	if got, err := t.LockSaga(s.ID); !engine.IsKind(err, engine.NotFound) {
		return got, err
	}
	if err := t.c.queue(t.ctx, "INSERT INTO sagas ("+sagaCols+") VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)"+
		" ON CONFLICT (id) DO NOTHING",
		s.ID, s.Status, s.Initiator, s.Ended, s.Reason, s.HeadSeq, s.HeadHash, s.Running, s.CreatedAt, s.UpdatedAt); err != nil {
		return engine.Saga{}, mapErr(err)
	}
	return t.LockSaga(s.ID)
}

func (t *tx) PutSaga(s engine.Saga) error {
	err := t.c.queue(t.ctx, "UPDATE sagas SET status = $2, ended = $3, reason = $4, head_seq = $5, head_hash = $6,"+
		" running = $7, updated_at = $8 WHERE id = $1", s.ID, s.Status, s.Ended, s.Reason, s.HeadSeq, s.HeadHash, s.Running, s.UpdatedAt)
	return mapErr(err)
}

func (t *tx) Append(e engine.Entry) error {
	err := t.c.queue(t.ctx, "INSERT INTO journal ("+entryCols+") VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
		e.SagaID, e.Seq, e.ToolName, e.Phase, e.Input, e.Payload, e.Timestamp, e.Hash)
	return mapErr(err)
}

func (t *tx) Entries(sagaID string) ([]engine.Entry, error) { return entries(t.ctx, t.c, sagaID) }

func (t *tx) Approval(sagaID string, seq int64) (engine.ApprovalRequest, error) {
	return one(t.ctx, t.c, scanApproval, "approval request", "SELECT "+approvalCols+
		" FROM approval_requests WHERE saga_id = $1 AND journal_seq = $2", sagaID, seq)
}

func (t *tx) PutApproval(r engine.ApprovalRequest) error {
	err := t.c.queue(t.ctx, "INSERT INTO approval_requests ("+approvalCols+", votes)"+
		" VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16)",
		r.SagaID, r.JournalSeq, r.ToolName, r.Input, r.InputHash, r.Requester, r.CreatedAt, r.Rule, r.Policy, r.Quorum, r.Reason,
		joinVoters(r.Voters), orNull(r.Due), r.Escalated, orNull(r.EscalateAt), len(r.Voters))
	return mapErr(err)
}

func (t *tx) PutVotes(sagaID string, seq int64, voters []string, at time.Time) error {
	err := t.c.queue(t.ctx, "UPDATE approval_requests SET voters = $3, votes = $4, due_at = $5 WHERE saga_id = $1 AND journal_seq = $2",
		sagaID, seq, joinVoters(voters), len(voters), orNull(at))
	return mapErr(err)
}

func (t *tx) DeleteApprovals(sagaID string, seq int64) (int, error) {
	n, err := t.c.exec(t.ctx, "DELETE FROM approval_requests WHERE saga_id = $1 AND ($2 = 0 OR journal_seq = $2)", sagaID, seq)
	return int(n), mapErr(err)
}

func (t *tx) CountApprovals(sagaID string) (int, error) {
	n, err := one(t.ctx, t.c, func(r rows) (n int, err error) { return n, r.Scan(&n) },
		"count", "SELECT count(*) FROM approval_requests WHERE saga_id = $1", sagaID)
	return n, err
}

func (t *tx) Call(sagaID string, seq int64) (engine.Call, error) {
	return one(t.ctx, t.c, scanCall, "call", "SELECT "+callCols+" FROM calls WHERE saga_id = $1 AND seq = $2", sagaID, seq)
}

// callUpsert makes an insert of calls update those that exist.
const callUpsert = " ON CONFLICT (saga_id, seq) DO UPDATE SET state = excluded.state, outcome_seq = excluded.outcome_seq," +
	" result = excluded.result, updated_at = excluded.updated_at, runner = excluded.runner"

func (t *tx) PutCall(c engine.Call) error {
	err := t.c.queue(t.ctx, "INSERT INTO calls ("+callCols+") VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)"+
		callUpsert,
		c.SagaID, c.Seq, c.ToolName, c.Input, c.Requester, c.State, c.OutcomeSeq, c.Result, c.StartedAt, c.UpdatedAt,
		c.Request, c.Runner)
	return mapErr(err)
}

func (t *tx) Calls(sagaID string, states ...engine.CallState) ([]engine.Call, error) {
	q := "SELECT " + callCols + " FROM calls WHERE saga_id = $1"
	args := []any{sagaID}
	if len(states) > 0 {
		ph := make([]string, len(states))
		for i, st := range states {
			args = append(args, st)
			ph[i] = fmt.Sprintf("$%d", i+2)
		}
		q += " AND state IN (" + strings.Join(ph, ", ") + ")"
	}
	return collect(t.ctx, t.c, scanCall, q+" ORDER BY seq", args...)
}

func (t *tx) InDoubt(sagaID string, before time.Time, gone []string) ([]engine.Call, error) {
	return inDoubtCalls(t.ctx, t.c, sagaID, before, gone)
}

func (t *tx) PutCallKey(sagaID, key string, seq int64) error {
	err := t.c.queue(t.ctx, "INSERT INTO call_keys (saga_id, key, seq) VALUES ($1, $2, $3)", sagaID, key, seq)
	return mapErr(err)
}
