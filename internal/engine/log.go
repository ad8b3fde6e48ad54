package engine

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/transparency-dev/merkle/compact"
	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"
	"golang.org/x/mod/sumdb/note"
)

// Every journal entry, of every saga, is also a leaf of one global Merkle
// log (RFC 6962; leaf data = the entry's hash), which the key signs
// checkpoints of (C2SP tlog-checkpoint) and publishes outside the
// database. A per-saga chain cannot see a saga deleted whole, its tail
// cut, or a chain recomputed end to end; the log can, against a
// checkpoint the database never held the key to forge.
//
// Entries are committed with no leaf, and a sequencer appends them to the
// log in batches, under one lock that every server shares (the log's state
// row): leaf order is the sequencer's order, which keeps each saga's
// entries in their seq order and, across sagas, follows their time. So the
// write path takes no global lock; checkpoints lag writes by the
// sequencer's interval at most.

// NodeID names a node of the log's tree: level 0 holds the leaves.
type NodeID = compact.NodeID

// LogState is the log's size and root hash, and the public key of the
// servers that sign its checkpoints, as the database records them.
type LogState struct {
	Size int64
	Root []byte
	Key  string // "" until the first server records its own
}

// LogNode is a node of the log's tree and its hash.
type LogNode struct {
	ID   NodeID
	Hash []byte
}

// LogTx is the sequencer's write transaction; it holds the log's lock.
type LogTx interface {
	// State reads the log's size and root.
	State() (LogState, error)
	// Unsequenced returns up to n entries that have no leaf yet, by time,
	// saga and seq.
	Unsequenced(n int) ([]Entry, error)
	// Nodes returns the stored hashes of the nodes asked for.
	Nodes(ids []NodeID) (map[NodeID][]byte, error)
	// Sequence gives entries (by saga and seq) the leaves first, first+1, …
	Sequence(entries []Entry, first int64) error
	// PutNodes stores nodes; PutState the log's new size and root.
	PutNodes(nodes []LogNode) error
	PutState(s LogState) error
}

// LogStore is the persistence of the global log.
type LogStore interface {
	// Sequence runs fn in one write transaction holding the log's lock,
	// across processes.
	Sequence(ctx context.Context, fn func(LogTx) error) error
	// LogState reads the log's size and root as recorded.
	LogState(ctx context.Context) (LogState, error)
	// LogNodes returns the stored hashes of the nodes asked for.
	LogNodes(ctx context.Context, ids []NodeID) (map[NodeID][]byte, error)
	// Leaves returns the entries at leaves from to to-1, by leaf; fewer
	// when some are missing.
	Leaves(ctx context.Context, from, to int64) ([]Leaf, error)
}

// Leaf is a journal entry as the log sees it.
type Leaf struct {
	Leaf   int64
	SagaID string
	Seq    int64
	Hash   string
}

// Witness keeps signed checkpoints outside the database: an append-only
// directory an operator ships elsewhere.
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

// rangeFactory makes compact ranges with the RFC 6962 hasher.
var rangeFactory = compact.RangeFactory{Hash: hasher.HashChildren}

// LeafHash is the log's leaf hash of a journal entry: RFC 6962's leaf hash
// of the entry's hash, as bytes.
func LeafHash(entryHash string) ([]byte, error) {
	b, err := hex.DecodeString(entryHash)
	if err != nil || len(b) != sha256.Size {
		return nil, Errorf(Invalid, "entry hash %q is not 64 hex digits", entryHash)
	}
	return hasher.HashLeaf(b), nil
}

// Checkpoint is a signed statement of the log's size and root.
type Checkpoint struct {
	Origin string
	Size   int64
	Root   []byte
}

// Text is the checkpoint's note text (C2SP tlog-checkpoint): the origin,
// the size in decimal and the root in base64, a line each.
func (c Checkpoint) Text() string {
	return c.Origin + "\n" + strconv.FormatInt(c.Size, 10) + "\n" + base64.StdEncoding.EncodeToString(c.Root) + "\n"
}

