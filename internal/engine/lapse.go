package engine

import (
	"cmp"
	"context"
	"log/slog"
	"time"

	"github.com/sagacity-go/sagacity/internal/service"
)

// A rule's clocks run without anyone watching: a request whose deadline
// passes without its quorum is rejected by the server, one whose rule
// executes on approval is executed when its wait timer ends, and one
// whose grant ends before it is executed is closed, each journaled and
// its saga compensated, as a person's rejection or a refused resume
// would be. The votes and resumes that come late find it so as well;
// Lapse closes the rest, and Lapser runs it on every replica. The
// request rows only index when each is due: LapseAll reads every pending
// request's time from its journal, so that a row edited to say later, or
// never, keeps nothing alive.

// lapseBatch bounds how many requests one Lapse closes, and how many
// LapseAll reads at a time.
const lapseBatch = 100

// Lapse closes the pending requests whose rows say their time ran out:
// expired without their quorum, or approved and not executed within
// their grant; and executes those whose rule executes on approval once
// their wait timer (notBefore) ended. It returns how many it closed or
// executed. Each is decided from its verified journal and its rule,
// never from its row alone: a row that says it is due when it is not
// closes nothing, and one that disagrees with its journal, or whose
// journal does not verify, is left alone unless the journal's own clock
// ran out (verification reports it).
// Errors: Unavailable when the store is.
func (e *Engine) Lapse(ctx context.Context) (int, error) {
	due, err := e.store.DueApprovals(ctx, Truncate(e.now()), lapseBatch)
	if err != nil {
		return 0, err
	}
	keys := make([]RequestKey, 0, len(due))
	for _, r := range due {
		keys = append(keys, RequestKey{SagaID: r.SagaID, JournalSeq: r.JournalSeq})
	}
	return e.lapseAll(ctx, keys)
}

// LapseAll is Lapse for every pending request, whatever its row says of
// when it is due: it reads each one's AWAITING_APPROVAL entry, and closes
// (see Lapse) those whose time may have run out by the rule that entry
// pinned. It returns how many it closed. Errors: Unavailable when the
// store is.
func (e *Engine) LapseAll(ctx context.Context) (int, error) {
	n := 0
	var after RequestKey
	for {
		gated, err := e.store.PendingEntries(ctx, after, lapseBatch)
		if err != nil {
			return n, err
		}
		now := e.now()
		var keys []RequestKey
		for _, g := range gated {
			if e.mayRunOut(ctx, g, now) {
				keys = append(keys, RequestKey{SagaID: g.SagaID, JournalSeq: g.Seq})
			}
		}
		closed, err := e.lapseAll(ctx, keys)
		if n += closed; err != nil || len(gated) < lapseBatch {
			return n, err
		}
		after = RequestKey{SagaID: gated[len(gated)-1].SagaID, JournalSeq: gated[len(gated)-1].Seq}
	}
}

// mayRunOut reports whether the time of the request entry gated made may
// have run out by now under the rule it pinned: its deadline passed, or
// its grant would have ended had its quorum been reached at once. One
// whose rule cannot be found is for lapse to report. (A row edited to put
// off a wait timer's end executes nothing: it disagrees with its
// journal.)
func (e *Engine) mayRunOut(ctx context.Context, gated Entry, now time.Time) bool {
	hash := gated.Field(KeyPolicy)
	if hash == "" {
		return false // from before policies: no clocks
	}
	a, err := e.policyOf(ctx, hash)
	if err != nil {
		return true
	}
	r, ok := a.Rule(gated.ToolName, gated.Field(KeyRule))
	return !ok || (r.Expires > 0 && now.After(gated.Timestamp.Add(r.Expires))) || (r.Grant > 0 && now.After(gated.Timestamp.Add(r.Grant)))
}

// lapseAll closes each request of keys whose time ran out, and returns
// how many it closed; it stops at the first Unavailable.
func (e *Engine) lapseAll(ctx context.Context, keys []RequestKey) (int, error) {
	n := 0
	for _, k := range keys {
		closed, err := e.lapse(ctx, k.SagaID, k.JournalSeq)
		switch {
		case IsKind(err, Unavailable):
			return n, err
		case err != nil:
			e.log.Warn("a pending request could not be held to its clocks", "saga", k.SagaID, "seq", k.JournalSeq, "err", err)
		case closed:
			n++
		}
	}
	return n, nil
}

// lapse closes the request at seq of saga sagaID if its time ran out, or
// executes it when its rule executes on approval and its wait timer
// ended, and reports whether it did either.
func (e *Engine) lapse(ctx context.Context, sagaID string, seq int64) (bool, error) {
	closed, execute := false, false
	gone := func(Tx, string, int64) error { return nil } // closed meanwhile
	s, err := e.onPending(ctx, sagaID, seq, nil, gone, func(tx Tx, s *Saga, b bound) (err error) {
		now := e.stamp(s)
		if _, closed, err = e.runOut(tx, s, b, now); closed || err != nil {
			return err
		}
		switch {
		case b.drift != nil:
			return b.drift
		case b.life.SupersededBy != 0:
			// The saga goes on with the request that replaced it; a
			// person dismisses it or rejects it.
			return tx.PutVotes(sagaID, seq, b.tally.Voters(), b.tally.Quorum(), time.Time{})
		}
		execute = b.rule.OnApproval && b.tally.Met() && !b.tally.RunsFrom.IsZero() && !b.tally.Early(now)
		return nil
	})
	if err != nil {
		e.unknown(sagaID, err)
		return false, err
	}
	if closed {
		e.compensateNow(ctx, s)
	}
	if execute {
		// The resume reads the journal again: another process may have
		// executed it meanwhile (the claim runs it once).
		if _, err := e.executeApproved(ctx, sagaID, seq); err != nil {
			return false, err
		}
		return true, nil
	}
	return closed, nil
}

// How often the Lapser closes the requests whose rows say their time ran
// out, and reads every pending request's time from its journal, whatever
// its row says (slower: it reads every pending request).
const (
	lapseEvery    = 15 * time.Second
	lapseAllEvery = 5 * time.Minute
)

// Lapser closes the requests whose time ran out (Lapse) every Every
// (default lapseEvery), and reads every pending request's time from its
// journal (LapseAll) every All (default lapseAllEvery): a service the
// server runs.
type Lapser struct {
	Engine     *Engine
	Every, All time.Duration
	Logger     *slog.Logger
	service.Base
}

// Start runs Lapse and LapseAll now, then each at its interval, until
// Stop or until ctx ends.
func (l *Lapser) Start(ctx context.Context) error {
	log := cmp.Or(l.Logger, l.Engine.log)
	return l.Run(ctx, service.Work{Loops: []service.Loop{
		service.Every(cmp.Or(l.Every, lapseEvery), func(ctx context.Context) {
			for {
				n, err := l.Engine.Lapse(ctx)
				if err != nil && ctx.Err() == nil {
					log.Warn("closing requests whose time ran out failed; trying again later", "err", err)
				}
				if n < lapseBatch || err != nil {
					return
				}
			}
		}),
		// A policy change another process executed takes effect here.
		l.Engine.tries(log, cmp.Or(l.Every, lapseEvery), "reading the approval policy in force failed; trying again later",
			l.Engine.RefreshPolicy),
		l.Engine.tries(log, cmp.Or(l.All, lapseAllEvery), "reading every pending request's time from its journal failed; trying again later",
			func(ctx context.Context) error {
				_, err := l.Engine.LapseAll(ctx)
				return err
			}),
	}})
}
