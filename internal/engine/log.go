package engine

import (
	"context"
	"encoding/json"
	"errors"
	"iter"
	"slices"
	"time"

	"github.com/sagacity-go/sagacity/evidence"
)

// Every journal entry, of every saga, is also a leaf of one global Merkle
// log whose checkpoints the key signs and publishes outside the database
// (internal/tlog runs it). The engine asks it two things: whether
// executions are halted because the database does not match the
// checkpoints, and whether a saga's entries are in the log as signed. The
// rest (its status, checkpoints and proofs) it hands to readers the
// policy lets read them.

// Log is the global log as the engine uses it.
type Log interface {
	// Halted says why executions of IRREVERSIBLE tools are halted, ""
	// when they are not.
	Halted() string
	// Signing checks that the database records this server's signing
	// key: Conflict, naming both, when it does not.
	Signing(ctx context.Context) error
	// Logged is the newest entry of saga id the log holds, as this
	// server read the log: what the saga's journal must hold.
	Logged(id string) Logged
	// Included checks a saga's journal, whose chain v verified, against
	// the newest checkpoint and against logged, what Logged said of the
	// saga before the journal was read, and returns v with what it
	// found.
	Included(ctx context.Context, entries []Entry, v Verification, logged Logged) (Verification, error)
	// Prove returns the inclusion proofs of a saga's entries in the log
	// at size (0: the newest checkpoint's).
	Prove(ctx context.Context, entries []Entry, size int64) (*Proofs, error)
	// Status reports the log's size, newest checkpoint and checks.
	Status(ctx context.Context) (LogStatus, error)
	// Checkpoint returns the signed checkpoint of a size (0: the newest).
	Checkpoint(size int64) (string, error)
	// Consistency proves that the log at size from is a prefix of the
	// log at size to.
	Consistency(ctx context.Context, from, to int64) ([][]byte, error)
}

// WithLog proves the engine's journals by the global log l.
func WithLog(l Log) Option { return func(e *Engine) { e.tlog = l } }

// errNoLog answers for an engine that runs no log.
var errNoLog = Errorf(Unavailable, "this server keeps no global log")