// OpenCheckpoint checks a signed checkpoint with the verifier and reads
// it. Invalid when the signature or the text is not right.
func OpenCheckpoint(signed string, v note.Verifier) (Checkpoint, error) {
	n, err := note.Open([]byte(signed), note.VerifierList(v))
	if err != nil {
		return Checkpoint{}, &Error{Kind: Invalid, Msg: "the checkpoint's signature does not verify with " + v.Name(), Err: err}
	}
	lines := strings.SplitN(n.Text, "\n", 4)
	if len(lines) < 4 {
		return Checkpoint{}, Errorf(Invalid, "not a checkpoint: want origin, size and root lines")
	}
	size, err := strconv.ParseInt(lines[1], 10, 64)
	root, rerr := base64.StdEncoding.DecodeString(lines[2])
	switch {
	case lines[0] != v.Name():
		return Checkpoint{}, Errorf(Invalid, "checkpoint of origin %q, not %q", lines[0], v.Name())
	case err != nil || size < 0:
		return Checkpoint{}, Errorf(Invalid, "checkpoint size %q is not a number", lines[1])
	case rerr != nil || len(root) != sha256.Size:
		return Checkpoint{}, Errorf(Invalid, "checkpoint root is not a base64 SHA-256")
	}
	return Checkpoint{Origin: lines[0], Size: size, Root: root}, nil
}

// logConfig is how the engine runs the log.
type logConfig struct {
	store    LogStore
	witness  Witness
	every    int64         // sign a checkpoint after this many new leaves
	interval time.Duration // or after this long, whichever comes first

	mu        sync.Mutex
	halted    string     // why executions are halted, "" when they are not
	cp        Checkpoint // the newest checkpoint witnessed (signed here, or read back)
	signed    string     // cp, signed
	cpAt      time.Time  // when cp was witnessed
	checkedAt time.Time  // when the database was last compared with cp
	fullAt    time.Time  // … from every journal entry
}

// WithLog runs the global log on s, publishing checkpoints to w, signed
// after every n new leaves or d, whichever comes first.
func WithLog(s LogStore, w Witness, n int64, d time.Duration) Option {
	return func(e *Engine) { e.tlog = &logConfig{store: s, witness: w, every: n, interval: d} }
}

// errNoLog answers for an engine that runs no log.
var errNoLog = Errorf(Unavailable, "this server keeps no global log")

// witnessed records cp as the newest checkpoint witnessed.
func (l *logConfig) witnessed(cp Checkpoint, signed string, at time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.cp, l.signed, l.cpAt = cp, signed, at
}

// newest is the newest checkpoint witnessed; Size 0 when none.
func (l *logConfig) newest() Checkpoint {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.cp
}

// sequenceBatch is how many entries the sequencer appends in one
// transaction.
const sequenceBatch = 2000

// Sequence appends the entries that have no leaf yet to the global log, in
// batches, and signs and publishes a checkpoint when one is due (or at
// once when force is set and the log grew since the last one). It returns
// the log's state. Safe to run in several servers at once: they take
// turns on the log's lock. Errors: Unavailable when the store is, Internal
// when the witness cannot keep a checkpoint.
func (e *Engine) Sequence(ctx context.Context, force bool) (LogState, error) {
	l := e.tlog
	if l == nil {
		return LogState{}, errNoLog
	}
	for {
		var st LogState
		var n int
		var signed string
		var cp Checkpoint
		err := l.store.Sequence(ctx, func(tx LogTx) error {
			signed = ""
			var err error
			if st, err = tx.State(); err != nil {
				return err
			}
			if err := e.sameKey(st); err != nil {
				return err
			}
			es, err := tx.Unsequenced(sequenceBatch)
			if err != nil {
				return err
			}
			n = len(es)
			if n > 0 {
				if st, err = e.appendLeaves(tx, st, es); err != nil {
					return err
				}
			}
			if n == sequenceBatch || !l.due(st.Size, e.now(), force) {
				return nil
			}
			cp = Checkpoint{Origin: e.keys.Name(), Size: st.Size, Root: st.Root}
			signed, err = e.keys.Sign(cp.Text())
			return err
		})
		if err != nil {
			return LogState{}, err
		}
		if signed != "" {
			// Published after the commit: a checkpoint outside the database
			// never covers leaves the database could still lose.
			if err := l.witness.Publish(st.Size, signed); err != nil {
				return st, fmt.Errorf("publishing the checkpoint at size %d: %w", st.Size, err)
			}
			l.witnessed(cp, signed, e.now())
		}
		if n < sequenceBatch {
			return st, nil
		}
	}
}

// sameKey refuses a log whose recorded key is not this server's: its
// database belongs to servers with another key, or the record was
// replaced.
func (e *Engine) sameKey(st LogState) error {
	if st.Key != "" && st.Key != e.keys.VerifierKey() {
		return Errorf(Conflict, "the database records the signing key %q, not this server's %q: the key or the database was replaced", st.Key, e.keys.VerifierKey())
	}
	return nil
}

