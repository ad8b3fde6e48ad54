package tlog

import (
	"context"
	"fmt"

	"github.com/sagacity-go/sagacity/internal/engine"
)

// What readers ask of the log: its status, its checkpoints, proofs that
// one checkpoint extends another and that entries are in it.

// Status reports the log's size, the newest checkpoint witnessed and
// whether the database still matches it. Unavailable when the store is.
func (l *Log) Status(ctx context.Context) (engine.LogStatus, error) {
	st, err := l.store.LogState(ctx)
	if err != nil {
		return engine.LogStatus{}, err
	}
	halted := l.Halted()
	l.mu.Lock()
	defer l.mu.Unlock()
	return engine.LogStatus{Size: st.Size, Checkpoint: l.cp, Signed: l.signed, SignedAt: l.cpAt,
		Halted: halted, CheckedAt: l.checkedAt, FullAt: l.fullAt}, nil
}

// Checkpoint returns the signed checkpoint of a size the witness keeps,
// or the newest witnessed for size 0. NotFound when there is none of that
// size.
func (l *Log) Checkpoint(size int64) (string, error) {
	if size == 0 {
		if _, signed := l.newest(); signed != "" {
			return signed, nil
		}
		return "", engine.Errorf(engine.NotFound, "no checkpoint is signed yet")
	}
	var signed string
	var err error
	if size > 0 {
		signed, err = l.witness.Get(size)
	}
	if err != nil {
		return "", err
	}
	if signed == "" {
		return "", engine.Errorf(engine.NotFound, "this server keeps no checkpoint of size %d", size)
	}
	return signed, nil
}

// Consistency proves that the log at size from is a prefix of the log at
// size to. Invalid for sizes out of order or beyond the log.
func (l *Log) Consistency(ctx context.Context, from, to int64) ([][]byte, error) {
	st, err := l.store.LogState(ctx)
	if err != nil {
		return nil, err
	}
	if from < 0 || from > to || to > st.Size {
		return nil, engine.Errorf(engine.Invalid, "from and to must be sizes of the log, from no larger than to, and to at most %d", st.Size)
	}
	pr, err := consistency(l.nodes(ctx), from, to)
	if engine.IsKind(err, engine.Conflict) {
		return nil, &engine.Error{Kind: engine.Internal, Msg: "the log's nodes proving it are missing", Err: err}
	}
	return pr, err
}

// Prove returns the inclusion proofs of one saga's entries in the log at
// size (0: the newest checkpoint's), for an export an auditor checks
// offline. Invalid for a size the log has not reached; NotFound when no
// checkpoint is signed yet; Internal when nodes proving an entry are
// missing.
func (l *Log) Prove(ctx context.Context, entries []engine.Entry, size int64) (*engine.Proofs, error) {
	if size == 0 {
		cp, _ := l.newest()
		if size = cp.Size; size == 0 {
			return nil, engine.Errorf(engine.NotFound, "no checkpoint is signed yet: export without proofs, or try again in a moment")
		}
	}
	st, err := l.store.LogState(ctx)
	if err != nil {
		return nil, err
	}
	if size < 0 || size > st.Size {
		return nil, engine.Errorf(engine.Invalid, "the log has %d leaves: no proofs at size %d", st.Size, size)
	}
	ps, err := inclusions(l.nodes(ctx), entries, size)
	if engine.IsKind(err, engine.Conflict) {
		return nil, &engine.Error{Kind: engine.Internal, Msg: "the log's nodes proving the journal are missing", Err: err}
	}
	return ps, err
}

// Logged is the newest entry of saga id that this server read in the
// log's leaves (engine.Log).
func (l *Log) Logged(id string) engine.Logged {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := engine.Logged{Read: int64(l.idx.r.End())}
	if h, ok := l.idx.heads[id]; ok {
		out.Seq, out.Hash, out.Leaf = h.seq, h.hash, h.leaf
	}
	return out
}

