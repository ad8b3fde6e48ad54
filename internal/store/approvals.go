package store

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/sagacity-go/sagacity/internal/engine"
)

// Pending approval requests: who stands behind each, the listings of
// them, and what is due.

const approvalCols = "saga_id, journal_seq, tool_name, input, input_hash, requester, created_at, rule, policy, quorum, reason, voters, due_at," +
	" escalated, escalate_at"

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

func (t *tx) PutVotes(sagaID string, seq int64, voters []string, quorum int, at time.Time) error {
	err := t.c.queue(t.ctx, "UPDATE approval_requests SET voters = $3, votes = $4, quorum = $5, due_at = $6 WHERE saga_id = $1 AND journal_seq = $2",
		sagaID, seq, joinVoters(voters), len(voters), quorum, orNull(at))
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