// due reports whether a checkpoint at size is to be signed now.
func (l *logConfig) due(size int64, now time.Time, force bool) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	grew := size > l.cp.Size
	return grew && (force || size-l.cp.Size >= l.every || now.Sub(l.cpAt) >= l.interval)
}

// appendLeaves appends entries to the log at state st: each saga's
// entries in seq order, in the places the batch's time order gives the
// saga; it stores their leaves and the tree's new nodes, and returns the
// new state.
func (e *Engine) appendLeaves(tx LogTx, st LogState, es []Entry) (LogState, error) {
	// es comes by time; a saga written by servers whose clocks disagree
	// could have a later seq earlier in time. Keep each saga's slots, and
	// fill them with its entries by seq.
	bySaga := map[string][]Entry{}
	for _, en := range es {
		bySaga[en.SagaID] = append(bySaga[en.SagaID], en)
	}
	for _, q := range bySaga {
		slices.SortFunc(q, func(a, b Entry) int { return int(a.Seq - b.Seq) })
	}
	ordered := make([]Entry, len(es))
	for i, en := range es {
		ordered[i], bySaga[en.SagaID] = bySaga[en.SagaID][0], bySaga[en.SagaID][1:]
	}
	ids := compact.RangeNodes(0, uint64(st.Size), nil)
	stored, err := tx.Nodes(ids)
	if err != nil {
		return st, err
	}
	hashes := make([][]byte, len(ids))
	for i, id := range ids {
		if hashes[i] = stored[id]; hashes[i] == nil {
			return st, &Error{Kind: Conflict, Msg: fmt.Sprintf("the log's node %d/%d is missing: refusing to extend a tree that does not hold together", id.Level, id.Index)}
		}
	}
	r, err := rangeFactory.NewRange(0, uint64(st.Size), hashes)
	if err != nil {
		return st, err
	}
	var nodes []LogNode
	visit := func(id NodeID, h []byte) { nodes = append(nodes, LogNode{ID: id, Hash: bytes.Clone(h)}) }
	for _, en := range ordered {
		leaf, err := LeafHash(en.Hash)
		if err != nil {
			return st, err
		}
		if err := r.Append(leaf, visit); err != nil {
			return st, err
		}
	}
	root, err := r.GetRootHash(nil)
	if err != nil {
		return st, err
	}
	next := LogState{Size: st.Size + int64(len(ordered)), Root: root, Key: e.keys.VerifierKey()}
	if err := tx.Sequence(ordered, st.Size); err != nil {
		return st, err
	}
	if err := tx.PutNodes(nodes); err != nil {
		return st, err
	}
	return next, tx.PutState(next)
}

// ErrHalted is wrapped by the error a resume gets while the log does not
// match the newest checkpoint this server signed.
var ErrHalted = errors.New("executions halted")

// Halted says why executions of IRREVERSIBLE tools are refused, "" when
// they are not: the database's log does not match the newest checkpoint
// outside it.
func (e *Engine) Halted() string {
	if e.tlog == nil {
		return ""
	}
	e.tlog.mu.Lock()
	defer e.tlog.mu.Unlock()
	return e.tlog.halted
}

