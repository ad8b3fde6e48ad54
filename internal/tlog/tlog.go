// Package tlog keeps the global log: every journal entry of every saga is
// also a leaf of one RFC 6962 Merkle tree, whose checkpoints (C2SP
// tlog-checkpoint) the server's key signs and publishes outside the
// database. A per-saga hash chain cannot see a saga deleted whole, its
// tail cut, or a chain recomputed end to end; the log can, against a
// checkpoint the database never held the key to forge.
//
// Entries commit with no leaf; the Sequencer appends them in batches under
// one lock every server shares (the log's state row), so the write path
// takes no global lock. The Checker compares the database with the newest
// checkpoint outside it and halts executions of IRREVERSIBLE tools while
// they differ. Each server keeps what it read of the log, each saga's
// newest logged entry: the sequencer logs only what chains on it, and
// verifying a saga holds its journal to it. The engine consumes the Log
// through the small interface it declares (engine.Log); cmd/web wires and
// starts the services.
package tlog

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/sagacity-go/sagacity/internal/engine"
	"github.com/transparency-dev/merkle/compact"
	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"
	"golang.org/x/mod/sumdb/note"
)

// NodeID names a node of the log's tree: level 0 holds the leaves.
type NodeID = compact.NodeID

// Node is a node of the log's tree and its hash.
type Node struct {
	ID   NodeID
	Hash []byte
}

// State is the log's size and root, and the public key of the servers
// that sign its checkpoints, as the database records them.
type State struct {
	Size int64
	Root []byte
	Key  string // recorded by the first server to start (Log.Claim)
}

// Leaf is a journal entry at its leaf, as the full check reads it back.
type Leaf struct {
	engine.Entry // its Leaf is the leaf's index
	// Orphan is set when the entry's saga has no row: no journal the
	// engine writes has one.
	Orphan bool
}

// Store is what the log needs of the database.
type Store interface {
	// Sequence runs fn in one write transaction holding the log's lock,
	// across processes.
	Sequence(ctx context.Context, fn func(Tx) error) error
	// LogState reads the log's size, root and key as recorded.
	LogState(ctx context.Context) (State, error)
	// LogNodes returns the stored hashes of the nodes asked for; a node
	// that is missing, or does not read, is left out.
	LogNodes(ctx context.Context, ids []NodeID) (map[NodeID][]byte, error)
	// Leaves returns the entries at leaves from to to-1, by leaf; fewer
	// when some are missing.
	Leaves(ctx context.Context, from, to int64) ([]Leaf, error)
}

// Tx is the sequencer's write transaction; it holds the log's lock.
type Tx interface {
	// State reads the log's size, root and key.
	State() (State, error)
	// Unsequenced returns up to n entries that have no leaf yet, by time,
	// saga and seq.
	Unsequenced(n int) ([]engine.Entry, error)
	// Leaves returns the entries at leaves from to to-1, as
	// Store.Leaves does.
	Leaves(from, to int64) ([]Leaf, error)
	// Nodes returns the stored hashes of the nodes asked for.
	Nodes(ids []NodeID) (map[NodeID][]byte, error)
	// Sequence gives entries (by saga and seq) the leaves first, first+1,
	// …; Conflict when one has a leaf already.
	Sequence(entries []engine.Entry, first int64) error
	// PutNodes stores nodes (Conflict when one is stored already);
	// PutState the log's new size, root and key.
	PutNodes(nodes []Node) error
	PutState(s State) error
}

// Witness keeps signed checkpoints outside the database: an append-only
// directory an operator ships elsewhere (internal/witness).
type Witness interface {
	// Publish keeps a checkpoint; it never replaces one.
	Publish(size int64, signed string) error
	// Newest returns the newest checkpoint kept and when it was kept; ""
	// when none.
	Newest() (signed string, at time.Time, err error)
	// Get returns the checkpoint kept of a size; "" when none.
	Get(size int64) (string, error)
}

var hasher = rfc6962.DefaultHasher

