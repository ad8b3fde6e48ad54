package engine

import (
	"context"
	"errors"
	"time"
)

// Store is the persistence the engine needs. Implementations map their
// errors to engine kinds: a missing row is NotFound, an unreachable database
// Unavailable.
type Store interface {
	// Update runs fn in one write transaction and commits it when fn
	// returns nil; otherwise nothing fn wrote is kept. Updates that lock
	// the same saga (Tx.LockSaga, Tx.CreateSaga) run one at a time, across
	// processes sharing the database. fn may run a second time, in a new
	// transaction, when the database connection turned out dead before
	// anything fn sent had run: fn starts from what it reads. It never
	// runs again after a commit whose answer was lost: what fn wrote may
	// or may not be kept, and the error (Unavailable) wraps
	// ErrCommitUnknown.
	Update(ctx context.Context, fn func(Tx) error) error

	// Listen calls changed with the id of each saga whose requests an
	// Update changed (Tx.Wake), once that Update committed, in this
	// process or any other that shares the database; and with "" when it
	// starts listening and whenever it may have missed some (a lost
	// connection), for the listener to read again whatever it waits on.
	// It returns when ctx ends.
	Listen(ctx context.Context, changed func(sagaID string)) error

	// Saga returns one saga; NotFound when absent.
	Saga(ctx context.Context, id string) (Saga, error)
	// Sagas lists sagas, newest first; CountSagas counts them, ignoring
	// After and Limit.
	Sagas(ctx context.Context, f SagaFilter) ([]Saga, error)
	CountSagas(ctx context.Context, f SagaFilter) (int, error)
	// Entries returns a saga's journal ordered by seq; empty for an unknown saga.
	Entries(ctx context.Context, sagaID string) ([]Entry, error)
	// Snapshot reads a saga's row, journal, pending requests and, when
	// calls is set, its calls, in one read transaction, so a saga being
	// written is never seen half-way.
	Snapshot(ctx context.Context, sagaID string, calls bool) (Snapshot, error)
	// Approvals lists pending requests: every saga's ordered by creation
	// when sagaID is "", else one saga's ordered by seq.
	Approvals(ctx context.Context, sagaID string) ([]ApprovalRequest, error)
	// InDoubt lists the calls of saga sagaID, or of every saga when it
	// is "", that are running or compensating and were last touched
	// before before, or whose runner is one of gone, oldest first.
	InDoubt(ctx context.Context, sagaID string, before time.Time, gone []string) ([]Call, error)
	// CallKey returns the seq of the call a saga made under an agent's
	// idempotency key; NotFound when none.
	CallKey(ctx context.Context, sagaID, key string) (int64, error)

	// Register records a runner, and removes the row of the runner it
	// retires ("" for none) and of runners unseen for a day.
	Register(ctx context.Context, r Runner, retires string) error
	// Runners returns the runners of the calls running or compensating,
	// each as its row has it (SeenAt zero when it has none), by id.
	Runners(ctx context.Context) ([]Runner, error)
	// Beat records that runner id was alive at t; NotFound when it was
	// retired.
	Beat(ctx context.Context, id string, t time.Time) error
	// Retire removes runner id.
	Retire(ctx context.Context, id string) error
	// Pending lists pending requests with what a list shows of each,
	// oldest first; CountPending counts them, ignoring After, Before,
	// Last and Limit.
	Pending(ctx context.Context, f PendingFilter) ([]Pending, error)
	CountPending(ctx context.Context, f PendingFilter) (int, error)
	// DueApprovals lists the pending requests due at or before t (see
	// ApprovalRequest.Due), the soonest first, at most limit.
	DueApprovals(ctx context.Context, t time.Time, limit int) ([]ApprovalRequest, error)
	// PendingEntries lists the AWAITING_APPROVAL entries of the pending
	// requests after after, by saga id and seq, at most limit, each
	// without its input: what the journal says of each request a row
	// stands for (when it was made, the rule and policy it pinned),
	// whatever the row's other columns say.
	PendingEntries(ctx context.Context, after RequestKey, limit int) ([]Entry, error)
	// PutCeremony stores a WebAuthn ceremony under way, first dropping
	// those that expired before now. Conflict when its id is taken.
	PutCeremony(ctx context.Context, c Ceremony, now time.Time) error
	// TakeCeremony returns a ceremony and deletes it, so it is taken
	// once; NotFound when absent.
	TakeCeremony(ctx context.Context, id string) (Ceremony, error)
	// Passkeys lists an identity's passkeys, removed ones too, by
	// enrolment.
	Passkeys(ctx context.Context, identity string) ([]Passkey, error)
	// PendingByTool counts pending requests by tool, with when each
	// tool's oldest was made, ordered by tool.
	PendingByTool(ctx context.Context) ([]ToolPending, error)
	// LastExecuted returns the newest EXECUTED entry of a tool, in any
	// saga, from before the given time; NotFound when there is none.
	LastExecuted(ctx context.Context, tool string, before time.Time) (Entry, error)

	// DueEscalations lists the pending requests whose next escalation
	// step is due at or before t, the soonest first, at most limit.
	DueEscalations(ctx context.Context, t time.Time, limit int) ([]ApprovalRequest, error)
	// ClaimDeliveries leases the due pending deliveries c asks for, each
	// the oldest pending of its thread and endpoint, of endpoints not
	// disabled, not leased, or whose lease ran out, or whose holder is
	// another runner, gone; no two claims get one delivery while its
	// lease holds. It counts the attempt.
	ClaimDeliveries(ctx context.Context, c Claim) ([]Delivery, error)
	// FinishDelivery records attempt a of claimed delivery d and what
	// comes of it, unless d's lease was lost meanwhile (Conflict); the
	// thread's handle, when a's is the first, with handleSeal.
	FinishDelivery(ctx context.Context, d Delivery, a Attempt, handleSeal string) error
	// RefuseDelivery records that claimed delivery d is refused at at,
	// for why, unless d's lease was lost meanwhile (Conflict).
	RefuseDelivery(ctx context.Context, d Delivery, why string, at time.Time) error
	// Deliveries lists deliveries, newest first.
	Deliveries(ctx context.Context, f DeliveryFilter) ([]Delivery, error)
	// OutboxStats says how each endpoint's deliveries stand, by name.
	OutboxStats(ctx context.Context) ([]EndpointStats, error)

	// RecordPerson keeps p as what the server knows of its identity,
	// unless it knows of a later sign-in already (a later SeenAt).
	RecordPerson(ctx context.Context, p Person) error
	// People returns the people known, the most recently seen first, at
	// most limit.
	People(ctx context.Context, limit int) ([]Person, error)

	// RecordVerified keeps v as its saga's newest verification, unless
	// one made later is kept already.
	RecordVerified(ctx context.Context, v Verified) error
	// Verifications returns the verification kept of each of the sagas
	// named (at most MaxList) that has one, by saga id.
	Verifications(ctx context.Context, sagaIDs []string) ([]Verified, error)

	// Unratified returns the break-glass executions not ratified yet,
	// the oldest first, at most limit.
	Unratified(ctx context.Context, limit int) ([]GlassUse, error)
}

