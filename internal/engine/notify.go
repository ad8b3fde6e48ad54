package engine

import (
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
// thread or not. Every endpoint hears of a break-glass, whatever it
// listens for: it is a deliberate bypass, told loudly.
func (ep Endpoint) wants(ev OutboxEvent, member bool) bool {
	switch {
	case ev.Type == wire.EventBreakGlass:
		return true
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
	if ev.SagaID != "" && ev.Type != wire.EventWaiting {
		// What a held call waits on changed (Await); a new request has
		// nobody waiting on it yet.
		if err := tx.Wake(ev.SagaID); err != nil {
			return err
		}
	}
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
		PayloadSHA256: hash, Fingerprint: Fingerprint(hash), Requester: g.Field(KeyRequester), Rule: r.Name, Quorum: t.Quorum(),
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
		when := ""
		if !t.RunsFrom.IsZero() {
			when = " from " + evidence.Moment(t.RunsFrom) + ", once its rule's wait ends"
		}
		ev = ev.said("%s is approved by %s and may be executed%s", ev.what(), strings.Join(ev.ApprovedBy, ", "), when)
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
	case DecidedCancelled:
		ev = ev.said("%s cancelled %s, their own request; the saga goes on", d.Approver, ev.what())
	default:
		ev = ev.said("%s expired without its quorum (%s); the server rejected it and the saga is compensated", ev.what(), ev.votes())
	}
	return e.tell(tx, ev)
}

// closings are the events of the decisions that close a request.
var closings = map[Decided]wire.EventType{DecidedRejected: wire.EventRejected, DecidedChanges: wire.EventChangesRequested,
	DecidedDismissed: wire.EventDismissed, DecidedExpired: wire.EventExpired, DecidedCancelled: wire.EventCancelled}

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
		return tx.Wake(s.ID) // as tell would
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
	by := "approved by " + strings.Join(ev.ApprovedBy, ", ")
	if l := lc.Requests[seq]; l.BrokenBy != "" {
		by = "by break-glass (" + l.BrokenBy + "), without its quorum"
	}
	if en.Phase == PhaseFailed {
		ev.Type, ev.Key = wire.EventFailed, fmt.Sprintf("%s/%d/%s", s.ID, en.Seq, wire.EventFailed)
		return e.tell(tx, ev.said("%s ran with the approved bytes (%s), and the tool failed; the saga is compensated", ev.what(), by))
	}
	return e.tell(tx, ev.said("%s was executed with the approved bytes (%s)", ev.what(), by))
}
