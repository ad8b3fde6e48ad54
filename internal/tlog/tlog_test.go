package tlog

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"os"
	"testing"

	"github.com/sagacity-go/sagacity/internal/engine"
	"github.com/transparency-dev/merkle/compact"
	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"
	"github.com/transparency-dev/merkle/testonly"
)

// TestLeafVectors reproduces leaves written by an independent
// implementation (testdata/leaves.json).
func TestLeafVectors(t *testing.T) {
	b, err := os.ReadFile("testdata/leaves.json")
	if err != nil {
		t.Fatal(err)
	}
	var vf struct {
		Leaves []struct {
			SagaID             string `json:"sagaId"`
			Seq                int64  `json:"seq"`
			Hash               string `json:"hash"`
			LeafData, LeafHash string
		} `json:"leaves"`
	}
	if err := json.Unmarshal(b, &vf); err != nil || len(vf.Leaves) < 4 {
		t.Fatalf("testdata/leaves.json: %d vectors, %v", len(vf.Leaves), err)
	}
	for _, v := range vf.Leaves {
		if got := string(LeafData(v.SagaID, v.Seq, v.Hash)); got != v.LeafData {
			t.Errorf("LeafData(%q, %d, %s) = %q, want %q", v.SagaID, v.Seq, v.Hash, got, v.LeafData)
		}
		got, err := LeafHash(engine.Entry{SagaID: v.SagaID, Seq: v.Seq, Hash: v.Hash})
		if err != nil || hex.EncodeToString(got) != v.LeafHash {
			t.Errorf("LeafHash(%q, %d) = %x, %v; want %s", v.SagaID, v.Seq, got, err, v.LeafHash)
		}
	}
	for _, bad := range []string{"", "xyz", "2B8F009DCDE4115339F77250EC69761E299C66809B569F77FE75033C04F80A4B"} {
		if _, err := LeafHash(engine.Entry{SagaID: "s", Seq: 1, Hash: bad}); !engine.IsKind(err, engine.Invalid) {
			t.Errorf("LeafHash of hash %q = %v, want Invalid", bad, err)
		}
	}
}

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

// TestVerifyProofs: the inclusion proofs of a journal's entries in a
// tree of their leaves and one more, written out by hand, verify against
// its root, not another's, and not for a rewritten entry.
func TestVerifyProofs(t *testing.T) {
	var es []engine.Entry
	prev := engine.ZeroHash
	for i := range 4 {
		e := engine.Entry{SagaID: "s", Seq: int64(i + 1), ToolName: "t", Phase: engine.PhaseIntent, Leaf: int64(i)}
		e.Hash = engine.Hash(prev, e)
		prev = e.Hash
		es = append(es, e)
	}
	h := rfc6962.DefaultHasher
	var leaves [][]byte
	for _, e := range append(es, engine.Entry{SagaID: "other", Seq: 1, Hash: engine.ZeroHash}) {
		leaves = append(leaves, h.HashLeaf(LeafData(e.SagaID, e.Seq, e.Hash)))
	}
	pair := func(a, b int) []byte { return h.HashChildren(leaves[a], leaves[b]) }
	root := h.HashChildren(h.HashChildren(pair(0, 1), pair(2, 3)), leaves[4])
	ps := &engine.Proofs{TreeSize: 5, Of: [][][]byte{
		{leaves[1], pair(2, 3), leaves[4]},
		{leaves[0], pair(2, 3), leaves[4]},
		{leaves[3], pair(0, 1), leaves[4]},
		nil, // left unproved
	}}
	if bad, proved := VerifyProofs(es, ps, root); bad != -1 || proved != 3 {
		t.Errorf("VerifyProofs = %d, %d; want -1, 3", bad, proved)
	}
	if bad, _ := VerifyProofs(es, ps, leaves[0]); bad != 0 {
		t.Errorf("VerifyProofs against another root = %d, want 0", bad)
	}
	moved := append([]engine.Entry(nil), es...)
	moved[1].SagaID = "elsewhere"
	if bad, _ := VerifyProofs(moved, ps, root); bad != 1 {
		t.Errorf("VerifyProofs of an entry moved to another saga = %d, want 1", bad)
	}
	moved = append([]engine.Entry(nil), es...)
	moved[2].Seq = 9
	if bad, _ := VerifyProofs(moved, ps, root); bad != 2 {
		t.Errorf("VerifyProofs of an entry given another seq = %d, want 2", bad)
	}
}
