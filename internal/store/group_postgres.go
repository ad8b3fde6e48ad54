package store

import (
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/sagacity-go/sagacity/internal/engine"
)

// togetherPostgres commits recorded members in one transaction whose
// writes are one statement (recordedSQL): it moves the heads that are as
// their members promised, locking them in the order of their ids (the
// members are sorted; two groups of one saga, from two servers, do not
// lock in turns that wait on each other), and writes those members'
// entries and calls. When no member has other writes, that statement and COMMIT
// go in one round trip; else the statement's answer names the members
// whose promise held, and their other writes go with COMMIT in a second.
// A member whose promise broke kept nothing and gets ErrStale, as alone.
// When the transaction fails before COMMIT is sent, or the server
// refuses it (a taken idempotency key, say), it kept nothing, and every
// member commits again alone; when COMMIT's answer is lost (the
// connection died, or the backend was terminated: its FATAL error may
// come after COMMIT ran), every member gets that error, as alone: such a
// commit is never made again.
func (s *sqlStore) togetherPostgres(ctx context.Context, ms []*member) {
	slices.SortFunc(ms, func(a, b *member) int { return strings.Compare(a.key, b.key) })
	held := make(map[string]bool, len(ms))
	err := s.begin(ctx, func(c conn) error {
		p := c.(*pipe)
		clear(held) // fn may run again, on a fresh connection
		sql, args := recorded(ms, " SELECT id FROM held")
		read := func(r rows) error {
			for r.Next() {
				var id string
				if err := r.Scan(&id); err != nil {
					return err
				}
				held[id] = true
			}
			return nil
		}
		if !slices.ContainsFunc(ms, func(m *member) bool { return len(m.rec.rest) > 0 }) {
			p.queueRead(sql, read, args...)
			return nil
		}
		r, err := p.query(ctx, sql, args...)
		if err != nil {
			return err
		}
		if err := readRows(r, read); err != nil {
			return err
		}
		t := s.tx(ctx, c)
		for _, m := range ms {
			if held[m.key] {
				for _, op := range m.rec.rest {
					if err := op(t); err != nil {
						return err
					}
				}
			}
		}
		return nil
	})
	if err != nil && !errors.Is(err, engine.ErrCommitUnknown) {
		retryAlone(ctx, s.group, ms)
		return
	}
	for _, m := range ms {
		switch {
		case err != nil:
			m.err = err
		case !held[m.key]:
			m.err = errStale
		}
	}
}

// recordedSQL, followed by a query of held, writes recorded members' heads,
// entries and calls in one statement: held moves the heads whose rows are
// as promised (and whose call at seq, for seq > 0, is in state want), in
// the order the members come, locking them; the entries and calls of
// those members only are inserted. A row changed by a transaction that
// committed meanwhile is compared again as it is now. A member that did
// not move its head keeps it as promised.
const recordedSQL = "WITH p AS (SELECT * FROM unnest($1::text[], $2::text[], $3::boolean[], $4::text[], $5::bigint[], $6::text[]," +
	" $7::timestamptz[], $8::bigint[], $9::bigint[], $10::text[], $11::text[], $12::boolean[], $13::text[], $14::bigint[], $15::text[]," +
	" $16::bigint[], $17::timestamptz[]) AS p (id, status, ended, reason, head_seq, head_hash, updated_at, running, seq, want," +
	" new_status, new_ended, new_reason, new_head_seq, new_head_hash, new_running, new_updated_at))," +
	" held AS (UPDATE sagas s SET status = p.new_status, ended = p.new_ended, reason = p.new_reason, head_seq = p.new_head_seq," +
	" head_hash = p.new_head_hash, running = p.new_running, updated_at = p.new_updated_at FROM p" +
	" WHERE s.id = p.id AND s.status = p.status AND s.ended = p.ended AND s.reason = p.reason AND s.head_seq = p.head_seq" +
	" AND s.head_hash = p.head_hash AND s.updated_at = p.updated_at AND s.running = p.running" +
	" AND (p.seq = 0 OR (SELECT c.state FROM calls c WHERE c.saga_id = p.id AND c.seq = p.seq) = p.want)" +
	" RETURNING s.id)," +
	" e AS (INSERT INTO journal (" + entryCols + ") SELECT * FROM unnest($18::text[], $19::bigint[], $20::text[], $21::text[]," +
	" $22::text[], $23::text[], $24::timestamptz[], $25::text[]) AS e (" + entryCols + ") WHERE e.saga_id IN (SELECT id FROM held))," +
	" c AS (INSERT INTO calls (" + callCols + ") SELECT * FROM unnest($26::text[], $27::bigint[], $28::text[], $29::text[], $30::text[]," +
	" $31::text[], $32::bigint[], $33::text[], $34::timestamptz[], $35::timestamptz[], $36::bigint[], $37::text[]) AS c (" + callCols + ")" +
	" WHERE c.saga_id IN (SELECT id FROM held)" + callUpsert + ")"

