package engine

import (
	"context"
	"crypto/rand"
	"encoding/base32"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sagacity-go/sagacity/evidence"
	"github.com/sagacity-go/sagacity/wire"
)

// Notifications: what people are told, and when. The engine writes each
// event to an outbox in the same transaction as the journal entry that
// causes it, so an event exists if and only if its entry committed, with
// a delivery to each endpoint that is to hear of it; internal/notify
// relays them. An event never decides anything: who may vote, how many
// and until when stay the rule's.

// Endpoint is where notifications go, as the engine routes them; the
// relay knows how to reach it.
type Endpoint struct {
	Name string
	// Events are what it is told of; everything when empty.
	Events []wire.EventType
	// Requesters, when set, limit it to the requests these identities
	// made (an agent's own endpoint); events about no request never go
	// to it.
	Requesters []string
	// OnEscalation: it is told of a request only once a step of the
	// rule's escalation names it, and then of all its later events.
	OnEscalation bool
}

// wants reports whether endpoint ep is to hear of ev, a member of its
// thread or not.
func (ep Endpoint) wants(ev OutboxEvent, member bool) bool {
	switch {
	case len(ep.Events) > 0 && !slices.Contains(ep.Events, ev.Type):
		return false
	case len(ep.Requesters) > 0 && !slices.Contains(ep.Requesters, ev.Requester):
		return false
	}
	return member || !ep.OnEscalation
}

// WithNotifications routes the events to endpoints; without it, no
// event is written.
func WithNotifications(endpoints []Endpoint) Option {
	return func(e *Engine) { e.endpoints = endpoints }
}

// OutboxEvent is an event as the outbox keeps it: the wire event without
// its links (the relay makes them from the server's public URL), and
// what routes it.
type OutboxEvent struct {
	wire.Event
	// At is when it happened (Event.Time says it in RFC 3339).
	At time.Time
	// Key names the event once: a second event of one key is not
	// written (a sweep noticing the same call in doubt twice).
	Key string
	// Thread is the request's or call's ("<saga>/<seq>"), whose events
	// each endpoint gets in order; the event's own id otherwise.
	Thread string
	// ReceiptSeq is the entry whose receipt the event links, 0 when
	// none.
	ReceiptSeq int64
	// Body is the event as written, Event's JSON; Seal the seal of the
	// whole row (seal.go). The engine sets both when it writes the
	// event; the store reads them back.
	Body, Seal string
}

// Recipient is an endpoint an event is written for, with the seals of
// its delivery and of its place among those told of the event's thread.
type Recipient struct {
	Endpoint             string
	DeliverySeal, Member string
}

// Member is an endpoint told of a thread, as the outbox holds it, with
// its row's seal.
type Member struct {
	Endpoint, Seal string
}

// Thread is the thread of the events of a saga's request or call at seq.
func Thread(sagaID string, seq int64) string { return sagaID + "/" + strconv.FormatInt(seq, 10) }

// eventID is a new event's id: "evt_" and 26 characters of base32.
func eventID() string {
	b := make([]byte, 16)
	rand.Read(b)
	return "evt_" + strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(b))
}

// Fingerprint is a payload hash's first 16 hex digits in four groups,
// for a person to compare by eye: "79c2 a241 5f1c 9e0d".
func Fingerprint(hash string) string {
	if len(hash) < 16 {
		return hash
	}
	return hash[0:4] + " " + hash[4:8] + " " + hash[8:12] + " " + hash[12:16]
}

// tell writes ev to the outbox in tx, with a delivery to each endpoint
// that wants it: those not waiting for an escalation, those already told
// of its thread, and also (a step of an escalation).
func (e *Engine) tell(tx Tx, ev OutboxEvent, also ...string) error {
	if len(e.endpoints) == 0 {
		return nil
	}
	var told []string
	if ev.Thread != "" && ev.Type != wire.EventWaiting {
		members, err := tx.Told(ev.Thread)
		if err != nil {
			return err
		}
		for _, m := range members {
			if e.keys.opens(m.Seal, sealMember, ev.Thread, m.Endpoint) {
				told = append(told, m.Endpoint)
				continue
			}
			// Told only of what an escalation step named it in, an
			// endpoint added by another hand hears nothing.
			e.obs.VerifyFailed(CheckedNotification)
			e.log.Warn("an endpoint listed among those told of a thread is not one this server wrote there; it is not told",
				"thread", ev.Thread, "endpoint", m.Endpoint)
		}
	}
	ev.ID, ev.At = eventID(), Truncate(ev.At)
	ev.Time = ev.At.Format(time.RFC3339)
	if ev.Thread == "" {
		ev.Thread = ev.ID
	}
	body, err := json.Marshal(ev.Event)
	if err != nil {
		return err
	}
	ev.Body = string(body)
	ev.Seal = e.keys.seal(sealEvent, eventParts(ev)...)
	var to []Recipient
	for _, ep := range e.endpoints {
		if ep.wants(ev, slices.Contains(told, ep.Name) || slices.Contains(also, ep.Name)) {
			to = append(to, Recipient{Endpoint: ep.Name, DeliverySeal: e.keys.seal(sealDelivery, ev.ID, ep.Name, ev.Thread),
				Member: e.keys.seal(sealMember, ev.Thread, ep.Name)})
		}
	}
	return tx.Notify(ev, to)
}

