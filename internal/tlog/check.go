package tlog

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/sagacity-go/sagacity/evidence"
	"github.com/sagacity-go/sagacity/internal/engine"
)

// check is how much of the database a check reads.
type check int

const (
	cheap check = iota // from the tree's stored nodes
	full               // from every journal entry
)

// Check compares the database's log with the newest checkpoint witnessed
// (this server's, or the witness's when that is newer and extends it):
// the log must be at least that large and its first leaves must hash to
// that root. With full, every leaf is rebuilt from its saga's journal,
// each entry chained on the one before it (a rewritten or recomputed
// chain, rows copied to another saga or to none, an entry logged twice);
// without, the root comes from the tree's stored nodes (a rollback, a
// rewritten tree), which is cheap. When they differ, executions halt
// until a check at least as strong passes against a checkpoint at least
// as large. It returns the problem, or an error when the check could not
// be made (Unavailable when the store is down).
func (l *Log) Check(ctx context.Context, fullCheck bool) (string, error) {
	kind := cheap
	if fullCheck {
		kind = full
	}
	cp, problem, err := l.target(ctx)
	var w *walk
	if err == nil && problem == "" {
		problem, w, err = l.compare(ctx, cp, kind)
	}
	if err != nil {
		return "", err
	}
	if w != nil {
		l.adopt(w)
	}
	if problem != "" {
		problem = fmt.Sprintf("the database's log does not match the checkpoint signed at size %d: %s", cp.Size, problem)
		l.obs.VerifyFailed(engine.CheckedLog)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.checkedAt = l.now()
	if kind == full {
		l.fullAt, l.firstFull = l.checkedAt, false
	}
	switch h := l.mismatch; {
	case problem != "" && h != nil:
		h.why, h.by, h.size = problem, max(h.by, kind), max(h.size, cp.Size)
	case problem != "":
		l.mismatch = &halt{why: problem, by: kind, size: cp.Size}
	case h != nil && kind >= h.by && cp.Size >= h.size:
		l.mismatch = nil
	}
	return problem, nil
}

// target is the checkpoint to check the database against: the newest
// this server witnessed, or the witness's newest when that is newer (it
// is adopted once the database matches it and it extends the one this
// server knew). A witness that cannot be read, or holds a checkpoint this
// key did not sign, is a problem: what cannot be compared is not trusted.
func (l *Log) target(ctx context.Context) (engine.Checkpoint, string, error) {
	known, _ := l.newest()
	signed, at, err := l.witness.Newest()
	if err != nil {
		return known, "the checkpoints outside the database cannot be read: " + err.Error(), nil
	}
	if signed == "" {
		return known, "", nil
	}
	cp, err := OpenCheckpoint(signed, l.keys.Verifier())
	if err != nil {
		return known, "the newest checkpoint outside the database does not verify with this server's key: " + msg(err), nil
	}
	switch {
	case cp.Size < known.Size:
		// Its newer files were deleted; this server still holds the
		// newest it witnessed, and compares with that.
		return known, "", nil
	case cp.Size == known.Size && !bytes.Equal(cp.Root, known.Root):
		return known, fmt.Sprintf("the witness holds another checkpoint of size %d than this server witnessed: the log forked", cp.Size), nil
	case cp.Size == known.Size:
		return known, "", nil
	}
	if known.Size > 0 {
		pr, err := consistency(l.nodes(ctx), known.Size, cp.Size)
		if err == nil {
			err = VerifyConsistency(known, cp, pr)
		}
		if engine.IsKind(err, engine.Unavailable) {
			return known, "", err
		}
		if err != nil {
			return known, fmt.Sprintf("the witness's checkpoint of size %d does not extend the one of size %d this server witnessed: %s",
				cp.Size, known.Size, msg(err)), nil
		}
	}
	l.witnessed(cp, signed, at)
	return cp, "", nil
}

// compare says how the database's log differs from checkpoint cp, or "";
// with the full check's walk when it matches.
func (l *Log) compare(ctx context.Context, cp engine.Checkpoint, kind check) (string, *walk, error) {
	st, err := l.store.LogState(ctx)
	if err != nil {
		return "", nil, err
	}
	if err := l.sameKey(st); err != nil {
		return msg(err), nil, nil
	}
	if cp.Size == 0 {
		return "", nil, nil
	}
	if st.Size < cp.Size {
		return fmt.Sprintf("it holds %d leaves, fewer than the %d signed (rolled back, or rows deleted)", st.Size, cp.Size), nil, nil
	}
	root, err := rootAt(l.nodes(ctx), cp.Size)
	switch {
	case engine.IsKind(err, engine.Conflict):
		return "nodes of its tree are missing (rows deleted)", nil, nil
	case err != nil:
		return "", nil, err
	case !bytes.Equal(root, cp.Root):
		return "its root at that size is not the one signed (history rewritten)", nil, nil
	case kind == cheap:
		return "", nil, nil
	}
	return l.rebuild(ctx, cp)
}

// adopt makes the full check's walk the server's index unless the index
// has read as far already: both hold what the log holds.
func (l *Log) adopt(w *walk) {
	l.sequencing.Lock()
	defer l.sequencing.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	if w.size() > int64(l.idx.r.End()) {
		l.idx = index{heads: w.heads, r: w.r}
	}
}

// extends refuses a checkpoint that is not proved, from the stored
// nodes, to extend the newest witnessed: signing it would fork the
// log's history.
func (l *Log) extends(r nodeReader, cp engine.Checkpoint) error {
	old, _ := l.newest()
	if old.Size == 0 {
		return nil
	}
	pr, err := consistency(r, old.Size, cp.Size)
	if err == nil {
		err = VerifyConsistency(old, cp, pr)
	}
	if err != nil && !engine.IsKind(err, engine.Unavailable) {
		return &refusal{fmt.Sprintf("refusing to sign the log at size %d: it does not extend the checkpoint of size %d: %s",
			cp.Size, old.Size, msg(err))}
	}
	return err
}

// msg is an error's message for people: an engine error's Msg, or, as
// evidence.Message says it, evidence's, or the error's text.
func msg(err error) string {
	if e, ok := errors.AsType[*engine.Error](err); ok {
		return e.Msg
	}
	return evidence.Message(err)
}