// ErrCommitUnknown is wrapped by the error of a Store.Update whose commit
// was sent and whose answer was lost (the connection died, the database
// went away): its writes may or may not be kept, and only what the
// database now holds can tell.
var ErrCommitUnknown = errors.New("the commit's answer was lost")

// Snapshot is one saga as of one moment.
type Snapshot struct {
	Saga     *Saga // nil when the saga has no row
	Entries  []Entry
	Requests []ApprovalRequest // pending, ordered by seq
	Calls    []Call            // ordered by seq, when asked for
}

// SagaFilter selects sagas for Store.Sagas. Sagas come newest first
// (CreatedAt, then ID, descending); After continues a listing after the
// given saga. Empty fields select everything; Limit must be positive.
type SagaFilter struct {
	Status    Status
	IDPrefix  string // the id starts with it
	Initiator string
	Tool      string // the journal has an entry of this tool
	// InDoubtBefore, when set, selects sagas with a call running or
	// compensating since before it. InDoubt asks the engine's listings
	// (Sagas, CountSagas) for the sagas with a call that has stood still
	// for the in-doubt window, by the engine's clock: they set
	// InDoubtBefore from it, so no shell computes that window itself.
	InDoubtBefore time.Time
	InDoubt       bool
	Limit         int
	After         *SagaCursor
}

