package engine

import (
	"context"
	"encoding/json"
	"slices"
	"time"

	"github.com/sagacity-go/sagacity/evidence"
	"github.com/sagacity-go/sagacity/wire"
)

// DeliveryState is where a delivery stands.
type DeliveryState string

// The delivery states.
const (
	DeliveryPending   DeliveryState = "pending"
	DeliveryDelivered DeliveryState = "delivered"
	// DeliveryFailed: given up on, after a refusal retrying cannot
	// change or a day of failures; an approver may retry it.
	DeliveryFailed DeliveryState = "failed"
	// DeliveryRefused: never sent, for its rows are not as this server
	// wrote them (seal.go); nobody may retry it.
	DeliveryRefused DeliveryState = "refused"
)

// Delivery is one event on its way to one endpoint.
type Delivery struct {
	ID       int64
	Event    OutboxEvent
	Endpoint string
	State    DeliveryState
	// Attempts counts the tries so far, a claimed one included; Next is
	// when it is due, Created when it was written.
	Attempts      int
	Next, Created time.Time
	// Last is the latest attempt's time, status and error.
	LastAt     time.Time
	LastStatus int
	LastError  string
	// Thread is what the endpoint answered the first message of the
	// delivery's thread with; First reports that none was delivered
	// yet, so this one is the first.
	Thread string
	First  bool
	// Owner holds it until Lease, once claimed.
	Owner string
	Lease time.Time
	// Seal is its row's seal, over its event, endpoint and RowThread,
	// the thread its row names; HandleSeal is the seal of its thread's
	// Thread. The engine opens them before anything is sent (seal.go).
	Seal, RowThread, HandleSeal string
}

// Claim asks for due deliveries: Owner (a live runner) leases at most
// Limit of them, due at Now, until Until; a lease whose owner was last
// seen before Alive is over.
type Claim struct {
	Owner             string
	Now, Until, Alive time.Time
	Limit             int
}

// Attempt is one try of a delivery and what comes of it.
type Attempt struct {
	At     time.Time
	Status int    // what the endpoint answered, 0 for nothing
	Error  string // "" when it took it
	// State is the delivery's state after it, Next its next try while
	// pending.
	State DeliveryState
	Next  time.Time
	// Thread, for the first of its thread delivered, is what later
	// messages need (see Delivery.Thread).
	Thread string
	// Gone: the endpoint takes nothing more; it is disabled.
	Gone bool
}

// DeliveryFilter selects deliveries, newest first: one by its id, of a
// thread, an endpoint, in some states (empty fields select all).
type DeliveryFilter struct {
	ID       int64
	Thread   string
	Endpoint string
	States   []DeliveryState
	Limit    int
}

// EndpointStats is how an endpoint's deliveries stand: those not
// delivered yet.
type EndpointStats struct {
	Name string
	// Pending counts those due or waiting for a retry, Failing those of
	// them tried before, Failed those given up on.
	Pending, Failing, Failed int
	Oldest                   time.Time // the oldest pending one's creation
	// LastAt and LastError are of the latest failing attempt.
	LastAt    time.Time
	LastError string
	// Disabled is when a 410 stopped it, and why.
	Disabled    time.Time
	DisabledWhy string
}

// ClaimDeliveries leases at most limit due deliveries to this process
// for lease: the relay's (internal/notify), which sends each and
// records the attempt (FinishDelivery). Invalid when the process is no
// registered runner (see Heartbeat): a lease is held by a live one.
func (e *Engine) ClaimDeliveries(ctx context.Context, lease time.Duration, limit int) ([]Delivery, error) {
	owner := e.runnerID()
	if owner == "" {
		return nil, Errorf(Invalid, "deliveries are claimed by a registered process: start the Heartbeat first")
	}
	now := Truncate(e.now())
	ds, err := e.store.ClaimDeliveries(ctx, Claim{Owner: owner, Now: now, Until: now.Add(lease), Alive: now.Add(-RunnerGone), Limit: limit})
	if err != nil {
		return nil, err
	}
	sent := ds[:0]
	for _, d := range ds {
		why := e.forged(d)
		if why == "" {
			sent = append(sent, d)
			continue
		}
		e.obs.VerifyFailed(CheckedNotification)
		e.log.Warn("a notification is not one this server wrote: it is refused, not sent", "delivery", d.ID, "endpoint", d.Endpoint,
			"event", d.Event.ID, "why", why)
		if err := e.store.RefuseDelivery(ctx, d, why, now); err != nil && !IsKind(err, Conflict) {
			return nil, err
		}
	}
	return sent, nil
}

// FinishDelivery records attempt a of claimed delivery d, and the seal of
// what the endpoint answered a thread's first message with; Conflict
// when its lease was lost (another process may send it again, with the
// same event id).
func (e *Engine) FinishDelivery(ctx context.Context, d Delivery, a Attempt) error {
	return e.store.FinishDelivery(ctx, d, a, e.keys.seal(sealHandle, d.RowThread, d.Endpoint, a.Thread))
}

// unforged is ds as they are to be read: a delivery still to be sent
// whose rows are not as this server wrote them shows refused, as its
// claim makes it.
func (e *Engine) unforged(ds []Delivery) []Delivery {
	for i, d := range ds {
		if d.State != DeliveryPending && d.State != DeliveryFailed {
			continue
		}
		if why := e.forged(d); why != "" {
			ds[i].State, ds[i].LastError = DeliveryRefused, why
		}
	}
	return ds
}

