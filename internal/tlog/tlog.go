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
	"time"

	"github.com/sagacity-go/sagacity/evidence"
	"github.com/sagacity-go/sagacity/internal/engine"
	"github.com/transparency-dev/merkle/compact"
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

// hasher is the log's: RFC 6962's, as evidence checks its proofs.
var hasher = rfc6962.DefaultHasher

// The log's leaves, checkpoints and proofs are checked by package
// evidence, as anyone checks them offline; these are its functions
// under the log's names, which the stores' tests call.

// LeafHash is evidence.LeafHash.
func LeafHash(e engine.Entry) ([]byte, error) { return evidence.LeafHash(e) }

// OpenCheckpoint is evidence.OpenCheckpoint.
func OpenCheckpoint(signed string, v note.Verifier) (engine.Checkpoint, error) {
	return evidence.OpenCheckpoint(signed, v)
}

// VerifyConsistency is evidence.VerifyConsistency.
func VerifyConsistency(old, new engine.Checkpoint, pr [][]byte) error {
	return evidence.VerifyConsistency(old, new, pr)
}

// VerifyProofs is evidence.VerifyProofs.
func VerifyProofs(entries []engine.Entry, ps *engine.Proofs, root []byte) (bad, proved int) {
	return evidence.VerifyProofs(entries, ps, root)
}