// recorded returns recordedSQL followed by then, and its arguments for
// members ms.
func recorded(ms []*member, then string) (string, []any) {
	var (
		p struct {
			id, status, reason, hash, want, newStatus, newReason, newHash []string
			ended, newEnded                                               []bool
			head, running, seq, newHead, newRunning                       []int64
			updated, newUpdated                                           []time.Time
		}
		e struct {
			saga, tool, phase, input, payload, hash []string
			seq                                     []int64
			at                                      []time.Time
		}
		c struct {
			saga, tool, input, requester, state, result, runner []string
			seq, outcome, request                               []int64
			started, updated                                    []time.Time
		}
	)
	for _, m := range ms {
		was := m.rec.promise
		h := was.s
		if m.rec.saga != nil {
			h = *m.rec.saga
		}
		p.id, p.status, p.ended, p.reason = append(p.id, was.s.ID), append(p.status, string(was.s.Status)), append(p.ended, was.s.Ended), append(p.reason, was.s.Reason)
		p.head, p.hash, p.updated, p.running = append(p.head, was.s.HeadSeq), append(p.hash, was.s.HeadHash), append(p.updated, was.s.UpdatedAt), append(p.running, was.s.Running)
		p.seq, p.want = append(p.seq, was.seq), append(p.want, string(was.want))
		p.newStatus, p.newEnded, p.newReason, p.newHead = append(p.newStatus, string(h.Status)), append(p.newEnded, h.Ended), append(p.newReason, h.Reason), append(p.newHead, h.HeadSeq)
		p.newHash, p.newRunning, p.newUpdated = append(p.newHash, h.HeadHash), append(p.newRunning, h.Running), append(p.newUpdated, h.UpdatedAt)
		for _, en := range m.rec.entries {
			e.saga, e.seq, e.tool, e.phase = append(e.saga, en.SagaID), append(e.seq, en.Seq), append(e.tool, en.ToolName), append(e.phase, string(en.Phase))
			e.input, e.payload, e.at, e.hash = append(e.input, en.Input), append(e.payload, en.Payload), append(e.at, en.Timestamp), append(e.hash, en.Hash)
		}
		for _, cl := range m.rec.calls {
			c.saga, c.seq, c.tool, c.input = append(c.saga, cl.SagaID), append(c.seq, cl.Seq), append(c.tool, cl.ToolName), append(c.input, cl.Input)
			c.requester, c.state, c.outcome, c.result = append(c.requester, cl.Requester), append(c.state, string(cl.State)), append(c.outcome, cl.OutcomeSeq), append(c.result, cl.Result)
			c.started, c.updated, c.request, c.runner = append(c.started, cl.StartedAt), append(c.updated, cl.UpdatedAt), append(c.request, cl.Request), append(c.runner, cl.Runner)
		}
	}
	return recordedSQL + then, []any{p.id, p.status, p.ended, p.reason, p.head, p.hash, p.updated, p.running, p.seq, p.want,
		p.newStatus, p.newEnded, p.newReason, p.newHead, p.newHash, p.newRunning, p.newUpdated,
		e.saga, e.seq, e.tool, e.phase, e.input, e.payload, e.at, e.hash,
		c.saga, c.seq, c.tool, c.input, c.requester, c.state, c.outcome, c.result, c.started, c.updated, c.request, c.runner}
}
