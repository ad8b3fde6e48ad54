package engine

import (
	"fmt"
	"strings"
	"time"

	"github.com/sagacity-go/sagacity/evidence"
	"github.com/sagacity-go/sagacity/wire"
)

// This file says what became of a request that is no longer pending: it
// expired, a reviewer sent it back, it was superseded or decided.

// noPending is the NotFound of a request that is not pending at seq.
func noPending(sagaID string, seq int64) *Error {
	return &Error{Kind: NotFound, Msg: fmt.Sprintf("No pending approval found for saga=%s seq=%d", sagaID, seq),
		SagaID: sagaID, Seq: seq}
}

// superseded is the Conflict of acting on a request the saga re-planned.
func superseded(l *Life) *Error {
	return &Error{Kind: Conflict, Code: wire.CodeSuperseded, Msg: fmt.Sprintf("the request at seq=%d was superseded by the saga's request at seq=%d: "+
		"it can no longer be approved or executed", l.Seq, l.SupersededBy)}
}

// timedOut is the Conflict (code EXPIRED) of acting on the request at
// seq of saga sagaID whose time ran out, which entry closing closed (the
// server's REJECTED of an expired request, or the refusal of a lapsed
// grant): the same answer whoever noticed first, the sweep, a vote or a
// resume.
func timedOut(sagaID string, seq int64, closing Entry) *Error {
	why := fmt.Sprintf("the request at seq=%d expired at %s without its quorum: the server rejected it at seq=%d, and the saga is compensated",
		seq, closing.Field(KeyExpired), closing.Seq)
	if closing.Field(KeyExpired) == "" {
		detail, _, _ := closing.Refusal()
		why = fmt.Sprintf("the request at seq=%d was not executed within its grant: the server closed it at seq=%d (%s), and the saga is compensated",
			seq, closing.Seq, detail)
	}
	return &Error{Kind: Conflict, Code: wire.CodeExpired, SagaID: sagaID, Seq: seq, Msg: why}
}

// expire closes bound request b, whose deadline passed with its votes
// short, as the server's REJECTED with a receipt, and fails the saga (the
// caller compensates it once committed). It returns that entry.
func (e *Engine) expire(tx Tx, s *Saga, b bound, at time.Time) (Entry, error) {
	server := Principal{ID: ServerDecider, Auth: AuthServer}
	r := ballot(b, DecidedExpired, server, "")
	r.EligibleAs = ""
	receipt, err := e.signed(server, b.gated, r, nil, at)
	if err != nil {
		return Entry{}, err
	}
	deadline := b.tally.Deadline.UTC().Format(TimeLayout)
	payload := Lines{{KeyExpired, deadline}, {KeyAuth, string(AuthServer)}, {KeyReceipt, receipt}}.String()
	en, err := e.appendAt(tx, s, GateTool, PhaseRejected, gateRef(b.gated.Seq), payload, at)
	if err != nil {
		return Entry{}, err
	}
	if err := e.tellClosed(tx, b, Decision{Decided: DecidedExpired, Approver: ServerDecider, DecidedAt: en.Timestamp, Receipt: en.Seq}); err != nil {
		return Entry{}, err
	}
	return en, e.fail(tx, s, fmt.Sprintf("%s at seq=%d expired without its quorum (%s)", b.gated.ToolName, b.gated.Seq, b.tally.Progress()))
}

// closedError says what became of a request that is not pending, as its
// journal says (see closedIn).
func (e *Engine) closedError(tx Tx, sagaID string, seq int64) error {
	entries, err := tx.Entries(sagaID)
	if err != nil {
		return err
	}
	_, err = closedIn(entries, sagaID, seq)
	return err
}

// closedIn says what became of the request at seq of saga sagaID that is
// not pending, as its journal (entries) says: its reviewer's request for
// changes (Conflict, code CHANGES_REQUESTED, with what the agent is
// told), its expiry or its lapsed grant (Conflict, code EXPIRED, see
// timedOut); NotFound, saying how it was closed, for anything else. It
// returns the request's life too, nil when the journal has no such
// request.
func closedIn(entries []Entry, sagaID string, seq int64) (*closed, error) {
	lc, _ := evidence.ReadLifecycle(entries)
	if lc.Requests[seq] == nil {
		return nil, noPending(sagaID, seq)
	}
	l := &closed{lc.Requests[seq]}
	if l.Open() || l.Closed > int64(len(entries)) {
		return l, noPending(sagaID, seq)
	}
	closing := entries[l.Closed-1]
	switch detail, _, _ := closing.Refusal(); {
	case l.Closing == ClosedChanges:
		return l, &Error{Kind: Conflict, Code: wire.CodeChangesRequested, SagaID: sagaID, Seq: seq,
			Msg: ChangesMessage(l.Tool, closing.Field(KeyReason))}
	case l.Closing == ClosedExpired, l.Closing == ClosedRefused && strings.HasPrefix(detail, RefusedGrant):
		return l, timedOut(sagaID, seq, closing)
	}
	none := noPending(sagaID, seq)
	none.Msg += ": it was " + l.how()
	return l, none
}

// closed is a request as closedIn reads it from its journal, which
// fate (calls.go) words with how.
type closed struct{ *Life }

// how says how it was closed: "rejected at seq=5".
func (l *closed) how() string { return l.How() }
