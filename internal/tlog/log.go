package tlog

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/sagacity-go/sagacity/evidence"
	"github.com/sagacity-go/sagacity/internal/engine"
	"github.com/transparency-dev/merkle/compact"
)

// Log is the global log over one database, publishing the checkpoints its
// key signs to a witness. It is safe for concurrent use, and several Logs
// (one a server) may share a database: they take turns on its lock.
type Log struct {
	store    Store
	witness  Witness
	keys     *engine.Keys
	every    int64         // sign a checkpoint after this many new leaves
	interval time.Duration // or after this long, whichever comes first
	now      func() time.Time
	obs      Observer

	mu sync.Mutex
	// cp is the newest checkpoint witnessed, signed here or read from
	// the witness; it never gets smaller while the server runs, whatever
	// happens to the witness's files.
	cp        engine.Checkpoint
	signed    string
	cpAt      time.Time
	checkedAt time.Time // when the database was last compared with cp
	fullAt    time.Time // … from every journal entry
	// mismatch is what a check found, seq what the sequencer refused to
	// log, stalled why the witness takes no checkpoint: each halts
	// executions until it is lifted.
	mismatch *halt
	seq      string
	stalled  string
	// failing is when publishing a checkpoint started failing; zero
	// while it works.
	failing time.Time
	// idx is what this server read of the log, each saga's newest entry
	// and the range of the leaves read: walked from the first leaf by
	// the full check, or by the sequencer from an empty log, and
	// extended by the sequencer with what any server logs since. The
	// database cannot make it forget a saga's entries: the sequencer
	// logs only what chains on them, and verifying a saga holds its
	// journal to them.
	idx index
	// sequencing is held by a pass of the sequencer, and by the full
	// check as it replaces idx.
	sequencing sync.Mutex
	// firstFull holds the sequencer back until a full check has run.
	firstFull bool
}

// index is a walk's result: each saga's newest entry, and the range of
// the leaves walked.
type index struct {
	heads map[string]head
	r     *compact.Range
}

// halt is a check's finding: why, by which check, against the checkpoint
// of which size. Only a check at least as strong, against a checkpoint
// at least as large, lifts it.
type halt struct {
	why  string
	by   check
	size int64
}

type check int

const (
	cheap check = iota // from the tree's stored nodes
	full               // from every journal entry
)

// Options say when checkpoints are signed.
type Options struct {
	Every    int64         // after this many new leaves (default 1000)
	Interval time.Duration // or after this long (default 10s), whichever comes first
	Now      func() time.Time
	Observer Observer // told of each check that finds the database broken
	// FullCheckFirst holds the sequencer back until a full check has
	// run: a server extends no log it has not checked from every entry.
	FullCheckFirst bool
}

// Observer is told when a check finds the database's log broken (the
// metrics count it).
type Observer interface {
	VerifyFailed(what engine.Checked)
}

type unobserved struct{}

func (unobserved) VerifyFailed(engine.Checked) {}

// New makes the log over s, publishing to w, signing with k.
func New(s Store, w Witness, k *engine.Keys, o Options) *Log {
	l := &Log{store: s, witness: w, keys: k, every: cmp.Or(o.Every, 1000), interval: cmp.Or(o.Interval, 10*time.Second),
		now: o.Now, obs: o.Observer, idx: index{heads: map[string]head{}, r: rangeFactory.NewEmptyRange(0)}, firstFull: o.FullCheckFirst}
	if l.now == nil {
		l.now = time.Now
	}
	if l.obs == nil {
		l.obs = unobserved{}
	}
	return l
}

// ErrKey is wrapped by the error of a server whose key is not the one the
// database records.
var ErrKey = errors.New("the signing key is not the database's")

// sameKey refuses a log whose recorded key is not this server's: its
// database belongs to servers with another key, or the record was
// replaced.
func (l *Log) sameKey(st State) error {
	switch st.Key {
	case l.keys.VerifierKey():
		return nil
	case "":
		return &engine.Error{Kind: engine.Conflict, Msg: "the database records no signing key (the record was emptied): refusing to sign for it", Err: ErrKey}
	}
	return &engine.Error{Kind: engine.Conflict, Msg: fmt.Sprintf("the database records the signing key %s, not this server's %s: "+
		"the key or the database was replaced", st.Key, l.keys.VerifierKey()), Err: ErrKey}
}

