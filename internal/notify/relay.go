package notify

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sagacity-go/sagacity/internal/engine"
	"github.com/sagacity-go/sagacity/internal/payload"
	"github.com/sagacity-go/sagacity/internal/service"
	"github.com/sagacity-go/sagacity/web/templates"
	"github.com/sagacity-go/sagacity/wire"
)

// Target is an endpoint the relay sends to: its name (the engine routes
// events to it by name), its kind ("webhook", "slack", "email",
// "pagerduty") and its channel.
type Target struct {
	Name, Kind string
	Channel    Channel
}

// Observer is told of each attempt: the endpoint, its kind, and what came
// of it ("delivered", "retry", "failed", "gone").
type Observer interface {
	Attempted(endpoint, kind, outcome string)
}

// Retry bounds: the first retry after 5 seconds, each later one twice as
// late up to an hour, with a fifth of jitter; a delivery still failing a
// day after its event is given up on, as is one the endpoint refuses for
// good.
const (
	firstRetry = 5 * time.Second
	maxRetry   = time.Hour
	giveUp     = 24 * time.Hour
)

// relayEvery is how often the relay looks for due deliveries: a person
// waiting for a request's notice waits at most this long for the send.
const relayEvery = time.Second

// Relay sends the outbox's deliveries, at least once each, in order per
// thread and endpoint: a service the server runs on every replica. Two
// replicas never hold one delivery at once (the store's claim and its
// lease); a process killed mid-send leaves its deliveries to be sent
// again, with the same event id, once its lease or its runner is gone.
type Relay struct {
	Engine  *engine.Engine
	Targets []Target
	// PublicURL is the console's public URL, which links start with.
	PublicURL string
	// Every is how often it looks for due deliveries (default
	// relayEvery), Batch how many it claims at once (default 32),
	// Timeout how long one send may take (default 30s), and Lease how
	// long a claim holds (default 4 × Timeout: longer than any send).
	Every, Timeout, Lease time.Duration
	Batch                 int
	Observer              Observer
	Logger                *slog.Logger
	Now                   func() time.Time
	service.Base
}

// Start runs the relay, claiming and sending until no more are due, now
// and then every Every, until Stop or until ctx ends.
func (r *Relay) Start(ctx context.Context) error {
	// r.Run is one pass, Base.Run the service's.
	return r.Base.Run(ctx, service.Work{Loops: []service.Loop{service.Every(cmp.Or(r.Every, relayEvery), func(ctx context.Context) {
		for {
			n, err := r.Run(ctx)
			if err != nil && ctx.Err() == nil {
				r.log().Warn("relaying notifications failed; trying again", "err", err)
			}
			if n < r.batch() || err != nil {
				return
			}
		}
	})}})
}

// The relay's settings, defaults filled in.
func (r *Relay) timeout() time.Duration { return cmp.Or(r.Timeout, 30*time.Second) }
func (r *Relay) lease() time.Duration   { return cmp.Or(r.Lease, 4*r.timeout()) }
func (r *Relay) batch() int             { return cmp.Or(r.Batch, 32) }
func (r *Relay) log() *slog.Logger      { return cmp.Or(r.Logger, discard) }
func (r *Relay) now() time.Time {
	if r.Now == nil {
		return time.Now()
	}
	return r.Now()
}

var discard = slog.New(slog.DiscardHandler)

// Run claims the due deliveries once, sends them, and records what came
// of each; it returns how many it claimed.
func (r *Relay) Run(ctx context.Context) (int, error) {
	ds, err := r.Engine.ClaimDeliveries(ctx, r.lease(), r.batch())
	if err != nil {
		return 0, err
	}
	var wg sync.WaitGroup
	for _, d := range ds {
		wg.Go(func() { r.deliver(ctx, d) })
	}
	wg.Wait()
	return len(ds), nil
}

