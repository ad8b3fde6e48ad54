package engine

import (
	"context"
	"slices"
	"time"

	"github.com/sagacity-go/sagacity/evidence"
)

// What waits for people: the pending requests, as a list shows them, and
// the backlog the metrics count.

// Approved reports whether a pending request has its quorum.
func (p Pending) Approved() bool { return len(p.Voters) >= max(p.Quorum, 1) }

// MaxPage caps a page of requests or sagas.
const MaxPage = 200

// Pending lists pending requests, oldest first, a page of at most
// f.Limit (1..MaxPage, 0 means 50) read forwards from the oldest or
// f.After, or backwards from the newest (f.Last) or f.Before, and counts
// all that f selects. With f.ForMe, only those p may vote on and has not
// (the engine sets f.Voter; a caller's is ignored).
// Errors: Forbidden as Can says for ActReview, Invalid when more than one
// of f.After, f.Before and f.Last is set, Unavailable when the store is.
func (e *Engine) Pending(ctx context.Context, p Principal, f PendingFilter) ([]Pending, int, error) {
	if err := e.Can(p, ActReview, Subject{}); err != nil {
		return nil, 0, err
	}
	if (f.After != nil && f.Backward()) || (f.Before != nil && f.Last) {
		return nil, 0, Errorf(Invalid, "a page starts from one place: after, before or the last")
	}
	f.Limit = clamp(f.Limit, 50, MaxPage)
	f.Voter = nil
	if f.ForMe {
		v, err := e.voter(ctx, p)
		if err != nil {
			return nil, 0, err
		}
		f.Voter = v
	}
	page, err := e.store.Pending(ctx, f)
	if err != nil {
		return nil, 0, err
	}
	if err := e.superseded(ctx, page); err != nil {
		return nil, 0, err
	}
	n, err := e.store.CountPending(ctx, f)
	return page, n, err
}

// superseded sets SupersededBy on the requests of page that the saga
// proposed again later, as the saga's lifecycle says (ReadLifecycle):
// only those sagas' journals are read, once each.
func (e *Engine) superseded(ctx context.Context, page []Pending) error {
	lives := map[string]Lifecycle{}
	for i := range page {
		p := &page[i]
		if !p.Later {
			continue
		}
		lc, ok := lives[p.SagaID]
		if !ok {
			es, err := e.store.Entries(ctx, p.SagaID)
			if err != nil {
				return err
			}
			lc, _ = evidence.ReadLifecycle(es)
			lives[p.SagaID] = lc
		}
		if l := lc.Requests[p.JournalSeq]; l != nil {
			p.SupersededBy = l.SupersededBy
		}
	}
	return nil
}

// Backlog is what waits for people, as of one moment.
type Backlog struct {
	Pending []ToolPending // by tool
	// Oldest is how long the oldest pending request has waited; 0 when
	// none is pending.
	Oldest time.Duration
	// InDoubt counts the calls in doubt (see Engine.InDoubt), up to the
	// store's cap on one listing.
	InDoubt int
	// Outbox is how the notifications' deliveries stand, by endpoint;
	// none without notifications.
	Outbox []EndpointStats
	// Unmeetable counts the rules of the policy in force that the people
	// known cannot meet (RuleHealth.Unmeetable).
	Unmeetable int
	// Unratified counts the break-glass executions their rules' quorums
	// have not ratified, Overdue those of them past their window, up to
	// the cap on one listing.
	Unratified, Overdue int
}

// Backlog counts what waits for people: pending requests by tool, how
// long the oldest has waited, and the calls in doubt. It takes no
// principal: the metrics ask it at each scrape, and whoever reads them is
// asked for ActMetrics where they are served. Errors: Unavailable when
// the store is.
func (e *Engine) Backlog(ctx context.Context) (Backlog, error) {
	pending, err := e.store.PendingByTool(ctx)
	if err != nil {
		return Backlog{}, err
	}
	now := e.now()
	b := Backlog{Pending: pending}
	for _, p := range pending {
		b.Oldest = max(b.Oldest, now.Sub(p.Oldest))
	}
	calls, err := e.inDoubt("", e.window(), e.stored(ctx))
	if err != nil {
		return Backlog{}, err
	}
	b.InDoubt = len(calls)
	if b.Unmeetable, err = e.unmeetableRules(ctx); err != nil {
		return Backlog{}, err
	}
	uses, err := e.store.Unratified(ctx, MaxList)
	if err != nil {
		return Backlog{}, err
	}
	for _, u := range uses {
		b.Unratified++
		if u.Overdue(now) {
			b.Overdue++
		}
	}
	if len(e.endpoints) == 0 {
		return b, nil
	}
	if b.Outbox, err = e.store.OutboxStats(ctx); err != nil {
		return Backlog{}, err
	}
	for _, ep := range e.endpoints {
		if !slices.ContainsFunc(b.Outbox, func(s EndpointStats) bool { return s.Name == ep.Name }) {
			b.Outbox = append(b.Outbox, EndpointStats{Name: ep.Name}) // nothing waits for it
		}
	}
	return b, nil
}

func clamp(n, def, hi int) int {
	switch {
	case n <= 0:
		return def
	case n > hi:
		return hi
	}
	return n
}
