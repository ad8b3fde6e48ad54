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
// a run is under way; its progress is AuditRun's. Errors: Forbidden as
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
