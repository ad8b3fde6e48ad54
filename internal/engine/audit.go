package engine

import (
	"context"
	"sync"
	"time"
)

// AuditRun is the verification of every saga, run in the background by
// this process, as it stands.
type AuditRun struct {
	Running bool
	// Started and Finished are zero until the run starts, and ends.
	Started, Finished time.Time
	Done, Total       int
	// Broken are the sagas whose journal does not verify, in listing
	// order, at most MaxBroken of them (Done counts them all).
	Broken []BrokenSaga
	// Err says why the run stopped before the end, for people.
	Err string
}

// BrokenSaga is a saga whose journal does not verify.
type BrokenSaga struct {
	Saga         Saga
	Verification Verification
}

// Verified is what the newest verification of a saga found, as kept, so
// that a list of sagas shows it without verifying each again. It is a
// record of work done, not evidence: verifying again reads the journal.
type Verified struct {
	SagaID       string
	Verification Verification
	// HeadSeq is the saga's newest entry when it was verified: a saga
	// whose head moved since has entries the verification did not see.
	HeadSeq int64
	At      time.Time
}

// keep records what verifying snap found, for a saga that exists; a
// record that cannot be written is logged, and the verification stands.
func (e *Engine) keep(ctx context.Context, snap Snapshot, v Verification) {
	var id string
	var head int64
	switch {
	case snap.Saga != nil:
		id, head = snap.Saga.ID, snap.Saga.HeadSeq
	case len(snap.Entries) > 0:
		last := snap.Entries[len(snap.Entries)-1]
		id, head = last.SagaID, last.Seq
	default:
		return // no such saga: nothing to list
	}
	if err := e.store.RecordVerified(ctx, Verified{SagaID: id, Verification: v, HeadSeq: head, At: Truncate(e.now())}); err != nil {
		e.log.Warn("keeping a saga's verification failed; lists show the one before", "saga", id, "err", err)
	}
}

// Audit is History for whoever verifies journals: it also keeps what
// verifying the saga found, as Verify does. Errors: Forbidden as Can says
// for ActVerify; others as History's.
func (e *Engine) Audit(ctx context.Context, p Principal, id string) (History, error) {
	if err := e.Can(p, ActVerify, Subject{}); err != nil {
		return History{}, err
	}
	h, err := e.History(ctx, p, id)
	if err != nil {
		return History{}, err
	}
	e.keep(ctx, h.Snapshot, h.Verification)
	return h, nil
}

// Verifications returns the newest verification kept of each of the
// sagas named (at most MaxList), by saga id; a saga never verified has
// none. Errors: Forbidden as Can says for ActVerify, Invalid for more
// than MaxList ids, Unavailable when the store is.
func (e *Engine) Verifications(ctx context.Context, p Principal, ids []string) (map[string]Verified, error) {
	if err := e.Can(p, ActVerify, Subject{}); err != nil {
		return nil, err
	}
	vs, err := e.store.Verifications(ctx, ids)
	if err != nil {
		return nil, err
	}
	out := make(map[string]Verified, len(vs))
	for _, v := range vs {
		out[v.SagaID] = v
	}
	return out, nil
}

// MaxBroken caps how many broken sagas a run keeps.
const MaxBroken = 100

// auditTimeout bounds one run.
const auditTimeout = time.Hour

// audit is the engine's one run at a time.
type audit struct {
	mu  sync.Mutex
	run AuditRun
}

// VerifyAll starts verifying every saga in the background, as p, unless
// a run is under way; its progress is AuditRun's, and what it finds of
// each saga is kept (see Verifications). Errors: Forbidden as
// Can says for ActVerify.
func (e *Engine) VerifyAll(p Principal) error {
	if err := e.Can(p, ActVerify, Subject{}); err != nil {
		return err
	}
	e.audit.mu.Lock()
	defer e.audit.mu.Unlock()
	if e.audit.run.Running {
		return nil
	}
	e.audit.run = AuditRun{Running: true, Started: e.now()}
	go e.verifyAll(p)
	return nil
}

// AuditRun reports the newest run. Errors: Forbidden as Can says for
// ActVerify.
func (e *Engine) AuditRun(p Principal) (AuditRun, error) {
	if err := e.Can(p, ActVerify, Subject{}); err != nil {
		return AuditRun{}, err
	}
	e.audit.mu.Lock()
	defer e.audit.mu.Unlock()
	r := e.audit.run
	r.Broken = append([]BrokenSaga(nil), r.Broken...)
	return r, nil
}

func (e *Engine) verifyAll(p Principal) {
	ctx, cancel := context.WithTimeout(context.Background(), auditTimeout)
	defer cancel()
	a := &e.audit
	err := func() error {
		total, err := e.CountSagas(ctx, p, SagaFilter{})
		if err != nil {
			return err
		}
		a.mu.Lock()
		a.run.Total = total
		a.mu.Unlock()
		f := SagaFilter{Limit: MaxList}
		for {
			sagas, err := e.Sagas(ctx, p, f)
			if err != nil {
				return err
			}
			for _, s := range sagas {
				v, err := e.Verify(ctx, p, s.ID)
				if err != nil {
					return err
				}
				a.mu.Lock()
				a.run.Done++
				if !v.Valid && len(a.run.Broken) < MaxBroken {
					a.run.Broken = append(a.run.Broken, BrokenSaga{s, v})
				}
				a.mu.Unlock()
			}
			if len(sagas) < f.Limit {
				return nil
			}
			last := sagas[len(sagas)-1]
			f.After = &SagaCursor{CreatedAt: last.CreatedAt, ID: last.ID}
		}
	}()
	a.mu.Lock()
	defer a.mu.Unlock()
	a.run.Running, a.run.Finished, a.run.Err = false, e.now(), msgOf(err)
}