// PendingFilter selects pending requests for Store.Pending. Empty fields
// select everything; requests come oldest first (CreatedAt, SagaID,
// JournalSeq). A page is the first Limit requests; After continues a
// listing after the given one; Before goes back, to the Limit requests
// just before the given one; Last asks for the newest Limit. Whichever
// way a page is read, it comes oldest first. At most one of After,
// Before and Last is set; Limit must be positive.
type PendingFilter struct {
	Tool      string
	SagaID    string
	Initiator string
	Approved  *bool // true: its quorum reached, awaiting execution; false: short of it
	// ForMe asks Engine.Pending for the requests that wait for the
	// principal's vote: it sets Voter.
	ForMe bool
	// Voter, when set, selects the requests Voter.ID may vote on and has
	// not: short of their quorum, under one of Voter.Rules, neither
	// made nor started by them, and not among their voters.
	Voter  *Voter
	Limit  int
	After  *PendingCursor
	Before *PendingCursor
	Last   bool
}

// Backward reports whether f reads a page from its newest end (Before
// or Last).
func (f PendingFilter) Backward() bool { return f.Before != nil || f.Last }

// Voter is a person looking for what waits for their vote: who they are,
// and the rules (of every policy that took effect) they are one of the
// approvers of.
type Voter struct {
	ID    string
	Rules []RuleRef
}

// RuleRef names a rule of a policy; a request from before policies has
// neither.
type RuleRef struct {
	Policy, Rule string
}

// ToolPending is how many requests for one tool are pending, and when
// the oldest of them was made.
type ToolPending struct {
	Tool   string
	Count  int
	Oldest time.Time
}

// RequestKey names a request: its saga, and the seq of its
// AWAITING_APPROVAL entry.
type RequestKey struct {
	SagaID     string
	JournalSeq int64
}

// PendingCursor is the position of one request in a listing.
type PendingCursor struct {
	CreatedAt  time.Time
	SagaID     string
	JournalSeq int64
}

// Pending is a pending request as a list shows it.
type Pending struct {
	ApprovalRequest
	Initiator string // who started the saga
	Replanned bool   // the saga proposed the same tool at an earlier seq
	Refused   bool   // a resume of the same tool in the saga was refused before
	// Later: the saga proposed the same tool at a later seq (a store
	// sets it; Engine.Pending reads from it whether the request is
	// superseded).
	Later bool
	// SupersededBy is the later request of the same tool that was
	// approved or executed, 0 when none: Engine.Pending sets it.
	SupersededBy int64
}

// SagaCursor is the position of one saga in a listing.
type SagaCursor struct {
	CreatedAt time.Time
	ID        string
}

