package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// This file is the journal's write path: every change to a saga appends
// entries chained on its head (append), stamped so that a saga's entries
// never go back in time (stamp), and commits them with the saga's row in
// one transaction (update, transact).

// append adds an entry to s's journal, chained on s's head, and advances
// the head. The caller holds s locked and saves it before committing. The
// payload is journaled as EncodeText keeps it: a tool's result or error
// may hold bytes no store keeps as they are.
func (e *Engine) append(tx Tx, s *Saga, tool string, phase Phase, input, payload string) (Entry, error) {
	return e.appendAt(tx, s, tool, phase, input, payload, e.stamp(s))
}

// stamp is the time of a change to saga s: now, as the journal keeps it,
// but never before the saga's last change. So a saga's entries never go
// back in time, however the clocks of the servers writing it disagree or
// jump, and verification can hold every journal to that.
func (e *Engine) stamp(s *Saga) time.Time {
	return maxTime(Truncate(e.now()), s.UpdatedAt)
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// appendAt is append at a time the caller read already with stamp (a
// receipt names it).
func (e *Engine) appendAt(tx Tx, s *Saga, tool string, phase Phase, input, payload string, at time.Time) (Entry, error) {
	en := Entry{SagaID: s.ID, Seq: s.HeadSeq + 1, ToolName: tool, Phase: phase,
		Input: input, Payload: EncodeText(payload), Timestamp: maxTime(at, s.UpdatedAt), Leaf: -1}
	en.Hash = Hash(s.HeadHash, en)
	if err := tx.Append(en); err != nil {
		return Entry{}, err
	}
	s.HeadSeq, s.HeadHash, s.UpdatedAt = en.Seq, en.Hash, en.Timestamp
	return en, nil
}

// update locks saga id, runs fn and saves the saga, in one transaction.
// A missing saga is reported as missing, or as "saga not found" when nil.
func (e *Engine) update(ctx context.Context, id string, missing *Error, fn func(tx Tx, s *Saga) error) (Saga, error) {
	return e.updateCall(ctx, id, 0, "", missing, fn)
}

// updateCall is update that, for seq > 0, runs fn only while the saga's
// call at seq is in state want: when an earlier attempt moved it on (a
// commit whose answer was lost), nothing is done; NotFound when there is
// no such call. The call's state is read with the lock.
func (e *Engine) updateCall(ctx context.Context, id string, seq int64, want CallState, missing *Error, fn func(tx Tx, s *Saga) error) (Saga, error) {
	if missing == nil {
		missing = &Error{Kind: NotFound, Msg: fmt.Sprintf("saga %s not found", id), SagaID: id}
	}
	s, err := e.transact(ctx, id, seq, want, func(tx Tx) (Saga, bool, error) {
		if seq == 0 {
			s, err := tx.LockSaga(id)
			if IsKind(err, NotFound) {
				err = missing
			}
			return s, err == nil, err
		}
		s, state, err := tx.LockSagaCall(id, seq)
		if IsKind(err, NotFound) {
			return s, false, missing
		}
		if err != nil {
			return s, false, err
		}
		work, err := inState(id, seq, state, want)
		return s, work, err
	}, fn)
	return s, at(err, id, 0)
}

// inState reports whether the call at seq, read in state, is still in
// want: false when an earlier attempt moved it on (a commit whose answer
// was lost), NotFound when there is no such call.
func inState(sagaID string, seq int64, state, want CallState) (bool, error) {
	if state == "" {
		return false, &Error{Kind: NotFound, Msg: fmt.Sprintf("call %s/%d not found", sagaID, seq), SagaID: sagaID, Seq: seq}
	}
	return state == want, nil
}

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
