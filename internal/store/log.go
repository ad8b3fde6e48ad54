package store

import (
	"context"
	"encoding/hex"
	"strings"

	"github.com/sagacity-go/sagacity/internal/engine"
	"github.com/sagacity-go/sagacity/internal/tlog"
)

var _ tlog.Store = (*DB)(nil)

// The global log's tables: journal.leaf, log_nodes and log_state (one
// row, the sequencer's lock). The sequencer is their only writer.

// logBatch bounds the rows one SQLite statement writes: three parameters
// a row stay well under its limit.
const logBatch = 500

func (s *sqlStore) Sequence(ctx context.Context, fn func(tlog.Tx) error) error {
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

func (s *sqlStore) LogState(ctx context.Context) (tlog.State, error) {
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	return logState(ctx, s.db)
}

func (s *sqlStore) LogNodes(ctx context.Context, ids []tlog.NodeID) (map[tlog.NodeID][]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	return logNodes(ctx, s.db, s.postgres, ids)
}

func (s *sqlStore) Leaves(ctx context.Context, from, to int64) ([]tlog.Leaf, error) {
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	return leaves(ctx, s.db, from, to)
}

// leaves reads the entries at leaves from to to-1.
func leaves(ctx context.Context, c conn, from, to int64) ([]tlog.Leaf, error) {
	return collect(ctx, c, func(r rows) (l tlog.Leaf, err error) {
		var saga presentCol
		l.Entry, err = scanEntryAnd(r, &saga)
		l.Orphan = !saga.ok
		return l, err
	}, leavesSQL, from, to)
}

// leavesSQL reads the entries at a range of leaves, each with whether its
// saga has a row, through the index of leaves.
const leavesSQL = "SELECT " + entryReadJ + ", s.id FROM journal AS j LEFT JOIN sagas AS s ON s.id = j.saga_id" +
	" WHERE j.leaf >= $1 AND j.leaf < $2 ORDER BY j.leaf"

func logState(ctx context.Context, c conn) (tlog.State, error) {
	var root string
	st, err := one(ctx, c, func(r rows) (st tlog.State, err error) { return st, r.Scan(&st.Size, &root, &st.Key) },
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
func logNodes(ctx context.Context, c conn, postgres bool, ids []tlog.NodeID) (map[tlog.NodeID][]byte, error) {
	type node struct {
		level, idx int64
		hash       string
	}
	scan := func(r rows) (n node, err error) { return n, r.Scan(&n.level, &n.idx, &n.hash) }
	out := make(map[tlog.NodeID][]byte, len(ids))
	for len(ids) > 0 {
		n := len(ids)
		if !postgres {
			n = min(n, logBatch)
		}
		levels, idxs := make([]int64, n), make([]int64, n)
		for i, id := range ids[:n] {
			levels[i], idxs[i] = int64(id.Level), int64(id.Index)
		}
		ids = ids[n:]
		var nodes []node
		var err error
		if postgres {
			nodes, err = collect(ctx, c, scan, nodesSQL(true, n), levels, idxs)
		} else {
			args := make([]any, 0, 2*n)
			for i := range n {
				args = append(args, levels[i], idxs[i])
			}
			nodes, err = collect(ctx, c, scan, nodesSQL(false, n), args...)
		}
		if err != nil {
			return nil, err
		}
		for _, n := range nodes {
			if h, err := hex.DecodeString(n.hash); err == nil {
				out[tlog.NodeID{Level: uint(n.level), Index: uint64(n.idx)}] = h
			}
		}
	}
	return out, nil
}

// nodesSQL reads n nodes by their ids: given as two arrays to
// PostgreSQL, as n pairs of ? to SQLite.
func nodesSQL(postgres bool, n int) string {
	if postgres {
		return "SELECT level, idx, hash FROM log_nodes WHERE (level, idx) IN (SELECT * FROM unnest($1::int[], $2::bigint[]))"
	}
	return "SELECT level, idx, hash FROM log_nodes WHERE (level, idx) IN (VALUES (?, ?)" + strings.Repeat(", (?, ?)", n-1) + ")"
}

// logTx is the sequencer's transaction.
type logTx struct {
	ctx      context.Context
	c        conn
	postgres bool
}

func (t *logTx) State() (tlog.State, error) { return logState(t.ctx, t.c) }

func (t *logTx) Unsequenced(n int) ([]engine.Entry, error) {
	return collect(t.ctx, t.c, scanEntry, unsequencedSQL(t.postgres), n)
}

func (t *logTx) Leaves(from, to int64) ([]tlog.Leaf, error) { return leaves(t.ctx, t.c, from, to) }

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

func (t *logTx) Nodes(ids []tlog.NodeID) (map[tlog.NodeID][]byte, error) {
	return logNodes(t.ctx, t.c, t.postgres, ids)
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

func (t *logTx) PutNodes(nodes []tlog.Node) error {
	levels, idxs, hashes := make([]int64, len(nodes)), make([]int64, len(nodes)), make([]string, len(nodes))
	for i, n := range nodes {
		levels[i], idxs[i], hashes[i] = int64(n.ID.Level), int64(n.ID.Index), hex.EncodeToString(n.Hash)
	}
	if t.postgres {
		m, err := t.c.exec(t.ctx, putNodesPostgres, levels, idxs, hashes)
		if err == nil && m != int64(len(nodes)) {
			err = errWrote(m, len(nodes))
		}
		return err
	}
	// Many rows a statement; with ? placeholders, which SQLite numbers as
	// it parses, where $N would be looked up one by one.
	for from := 0; from < len(nodes); from += logBatch {
		to := min(len(nodes), from+logBatch)
		args := make([]any, 0, 3*(to-from))
		for i := from; i < to; i++ {
			args = append(args, levels[i], idxs[i], hashes[i])
		}
		q := "INSERT INTO log_nodes (level, idx, hash) VALUES (?, ?, ?)" + strings.Repeat(", (?, ?, ?)", to-from-1)
		m, err := t.c.exec(t.ctx, q, args...)
		if err != nil {
			return err
		}
		if m != int64(to-from) {
			return errWrote(m, to-from)
		}
	}
	return nil
}

// putNodesPostgres stores a batch of the tree's nodes in one statement.
const putNodesPostgres = "INSERT INTO log_nodes (level, idx, hash) SELECT * FROM unnest($1::int[], $2::bigint[], $3::text[])"

func (t *logTx) PutState(st tlog.State) error {
	_, err := t.c.exec(t.ctx, "UPDATE log_state SET size = $1, root = $2, verifier_key = $3 WHERE id = 1", st.Size, hex.EncodeToString(st.Root), st.Key)
	return err
}
