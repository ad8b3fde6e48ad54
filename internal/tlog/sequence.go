package tlog

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/sagacity-go/sagacity/internal/engine"
	"github.com/transparency-dev/merkle/compact"
)

// readBatch is how many leaves the full check reads at once, and how many
// entries the sequencer appends in one transaction.
const readBatch = 2000

// refusal is what makes the sequencer refuse a batch: nothing of it is
// kept, and executions halt until it passes.
type refusal struct{ why string }

func (r *refusal) Error() string { return r.why }

// Sequence appends the entries that have no leaf yet to the log, in
// batches, and signs and publishes a checkpoint when one is due (or at
// once when force is set and the log grew since the last one). It does
// nothing while a check finds the database broken: the server never
// extends or signs a log that does not match its checkpoints. First it
// reads what other servers logged since it last read the log, held to
// the rules of the full check (each leaf the entry that chains on its
// saga's last, the root the one recorded); then it gives a leaf only to
// an entry that chains on the entry its saga has at its newest leaf, as
// this server read it: so no entry is logged twice, none after a later
// one of its saga, and none of a saga whose entries' leaves were taken
// away. It refuses a batch otherwise (Conflict, and executions halt
// until a later pass succeeds). A checkpoint is published only once it
// is proved to extend the newest witnessed. It returns the log's state.
// Errors: Unavailable when the store is, Internal when the witness
// cannot keep a checkpoint (executions halt when that lasts three
// intervals).
func (l *Log) Sequence(ctx context.Context, force bool) (State, error) {
	l.sequencing.Lock()
	defer l.sequencing.Unlock()
	for {
		l.mu.Lock()
		wait := l.mismatch != nil || l.firstFull
		l.mu.Unlock()
		if wait {
			return l.store.LogState(ctx)
		}
		var st State
		var n int
		var signed string
		var cp engine.Checkpoint
		var w *walk
		behind := false
		err := l.store.Sequence(ctx, func(tx Tx) error {
			signed, n = "", 0
			var err error
			if st, err = tx.State(); err != nil {
				return err
			}
			if err := l.sameKey(st); err != nil {
				return err
			}
			// The walk goes on from the index, which only this pass
			// changes while it runs.
			r, err := clone(l.idx.r)
			if err != nil {
				return err
			}
			w = newWalk(l.idx.heads, r)
			if behind, err = l.follow(tx, w, st); err != nil || behind {
				return err
			}
			es, err := tx.Unsequenced(readBatch)
			if err != nil {
				return err
			}
			if n = len(es); n > 0 {
				if st, err = l.append(tx, st, w, es); err != nil {
					return err
				}
			}
			if n == readBatch || !l.due(st.Size, force) {
				return nil
			}
			cp = engine.Checkpoint{Origin: l.keys.Name(), Size: st.Size, Root: st.Root}
			if err := l.extends(tx.Nodes, cp); err != nil {
				return err
			}
			signed, err = l.keys.Sign(cp.Text())
			return err
		})
		if r, ok := errors.AsType[*refusal](err); ok {
			l.mu.Lock()
			l.seq = r.why
			l.mu.Unlock()
			l.obs.VerifyFailed(engine.CheckedLog)
			return st, &engine.Error{Kind: engine.Conflict, Msg: r.why}
		}
		if err != nil {
			return State{}, err
		}
		l.mu.Lock()
		l.seq = ""
		maps.Copy(l.idx.heads, w.heads)
		l.idx.r = w.r
		l.mu.Unlock()
		if signed != "" {
			// Published after the commit: a checkpoint outside the database
			// never covers leaves the database could still lose.
			err := l.witness.Publish(st.Size, signed)
			l.published(err)
			if err != nil {
				return st, &engine.Error{Kind: engine.Internal, Msg: fmt.Sprintf("publishing the checkpoint at size %d", st.Size), Err: err}
			}
			l.witnessed(cp, signed, l.now())
		}
		if !behind && n < readBatch {
			return st, nil
		}
	}
}

// clone is a copy of r to append to: r's hashes are never written
// again, only the slice that holds them.
func clone(r *compact.Range) (*compact.Range, error) {
	return rangeFactory.NewRange(r.Begin(), r.End(), slices.Clone(r.Hashes()))
}

