package engine

import (
	"context"
	"errors"
	"time"
)

// Observer is told what the engine does, as it happens: the metrics
// (internal/metrics) are one. The engine calls it on its hot paths, so its
// methods must be quick, never block, and be safe for concurrent use.
// Each event is reported from one place in the engine.
type Observer interface {
	// Called reports how a request to run a tool ended: an agent's call,
	// or the resume of an approved request. tool is "" when the request
	// named no registered tool or was refused before its tool was known.
	Called(tool string, end CallEnd)
	// Decided reports a person's decision once it is committed, as its
	// receipt names it: DecidedApproved, DecidedRejected, or what a call
	// in doubt came to (DecidedHappened, DecidedNotHappened,
	// DecidedUndone, DecidedNotUndone).
	Decided(decision Decided)
	// ToolRan reports how long one run of a tool's execute or compensate
	// took, whatever it returned.
	ToolRan(tool string, phase ToolPhase, took time.Duration)
	// Compensated reports a saga whose compensation ended, Compensated or
	// CompensationFailed.
	Compensated(s Status)
	// VerifyFailed reports a check that found evidence broken: a saga's
	// journal, read or about to be acted on, or the global log against
	// the newest checkpoint (which halts executions).
	VerifyFailed(what Checked)
	// StoreError reports a store operation, its transaction included,
	// that failed Unavailable or Internal while its caller still waited.
	StoreError(k Kind)
}

// CallEnd is how a request to run a tool ended, as an Observer is told.
type CallEnd string

// How requests to run a tool end.
const (
	EndExecuted CallEnd = "executed"          // the tool ran and its result is journaled
	EndAwaiting CallEnd = "awaiting_approval" // an IRREVERSIBLE tool waits for a person
	EndFailed   CallEnd = "failed"            // the tool failed; the saga is compensated
	EndInDoubt  CallEnd = "in_doubt"          // the tool ran, but its outcome could not be journaled
	// EndRefused: the engine ran nothing: bad input, an unknown tool, a
	// missing role, a saga that takes no calls, halted executions, a
	// resume without approval or with other bytes.
	EndRefused CallEnd = "refused"
	EndError   CallEnd = "error" // the store failed; nothing ran
)

// ended classifies how a call or a resume ended: its outcome, whether a
// resume was refused, and its error.
func ended(o Outcome, refused bool, err error) CallEnd {
	switch {
	case err != nil && !errors.Is(err, ErrHalted) && (KindOf(err) == Unavailable || KindOf(err) == Internal):
		return EndError
	case err != nil || refused || o == OutcomeRefused:
		return EndRefused
	case o == OutcomeExecuted:
		return EndExecuted
	case o == OutcomeAwaitingApproval:
		return EndAwaiting
	case o == OutcomeInDoubt:
		return EndInDoubt
	}
	return EndFailed
}

// ToolPhase is which of a tool's functions ran (the phase a tool signature
// binds, see toolsig).
type ToolPhase string

// Tool phases.
const (
	ToolExecute    ToolPhase = "execute"
	ToolCompensate ToolPhase = "compensate"
)

// Checked is what a verification checked.
type Checked string

// What verifications check.
const (
	CheckedJournal Checked = "journal" // a saga's journal, its receipts and its place in the log
	CheckedLog     Checked = "log"     // the global log against the newest checkpoint
	// CheckedNotification: an outbox row's seal (seal.go), when a
	// delivery is claimed or an event is routed.
	CheckedNotification Checked = "notification"
)

// WithObserver sets who is told what the engine does; the default is
// nobody.
func WithObserver(o Observer) Option { return func(e *Engine) { e.obs = o } }

// unobserved is the default Observer.
type unobserved struct{}

func (unobserved) Called(string, CallEnd)                   {}
func (unobserved) Decided(Decided)                          {}
func (unobserved) ToolRan(string, ToolPhase, time.Duration) {}
func (unobserved) Compensated(Status)                       {}
func (unobserved) VerifyFailed(Checked)                     {}
func (unobserved) StoreError(Kind)                          {}

// failing reports err to the observer when it is the store failing
// (Unavailable or Internal) while the caller of the operation, whose
// context is ctx, still waits: a caller that went away is not the store's
// failure. It returns err.
func failing(ctx context.Context, obs Observer, err error) error {
	if err != nil && ctx.Err() == nil {
		if k := KindOf(err); k == Unavailable || k == Internal {
			obs.StoreError(k)
		}
	}
	return err
}

// watched is the engine's store as the observer sees it: the one place
// where store errors are reported.
type watched struct {
	s   Store
	obs Observer
}

func (w watched) Update(ctx context.Context, fn func(Tx) error) error {
	return failing(ctx, w.obs, w.s.Update(ctx, fn))
}

func (w watched) Listen(ctx context.Context, changed func(string)) error {
	return w.s.Listen(ctx, changed)
}

func (w watched) Saga(ctx context.Context, id string) (Saga, error) {
	s, err := w.s.Saga(ctx, id)
	return s, failing(ctx, w.obs, err)
}

func (w watched) Sagas(ctx context.Context, f SagaFilter) ([]Saga, error) {
	ss, err := w.s.Sagas(ctx, f)
	return ss, failing(ctx, w.obs, err)
}

func (w watched) CountSagas(ctx context.Context, f SagaFilter) (int, error) {
	n, err := w.s.CountSagas(ctx, f)
	return n, failing(ctx, w.obs, err)
}

func (w watched) Entries(ctx context.Context, sagaID string) ([]Entry, error) {
	es, err := w.s.Entries(ctx, sagaID)
	return es, failing(ctx, w.obs, err)
}