// CheckLog compares the database's log with the newest checkpoint the
// witness holds: the log must be at least that large, and its first
// leaves must hash to that root. With full, the root is recomputed from
// every journal entry's hash (a deleted saga, a rewritten or recomputed
// chain, rows moved between leaves); without, from the tree's stored nodes
// (a rollback, a rewritten tree), which is cheap. When they do not match,
// executions of IRREVERSIBLE tools are halted until a later check passes
// (Halted says why); reads go on. It returns the problem, or an error
// when the check could not be made (Unavailable when the store is down).
func (e *Engine) CheckLog(ctx context.Context, full bool) (problem string, err error) {
	l := e.tlog
	if l == nil {
		return "", errNoLog
	}
	if problem, err = e.checkLog(ctx, full); err != nil {
		return "", err
	}
	if problem != "" {
		e.obs.VerifyFailed(CheckedLog)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.halted, l.checkedAt = problem, e.now()
	if full {
		l.fullAt = l.checkedAt
	}
	return problem, nil
}

// checkLog is CheckLog's comparison: the problem, or "".
func (e *Engine) checkLog(ctx context.Context, full bool) (string, error) {
	l := e.tlog
	signed, at, err := l.witness.Newest()
	if err != nil {
		// Fail closed: what cannot be compared is not trusted.
		return "the checkpoints outside the database cannot be read: " + err.Error(), nil
	}
	var cp Checkpoint
	if signed != "" {
		if cp, err = OpenCheckpoint(signed, e.keys.Verifier()); err != nil {
			return "the newest checkpoint outside the database does not verify with this server's key: " + err.(*Error).Msg, nil
		}
		if cp.Size >= l.newest().Size {
			l.witnessed(cp, signed, at)
		}
	}
	problem, err := e.compare(ctx, cp, full)
	if err != nil || problem == "" {
		return problem, err
	}
	return fmt.Sprintf("the database's log does not match the checkpoint signed at size %d: %s", cp.Size, problem), nil
}

// compare says how the database's log differs from checkpoint cp, or "".
func (e *Engine) compare(ctx context.Context, cp Checkpoint, full bool) (string, error) {
	l := e.tlog
	st, err := l.store.LogState(ctx)
	if err != nil {
		return "", err
	}
	if err := e.sameKey(st); err != nil {
		return err.(*Error).Msg, nil
	}
	if cp.Size == 0 {
		return "", nil
	}
	if st.Size < cp.Size {
		return fmt.Sprintf("it holds %d leaves, fewer than the %d signed (rolled back, or rows deleted)", st.Size, cp.Size), nil
	}
	root, ok, err := e.rootAt(ctx, cp.Size)
	switch {
	case err != nil:
		return "", err
	case !ok:
		return "nodes of its tree are missing (rows deleted)", nil
	case !bytes.Equal(root, cp.Root):
		return "its root at that size is not the one signed (history rewritten)", nil
	case !full:
		return "", nil
	}
	r := rangeFactory.NewEmptyRange(0)
	for from := int64(0); from < cp.Size; from += sequenceBatch {
		to := min(from+sequenceBatch, cp.Size)
		ls, err := l.store.Leaves(ctx, from, to)
		if err != nil {
			return "", err
		}
		for i, lf := range ls {
			if want := from + int64(i); lf.Leaf != want {
				return fmt.Sprintf("leaf %d is missing (rows deleted, a saga removed)", want), nil
			}
			leaf, err := LeafHash(lf.Hash)
			if err != nil {
				return fmt.Sprintf("leaf %d (saga %s seq=%d) has no hash", lf.Leaf, lf.SagaID, lf.Seq), nil
			}
			if err := r.Append(leaf, nil); err != nil {
				return "", err
			}
		}
		if int64(len(ls)) < to-from {
			return fmt.Sprintf("leaf %d is missing (rows deleted, a saga removed)", from+int64(len(ls))), nil
		}
	}
	if root, err = r.GetRootHash(nil); err != nil {
		return "", err
	}
	if !bytes.Equal(root, cp.Root) {
		return "its root at that size, from the journal's entries, is not the one signed (history rewritten)", nil
	}
	return "", nil
}

// rootAt computes the root of the log's first size leaves from stored
// nodes; ok is false when one is missing.
func (e *Engine) rootAt(ctx context.Context, size int64) (root []byte, ok bool, err error) {
	ids := compact.RangeNodes(0, uint64(size), nil)
	stored, err := e.tlog.store.LogNodes(ctx, ids)
	if err != nil {
		return nil, false, err
	}
	hashes := make([][]byte, len(ids))
	for i, id := range ids {
		if hashes[i] = stored[id]; hashes[i] == nil {
			return nil, false, nil
		}
	}
	r, err := rangeFactory.NewRange(0, uint64(size), hashes)
	if err != nil {
		return nil, false, err
	}
	root, err = r.GetRootHash(nil)
	return root, true, err
}

// proofOf reads the hashes of a proof's nodes and rehashes them into the
// proof. NotFound when a node is missing.
func (e *Engine) proofOf(ctx context.Context, n proof.Nodes) ([][]byte, error) {
	stored, err := e.tlog.store.LogNodes(ctx, n.IDs)
	if err != nil {
		return nil, err
	}
	hashes := make([][]byte, len(n.IDs))
	for i, id := range n.IDs {
		if hashes[i] = stored[id]; hashes[i] == nil {
			return nil, Errorf(NotFound, "the log's node %d/%d is missing", id.Level, id.Index)
		}
	}
	return n.Rehash(hashes, hasher.HashChildren)
}

// VerifyConsistency checks that the log old signed is a prefix of the log
// new signed, with their consistency proof (RFC 6962). Invalid when not.
func VerifyConsistency(old, new Checkpoint, pr [][]byte) error {
	if old.Size > new.Size {
		return Errorf(Invalid, "the older checkpoint (size %d) is larger than the newer (size %d)", old.Size, new.Size)
	}
	if err := proof.VerifyConsistency(hasher, uint64(old.Size), uint64(new.Size), pr, old.Root, new.Root); err != nil {
		return &Error{Kind: Invalid, Msg: fmt.Sprintf("the log at size %d is not a prefix of the log at size %d: the log was rewritten", old.Size, new.Size), Err: err}
	}
	return nil
}

// ConsistencyProof proves that the log at size from is a prefix of the
// log at size to. Invalid for sizes out of order or beyond the log.
func (e *Engine) ConsistencyProof(ctx context.Context, p Principal, from, to int64) ([][]byte, error) {
	if err := e.Can(p, ActVerify, Subject{}); err != nil {
		return nil, err
	}
	if e.tlog == nil {
		return nil, errNoLog
	}
	st, err := e.tlog.store.LogState(ctx)
	if err != nil {
		return nil, err
	}
	if from < 0 || from > to || to > st.Size {
		return nil, Errorf(Invalid, "from and to must be sizes of the log, from no larger than to, and to at most %d", st.Size)
	}
	n, err := proof.Consistency(uint64(from), uint64(to))
	if err != nil {
		return nil, err
	}
	return e.proofOf(ctx, n)
}

// LogStatus is the global log as this server sees it.
type LogStatus struct {
	Size       int64      // leaves in the database's log
	Checkpoint Checkpoint // the newest witnessed; Size 0 when none yet
	Signed     string     // it, as a signed note
	SignedAt   time.Time  // when it was witnessed
	Halted     string     // why executions are halted, "" when they are not
	CheckedAt  time.Time  // when the database was last compared with it
	FullAt     time.Time  // … from every journal entry
}

// LogStatus reports the global log's size, the newest checkpoint outside
// the database and whether the database still matches it. Errors:
// Forbidden as Can says for ActVerify, Unavailable when the store is or
// there is no log.
func (e *Engine) LogStatus(ctx context.Context, p Principal) (LogStatus, error) {
	if err := e.Can(p, ActVerify, Subject{}); err != nil {
		return LogStatus{}, err
	}
	l := e.tlog
	if l == nil {
		return LogStatus{}, errNoLog
	}
	st, err := l.store.LogState(ctx)
	if err != nil {
		return LogStatus{}, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return LogStatus{Size: st.Size, Checkpoint: l.cp, Signed: l.signed, SignedAt: l.cpAt,
		Halted: l.halted, CheckedAt: l.checkedAt, FullAt: l.fullAt}, nil
}

// Checkpoint returns the signed checkpoint of a size this server keeps
// outside the database (0: the newest). NotFound when it keeps none of
// that size.
func (e *Engine) Checkpoint(ctx context.Context, p Principal, size int64) (string, error) {
	if err := e.Can(p, ActVerify, Subject{}); err != nil {
		return "", err
	}
	l := e.tlog
	if l == nil {
		return "", errNoLog
	}
	var signed string
	var err error
	if size == 0 {
		signed, _, err = l.witness.Newest()
	} else if size > 0 {
		signed, err = l.witness.Get(size)
	}
	if err != nil {
		return "", err
	}
	if signed == "" {
		if size == 0 {
			return "", Errorf(NotFound, "no checkpoint is signed yet")
		}
		return "", Errorf(NotFound, "this server keeps no checkpoint of size %d", size)
	}
	return signed, nil
}

// included checks a saga's journal, already verified as a chain, against
// the newest checkpoint witnessed: each entry the checkpoint covers must
// be in the log as signed (proved from the stored tree to the signed
// root), and leaves must follow seq. An entry rewritten after it was
// logged, or a chain recomputed end to end, fails here even when the
// chain holds. It returns v when there is no log or no checkpoint yet.
func (e *Engine) included(ctx context.Context, entries []Entry, v Verification) (Verification, error) {
	if e.tlog == nil || !v.Valid {
		return v, nil
	}
	cp := e.tlog.newest()
	n := len(entries)
	prev, gap := int64(-1), -1
	for i, en := range entries {
		switch {
		case en.Leaf < 0:
			if gap < 0 {
				gap = i
			}
			continue
		case gap >= 0:
			return broken(n, gap, fmt.Sprintf("seq=%d (entry %d) is not in the log, though seq=%d is", entries[gap].Seq, gap, en.Seq)), nil
		case en.Leaf <= prev:
			return broken(n, i, fmt.Sprintf("seq=%d (entry %d) is at leaf %d of the log, not after seq=%d's", en.Seq, i, en.Leaf, en.Seq-1)), nil
		}
		prev = en.Leaf
	}
	ps, err := e.proofs(ctx, entries, cp.Size)
	if err != nil {
		return v, err
	}
	if bad, proved := VerifyProofs(entries, ps, cp.Root); bad >= 0 {
		en := entries[bad]
		return broken(n, bad, fmt.Sprintf("seq=%d (entry %d) is not in the log as the checkpoint of size %d signed it: written after it was logged", en.Seq, bad, cp.Size)), nil
	} else if proved > 0 {
		v.Message += fmt.Sprintf("; %d in the log as the checkpoint of size %d signed it", proved, cp.Size)
	}
	return v, nil
}

// proofs reads the inclusion proofs of entries in the log at size, from
// the tree's stored nodes: Of[i] is nil for an entry with no leaf below
// size, and empty (not nil) for one whose proof misses a node, which no
// proof of a tree with more than one leaf is.
func (e *Engine) proofs(ctx context.Context, entries []Entry, size int64) (*Proofs, error) {
	ps := &Proofs{TreeSize: size, Of: make([][][]byte, len(entries))}
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
		if stored, err = e.tlog.store.LogNodes(ctx, ids); err != nil {
			return nil, err
		}
	}
	for i, en := range entries {
		if en.Leaf < 0 || en.Leaf >= size {
			continue
		}
		hashes := make([][]byte, len(nodes[i].IDs))
		ps.Of[i] = [][]byte{}
		for k, id := range nodes[i].IDs {
			if hashes[k] = stored[id]; hashes[k] == nil {
				hashes = nil
				break
			}
		}
		if hashes != nil {
			var err error
			if ps.Of[i], err = nodes[i].Rehash(hashes, hasher.HashChildren); err != nil {
				return nil, err
			}
		}
	}
	return ps, nil
}

// VerifyProofs checks that each entry ps covers is the leaf it names of
// the tree of ps.TreeSize with root, with the RFC 6962 hasher. It returns
// the index of the first entry whose proof fails (-1 when none does) and
// how many entries were proved.
func VerifyProofs(entries []Entry, ps *Proofs, root []byte) (bad, proved int) {
	for i, en := range entries {
		if ps.Of[i] == nil {
			continue
		}
		leaf, err := LeafHash(en.Hash)
		if err != nil || en.Leaf < 0 || proof.VerifyInclusion(hasher, uint64(en.Leaf), uint64(ps.TreeSize), leaf, ps.Of[i], root) != nil {
			return i, proved
		}
		proved++
	}
	return -1, proved
}

// Evidence returns a saga's journal with each entry's inclusion proof in
// the log at size (0: the newest checkpoint's): what `sagacity verify`
// checks offline against that checkpoint. Invalid for a size the log has
// not reached; NotFound when no checkpoint is signed yet. Errors also as
// Journal.
func (e *Engine) Evidence(ctx context.Context, p Principal, sagaID string, size int64) ([]Entry, *Proofs, error) {
	entries, err := e.Journal(ctx, p, sagaID)
	if err != nil {
		return nil, nil, err
	}
	if e.tlog == nil {
		return nil, nil, errNoLog
	}
	if size == 0 {
		if size = e.tlog.newest().Size; size == 0 {
			return nil, nil, Errorf(NotFound, "no checkpoint is signed yet: export without proofs, or try again in a moment")
		}
	}
	st, err := e.tlog.store.LogState(ctx)
	if err != nil {
		return nil, nil, err
	}
	if size < 0 || size > st.Size {
		return nil, nil, Errorf(Invalid, "the log has %d leaves: no proofs at size %d", st.Size, size)
	}
	ps, err := e.proofs(ctx, entries, size)
	if err != nil {
		return nil, nil, err
	}
	for i, pr := range ps.Of {
		if pr != nil && len(pr) == 0 && size > 1 {
			return nil, nil, &Error{Kind: Internal, Msg: fmt.Sprintf("the log's nodes proving seq=%d are missing", entries[i].Seq)}
		}
	}
	return entries, ps, nil
}