// Claim records this server's public key as the database's the first
// time (a new database), so that no server with another key can ever
// sign for it. Conflict, naming both keys, when the database records
// another key; Unavailable when the store is.
func (l *Log) Claim(ctx context.Context) error {
	return l.store.Sequence(ctx, func(tx Tx) error {
		st, err := tx.State()
		if err != nil {
			return err
		}
		if st.Key == "" && st.Size == 0 {
			st.Key = l.keys.VerifierKey()
			return tx.PutState(st)
		}
		return l.sameKey(st)
	})
}

// Signing checks that the database still records this server's key:
// nothing may be decided with a key the database's evidence does not
// verify with. Conflict naming both keys when not.
func (l *Log) Signing(ctx context.Context) error {
	st, err := l.store.LogState(ctx)
	if err != nil {
		return err
	}
	return l.sameKey(st)
}

// Halted says why executions of IRREVERSIBLE tools are refused, "" when
// they are not: the database does not match the newest checkpoint, the
// sequencer refused entries it could not log as they are, or the witness
// has taken no checkpoint for too long.
func (l *Log) Halted() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.mismatch != nil:
		return l.mismatch.why
	case l.seq != "":
		return l.seq
	}
	return l.stalled
}

// newest is the newest checkpoint witnessed; Size 0 when none.
func (l *Log) newest() (engine.Checkpoint, string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.cp, l.signed
}

// witnessed records cp as the newest checkpoint witnessed, unless a
// larger one is.
func (l *Log) witnessed(cp engine.Checkpoint, signed string, at time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if cp.Size >= l.cp.Size {
		l.cp, l.signed, l.cpAt = cp, signed, at
	}
}

// nodes reads stored nodes from the database.
func (l *Log) nodes(ctx context.Context) nodeReader {
	return func(ids []NodeID) (map[NodeID][]byte, error) { return l.store.LogNodes(ctx, ids) }
}