// Tx is a write transaction. It carries the context given to Store.Update.
//
// Writes (PutSaga, Append, PutApproval, PutCall) may be held back and sent
// with the transaction's next read or its commit; their errors are then
// that read's, or Update's. Either way the transaction keeps nothing.
type Tx interface {
	// LockSaga reads a saga and holds it until the transaction ends;
	// NotFound when absent.
	LockSaga(id string) (Saga, error)
	// LockSagaCall is LockSaga that also reads the state of the saga's
	// call at seq, "" when there is none, in the same round trip.
	LockSagaCall(id string, seq int64) (Saga, CallState, error)
	// LockAs locks saga s.ID on the promise that it is s as last written
	// (status, ended, reason, head and time of its last change) and, for
	// seq > 0, that its call at seq is in state want; a store may check
	// the promise with the statements that follow instead of reading the
	// saga first. When the promise does not hold the transaction fails
	// with an error wrapping ErrStale and keeps nothing.
	LockAs(s Saga, seq int64, want CallState) error
	// CreateSaga inserts s unless a saga with its ID exists, then locks and
	// returns the stored saga.
	CreateSaga(s Saga) (Saga, error)
	// PutSaga updates a locked saga's mutable fields.
	PutSaga(s Saga) error

	// Wake says that the saga's requests changed: Store.Listen tells of
	// it once the transaction commits, and never when it does not.
	Wake(sagaID string) error

	// Append inserts a journal entry; Conflict if its seq is taken.
	Append(e Entry) error
	// Entries returns a saga's journal ordered by seq.
	Entries(sagaID string) ([]Entry, error)

	// Approval returns one pending request; NotFound when absent.
	Approval(sagaID string, seq int64) (ApprovalRequest, error)
	// PutApproval stores a pending request.
	PutApproval(r ApprovalRequest) error
	// DeleteApprovals drops a saga's pending requests: the one at seq, or
	// all of them when seq is 0. It returns how many it dropped.
	DeleteApprovals(sagaID string, seq int64) (int, error)
	// PutVotes records who stands behind a pending request, how many
	// approvals meet it now (Tally.Quorum) and when it is due (see
	// ApprovalRequest).
	PutVotes(sagaID string, seq int64, voters []string, quorum int, due time.Time) error
	// CountApprovals counts a saga's pending requests.
	CountApprovals(sagaID string) (int, error)

	// Call returns one call; NotFound when absent.
	Call(sagaID string, seq int64) (Call, error)
	// PutCall inserts or updates a call.
	PutCall(c Call) error
	// Calls returns a saga's calls in any of the given states, ordered by seq.
	Calls(sagaID string, states ...CallState) ([]Call, error)
	// InDoubt is Store.InDoubt in the transaction.
	InDoubt(sagaID string, before time.Time, gone []string) ([]Call, error)

	// PutPasskey stores an enrolled passkey; Conflict when its id is
	// taken.
	PutPasskey(k Passkey) error
	// Passkey returns one passkey; NotFound when absent.
	Passkey(id string) (Passkey, error)
	// RemovePasskey records that a passkey was removed at t.
	RemovePasskey(id string, t time.Time) error
	// SetSignCount records a passkey's newest signature counter.
	SetSignCount(id string, n uint32) error

	// PutCallKey records that the saga's call at seq was made under an
	// agent's idempotency key; an error wrapping ErrKeyTaken when the
	// saga has a call under that key.
	PutCallKey(sagaID, key string, seq int64) error

	// Notify writes event ev to the outbox, its body and seal as given,
	// with a delivery, due now, to each recipient, which joins its
	// thread, each row with its seal; nothing when an event of its key
	// is there already.
	Notify(ev OutboxEvent, to []Recipient) error
	// Told lists the endpoints a thread's events went to so far, with
	// their seals.
	Told(thread string) ([]Member, error)
	// RetryDelivery makes a pending or failed delivery pending again,
	// due at at; Conflict when it is neither (delivered, refused).
	RetryDelivery(id int64, at time.Time) error
	// EnableEndpoint lets deliveries to a disabled endpoint go again;
	// Conflict when it is not disabled.
	EnableEndpoint(name string) error
	// PutEscalation records that a pending request took its escalation's
	// first steps steps, the next due at next (zero for none).
	PutEscalation(sagaID string, seq int64, steps int, next time.Time) error
	// PutGlassUse records a break-glass execution of a request, not
	// ratified yet.
	PutGlassUse(u GlassUse) error
	// RatifyGlass records that the break-glass execution of the request
	// at seq of saga sagaID was ratified at at.
	RatifyGlass(sagaID string, seq int64, at time.Time) error
}
