package evidence

import (
	"encoding/hex"
	"encoding/json"
	"os"
	"testing"

	"github.com/transparency-dev/merkle/rfc6962"
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
		got, err := LeafHash(Entry{SagaID: v.SagaID, Seq: v.Seq, Hash: v.Hash})
		if err != nil || hex.EncodeToString(got) != v.LeafHash {
			t.Errorf("LeafHash(%q, %d) = %x, %v; want %s", v.SagaID, v.Seq, got, err, v.LeafHash)
		}
	}
	for _, bad := range []string{"", "xyz", "2B8F009DCDE4115339F77250EC69761E299C66809B569F77FE75033C04F80A4B"} {
		if _, err := LeafHash(Entry{SagaID: "s", Seq: 1, Hash: bad}); !isEvidence(err) {
			t.Errorf("LeafHash of hash %q = %v, want an *Error", bad, err)
		}
	}
}

// TestVerifyProofs: the inclusion proofs of a journal's entries in a
// tree of their leaves and one more, written out by hand, verify against
// its root, not another's, and not for a rewritten entry.
func TestVerifyProofs(t *testing.T) {
	var es []Entry
	prev := ZeroHash
	for i := range 4 {
		e := Entry{SagaID: "s", Seq: int64(i + 1), ToolName: "t", Phase: PhaseIntent, Leaf: int64(i)}
		e.Hash = Hash(prev, e)
		prev = e.Hash
		es = append(es, e)
	}
	h := rfc6962.DefaultHasher
	var leaves [][]byte
	for _, e := range append(es, Entry{SagaID: "other", Seq: 1, Hash: ZeroHash}) {
		leaves = append(leaves, h.HashLeaf(LeafData(e.SagaID, e.Seq, e.Hash)))
	}
	pair := func(a, b int) []byte { return h.HashChildren(leaves[a], leaves[b]) }
	root := h.HashChildren(h.HashChildren(pair(0, 1), pair(2, 3)), leaves[4])
	ps := &Proofs{TreeSize: 5, Of: [][][]byte{
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
	moved := append([]Entry(nil), es...)
	moved[1].SagaID = "elsewhere"
	if bad, _ := VerifyProofs(moved, ps, root); bad != 1 {
		t.Errorf("VerifyProofs of an entry moved to another saga = %d, want 1", bad)
	}
	moved = append([]Entry(nil), es...)
	moved[2].Seq = 9
	if bad, _ := VerifyProofs(moved, ps, root); bad != 2 {
		t.Errorf("VerifyProofs of an entry given another seq = %d, want 2", bad)
	}
}