// deliver sends d and records the attempt.
func (r *Relay) deliver(ctx context.Context, d engine.Delivery) {
	t := r.target(d.Endpoint)
	var a engine.Attempt
	if t == nil {
		a = engine.Attempt{Error: "no endpoint of this name is configured any more", State: engine.DeliveryFailed}
	} else {
		m := r.message(ctx, d)
		sctx, cancel := context.WithTimeout(ctx, r.timeout())
		thread, err := t.Channel.Send(sctx, m)
		cancel()
		a = r.attempt(d, thread, err)
	}
	a.At = engine.Truncate(r.now())
	if a.State == engine.DeliveryPending && a.Next.IsZero() {
		a.Next = a.At
	}
	if r.Observer != nil && t != nil {
		r.Observer.Attempted(d.Endpoint, t.Kind, outcome(a))
	}
	if err := r.Engine.FinishDelivery(context.WithoutCancel(ctx), d, a); err != nil {
		r.log().Warn("a notification's attempt could not be recorded; it will be sent again", "endpoint", d.Endpoint,
			"event", d.Event.ID, "err", err)
		return
	}
	if a.Error != "" {
		r.log().Info("a notification was not delivered", "endpoint", d.Endpoint, "event", d.Event.ID, "type", d.Event.Type,
			"attempt", d.Attempts, "state", a.State, "next", a.Next, "err", a.Error)
	}
}

// attempt says what came of sending d: delivered, retried (after the
// backoff, or when the endpoint asked), given up on, or the endpoint
// gone.
func (r *Relay) attempt(d engine.Delivery, thread string, err error) engine.Attempt {
	now := r.now()
	if err == nil {
		return engine.Attempt{State: engine.DeliveryDelivered, Thread: thread, Status: 0}
	}
	a := engine.Attempt{Error: oneLine(err.Error()), State: engine.DeliveryPending}
	var f *Failure
	if errors.As(err, &f) {
		a.Status = f.Status
		switch {
		case f.Gone:
			a.Gone = true
			return a // pending: sent once an approver enables the endpoint again
		case f.Permanent:
			a.State = engine.DeliveryFailed
			return a
		}
	}
	if now.Sub(d.Created) >= giveUp {
		a.State = engine.DeliveryFailed
		return a
	}
	wait := backoff(d.Attempts)
	if f != nil && f.RetryAfter > 0 {
		wait = min(f.RetryAfter, giveUp)
	}
	a.Next = engine.Truncate(now.Add(wait))
	return a
}

// backoff is how long to wait before try n+1: 5s, 10s, 20s, … up to an
// hour, give or take a tenth.
func backoff(n int) time.Duration {
	d := firstRetry << min(max(n-1, 0), 20)
	d = min(d, maxRetry)
	return time.Duration(float64(d) * (0.9 + 0.2*rand.Float64()))
}

// outcome names what an attempt came to, for the observer.
func outcome(a engine.Attempt) string {
	switch {
	case a.Gone:
		return "gone"
	case a.State == engine.DeliveryDelivered:
		return "delivered"
	case a.State == engine.DeliveryFailed:
		return "failed"
	}
	return "retry"
}

func (r *Relay) target(name string) *Target {
	for i := range r.Targets {
		if r.Targets[i].Name == name {
			return &r.Targets[i]
		}
	}
	return nil
}

// fieldsShown is how many of a request's payload fields a message shows.
const fieldsShown = 4

// message is what delivery d sends: its event with absolute links, and
// for a request a few of its payload fields.
func (r *Relay) message(ctx context.Context, d engine.Delivery) Message {
	ev := d.Event.Event
	base := strings.TrimRight(r.PublicURL, "/")
	switch {
	case requestEvent(ev.Type):
		ev.Link = base + templates.RequestHref(ev.SagaID, ev.JournalSeq)
	case ev.Type == wire.EventInDoubt:
		ev.Link = base + "/in-doubt"
	case ev.Type == wire.EventCompensationFailed:
		ev.Link = base + templates.SagaHref(ev.SagaID)
	case ev.Type == wire.EventUnmeetable:
		ev.Link = base + "/policy"
	default:
		ev.Link = base + "/audit"
	}
	if d.Event.ReceiptSeq > 0 {
		ev.Receipt = base + templates.ReceiptHref(ev.SagaID, d.Event.ReceiptSeq)
	}
	ev.Votes = slices.Clone(ev.Votes)
	for i, v := range ev.Votes {
		ev.Votes[i].Receipt = base + templates.ReceiptHref(ev.SagaID, v.JournalSeq)
	}
	m := Message{Event: ev, Thread: d.Thread, First: d.First}
	if requestEvent(ev.Type) {
		if in, err := r.Engine.RequestInput(ctx, d.Event); err == nil {
			m.Fields, m.More = payload.Summary(in, fieldsShown)
		}
	}
	return m
}

// oneLine is an error as an attempt records it: one line, at most 500
// bytes of valid UTF-8.
func oneLine(s string) string {
	s = strings.Join(strings.Fields(strings.ToValidUTF8(s, "?")), " ")
	if len(s) > 500 {
		s = strings.ToValidUTF8(s[:500], "") + "…"
	}
	return s
}
