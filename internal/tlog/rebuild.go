package tlog

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/sagacity-go/sagacity/internal/engine"
	"github.com/sagacity-go/sagacity/internal/parallel"
	"github.com/transparency-dev/merkle/compact"
)

// rebuild recomputes the root of the log at cp's size from every journal
// entry it holds: each leaf's entry must be of a saga that has a row, and
// chain on the entry its saga logged before it, seq after seq from the
// first; the problem, or "", and the walk (each saga's newest entry)
// when it matches. The leaves are read a batch at a time, the next while
// the last is checked, and each batch's entries are hashed on every core:
// memory holds two batches and each saga's last entry, however long the
// log.
func (l *Log) rebuild(ctx context.Context, cp engine.Checkpoint) (string, *walk, error) {
	ctx, cancel := context.WithCancel(ctx)
	var reading sync.WaitGroup
	defer reading.Wait()
	defer cancel()
	type batch struct {
		from   int64
		leaves []Leaf
		err    error
	}
	batches := make(chan batch, 1)
	reading.Go(func() {
		defer close(batches)
		for from := int64(0); from < cp.Size; from += readBatch {
			ls, err := l.store.Leaves(ctx, from, min(from+readBatch, cp.Size))
			select {
			case batches <- batch{from, ls, err}:
			case <-ctx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	})
	w := newWalk(nil, rangeFactory.NewEmptyRange(0))
	for b := range batches {
		if b.err != nil {
			return "", nil, b.err
		}
		if problem, err := w.take(min(b.from+readBatch, cp.Size), b.leaves); problem != "" || err != nil {
			return problem, nil, err
		}
	}
	root, err := w.r.GetRootHash(nil)
	if err != nil {
		return "", nil, err
	}
	if !bytes.Equal(root, cp.Root) {
		return "its root at that size, from the journal's entries, is not the one signed (history rewritten)", nil, nil
	}
	return "", w, nil
}

// head is a saga's newest entry a walk met.
type head struct {
	seq  int64
	hash string
	leaf int64
}

// walk goes over the log's leaves in order from the first, holding each
// saga's newest entry and the compact range of the leaves so far: the
// full check walks the whole log with one; the sequencer extends the
// server's index (Log.idx) with one, over it.
type walk struct {
	heads  map[string]head // the walk's own
	base   map[string]head // the index it extends, read only; nil for none
	r      *compact.Range
	prev   []string // a batch's entries' previous hashes
	hashes [][]byte // a batch's leaf hashes
}

// newWalk walks on from range r over the heads base (nil for none).
func newWalk(base map[string]head, r *compact.Range) *walk {
	return &walk{heads: map[string]head{}, base: base, r: r}
}

// size is how many leaves the walk has gone over.
func (w *walk) size() int64 { return int64(w.r.End()) }

// head is saga's newest entry the walk met, or over which it walks.
func (w *walk) head(saga string) (head, bool) {
	if h, ok := w.heads[saga]; ok {
		return h, true
	}
	h, ok := w.base[saga]
	return h, ok
}

// take walks over ls, the leaves from the walk's size to to, as add
// does; a leaf missing at their end is a problem too.
func (w *walk) take(to int64, ls []Leaf) (string, error) {
	from := w.size()
	if problem, err := w.add(from, ls); problem != "" || err != nil {
		return problem, err
	}
	if int64(len(ls)) < to-from {
		return fmt.Sprintf("leaf %d is missing (rows deleted, a saga removed)", from+int64(len(ls))), nil
	}
	return "", nil
}

// add checks a batch of leaves, from index from on, and appends them to
// the range: first, in order, what each leaf's place says of it (its
// index, its saga, its seq after its saga's last), which also gives the
// hash each entry chains on; then, on every core, each entry's hash and
// its leaf's; the problem at the first leaf that has one, or "".
func (w *walk) add(from int64, ls []Leaf) (string, error) {
	w.prev, w.hashes = slices.Grow(w.prev[:0], len(ls))[:len(ls)], slices.Grow(w.hashes[:0], len(ls))[:len(ls)]
	placed, problem := len(ls), ""
	for i, lf := range ls {
		e := lf.Entry
		h, seen := w.head(e.SagaID)
		if !seen {
			h = head{0, engine.ZeroHash, -1}
		}
		switch {
		case e.Leaf != from+int64(i):
			problem = fmt.Sprintf("leaf %d is missing (rows deleted, a saga removed)", from+int64(i))
		case e.Unreadable != "":
			problem = at(e) + " does not read: " + e.Unreadable
		case lf.Orphan:
			problem = at(e) + " belongs to no saga: its entry was copied out of its journal"
		case e.Seq <= h.seq:
			problem = fmt.Sprintf("%s is logged a second time: the saga's seq=%d was logged before it, at leaf %d", at(e), h.seq, h.leaf)
		case e.Seq != h.seq+1:
			problem = fmt.Sprintf("%s is logged before the saga's seq=%d", at(e), h.seq+1)
		}
		if problem != "" {
			placed = i
			break
		}
		w.prev[i] = h.hash
		w.heads[e.SagaID] = head{e.Seq, e.Hash, e.Leaf}
	}
	// The entries placed are hashed on every core; the first that does
	// not chain comes before the first misplaced.
	if bad := parallel.First(placed, 256, func() struct{} { return struct{}{} }, func(_ struct{}, i int) bool {
		e := ls[i].Entry
		if engine.Hash(w.prev[i], e) != e.Hash {
			return false
		}
		var err error
		w.hashes[i], err = LeafHash(e) // a hash Hash wrote is well-formed
		return err == nil
	}); bad < placed {
		return at(ls[bad].Entry) + " is not the entry that chains on the one before it (history rewritten)", nil
	}
	if problem != "" {
		return problem, nil
	}
	for _, h := range w.hashes {
		if err := w.r.Append(h, nil); err != nil {
			return "", err
		}
	}
	return "", nil
}

// at names an entry at its leaf in the full check's problems.
func at(e engine.Entry) string {
	return fmt.Sprintf("leaf %d (saga %s seq=%d)", e.Leaf, e.SagaID, e.Seq)
}
