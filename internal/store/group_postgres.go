package store

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/sagacity-go/sagacity/internal/engine"
)

// togetherPostgres commits recorded members in one transaction of two
// round trips: the first checks every member's promise at once and locks
// the heads that hold (in the order of their ids, so two groups never
// wait on each other); the second sends every member's entries in one
// insert, their calls in one upsert, their other writes, their heads in
// one update, and COMMIT. A member whose promise broke kept nothing and
// gets ErrStale, as alone. When the server refuses the transaction
// (a taken idempotency key, say) it kept nothing, and every member
// commits again alone; when its answer to COMMIT is lost, every member
// gets that error, as alone.
func (s *sqlStore) togetherPostgres(ctx context.Context, ms []*member) {
	var held map[string]bool
	err := s.begin(ctx, func(c conn) error {
		var err error
		if held, err = promisesHeld(ctx, c, ms); err != nil {
			return err
		}
		return writeTogether(ctx, s.tx(ctx, c), ms, held)
	})
	if _, refused := errors.AsType[*pgconn.PgError](err); refused || errors.Is(err, pgx.ErrTxCommitRollback) {
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

// promisedSQL returns the ids of the sagas whose rows are as promised
// (and whose call at seq, for seq > 0, is in state want), locking them.
// The join reads each saga by its key; a row changed by a transaction
// that committed meanwhile is compared again as it is now.
const promisedSQL = "SELECT s.id FROM sagas s JOIN unnest($1::text[], $2::text[], $3::boolean[], $4::text[], $5::bigint[], $6::text[]," +
	" $7::timestamptz[], $8::bigint[], $9::bigint[], $10::text[])" +
	" AS p (id, status, ended, reason, head_seq, head_hash, updated_at, running, seq, want)" +
	" ON s.id = p.id AND s.status = p.status AND s.ended = p.ended AND s.reason = p.reason AND s.head_seq = p.head_seq" +
	" AND s.head_hash = p.head_hash AND s.updated_at = p.updated_at AND s.running = p.running" +
	" AND (p.seq = 0 OR EXISTS (SELECT 1 FROM calls c WHERE c.saga_id = p.id AND c.seq = p.seq AND c.state = p.want))" +
	" ORDER BY s.id FOR UPDATE OF s"

func promisesHeld(ctx context.Context, c conn, ms []*member) (map[string]bool, error) {
	n := len(ms)
	ids, status, reason, hash, want := make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	ended, head, running, seq := make([]bool, n), make([]int64, n), make([]int64, n), make([]int64, n)
	updated := make([]time.Time, n)
	for i, m := range ms {
		p := m.rec.promise
		ids[i], status[i], ended[i], reason[i], head[i], hash[i] = p.s.ID, string(p.s.Status), p.s.Ended, p.s.Reason, p.s.HeadSeq, p.s.HeadHash
		updated[i], running[i], seq[i], want[i] = p.s.UpdatedAt, p.s.Running, p.seq, string(p.want)
	}
	r, err := c.query(ctx, promisedSQL, ids, status, ended, reason, head, hash, updated, running, seq, want)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	held := make(map[string]bool, n)
	for r.Next() {
		var id string
		if err := r.Scan(&id); err != nil {
			return nil, err
		}
		held[id] = true
	}
	return held, r.Err()
}

const (
	journalMany = "INSERT INTO journal (" + entryCols + ") SELECT * FROM unnest($1::text[], $2::bigint[], $3::text[], $4::text[]," +
		" $5::text[], $6::text[], $7::timestamptz[], $8::text[])"
	callsMany = "INSERT INTO calls (" + callCols + ") SELECT * FROM unnest($1::text[], $2::bigint[], $3::text[], $4::text[], $5::text[]," +
		" $6::text[], $7::bigint[], $8::text[], $9::timestamptz[], $10::timestamptz[], $11::bigint[], $12::text[])" + callUpsert
	sagasMany = "UPDATE sagas SET status = u.status, ended = u.ended, reason = u.reason, head_seq = u.head_seq, head_hash = u.head_hash," +
		" running = u.running, updated_at = u.updated_at FROM unnest($1::text[], $2::text[], $3::boolean[], $4::text[], $5::bigint[]," +
		" $6::text[], $7::bigint[], $8::timestamptz[]) AS u (id, status, ended, reason, head_seq, head_hash, running, updated_at)" +
		" WHERE sagas.id = u.id"
)

// writeTogether queues the writes of the members whose promise held.
func writeTogether(ctx context.Context, t *tx, ms []*member, held map[string]bool) error {
	var (
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
		s struct {
			id, status, reason, hash []string
			ended                    []bool
			head, running            []int64
			updated                  []time.Time
		}
		rest []func(engine.Tx) error
	)
	for _, m := range ms {
		if !held[m.key] {
			continue
		}
		for _, en := range m.rec.entries {
			e.saga, e.seq, e.tool, e.phase = append(e.saga, en.SagaID), append(e.seq, en.Seq), append(e.tool, en.ToolName), append(e.phase, string(en.Phase))
			e.input, e.payload, e.at, e.hash = append(e.input, en.Input), append(e.payload, en.Payload), append(e.at, en.Timestamp), append(e.hash, en.Hash)
		}
		for _, cl := range m.rec.calls {
			c.saga, c.seq, c.tool, c.input = append(c.saga, cl.SagaID), append(c.seq, cl.Seq), append(c.tool, cl.ToolName), append(c.input, cl.Input)
			c.requester, c.state, c.outcome, c.result = append(c.requester, cl.Requester), append(c.state, string(cl.State)), append(c.outcome, cl.OutcomeSeq), append(c.result, cl.Result)
			c.started, c.updated, c.request, c.runner = append(c.started, cl.StartedAt), append(c.updated, cl.UpdatedAt), append(c.request, cl.Request), append(c.runner, cl.Runner)
		}
		if h := m.rec.saga; h != nil {
			s.id, s.status, s.ended, s.reason = append(s.id, h.ID), append(s.status, string(h.Status)), append(s.ended, h.Ended), append(s.reason, h.Reason)
			s.head, s.hash, s.running, s.updated = append(s.head, h.HeadSeq), append(s.hash, h.HeadHash), append(s.running, h.Running), append(s.updated, h.UpdatedAt)
		}
		rest = append(rest, m.rec.rest...)
	}
	if len(e.saga) > 0 {
		if err := t.c.queue(ctx, journalMany, e.saga, e.seq, e.tool, e.phase, e.input, e.payload, e.at, e.hash); err != nil {
			return err
		}
	}
	if len(c.saga) > 0 {
		if err := t.c.queue(ctx, callsMany, c.saga, c.seq, c.tool, c.input, c.requester, c.state, c.outcome, c.result,
			c.started, c.updated, c.request, c.runner); err != nil {
			return err
		}
	}
	for _, op := range rest {
		if err := op(t); err != nil {
			return err
		}
	}
	if len(s.id) > 0 {
		return t.c.queue(ctx, sagasMany, s.id, s.status, s.ended, s.reason, s.head, s.hash, s.running, s.updated)
	}
	return nil
}