// follow walks w, from the index, over what other servers logged since
// this one last read the log, up to st, at most readBatch leaves: a
// refusal when the leaves are not what the full check takes, or do not
// hash to the root recorded; behind when more are left to read.
func (l *Log) follow(tx Tx, w *walk, st State) (behind bool, err error) {
	from := w.size()
	switch {
	case from > st.Size:
		return false, &refusal{fmt.Sprintf("refusing to extend the log: it holds %d leaves, fewer than the %d this server read "+
			"(rolled back, or rows deleted)", st.Size, from)}
	case from == st.Size:
		return false, nil
	}
	to := min(st.Size, from+readBatch)
	ls, err := tx.Leaves(from, to)
	if err != nil {
		return false, err
	}
	problem, err := w.take(to, ls)
	if err != nil {
		return false, err
	}
	if problem != "" {
		return false, &refusal{"refusing to extend the log: " + problem}
	}
	if to < st.Size {
		return true, nil
	}
	if root, err := w.r.GetRootHash(nil); err != nil || !bytes.Equal(root, st.Root) {
		return false, &refusal{fmt.Sprintf("refusing to extend the log: its recorded root at size %d is not what its leaves hash to "+
			"(its state rewritten)", st.Size)}
	}
	return false, nil
}

// published notes how a checkpoint's publication went: a witness that has
// taken none for three intervals halts executions until it takes one.
func (l *Log) published(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	if err == nil {
		l.failing, l.stalled = time.Time{}, ""
		return
	}
	if l.failing.IsZero() {
		l.failing = now
	}
	if now.Sub(l.failing) >= 3*l.interval && l.stalled == "" {
		l.stalled = fmt.Sprintf("the checkpoint directory has taken no checkpoint since %s (%v): what the database holds since the "+
			"checkpoint of size %d is proved nowhere outside it", l.failing.UTC().Format(time.RFC3339), err, l.cp.Size)
		l.obs.VerifyFailed(engine.CheckedLog)
	}
}

// due reports whether a checkpoint at size is to be signed now.
func (l *Log) due(size int64, force bool) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	grew := size > l.cp.Size
	return grew && (force || size-l.cp.Size >= l.every || l.now().Sub(l.cpAt) >= l.interval)
}

// append gives es (by time) their leaves at state st: each saga's entries
// in seq order, in the places the batch's time order gives the saga, once
// walk w, at st's size, takes them (each chaining on what its saga has
// at its newest leaf); it stores the tree's new nodes, which must hash
// to what w's range does, and returns the new state.
func (l *Log) append(tx Tx, st State, w *walk, es []engine.Entry) (State, error) {
	bySaga := map[string][]engine.Entry{}
	for _, en := range es {
		bySaga[en.SagaID] = append(bySaga[en.SagaID], en)
	}
	for _, q := range bySaga {
		slices.SortFunc(q, func(a, b engine.Entry) int { return cmp.Compare(a.Seq, b.Seq) })
	}
	ordered := make([]engine.Entry, len(es))
	leaves := make([]Leaf, len(es))
	for i, en := range es {
		ordered[i], bySaga[en.SagaID] = bySaga[en.SagaID][0], bySaga[en.SagaID][1:]
		ordered[i].Leaf = st.Size + int64(i)
		leaves[i] = Leaf{Entry: ordered[i]}
	}
	if problem, err := w.add(st.Size, leaves); err != nil || problem != "" {
		if problem != "" {
			err = &refusal{"refusing to extend the log: " + problem}
		}
		return st, err
	}
	root, nodes, err := extend(tx.Nodes, st.Size, w.hashes)
	if err != nil {
		return st, err
	}
	if want, err := w.r.GetRootHash(nil); err != nil || !bytes.Equal(root, want) {
		return st, &refusal{fmt.Sprintf("refusing to extend the log: its stored tree at size %d does not hash to its leaves "+
			"(its nodes rewritten)", st.Size)}
	}
	next := State{Size: st.Size + int64(len(ordered)), Root: root, Key: st.Key}
	if err := tx.Sequence(ordered, st.Size); err != nil {
		return st, err
	}
	if err := tx.PutNodes(nodes); err != nil {
		return st, err
	}
	return next, tx.PutState(next)
}
