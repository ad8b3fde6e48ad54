package engine

import (
	"context"
	"encoding/base64"
	"fmt"
	"slices"

	"github.com/sagacity-go/sagacity/evidence"
	"github.com/sagacity-go/sagacity/wire"
)

// The server journals facts of its own — the approval policies in force,
// the passkeys enrolled, the notifications sent again by hand — in sagas
// of its own (ids starting ReservedSagaPrefix), so in the global log.
// Those that come from a person, or decide anything, carry the server's
// signature of what they hold (evidence.Form.EntryNote).

// journalSigned appends an EXECUTED entry of tool with input to the
// server's saga id (created, with initiator, by its first entry), signed
// (signedEntry), and runs fn with it in the same transaction. Errors:
// fn's, or the store's.
func (e *Engine) journalSigned(ctx context.Context, id, initiator string, notes evidence.Form, tool, input string, lines Lines,
	fn func(tx Tx, en Entry) error) error {
	return e.journalOwn(ctx, id, initiator, func(tx Tx, s *Saga) error {
		en, err := e.signedEntry(tx, s, notes, tool, input, lines)
		if err != nil {
			return err
		}
		return fn(tx, en)
	})
}

// journalOwn runs fn on the server's saga id, locked (created, with
// initiator, by its first entry), in one transaction.
func (e *Engine) journalOwn(ctx context.Context, id, initiator string, fn func(tx Tx, s *Saga) error) error {
	now := Truncate(e.now())
	_, err := e.transact(ctx, id, 0, "", func(tx Tx) (Saga, bool, error) {
		s, err := tx.CreateSaga(Saga{ID: id, Status: wire.Completed, Ended: true, Initiator: initiator,
			HeadHash: ZeroHash, CreatedAt: now, UpdatedAt: now})
		return s, err == nil, err
	}, fn)
	return err
}

// signedEntry appends to s, one of the server's sagas, locked, an
// EXECUTED entry of tool with input, its payload lines then the key's
// signature of its note of form notes.
func (e *Engine) signedEntry(tx Tx, s *Saga, notes evidence.Form, tool, input string, lines Lines) (Entry, error) {
	sig, err := e.keys.Sign(notes.EntryNote(tool, input))
	if err != nil {
		return Entry{}, fmt.Errorf("signing an entry of %s: %w", s.ID, err)
	}
	lines = append(slices.Clone(lines), Line{KeyReceipt, base64.StdEncoding.EncodeToString([]byte(sig))})
	return e.append(tx, s, tool, PhaseExecuted, input, lines.String())
}