func (w watched) Snapshot(ctx context.Context, sagaID string, calls bool) (Snapshot, error) {
	snap, err := w.s.Snapshot(ctx, sagaID, calls)
	return snap, failing(ctx, w.obs, err)
}

func (w watched) Approvals(ctx context.Context, sagaID string) ([]ApprovalRequest, error) {
	rs, err := w.s.Approvals(ctx, sagaID)
	return rs, failing(ctx, w.obs, err)
}

func (w watched) InDoubt(ctx context.Context, sagaID string, before time.Time, gone []string) ([]Call, error) {
	cs, err := w.s.InDoubt(ctx, sagaID, before, gone)
	return cs, failing(ctx, w.obs, err)
}

func (w watched) CallKey(ctx context.Context, sagaID, key string) (int64, error) {
	seq, err := w.s.CallKey(ctx, sagaID, key)
	return seq, failing(ctx, w.obs, err)
}

func (w watched) Register(ctx context.Context, r Runner, retires string) error {
	return failing(ctx, w.obs, w.s.Register(ctx, r, retires))
}

func (w watched) Runners(ctx context.Context) ([]Runner, error) {
	rs, err := w.s.Runners(ctx)
	return rs, failing(ctx, w.obs, err)
}

func (w watched) Beat(ctx context.Context, id string, t time.Time) error {
	return failing(ctx, w.obs, w.s.Beat(ctx, id, t))
}

func (w watched) Retire(ctx context.Context, id string) error {
	return failing(ctx, w.obs, w.s.Retire(ctx, id))
}

func (w watched) Pending(ctx context.Context, f PendingFilter) ([]Pending, error) {
	ps, err := w.s.Pending(ctx, f)
	return ps, failing(ctx, w.obs, err)
}

func (w watched) CountPending(ctx context.Context, f PendingFilter) (int, error) {
	n, err := w.s.CountPending(ctx, f)
	return n, failing(ctx, w.obs, err)
}

func (w watched) PendingByTool(ctx context.Context) ([]ToolPending, error) {
	ps, err := w.s.PendingByTool(ctx)
	return ps, failing(ctx, w.obs, err)
}

func (w watched) LastExecuted(ctx context.Context, tool string, before time.Time) (Entry, error) {
	en, err := w.s.LastExecuted(ctx, tool, before)
	return en, failing(ctx, w.obs, err)
}

func (w watched) DueApprovals(ctx context.Context, t time.Time, limit int) ([]ApprovalRequest, error) {
	rs, err := w.s.DueApprovals(ctx, t, limit)
	return rs, failing(ctx, w.obs, err)
}

func (w watched) PendingEntries(ctx context.Context, after RequestKey, limit int) ([]Entry, error) {
	es, err := w.s.PendingEntries(ctx, after, limit)
	return es, failing(ctx, w.obs, err)
}

func (w watched) PutCeremony(ctx context.Context, c Ceremony, now time.Time) error {
	return failing(ctx, w.obs, w.s.PutCeremony(ctx, c, now))
}

func (w watched) TakeCeremony(ctx context.Context, id string) (Ceremony, error) {
	c, err := w.s.TakeCeremony(ctx, id)
	return c, failing(ctx, w.obs, err)
}

func (w watched) Passkeys(ctx context.Context, identity string) ([]Passkey, error) {
	ks, err := w.s.Passkeys(ctx, identity)
	return ks, failing(ctx, w.obs, err)
}

func (w watched) DueEscalations(ctx context.Context, t time.Time, limit int) ([]ApprovalRequest, error) {
	rs, err := w.s.DueEscalations(ctx, t, limit)
	return rs, failing(ctx, w.obs, err)
}

func (w watched) ClaimDeliveries(ctx context.Context, c Claim) ([]Delivery, error) {
	ds, err := w.s.ClaimDeliveries(ctx, c)
	return ds, failing(ctx, w.obs, err)
}

func (w watched) FinishDelivery(ctx context.Context, d Delivery, a Attempt, handleSeal string) error {
	return failing(ctx, w.obs, w.s.FinishDelivery(ctx, d, a, handleSeal))
}

func (w watched) RefuseDelivery(ctx context.Context, d Delivery, why string, at time.Time) error {
	return failing(ctx, w.obs, w.s.RefuseDelivery(ctx, d, why, at))
}

func (w watched) Deliveries(ctx context.Context, f DeliveryFilter) ([]Delivery, error) {
	ds, err := w.s.Deliveries(ctx, f)
	return ds, failing(ctx, w.obs, err)
}

func (w watched) OutboxStats(ctx context.Context) ([]EndpointStats, error) {
	ss, err := w.s.OutboxStats(ctx)
	return ss, failing(ctx, w.obs, err)
}

func (w watched) RecordPerson(ctx context.Context, p Person) error {
	return failing(ctx, w.obs, w.s.RecordPerson(ctx, p))
}

func (w watched) People(ctx context.Context, limit int) ([]Person, error) {
	ps, err := w.s.People(ctx, limit)
	return ps, failing(ctx, w.obs, err)
}

func (w watched) RecordVerified(ctx context.Context, v Verified) error {
	return failing(ctx, w.obs, w.s.RecordVerified(ctx, v))
}

func (w watched) Verifications(ctx context.Context, sagaIDs []string) ([]Verified, error) {
	vs, err := w.s.Verifications(ctx, sagaIDs)
	return vs, failing(ctx, w.obs, err)
}

func (w watched) Unratified(ctx context.Context, limit int) ([]GlassUse, error) {
	us, err := w.s.Unratified(ctx, limit)
	return us, failing(ctx, w.obs, err)
}