// Check compares the database's log with the newest checkpoint witnessed
// (this server's, or the witness's when that is newer and extends it):
// the log must be at least that large and its first leaves must hash to
// that root. With full, every leaf is rebuilt from its saga's journal,
// each entry chained on the one before it (a rewritten or recomputed
// chain, rows copied to another saga or to none, an entry logged twice);
// without, the root comes from the tree's stored nodes (a rollback, a
// rewritten tree), which is cheap. When they differ, executions halt
// until a check at least as strong passes against a checkpoint at least
// as large. It returns the problem, or an error when the check could not
// be made (Unavailable when the store is down).
func (l *Log) Check(ctx context.Context, fullCheck bool) (string, error) {
	kind := cheap
	if fullCheck {
		kind = full
	}
	cp, problem, err := l.target(ctx)
	var w *walk
	if err == nil && problem == "" {
		problem, w, err = l.compare(ctx, cp, kind)
	}
	if err != nil {
		return "", err
	}
	if w != nil {
		l.adopt(w)
	}
	if problem != "" {
		problem = fmt.Sprintf("the database's log does not match the checkpoint signed at size %d: %s", cp.Size, problem)
		l.obs.VerifyFailed(engine.CheckedLog)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.checkedAt = l.now()
	if kind == full {
		l.fullAt, l.firstFull = l.checkedAt, false
	}
	switch h := l.mismatch; {
	case problem != "" && h != nil:
		h.why, h.by, h.size = problem, max(h.by, kind), max(h.size, cp.Size)
	case problem != "":
		l.mismatch = &halt{why: problem, by: kind, size: cp.Size}
	case h != nil && kind >= h.by && cp.Size >= h.size:
		l.mismatch = nil
	}
	return problem, nil
}

// target is the checkpoint to check the database against: the newest
// this server witnessed, or the witness's newest when that is newer (it
// is adopted once the database matches it and it extends the one this
// server knew). A witness that cannot be read, or holds a checkpoint this
// key did not sign, is a problem: what cannot be compared is not trusted.
func (l *Log) target(ctx context.Context) (engine.Checkpoint, string, error) {
	known, _ := l.newest()
	signed, at, err := l.witness.Newest()
	if err != nil {
		return known, "the checkpoints outside the database cannot be read: " + err.Error(), nil
	}
	if signed == "" {
		return known, "", nil
	}
	cp, err := OpenCheckpoint(signed, l.keys.Verifier())
	if err != nil {
		return known, "the newest checkpoint outside the database does not verify with this server's key: " + msg(err), nil
	}
	switch {
	case cp.Size < known.Size:
		// Its newer files were deleted; this server still holds the
		// newest it witnessed, and compares with that.
		return known, "", nil
	case cp.Size == known.Size && !bytes.Equal(cp.Root, known.Root):
		return known, fmt.Sprintf("the witness holds another checkpoint of size %d than this server witnessed: the log forked", cp.Size), nil
	case cp.Size == known.Size:
		return known, "", nil
	}
	if known.Size > 0 {
		pr, err := consistency(l.nodes(ctx), known.Size, cp.Size)
		if err == nil {
			err = VerifyConsistency(known, cp, pr)
		}
		if engine.IsKind(err, engine.Unavailable) {
			return known, "", err
		}
		if err != nil {
			return known, fmt.Sprintf("the witness's checkpoint of size %d does not extend the one of size %d this server witnessed: %s",
				cp.Size, known.Size, msg(err)), nil
		}
	}
	l.witnessed(cp, signed, at)
	return cp, "", nil
}

// compare says how the database's log differs from checkpoint cp, or "";
// with the full check's walk when it matches.
func (l *Log) compare(ctx context.Context, cp engine.Checkpoint, kind check) (string, *walk, error) {
	st, err := l.store.LogState(ctx)
	if err != nil {
		return "", nil, err
	}
	if err := l.sameKey(st); err != nil {
		return msg(err), nil, nil
	}
	if cp.Size == 0 {
		return "", nil, nil
	}
	if st.Size < cp.Size {
		return fmt.Sprintf("it holds %d leaves, fewer than the %d signed (rolled back, or rows deleted)", st.Size, cp.Size), nil, nil
	}
	root, err := rootAt(l.nodes(ctx), cp.Size)
	switch {
	case engine.IsKind(err, engine.Conflict):
		return "nodes of its tree are missing (rows deleted)", nil, nil
	case err != nil:
		return "", nil, err
	case !bytes.Equal(root, cp.Root):
		return "its root at that size is not the one signed (history rewritten)", nil, nil
	case kind == cheap:
		return "", nil, nil
	}
	return l.rebuild(ctx, cp)
}

// adopt makes the full check's walk the server's index unless the index
// has read as far already: both hold what the log holds.
func (l *Log) adopt(w *walk) {
	l.sequencing.Lock()
	defer l.sequencing.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	if w.size() > int64(l.idx.r.End()) {
		l.idx = index{heads: w.heads, r: w.r}
	}
}

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

// extends refuses a checkpoint that is not proved, from the stored
// nodes, to extend the newest witnessed: signing it would fork the
// log's history.
func (l *Log) extends(r nodeReader, cp engine.Checkpoint) error {
	old, _ := l.newest()
	if old.Size == 0 {
		return nil
	}
	pr, err := consistency(r, old.Size, cp.Size)
	if err == nil {
		err = VerifyConsistency(old, cp, pr)
	}
	if err != nil && !engine.IsKind(err, engine.Unavailable) {
		return &refusal{fmt.Sprintf("refusing to sign the log at size %d: it does not extend the checkpoint of size %d: %s",
			cp.Size, old.Size, msg(err))}
	}
	return err
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

// msg is an error's message for people: an engine error's Msg, or, as
// evidence.Message says it, evidence's, or the error's text.
func msg(err error) string {
	if e, ok := errors.AsType[*engine.Error](err); ok {
		return e.Msg
	}
	return evidence.Message(err)
}