// Included checks a saga's journal, already verified as a chain (v),
// against the newest checkpoint witnessed and against logged, the saga's
// newest entry this server read in the log before the journal was read:
// the entries with a leaf come first, by seq, each after the one before
// it; each entry the checkpoint covers is in the log as signed (proved
// from the stored tree to the signed root); and every entry up to
// logged's has a leaf, logged's its own. An entry rewritten after it was
// logged, a chain recomputed end to end, a saga rewritten with its
// entries' leaves taken away (its originals copied to another saga or to
// none), its tail cut or the saga deleted whole fails here even when the
// chain holds. It returns v when v is broken.
func (l *Log) Included(ctx context.Context, entries []engine.Entry, v engine.Verification, logged engine.Logged) (engine.Verification, error) {
	if !v.Valid {
		return v, nil
	}
	cp, _ := l.newest()
	n := len(entries)
	broken := func(i int, format string, args ...any) engine.Verification {
		return engine.Verification{EntryCount: n, BreakAtIndex: i, Message: fmt.Sprintf(format, args...)}
	}
	prev, gap := int64(-1), -1
	for i, en := range entries {
		switch {
		case en.Leaf < 0:
			if gap < 0 {
				gap = i
			}
			continue
		case gap >= 0:
			return broken(gap, "seq=%d (entry %d) is not in the log, though seq=%d is", entries[gap].Seq, gap, en.Seq), nil
		case en.Leaf <= prev:
			return broken(i, "seq=%d (entry %d) is at leaf %d of the log, not after seq=%d's", en.Seq, i, en.Leaf, en.Seq-1), nil
		}
		prev = en.Leaf
	}
	ps, err := inclusions(l.nodes(ctx), entries, cp.Size)
	if engine.IsKind(err, engine.Conflict) {
		// A node is missing: no entry it would prove is in the log as
		// signed.
		ps = &engine.Proofs{TreeSize: cp.Size, Of: make([][][]byte, n)}
		for i, en := range entries {
			if en.Leaf >= 0 && en.Leaf < cp.Size {
				ps.Of[i] = [][]byte{}
			}
		}
	} else if err != nil {
		return v, err
	}
	bad, proved := VerifyProofs(entries, ps, cp.Root)
	if bad >= 0 {
		en := entries[bad]
		return broken(bad, "seq=%d (entry %d) is not in the log as the checkpoint of size %d signed it: written after it was logged", en.Seq, bad, cp.Size), nil
	}
	if k := logged.Seq; k > 0 {
		holds := fmt.Sprintf("the log holds the saga's entries through seq=%d, at leaf %d", k, logged.Leaf)
		for i, en := range entries[:min(int64(n), k)] {
			if en.Leaf < 0 {
				return broken(i, "seq=%d (entry %d) has no leaf, but %s: its leaf was taken away (the entry rewritten, its original copied elsewhere)",
					en.Seq, i, holds), nil
			}
		}
		switch {
		case n == 0:
			return broken(0, "the saga has no journal, but %s: it was deleted", holds), nil
		case int64(n) < k:
			return broken(n, "the journal ends at seq=%d, but %s: entries were deleted", n, holds), nil
		}
		if en := entries[k-1]; en.Hash != logged.Hash || en.Leaf != logged.Leaf {
			return broken(int(k-1), "seq=%d (entry %d) is not the entry the log holds at leaf %d: rewritten", en.Seq, k-1, logged.Leaf), nil
		}
	}
	if proved > 0 {
		v.Message += fmt.Sprintf("; %d in the log as the checkpoint of size %d signed it", proved, cp.Size)
	}
	if logged.Read < cp.Size {
		v.Message += fmt.Sprintf("; this server has read %d of the %d leaves signed since it started, so a saga whose leaves were taken away "+
			"is found by the check from every entry", logged.Read, cp.Size)
	}
	return v, nil
}