// Logged is the newest entry of a saga the global log holds, as a server
// read the log's leaves: Seq 0 when they hold none of it.
type Logged struct {
	Seq  int64
	Hash string
	Leaf int64
	// Read is how many of the log's leaves the server has read: it
	// knows nothing of an entry at a later one.
	Read int64
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

// ErrHalted is wrapped by the error a resume gets while executions are
// halted.
var ErrHalted = errors.New("executions halted")

// Halted says why executions of IRREVERSIBLE tools are refused, "" when
// they are not.
func (e *Engine) Halted() string {
	if e.tlog == nil {
		return ""
	}
	return e.tlog.Halted()
}

// signing refuses a decision while the database records another signing
// key than this server's: its receipt would verify with neither.
func (e *Engine) signing(ctx context.Context) error {
	if e.tlog == nil {
		return nil
	}
	return e.tlog.Signing(ctx)
}

// LogStatus reports the global log's size, the newest checkpoint outside
// the database and whether the database still matches it. Errors:
// Forbidden as Can says for ActVerify, Unavailable when the store is or
// there is no log.
func (e *Engine) LogStatus(ctx context.Context, p Principal) (LogStatus, error) {
	if err := e.Can(p, ActVerify, Subject{}); err != nil {
		return LogStatus{}, err
	}
	if e.tlog == nil {
		return LogStatus{}, errNoLog
	}
	return e.tlog.Status(ctx)
}

// Checkpoint returns the signed checkpoint of a size this server keeps
// outside the database (0: the newest). NotFound when it keeps none of
// that size.
func (e *Engine) Checkpoint(ctx context.Context, p Principal, size int64) (string, error) {
	if err := e.Can(p, ActVerify, Subject{}); err != nil {
		return "", err
	}
	if e.tlog == nil {
		return "", errNoLog
	}
	return e.tlog.Checkpoint(size)
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
	return e.tlog.Consistency(ctx, from, to)
}

// Evidence returns a saga's journal with each entry's inclusion proof in
// the log at size (0: the newest checkpoint's), and the saga's head as
// exported, signed: what `sagacity verify` checks offline against that
// checkpoint. For a principal who may read the approval policies (as
// Policies: agents are not shown the thresholds they are held to), the
// proofs also carry the entries of PolicySaga holding the policies the
// saga's requests pin, proved at the same size, so that the check covers
// every request's votes; a pinned policy PolicySaga lacks is left out,
// for the check to report. Invalid for a size the log has not reached;
// NotFound when no checkpoint is signed yet. Errors also as Journal.
func (e *Engine) Evidence(ctx context.Context, p Principal, sagaID string, size int64) ([]Entry, *Proofs, error) {
	entries, err := e.Journal(ctx, p, sagaID)
	if err != nil {
		return nil, nil, err
	}
	if e.tlog == nil {
		return nil, nil, errNoLog
	}
	var policies, passkeys, signIns, delegations []Entry
	if e.Can(p, ActReview, Subject{}) == nil {
		if policies, err = e.pinned(ctx, entries); err != nil {
			return nil, nil, err
		}
		if passkeys, err = e.signers(ctx, entries); err != nil {
			return nil, nil, err
		}
		if signIns, err = e.signedIn(ctx, entries, passkeys); err != nil {
			return nil, nil, err
		}
		if delegations, err = e.delegationsOf(ctx, entries); err != nil {
			return nil, nil, err
		}
	}
	n, m, k, l := len(entries), len(policies), len(passkeys), len(signIns)
	ps, err := e.tlog.Prove(ctx, slices.Concat(entries, policies, passkeys, signIns, delegations), size)
	if err != nil {
		return nil, nil, err
	}
	ps.Of, ps.Policies, ps.Passkeys, ps.SignIns, ps.Delegations = ps.Of[:n:n], attach(policies, ps.Of[n:n+m:n+m]),
		attach(passkeys, ps.Of[n+m:n+m+k:n+m+k]), attach(signIns, ps.Of[n+m+k:n+m+k+l:n+m+k+l]), attach(delegations, ps.Of[n+m+k+l:])
	ps.Head, err = e.head(entries)
	return entries, ps, err
}

// head signs the head of a journal as exported now; "" for an empty one.
func (e *Engine) head(entries []Entry) (string, error) {
	if len(entries) == 0 {
		return "", nil
	}
	last := entries[len(entries)-1]
	return e.keys.Sign(Head{SagaID: last.SagaID, Seq: last.Seq, Hash: last.Hash, Time: Truncate(e.now())}.Text())
}

// pinned returns the entries of PolicySaga that hold the policies a
// journal's requests pin, each policy once, in PolicySaga's order; one
// PolicySaga does not hold is left out. Unavailable when the store is.
func (e *Engine) pinned(ctx context.Context, entries []Entry) ([]Entry, error) {
	pins := map[string]bool{}
	for _, en := range entries {
		if en.ToolName != GateTool && en.Phase == PhaseAwaitingApproval && en.Field(KeyPolicy) != "" {
			pins[en.Field(KeyPolicy)] = true
		}
	}
	if len(pins) == 0 {
		return nil, nil
	}
	docs, err := e.store.Entries(ctx, PolicySaga)
	if err != nil {
		return nil, err
	}
	var out []Entry
	for _, d := range docs {
		if h := d.Field(KeyPolicy); d.ToolName == PolicyTool && d.Phase == PhaseExecuted && pins[h] {
			out = append(out, d)
			delete(pins, h)
		}
	}
	return out, nil
}

// attach is entries with their proofs; none when there are none.
func attach(entries []Entry, of [][][]byte) Attached {
	if len(entries) == 0 {
		return Attached{}
	}
	return Attached{Entries: entries, Of: of}
}

// signers returns the entries of PasskeySaga that enrol and remove the
// passkeys a journal's votes were signed with, in PasskeySaga's order
// (not their uses: a vote's receipt carries its own assertion).
// Unavailable when the store is.
func (e *Engine) signers(ctx context.Context, entries []Entry) ([]Entry, error) {
	used := map[string]bool{}
	for r := range e.receipts(entries) {
		if r.Passkey != nil {
			used[r.Passkey.Credential] = true
		}
	}
	if len(used) == 0 {
		return nil, nil
	}
	all, err := e.store.Entries(ctx, PasskeySaga)
	if err != nil {
		return nil, err
	}
	var out []Entry
	for _, en := range all {
		var r evidence.PasskeyRecord
		if en.ToolName != PasskeyUsed && json.Unmarshal([]byte(en.Input), &r) == nil && used[r.Credential] {
			out = append(out, en)
		}
	}
	return out, nil
}

// receipts yields the receipts the engine's key signed of a journal's
// decisions on requests.
func (e *Engine) receipts(entries []Entry) iter.Seq[Receipt] {
	return func(yield func(Receipt) bool) {
		for _, en := range entries {
			if signed := ReceiptOf(en); en.ToolName == GateTool && signed != "" {
				if r, err := OpenReceipt(signed, e.keys.Verifier()); err == nil && !yield(r) {
					return
				}
			}
		}
	}
}

// delegationsOf returns the entries of DelegationSaga that record the
// delegations a journal's delegated votes name, and their revocations,
// in DelegationSaga's order. Unavailable when the store is.
func (e *Engine) delegationsOf(ctx context.Context, entries []Entry) ([]Entry, error) {
	used := map[int64]bool{}
	for r := range e.receipts(entries) {
		if r.Delegation != 0 {
			used[r.Delegation] = true
		}
	}
	if len(used) == 0 {
		return nil, nil
	}
	all, err := e.store.Entries(ctx, DelegationSaga)
	if err != nil {
		return nil, err
	}
	var out []Entry
	for _, en := range all {
		var r evidence.DelegationRecord
		if used[en.Seq] || (en.ToolName == DelegationRevoked && json.Unmarshal([]byte(en.Input), &r) == nil && used[r.Seq]) {
			out = append(out, en)
		}
	}
	return out, nil
}

// signedIn returns the entries of SignInSaga that journal the sign-ins a
// journal's decisions and its passkeys' enrolments name, and the
// provider keys those name, in SignInSaga's order (a sign-in journaled
// twice, by two processes, twice). Unavailable when the store is.
func (e *Engine) signedIn(ctx context.Context, entries, passkeys []Entry) ([]Entry, error) {
	named := map[string]bool{}
	for r := range e.receipts(entries) {
		if r.SignIn != "" && r.SignIn != SignInByAccessToken {
			named[r.SignIn] = true
		}
	}
	for _, en := range passkeys {
		var r evidence.PasskeyRecord
		if json.Unmarshal([]byte(en.Input), &r) == nil && r.SignIn != "" {
			named[r.SignIn] = true
		}
	}
	if len(named) == 0 {
		return nil, nil
	}
	all, err := e.store.Entries(ctx, SignInSaga)
	if err != nil {
		return nil, err
	}
	var out []Entry
	keys := map[string]bool{}
	for _, en := range all {
		var r evidence.SignInRecord
		if en.ToolName == SignedInTool && named[en.Field(KeySignIn)] && json.Unmarshal([]byte(en.Input), &r) == nil {
			keys[r.Key] = true
		}
	}
	for _, en := range all {
		if h := en.Field(KeySignIn); (en.ToolName == SignedInTool && named[h]) || (en.ToolName == ProviderKeyTool && keys[h]) {
			out = append(out, en)
		}
	}
	return out, nil
}

// logged is what the global log holds of saga id (see Log.Logged): read
// before the saga's journal, which must then hold it.
func (e *Engine) logged(id string) Logged {
	if e.tlog == nil {
		return Logged{}
	}
	return e.tlog.Logged(id)
}

// included checks a verified journal against the global log, and what
// it held of the saga before the journal was read.
func (e *Engine) included(ctx context.Context, entries []Entry, v Verification, logged Logged) (Verification, error) {
	if e.tlog == nil {
		return v, nil
	}
	return e.tlog.Included(ctx, entries, v, logged)
}
