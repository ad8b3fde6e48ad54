package tlog

import (
	"bytes"
	"fmt"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/sagacity-go/sagacity/internal/engine"
)

// TestFullCheck: the full check's walk, batch by batch with each batch
// hashed on every core, finds what a walk of one leaf at a time finds:
// the same root of an intact log, and the same first problem when a leaf
// is changed at a batch's first or last leaf, in its middle, or in two
// places, whichever the earlier.
func TestFullCheck(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4))
	const n = 2*readBatch + 777
	intact := leaves(n)
	walk := func(ls []Leaf) (string, []byte) { // one leaf at a time
		heads := map[string]head{}
		r := rangeFactory.NewEmptyRange(0)
		for i, lf := range ls {
			e := lf.Entry
			h, seen := heads[e.SagaID]
			if !seen {
				h = head{0, engine.ZeroHash, -1}
			}
			switch {
			case e.Leaf != int64(i):
				return fmt.Sprintf("leaf %d is missing (rows deleted, a saga removed)", i), nil
			case e.Unreadable != "":
				return at(e) + " does not read: " + e.Unreadable, nil
			case lf.Orphan:
				return at(e) + " belongs to no saga: its entry was copied out of its journal", nil
			case e.Seq <= h.seq:
				return fmt.Sprintf("%s is logged a second time: the saga's seq=%d was logged before it, at leaf %d", at(e), h.seq, h.leaf), nil
			case e.Seq != h.seq+1:
				return fmt.Sprintf("%s is logged before the saga's seq=%d", at(e), h.seq+1), nil
			case engine.Hash(h.hash, e) != e.Hash:
				return at(e) + " is not the entry that chains on the one before it (history rewritten)", nil
			}
			heads[e.SagaID] = head{e.Seq, e.Hash, e.Leaf}
			leaf, err := LeafHash(e)
			if err != nil {
				t.Fatal(err)
			}
			if err := r.Append(leaf, nil); err != nil {
				t.Fatal(err)
			}
		}
		root, err := r.GetRootHash(nil)
		if err != nil {
			t.Fatal(err)
		}
		return "", root
	}
	batched := func(ls []Leaf) (string, []byte) {
		c := newWalk(nil, rangeFactory.NewEmptyRange(0))
		for from := 0; from < len(ls); from += readBatch {
			problem, err := c.add(int64(from), ls[from:min(from+readBatch, len(ls))])
			if err != nil {
				t.Fatal(err)
			}
			if problem != "" {
				return problem, nil
			}
		}
		root, err := c.r.GetRootHash(nil)
		if err != nil {
			t.Fatal(err)
		}
		return "", root
	}
	wantProblem, wantRoot := walk(intact)
	if gotProblem, gotRoot := batched(intact); wantProblem != "" || gotProblem != "" || !bytes.Equal(gotRoot, wantRoot) {
		t.Fatalf("intact log: batched %q %x, walked %q %x", gotProblem, gotRoot, wantProblem, wantRoot)
	}
	changes := map[string]func(*Leaf){
		"input":      func(l *Leaf) { l.Input = "{}" },
		"hash":       func(l *Leaf) { l.Hash = l.Hash[:63] + "0" },
		"leaf":       func(l *Leaf) { l.Leaf++ },
		"unreadable": func(l *Leaf) { l.Unreadable = "seq" },
		"orphan":     func(l *Leaf) { l.Orphan = true },
		"seq back":   func(l *Leaf) { l.Seq-- },
		"seq ahead":  func(l *Leaf) { l.Seq += 2 },
	}
	for name, change := range changes {
		for _, i := range []int{3, readBatch - 1, readBatch, readBatch + 1, readBatch + 1000, n - 1} {
			ls := slices.Clone(intact)
			change(&ls[i])
			want, _ := walk(ls)
			if want == "" {
				t.Fatalf("%s changed at leaf %d: the walk finds nothing", name, i)
			}
			if got, _ := batched(ls); got != want {
				t.Errorf("%s changed at leaf %d: batched %q, walked %q", name, i, got, want)
			}
			for _, j := range []int{i - 2, i + 2} { // a second change, before or after
				if j < 2 || j >= n {
					continue
				}
				ls := slices.Clone(ls)
				ls[j].Payload = "also changed"
				want, _ := walk(ls)
				if got, _ := batched(ls); got != want {
					t.Errorf("%s changed at leaf %d, a payload at %d: batched %q, walked %q", name, i, j, got, want)
				}
			}
		}
	}
}

// leaves is a log of n leaves of five sagas' journals, interleaved.
func leaves(n int) []Leaf {
	heads := map[string]head{}
	at := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	ls := make([]Leaf, n)
	for i := range ls {
		saga := fmt.Sprintf("saga-%d", i*7%5)
		h, ok := heads[saga]
		if !ok {
			h = head{0, engine.ZeroHash, -1}
		}
		e := engine.Entry{SagaID: saga, Seq: h.seq + 1, ToolName: "t", Phase: engine.PhaseIntent,
			Input: fmt.Sprintf(`{"n":%d}`, i), Timestamp: at.Add(time.Duration(i) * time.Millisecond), Leaf: int64(i)}
		e.Hash = engine.Hash(h.hash, e)
		heads[saga] = head{e.Seq, e.Hash, e.Leaf}
		ls[i] = Leaf{Entry: e}
	}
	return ls
}
