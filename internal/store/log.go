package store

import (
	"context"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/sagacity-go/sagacity/internal/engine"
)

var _ engine.LogStore = (*DB)(nil)

// The global log's tables: journal.leaf, log_nodes and log_state (one
// row, the sequencer's lock). The sequencer is their only writer.

// logBatch bounds the rows one statement writes: three parameters a row
// stays well under both databases' limits.
const logBatch = 500

func (s *sqlStore) Sequence(ctx context.Context, fn func(engine.LogTx) error) error {
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	return mapErr(s.begin(ctx, func(c conn) error {
		// The state row's lock orders every sequencer, across processes
		// (SQLite's write lock already does).
		if _, err := c.exec(ctx, "SELECT size FROM log_state WHERE id = 1"+s.lock); err != nil {
			return err
		}
		return fn(&logTx{ctx: ctx, c: c, postgres: s.postgres})
	}))
}

func (s *sqlStore) LogState(ctx context.Context) (engine.LogState, error) {
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	return logState(ctx, s.db)
}

func (s *sqlStore) LogNodes(ctx context.Context, ids []engine.NodeID) (map[engine.NodeID][]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	return logNodes(ctx, s.db, ids)
}

func (s *sqlStore) Leaves(ctx context.Context, from, to int64) ([]engine.Leaf, error) {
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	return collect(ctx, s.db, func(r rows) (l engine.Leaf, err error) {
		leaf, seq := intCol{col: col{name: "leaf"}}, intCol{col: col{name: "seq"}}
		err = r.Scan(&leaf, &l.SagaID, &seq, &l.Hash)
		l.Leaf, l.Seq = leaf.v, seq.v
		if leaf.bad || seq.bad {
			l.Hash = "" // a row that does not read is no leaf
		}
		return l, err
	}, "SELECT leaf, saga_id, seq, hash FROM journal WHERE leaf >= $1 AND leaf < $2 ORDER BY leaf", from, to)
}

func logState(ctx context.Context, c conn) (engine.LogState, error) {
	var root string
	st, err := one(ctx, c, func(r rows) (st engine.LogState, err error) { return st, r.Scan(&st.Size, &root, &st.Key) },
		"the log's state", "SELECT size, root, verifier_key FROM log_state WHERE id = 1")
	if err != nil {
		return st, err
	}
	if st.Root, err = hex.DecodeString(root); err != nil || st.Size < 0 {
		return st, engine.Errorf(engine.Internal, "the log's state row does not hold a size and a hex root")
	}
	return st, nil
}

// logNodes reads nodes; one that is missing, or not hex, is left out.
func logNodes(ctx context.Context, c conn, ids []engine.NodeID) (map[engine.NodeID][]byte, error) {
	out := make(map[engine.NodeID][]byte, len(ids))
	for len(ids) > 0 {
		n := min(len(ids), logBatch)
		var q strings.Builder
		args := make([]any, 0, 2*n)
		for i, id := range ids[:n] {
			if i > 0 {
				q.WriteString(" OR ")
			}
			fmt.Fprintf(&q, "(level = $%d AND idx = $%d)", 2*i+1, 2*i+2)
			args = append(args, int64(id.Level), int64(id.Index))
		}
		ids = ids[n:]
		type node struct {
			level, idx int64
			hash       string
		}
		nodes, err := collect(ctx, c, func(r rows) (n node, err error) { return n, r.Scan(&n.level, &n.idx, &n.hash) },
			"SELECT level, idx, hash FROM log_nodes WHERE "+q.String(), args...)
		if err != nil {
			return nil, err
		}
		for _, n := range nodes {
			if h, err := hex.DecodeString(n.hash); err == nil {
				out[engine.NodeID{Level: uint(n.level), Index: uint64(n.idx)}] = h
			}
		}
	}
	return out, nil
}

// logTx is the sequencer's transaction.
type logTx struct {
	ctx      context.Context
	c        conn
	postgres bool
}

func (t *logTx) State() (engine.LogState, error) { return logState(t.ctx, t.c) }

func (t *logTx) Unsequenced(n int) ([]engine.Entry, error) {
	return collect(t.ctx, t.c, scanEntry, unsequencedSQL(t.postgres), n)
}

