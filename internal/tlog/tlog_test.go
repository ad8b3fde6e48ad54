package tlog

import (
	"bytes"
	"testing"

	"github.com/sagacity-go/sagacity/internal/engine"
	"github.com/transparency-dev/merkle/compact"
	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"
	"github.com/transparency-dev/merkle/testonly"
)

// memory is a tree's stored nodes, in memory.
type memory map[NodeID][]byte

func (m memory) read(ids []NodeID) (map[NodeID][]byte, error) {
	out := map[NodeID][]byte{}
	for _, id := range ids {
		if h, ok := m[id]; ok {
			out[id] = h
		}
	}
	return out, nil
}

// TestTree builds the tree a leaf at a time from its stored nodes and
// checks it against RFC 6962's reference vectors (transparency-dev's
// testonly): each root, and the inclusion and consistency proofs made
// from the stored nodes, as transparency-dev's verifier checks them.
func TestTree(t *testing.T) {
	inputs, roots := testonly.LeafInputs(), testonly.RootHashes() // roots[n]: the root of n leaves
	m := memory{}
	var leaves [][]byte
	for i, in := range inputs {
		leaf := rfc6962.DefaultHasher.HashLeaf(in)
		leaves = append(leaves, leaf)
		root, nodes, err := extend(m.read, int64(i), [][]byte{leaf})
		if err != nil {
			t.Fatalf("extend to %d leaves: %v", i+1, err)
		}
		for _, n := range nodes {
			m[n.ID] = n.Hash
		}
		if !bytes.Equal(root, roots[i+1]) {
			t.Errorf("root of %d leaves = %x, want %x", i+1, root, roots[i+1])
		}
		if got, err := rootAt(m.read, int64(i+1)); err != nil || !bytes.Equal(got, roots[i+1]) {
			t.Errorf("rootAt(%d) = %x, %v; want %x", i+1, got, err, roots[i+1])
		}
	}
	size := int64(len(inputs))
	es := make([]engine.Entry, size)
	for i := range es {
		es[i].Leaf = int64(i)
	}
	ps, err := inclusions(m.read, es, size)
	if err != nil {
		t.Fatal(err)
	}
	for i := range es {
		if err := proof.VerifyInclusion(rfc6962.DefaultHasher, uint64(i), uint64(size), leaves[i], ps.Of[i], roots[size]); err != nil {
			t.Errorf("inclusion of leaf %d: %v", i, err)
		}
	}
	for from := int64(1); from <= size; from++ {
		pr, err := consistency(m.read, from, size)
		if err != nil {
			t.Fatal(err)
		}
		if err := proof.VerifyConsistency(rfc6962.DefaultHasher, uint64(from), uint64(size), pr, roots[from], roots[size]); err != nil {
			t.Errorf("consistency %d → %d: %v", from, size, err)
		}
	}
	// A tree of one leaf proves it with no hashes at all.
	if one, err := inclusions(m.read, es[:1], 1); err != nil || one.Of[0] == nil || len(one.Of[0]) != 0 {
		t.Errorf("inclusions of leaf 0 in a tree of 1 = %+v, %v; want an empty proof, not none", one, err)
	}
	// A tree missing a node it needs does not hold together.
	delete(m, compact.RangeNodes(0, uint64(size), nil)[0])
	if _, err := rootAt(m.read, size); !engine.IsKind(err, engine.Conflict) {
		t.Errorf("rootAt with a node missing = %v, want Conflict", err)
	}
	if _, _, err := extend(m.read, size, leaves[:1]); !engine.IsKind(err, engine.Conflict) {
		t.Errorf("extend with a node missing = %v, want Conflict", err)
	}
}

// TestMsg: a refusal names what does not hold, never its cause: an
// engine error's message, and a checkpoint's or a proof's as evidence
// says it.
func TestMsg(t *testing.T) {
	old, cp := engine.Checkpoint{Size: 2, Root: make([]byte, 32)}, engine.Checkpoint{Size: 3, Root: make([]byte, 32)}
	err := VerifyConsistency(old, cp, nil)
	if got, want := msg(err), "the log at size 2 is not a prefix of the log at size 3: the log was rewritten"; got != want {
		t.Errorf("msg(VerifyConsistency(a proof that is none)) = %q, want %q", got, want)
	}
	if got := msg(engine.Errorf(engine.Conflict, "halted")); got != "halted" {
		t.Errorf("msg(an engine error) = %q, want its message", got)
	}
}
