package tlog

import (
	"bytes"
	"fmt"

	"github.com/sagacity-go/sagacity/internal/engine"
	"github.com/transparency-dev/merkle/compact"
	"github.com/transparency-dev/merkle/proof"
)

// The tree is built and proved from its stored nodes alone, by pure
// functions of what reads them: the database, or the sequencer's
// transaction.

// nodeReader reads the stored hashes of nodes; one that is missing is
// left out.
type nodeReader func(ids []NodeID) (map[NodeID][]byte, error)

// rangeFactory makes compact ranges with the RFC 6962 hasher.
var rangeFactory = compact.RangeFactory{Hash: hasher.HashChildren}

// errMissing is the Conflict of a tree whose stored nodes do not hold
// together.
func errMissing(id NodeID) error {
	return engine.Errorf(engine.Conflict, "the log's node %d/%d is missing (rows deleted)", id.Level, id.Index)
}

// read reads the nodes ids names, in order; errMissing when one is not
// stored.
func read(r nodeReader, ids []NodeID) ([][]byte, error) {
	stored, err := r(ids)
	if err != nil {
		return nil, err
	}
	hashes := make([][]byte, len(ids))
	for i, id := range ids {
		if hashes[i] = stored[id]; hashes[i] == nil {
			return nil, errMissing(id)
		}
	}
	return hashes, nil
}

// rangeAt is the compact range of the first size leaves, from the stored
// nodes.
func rangeAt(r nodeReader, size int64) (*compact.Range, error) {
	ids := compact.RangeNodes(0, uint64(size), nil)
	hashes, err := read(r, ids)
	if err != nil {
		return nil, err
	}
	return rangeFactory.NewRange(0, uint64(size), hashes)
}

// rootAt is the root of the first size leaves, from the stored nodes.
func rootAt(r nodeReader, size int64) ([]byte, error) {
	cr, err := rangeAt(r, size)
	if err != nil {
		return nil, err
	}
	return cr.GetRootHash(nil)
}

// extend appends leaves (leaf hashes) to the tree of size, from its
// stored nodes, and returns its new root and the nodes to store.
func extend(r nodeReader, size int64, leaves [][]byte) (root []byte, nodes []Node, err error) {
	cr, err := rangeAt(r, size)
	if err != nil {
		return nil, nil, err
	}
	visit := func(id NodeID, h []byte) { nodes = append(nodes, Node{ID: id, Hash: bytes.Clone(h)}) }
	for _, l := range leaves {
		if err := cr.Append(l, visit); err != nil {
			return nil, nil, err
		}
	}
	root, err = cr.GetRootHash(nil)
	return root, nodes, err
}

// rehash reads a proof's nodes and hashes them into the proof.
func rehash(r nodeReader, n proof.Nodes) ([][]byte, error) {
	hashes, err := read(r, n.IDs)
	if err != nil {
		return nil, err
	}
	return n.Rehash(hashes, hasher.HashChildren)
}

// consistency proves, from the stored nodes, that the tree of size from
// is a prefix of the tree of size to.
func consistency(r nodeReader, from, to int64) ([][]byte, error) {
	if from < 0 || from > to {
		return nil, engine.Errorf(engine.Invalid, "no consistency proof from size %d to size %d", from, to)
	}
	n, err := proof.Consistency(uint64(from), uint64(to))
	if err != nil {
		return nil, err
	}
	return rehash(r, n)
}

// inclusions are the inclusion proofs, in the tree of size, of the
// entries that have a leaf below it, from one read of the stored nodes:
// Of[i] is nil for an entry the tree does not reach. Conflict when a node
// is missing.
func inclusions(r nodeReader, entries []engine.Entry, size int64) (*engine.Proofs, error) {
	ps := &engine.Proofs{TreeSize: size, Of: make([][][]byte, len(entries))}
	nodes := make([]proof.Nodes, len(entries))
	var ids []NodeID
	for i, en := range entries {
		if en.Leaf < 0 || en.Leaf >= size {
			continue
		}
		var err error
		if nodes[i], err = proof.Inclusion(uint64(en.Leaf), uint64(size)); err != nil {
			return nil, err
		}
		ids = append(ids, nodes[i].IDs...)
	}
	stored := map[NodeID][]byte{}
	if len(ids) > 0 {
		var err error
		if stored, err = r(ids); err != nil {
			return nil, err
		}
	}
	once := func(ids []NodeID) (map[NodeID][]byte, error) { return stored, nil }
	for i, en := range entries {
		if en.Leaf < 0 || en.Leaf >= size {
			continue
		}
		var err error
		if ps.Of[i], err = rehash(once, nodes[i]); err != nil {
			return nil, fmt.Errorf("proving seq=%d: %w", en.Seq, err)
		}
	}
	return ps, nil
}
