package engine

import (
	"cmp"
	"context"
	"log/slog"
	"time"
)

// A rule's clocks run without anyone watching: a request whose deadline
// passes without its quorum is rejected by the server, and one whose
// grant ends before it is executed is closed, each journaled and its saga
// compensated, as a person's rejection or a refused resume would be. The
// votes and resumes that come late find it so as well; Lapse closes the
// rest, and Lapser runs it on every replica.

// lapseBatch bounds how many requests one Lapse closes.
const lapseBatch = 100

// Lapse closes the pending requests whose time ran out: expired without
// their quorum, or approved and not executed within their grant. It
// returns how many it closed. Each is decided from its verified journal
// and its rule, never from its row alone: a row that says it is due when
// it is not is put right, and one whose journal does not verify is left
// alone (verification reports it). Errors: Unavailable when the store is.
func (e *Engine) Lapse(ctx context.Context) (int, error) {
	due, err := e.store.DueApprovals(ctx, Truncate(e.now()), lapseBatch)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, r := range due {
		closed, err := e.lapse(ctx, r.SagaID, r.JournalSeq)
		switch {
		case IsKind(err, Unavailable):
			return n, err
		case err != nil:
			e.log.Warn("a request whose time ran out could not be closed", "saga", r.SagaID, "seq", r.JournalSeq, "err", err)
		case closed:
			n++
		}
	}
	return n, nil
}

// lapse closes the request at seq of saga sagaID if its time ran out, and
// reports whether it did.
func (e *Engine) lapse(ctx context.Context, sagaID string, seq int64) (bool, error) {
	closed := false
	gone := func(Tx, string, int64) error { return nil } // closed meanwhile
	s, err := e.onRequest(ctx, sagaID, seq, gone, func(tx Tx, s *Saga, b bound) (err error) {
		if _, closed, err = e.runOut(tx, s, b, e.stamp(s)); closed || err != nil {
			return err
		}
		switch {
		case b.life.SupersededBy != 0:
			// The saga goes on with the request that replaced it; a
			// person dismisses it or rejects it.
			return tx.PutVotes(sagaID, seq, b.tally.Voters(), time.Time{})
		case !b.row.Due.Equal(b.tally.Due()):
			return tx.PutVotes(sagaID, seq, b.tally.Voters(), b.tally.Due())
		}
		return nil
	})
	if err != nil {
		e.unknown(sagaID, err)
		return false, err
	}
	if closed {
		e.compensateNow(ctx, s)
	}
	return closed, nil
}

// Lapser closes the requests whose time ran out (Lapse) every Every
// (default 15 seconds): a service the server starts.
type Lapser struct {
	Engine *Engine
	Every  time.Duration
	Logger *slog.Logger
}

// Start runs Lapse now and then every Every until ctx ends.
func (l Lapser) Start(ctx context.Context) {
	log := cmp.Or(l.Logger, l.Engine.log)
	periodically(ctx, cmp.Or(l.Every, 15*time.Second), func() {
		for {
			n, err := l.Engine.Lapse(ctx)
			if err != nil && ctx.Err() == nil {
				log.Warn("closing requests whose time ran out failed; trying again later", "err", err)
			}
			if n < lapseBatch || err != nil {
				return
			}
		}
	})
}