// requestEvent is event typ of the request made by entry g, under rule r
// with its votes as t, caused by the entry at seq at at.
func requestEvent(typ wire.EventType, g Entry, r Rule, t Tally, seq int64, at time.Time) OutboxEvent {
	hash := PayloadHash(g.Input)
	ev := OutboxEvent{Key: fmt.Sprintf("%s/%d/%s", g.SagaID, seq, typ), Thread: Thread(g.SagaID, g.Seq), At: at, Event: wire.Event{
		Type: typ, SagaID: g.SagaID, JournalSeq: g.Seq, Tool: g.ToolName,
		PayloadSHA256: hash, Fingerprint: Fingerprint(hash), Requester: g.Field(KeyRequester), Rule: r.Name, Quorum: max(r.Quorum, 1),
		ApprovedBy: t.Voters()}}
	if !t.Deadline.IsZero() {
		ev.ExpiresAt = t.Deadline.UTC().Format(time.RFC3339)
	}
	return ev
}

// decided adds decision d, caused by entry seq, to request event ev.
func (ev OutboxEvent) decided(d Decided, by, reason string, seq int64) OutboxEvent {
	ev.Decision, ev.DecidedBy, ev.Reason, ev.ReceiptSeq = string(d), by, reason, seq
	return ev
}

// said is ev with its message.
func (ev OutboxEvent) said(format string, args ...any) OutboxEvent {
	ev.Message = fmt.Sprintf(format, args...)
	return ev
}

// what names a request event's request, for its message.
func (ev OutboxEvent) what() string {
	return fmt.Sprintf("%s in saga %s (seq %d)", ev.Tool, ev.SagaID, ev.JournalSeq)
}

// votes says where a request event's approvals stand.
func (ev OutboxEvent) votes() string {
	s := fmt.Sprintf("%d of %d approvals", len(ev.ApprovedBy), ev.Quorum)
	if len(ev.ApprovedBy) > 0 {
		s += " (" + strings.Join(ev.ApprovedBy, ", ") + ")"
	}
	return s
}

// tellVote tells of vote d on request b, its votes standing as t after.
func (e *Engine) tellVote(tx Tx, b bound, d Decision, t Tally) error {
	typ := wire.EventVoted
	ev := requestEvent(typ, b.gated, b.rule, t, d.Receipt, d.DecidedAt).decided(d.Decided, d.Approver, d.Reason, d.Receipt)
	switch {
	case d.Decided == DecidedWithdrawn:
		ev = ev.said("%s withdrew their approval of %s: %s", d.Approver, ev.what(), ev.votes())
	case t.Met():
		ev.Type, ev.Key = wire.EventApproved, fmt.Sprintf("%s/%d/%s", ev.SagaID, d.Receipt, wire.EventApproved)
		ev = ev.said("%s is approved by %s and may be executed", ev.what(), strings.Join(ev.ApprovedBy, ", "))
	default:
		ev = ev.said("%s approved %s: %s", d.Approver, ev.what(), ev.votes())
	}
	return e.tell(tx, ev)
}

// tellClosed tells of decision d that closed request b: a rejection, a
// request for changes, a dismissal or the server's expiry.
func (e *Engine) tellClosed(tx Tx, b bound, d Decision) error {
	ev := requestEvent(closings[d.Decided], b.gated, b.rule, b.tally, d.Receipt, d.DecidedAt).decided(d.Decided, d.Approver, d.Reason, d.Receipt)
	switch d.Decided {
	case DecidedRejected:
		ev = ev.said("%s rejected %s; the saga is compensated", d.Approver, ev.what())
	case DecidedChanges:
		ev = ev.said("%s sent %s back to its agent: %s", d.Approver, ev.what(), d.Reason)
	case DecidedDismissed:
		ev = ev.said("%s dismissed %s, which a later request replaced; the saga goes on", d.Approver, ev.what())
	default:
		ev = ev.said("%s expired without its quorum (%s); the server rejected it and the saga is compensated", ev.what(), ev.votes())
	}
	return e.tell(tx, ev)
}

// closings are the events of the decisions that close a request.
var closings = map[Decided]wire.EventType{DecidedRejected: wire.EventRejected, DecidedChanges: wire.EventChangesRequested,
	DecidedDismissed: wire.EventDismissed, DecidedExpired: wire.EventExpired}

// ruleOrName is the rule request entry g is decided by, or, when it
// cannot be read here, one that only has the name g records.
func (e *Engine) ruleOrName(g Entry) Rule {
	if r, err := e.ruleIn(g); err == nil {
		return r
	}
	return Rule{Name: g.Field(KeyRule)}
}

// tellOutcome tells of the outcome en of the call that executed the
// request at seq of saga s.
func (e *Engine) tellOutcome(tx Tx, s *Saga, seq int64, en Entry) error {
	if len(e.endpoints) == 0 {
		return nil
	}
	entries, err := tx.Entries(s.ID)
	if err != nil {
		return err
	}
	lc, _ := evidence.ReadLifecycle(entries)
	g := entries[seq-1]
	r := e.ruleOrName(g)
	t := tally(g, lc.Requests[seq], r)
	ev := requestEvent(wire.EventExecuted, g, r, t, en.Seq, en.Timestamp)
	// Who decided it and why: each vote it ran on, with its receipt.
	for _, v := range t.Votes {
		ev.Votes = append(ev.Votes, wire.EventVote{By: v.Voter, Reason: entries[v.Seq-1].Field(KeyReason), JournalSeq: v.Seq})
	}
	if en.Phase == PhaseFailed {
		ev.Type, ev.Key = wire.EventFailed, fmt.Sprintf("%s/%d/%s", s.ID, en.Seq, wire.EventFailed)
		return e.tell(tx, ev.said("%s ran with the approved bytes, and the tool failed; the saga is compensated", ev.what()))
	}
	return e.tell(tx, ev.said("%s was executed with the approved bytes (approved by %s)", ev.what(), strings.Join(ev.ApprovedBy, ", ")))
}

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