// unsequencedSQL reads the entries waiting for a leaf. The partial index
// holds exactly them, in this order: PostgreSQL's planner finds it;
// SQLite's would rather test leaf IS NULL on the unique index of leaves
// and sort the whole backlog, so it is told.
func unsequencedSQL(postgres bool) string {
	from := "journal"
	if !postgres {
		from += " INDEXED BY journal_unsequenced"
	}
	return "SELECT " + entryRead + " FROM " + from + " WHERE leaf IS NULL ORDER BY timestamp, saga_id, seq LIMIT $1"
}

// The statements that give entries their leaves: in PostgreSQL one for a
// batch, whose rows the planner looks up by key; in SQLite, which runs in
// the process, one a row by the primary key, which costs no round trip
// and no plan can turn into a scan.
const (
	sequencePostgres = "UPDATE journal AS j SET leaf = v.leaf" +
		" FROM unnest($1::text[], $2::bigint[], $3::bigint[]) AS v(saga_id, seq, leaf)" +
		" WHERE j.saga_id = v.saga_id AND j.seq = v.seq AND j.leaf IS NULL"
	sequenceSQLite = "UPDATE journal SET leaf = $1 WHERE saga_id = $2 AND seq = $3 AND leaf IS NULL"
)

func (t *logTx) Nodes(ids []engine.NodeID) (map[engine.NodeID][]byte, error) {
	return logNodes(t.ctx, t.c, ids)
}

// values writes rows of three values each, logBatch at a time, as
// "($1, $2, $3), …" after the statement's head, and fails unless every
// statement wrote as many rows as it carried.
func (t *logTx) values(head, row string, n int, arg func(i int) [3]any) error {
	for from := 0; from < n; from += logBatch {
		to := min(n, from+logBatch)
		var q strings.Builder
		q.WriteString(head)
		args := make([]any, 0, 3*(to-from))
		for i := from; i < to; i++ {
			if i > from {
				q.WriteString(", ")
			}
			k := 3 * (i - from)
			fmt.Fprintf(&q, row, k+1, k+2, k+3)
			a := arg(i)
			args = append(args, a[:]...)
		}
		m, err := t.c.exec(t.ctx, q.String(), args...)
		if err != nil {
			return err
		}
		if m != int64(to-from) {
			return errWrote(m, to-from)
		}
	}
	return nil
}

// errWrote reports a sequencer statement that touched another number of
// rows than it carried: another writer touched the log.
func errWrote(got int64, want int) error {
	return engine.Errorf(engine.Conflict, "the log's sequencer wrote %d rows, not %d: another writer touched the log", got, want)
}

func (t *logTx) Sequence(es []engine.Entry, first int64) error {
	if t.postgres {
		ids, seqs, leaves := make([]string, len(es)), make([]int64, len(es)), make([]int64, len(es))
		for i, e := range es {
			ids[i], seqs[i], leaves[i] = e.SagaID, e.Seq, first+int64(i)
		}
		m, err := t.c.exec(t.ctx, sequencePostgres, ids, seqs, leaves)
		if err == nil && m != int64(len(es)) {
			err = errWrote(m, len(es))
		}
		return err
	}
	for i, e := range es {
		m, err := t.c.exec(t.ctx, sequenceSQLite, first+int64(i), e.SagaID, e.Seq)
		if err != nil {
			return err
		}
		if m != 1 {
			return errWrote(m, 1)
		}
	}
	return nil
}

func (t *logTx) PutNodes(nodes []engine.LogNode) error {
	return t.values("INSERT INTO log_nodes (level, idx, hash) VALUES ", "($%d, $%d, $%d)", len(nodes),
		func(i int) [3]any {
			return [3]any{int64(nodes[i].ID.Level), int64(nodes[i].ID.Index), hex.EncodeToString(nodes[i].Hash)}
		})
}

func (t *logTx) PutState(st engine.LogState) error {
	_, err := t.c.exec(t.ctx, "UPDATE log_state SET size = $1, root = $2, verifier_key = $3 WHERE id = 1", st.Size, hex.EncodeToString(st.Root), st.Key)
	return err
}