// LeafData is what a journal entry is in the log: its saga, its seq in
// decimal and its hash in hex, each written as its byte length in
// decimal, a colon and its bytes, with nothing between (as the chain
// writes fields). So a proof of inclusion names which entry of which saga
// it proves, and one entry can be logged only as itself.
func LeafData(sagaID string, seq int64, hash string) []byte {
	var b []byte
	for _, f := range []string{sagaID, strconv.FormatInt(seq, 10), hash} {
		b = append(strconv.AppendInt(b, int64(len(f)), 10), ':')
		b = append(b, f...)
	}
	return b
}

// LeafHash is the log's leaf hash of a journal entry: RFC 6962's hash of
// its LeafData. Invalid for an entry hash that is not 64 hex digits.
func LeafHash(e engine.Entry) ([]byte, error) {
	if b, err := hex.DecodeString(e.Hash); err != nil || len(b) != sha256.Size || strings.ToLower(e.Hash) != e.Hash {
		return nil, engine.Errorf(engine.Invalid, "entry hash %q is not 64 lowercase hex digits", e.Hash)
	}
	return hasher.HashLeaf(LeafData(e.SagaID, e.Seq, e.Hash)), nil
}

// OpenCheckpoint checks a signed checkpoint with the verifier and reads
// it. Invalid when the signature or the text is not right.
func OpenCheckpoint(signed string, v note.Verifier) (engine.Checkpoint, error) {
	n, err := note.Open([]byte(signed), note.VerifierList(v))
	if err != nil {
		return engine.Checkpoint{}, &engine.Error{Kind: engine.Invalid, Msg: "the checkpoint's signature does not verify with " + v.Name(), Err: err}
	}
	lines := strings.SplitN(n.Text, "\n", 4)
	if len(lines) < 4 {
		return engine.Checkpoint{}, engine.Errorf(engine.Invalid, "not a checkpoint: want origin, size and root lines")
	}
	size, err := strconv.ParseInt(lines[1], 10, 64)
	root, rerr := base64.StdEncoding.DecodeString(lines[2])
	switch {
	case lines[0] != v.Name():
		return engine.Checkpoint{}, engine.Errorf(engine.Invalid, "checkpoint of origin %q, not %q", lines[0], v.Name())
	case err != nil || size < 0:
		return engine.Checkpoint{}, engine.Errorf(engine.Invalid, "checkpoint size %q is not a number", lines[1])
	case rerr != nil || len(root) != sha256.Size:
		return engine.Checkpoint{}, engine.Errorf(engine.Invalid, "checkpoint root is not a base64 SHA-256")
	}
	return engine.Checkpoint{Origin: lines[0], Size: size, Root: root}, nil
}

// VerifyConsistency checks that the log old signed is a prefix of the log
// new signed, with their consistency proof (RFC 6962). Invalid when not.
func VerifyConsistency(old, new engine.Checkpoint, pr [][]byte) error {
	if old.Size > new.Size {
		return engine.Errorf(engine.Invalid, "the older checkpoint (size %d) is larger than the newer (size %d)", old.Size, new.Size)
	}
	if err := proof.VerifyConsistency(hasher, uint64(old.Size), uint64(new.Size), pr, old.Root, new.Root); err != nil {
		return &engine.Error{Kind: engine.Invalid, Msg: fmt.Sprintf("the log at size %d is not a prefix of the log at size %d: the log was rewritten", old.Size, new.Size), Err: err}
	}
	return nil
}

// VerifyProofs checks that each entry ps covers is the leaf it names of
// the tree of ps.TreeSize with root. It returns the index of the first
// entry whose proof fails (-1 when none does) and how many entries were
// proved.
func VerifyProofs(entries []engine.Entry, ps *engine.Proofs, root []byte) (bad, proved int) {
	for i, en := range entries {
		if ps.Of[i] == nil {
			continue
		}
		leaf, err := LeafHash(en)
		if err != nil || en.Leaf < 0 || proof.VerifyInclusion(hasher, uint64(en.Leaf), uint64(ps.TreeSize), leaf, ps.Of[i], root) != nil {
			return i, proved
		}
		proved++
	}
	return -1, proved
}
