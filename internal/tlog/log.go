package tlog

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

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
