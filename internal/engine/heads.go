package engine

import (
	"context"
	"errors"
	"sync"
)

// A transaction on a saga reads its row under a lock before it writes:
// the new entry chains on the head, and its status decides what may
// happen. When this engine wrote the saga last, it knows that row already;
// it then promises the store the row is unchanged (Tx.LockAs) instead of
// reading it, which saves a round trip, and the store checks the promise,
// under the same lock, before anything is kept. A broken promise (another
// server or another call of the saga wrote since) costs one more try,
// reading.

// ErrStale is wrapped by the error of a transaction whose promise that a
// saga was unchanged did not hold; nothing of it was kept.
var ErrStale = errors.New("the saga changed since this server last wrote it")

// maxHeads bounds how many sagas an engine remembers.
const maxHeads = 10_000

// heads are the sagas as this engine last committed them.
type heads struct {
	mu sync.Mutex
	m  map[string]Saga
}

func (h *heads) get(id string) (Saga, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	s, ok := h.m[id]
	return s, ok
}

func (h *heads) put(s Saga) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.m == nil || len(h.m) >= maxHeads {
		h.m = make(map[string]Saga) // forgetting costs a read each, no more
	}
	h.m[s.ID] = s
}

func (h *heads) drop(id string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.m, id)
}

// locker locks a saga in a transaction and says whether there is work for
// fn (see updateCall).
type locker func(tx Tx) (s Saga, work bool, err error)

// transact runs fn on saga id in one transaction and saves the saga: on
// the saga as this engine last committed it, promised unchanged (with,
// for seq > 0, its call at seq in state want), or, when there is none or
// the promise broke, as lock reads it.
func (e *Engine) transact(ctx context.Context, id string, seq int64, want CallState, lock locker, fn func(tx Tx, s *Saga) error) (Saga, error) {
	if s, ok := e.heads.get(id); ok {
		out, err := e.commit(ctx, id, func(tx Tx) (Saga, bool, error) { return s, true, tx.LockAs(s, seq, want) }, fn)
		if !errors.Is(err, ErrStale) {
			return out, err
		}
	}
	return e.commit(ctx, id, lock, fn)
}

// commit is one try of transact.
func (e *Engine) commit(ctx context.Context, id string, lock locker, fn func(tx Tx, s *Saga) error) (Saga, error) {
	var out Saga
	err := e.store.Update(ctx, func(tx Tx) error {
		s, work, err := lock(tx)
		if err != nil || !work {
			out = s
			return err
		}
		if err := fn(tx, &s); err != nil {
			return err
		}
		out = s
		return tx.PutSaga(s)
	})
	if err != nil {
		e.heads.drop(id)
	} else {
		e.heads.put(out)
	}
	return out, err
}