// RequestInput returns the bytes of the request event ev is about (its
// AWAITING_APPROVAL entry's input), for the relay to show a few of their
// fields: only the bytes whose SHA-256 the event names, so that a journal
// row changed by another hand shows nothing the sealed event does not
// vouch for. NotFound when there is no such request; Conflict when its
// bytes are not the event's.
func (e *Engine) RequestInput(ctx context.Context, ev OutboxEvent) (string, error) {
	entries, err := e.store.Entries(ctx, ev.SagaID)
	if err != nil {
		return "", err
	}
	seq := ev.JournalSeq
	if seq < 1 || seq > int64(len(entries)) || entries[seq-1].Phase != PhaseAwaitingApproval {
		return "", Errorf(NotFound, "no request at seq=%d of saga %s", seq, ev.SagaID)
	}
	if in := entries[seq-1].Input; PayloadHash(in) == ev.PayloadSHA256 {
		return in, nil
	}
	return "", Errorf(Conflict, "the request at seq=%d of saga %s holds other bytes than its event names", seq, ev.SagaID)
}

// maxDeliveries bounds a listing of deliveries.
const maxDeliveries = 200

// Notifications lists the deliveries of the events of the request (or
// call) at seq of saga sagaID, newest first, for p, who may review it.
func (e *Engine) Notifications(ctx context.Context, p Principal, sagaID string, seq int64) ([]Delivery, error) {
	if err := e.Can(p, ActReview, Subject{}); err != nil {
		return nil, err
	}
	ds, err := e.store.Deliveries(ctx, DeliveryFilter{Thread: Thread(sagaID, seq), Limit: maxDeliveries})
	return e.unforged(ds), err
}

// Outbox says how notifications stand, for p: each endpoint's
// deliveries, and those failing, given up on or refused, newest first.
func (e *Engine) Outbox(ctx context.Context, p Principal) ([]EndpointStats, []Delivery, error) {
	if err := e.Can(p, ActOutbox, Subject{}); err != nil {
		return nil, nil, err
	}
	stats, err := e.store.OutboxStats(ctx)
	if err != nil {
		return nil, nil, err
	}
	failing, err := e.store.Deliveries(ctx, DeliveryFilter{States: []DeliveryState{DeliveryFailed, DeliveryRefused}, Limit: maxDeliveries})
	if err != nil {
		return nil, nil, err
	}
	retrying, err := e.store.Deliveries(ctx, DeliveryFilter{States: []DeliveryState{DeliveryPending}, Limit: maxDeliveries})
	if err != nil {
		return nil, nil, err
	}
	for _, d := range e.unforged(retrying) {
		if !d.LastAt.IsZero() || d.State == DeliveryRefused {
			failing = append(failing, d)
		}
	}
	return stats, e.unforged(failing), nil
}

// resent is a NotificationSaga entry's input: what was sent again, and
// by whom.
type resent struct {
	Delivery int64          `json:"delivery,omitempty"`
	Event    string         `json:"event,omitempty"`
	Type     wire.EventType `json:"type,omitempty"`
	Endpoint string         `json:"endpoint"`
	By       string         `json:"by"`
	Auth     AuthMethod     `json:"auth"`
}

// journalResent journals rec, by p, in NotificationSaga as tool, and
// runs fn in the same transaction: what was done commits with the entry
// that says who did it, or neither does.
func (e *Engine) journalResent(ctx context.Context, p Principal, tool string, rec resent, fn func(tx Tx) error) error {
	rec.By, rec.Auth = p.ID, p.Auth
	b, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	return e.journalSigned(ctx, NotificationSaga, tool, evidence.NotificationNotes, tool, string(b), nil,
		func(tx Tx, _ Entry) error { return fn(tx) })
}

// RetryDelivery makes delivery id due now, for p, journaled in
// NotificationSaga: a failed one, or one waiting for its next try.
// Forbidden as Can says for ActResend; NotFound when there is none;
// Conflict when it was delivered or refused.
func (e *Engine) RetryDelivery(ctx context.Context, p Principal, id int64) error {
	if err := e.Can(p, ActResend, Subject{}); err != nil {
		return err
	}
	ds, err := e.store.Deliveries(ctx, DeliveryFilter{ID: id, Limit: 1})
	if err != nil {
		return err
	}
	if len(ds) == 0 {
		return Errorf(NotFound, "no delivery %d", id)
	}
	d := e.unforged(ds)[0]
	if d.State != DeliveryPending && d.State != DeliveryFailed {
		return Errorf(Conflict, "delivery %d was %s already", id, d.State)
	}
	rec := resent{Delivery: id, Event: d.Event.ID, Type: d.Event.Type, Endpoint: d.Endpoint}
	return e.journalResent(ctx, p, DeliveryRetried, rec, func(tx Tx) error { return tx.RetryDelivery(id, Truncate(e.now())) })
}

// EnableEndpoint lets deliveries to endpoint name go again, for p, after
// it answered 410, journaled in NotificationSaga. Forbidden as Can says
// for ActResend; NotFound for no endpoint of that name; Conflict when it
// is not disabled.
func (e *Engine) EnableEndpoint(ctx context.Context, p Principal, name string) error {
	if err := e.Can(p, ActResend, Subject{}); err != nil {
		return err
	}
	if e.endpoint(name) == nil {
		return Errorf(NotFound, "no endpoint %q", name)
	}
	return e.journalResent(ctx, p, EndpointEnabled, resent{Endpoint: name}, func(tx Tx) error { return tx.EnableEndpoint(name) })
}

// Endpoints are the endpoints notifications go to.
func (e *Engine) Endpoints() []Endpoint { return slices.Clone(e.endpoints) }
