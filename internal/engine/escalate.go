package engine

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/sagacity-go/sagacity/internal/service"
	"github.com/sagacity-go/sagacity/wire"
)

// Some events have no person's action to come with: a request that
// waits past a step of its rule's escalation, a call that falls in
// doubt, executions halting. The Notifier service notices them on every
// replica; an event's key makes each one once, whoever notices first.

// EscalationSaga is the server's own saga that journals every step of
// every escalation taken: which request, which step, who was told.
const EscalationSaga = "sagacity:escalations"

// EscalationTool is the tool of EscalationSaga's entries.
const EscalationTool = "escalation"

// escalationBatch bounds how many due steps one Escalate takes.
const escalationBatch = 100

// firstStep is when a request made at at under rule r takes its first
// escalation step; zero for none.
func firstStep(at time.Time, r Rule) time.Time {
	if len(r.Escalate) == 0 {
		return time.Time{}
	}
	return at.Add(r.Escalate[0].After)
}

// Escalate takes the escalation steps that are due: each pending
// request short of its quorum past a step's time is told, in that step,
// to more endpoints, and the step is journaled in EscalationSaga. Who
// may vote, how many and until when do not change. It returns how many
// steps it took. Errors: Unavailable when the store is.
func (e *Engine) Escalate(ctx context.Context) (int, error) {
	due, err := e.store.DueEscalations(ctx, Truncate(e.now()), escalationBatch)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, r := range due {
		took, err := e.escalate(ctx, r.SagaID, r.JournalSeq)
		switch {
		case IsKind(err, Unavailable):
			return n, err
		case err != nil:
			e.log.Warn("an escalation step could not be taken", "saga", r.SagaID, "seq", r.JournalSeq, "err", err)
		case took:
			n++
		}
	}
	return n, nil
}

// escalate takes the due step of the request at seq of saga sagaID, and
// reports whether it did.
func (e *Engine) escalate(ctx context.Context, sagaID string, seq int64) (bool, error) {
	took := false
	gone := func(Tx, string, int64) error { return nil } // closed meanwhile
	_, err := e.onRequest(ctx, sagaID, seq, gone, func(tx Tx, s *Saga, b bound) error {
		took = false
		now := Truncate(e.now())
		k, steps := b.row.Escalated, b.rule.Escalate
		switch {
		case b.tally.Met() || b.life.SupersededBy != 0 || k >= len(steps):
			// Nobody needs telling any more: its votes are in, or the
			// saga went on without it.
			return tx.PutEscalation(sagaID, seq, k, time.Time{})
		case now.Before(b.gated.Timestamp.Add(steps[k].After)):
			return tx.PutEscalation(sagaID, seq, k, b.gated.Timestamp.Add(steps[k].After))
		}
		step := steps[k]
		var notify []string
		for _, name := range step.Notify {
			if e.endpoint(name) != nil {
				notify = append(notify, name)
			} else {
				e.log.Warn("an escalation step names an endpoint this server does not have", "saga", sagaID, "seq", seq, "endpoint", name)
			}
		}
		en, err := e.journalStep(tx, escalationRecord{SagaID: sagaID, Seq: seq, Rule: b.rule.Name, Step: k + 1,
			After: step.After.String(), Notify: notify}, now)
		if err != nil {
			return err
		}
		next := time.Time{}
		if k+1 < len(steps) {
			next = b.gated.Timestamp.Add(steps[k+1].After)
		}
		if err := tx.PutEscalation(sagaID, seq, k+1, next); err != nil {
			return err
		}
		ev := requestEvent(wire.EventEscalated, b.gated, b.rule, b.tally, en.Seq, now)
		ev.Key, ev.Escalation = fmt.Sprintf("%s/%d/escalated/%d", sagaID, seq, k+1), k+1
		ev = ev.said("%s still waits for approval after %s (%s): step %d tells %s too", ev.what(), step.After, ev.votes(), k+1,
			strings.Join(notify, ", "))
		took = true
		return e.tell(tx, ev, notify...)
	})
	return took, err
}

// escalationRecord is an entry of EscalationSaga: a step taken.
type escalationRecord struct {
	SagaID string   `json:"saga"`
	Seq    int64    `json:"seq"`
	Rule   string   `json:"rule"`
	Step   int      `json:"step"`
	After  string   `json:"after"`
	Notify []string `json:"notify"`
}

// journalStep journals rec in EscalationSaga, in tx, whose own saga is
// locked already: the request's saga, then EscalationSaga, always in
// that order.
func (e *Engine) journalStep(tx Tx, rec escalationRecord, at time.Time) (Entry, error) {
	input, err := json.Marshal(rec)
	if err != nil {
		return Entry{}, err
	}
	s, err := tx.CreateSaga(Saga{ID: EscalationSaga, Status: wire.Completed, Ended: true, Initiator: EscalationTool,
		HeadHash: ZeroHash, CreatedAt: at, UpdatedAt: at})
	if err != nil {
		return Entry{}, err
	}
	en, err := e.appendAt(tx, &s, EscalationTool, PhaseExecuted, string(input), "", at)
	if err != nil {
		return Entry{}, err
	}
	e.heads.drop(EscalationSaga)
	return en, tx.PutSaga(s)
}

// endpoint is the endpoint named name, nil when there is none.
func (e *Engine) endpoint(name string) *Endpoint {
	for i := range e.endpoints {
		if e.endpoints[i].Name == name {
			return &e.endpoints[i]
		}
	}
	return nil
}

// Notice tells of what happened without a person: escalation steps that
// are due, calls that fell in doubt, rules the people known cannot meet,
// executions halting. Errors:
// Unavailable when the store is.
func (e *Engine) Notice(ctx context.Context) error {
	if len(e.endpoints) == 0 {
		return nil
	}
	for {
		n, err := e.Escalate(ctx)
		if err != nil {
			return err
		}
		if n < escalationBatch {
			break
		}
	}
	calls, err := e.inDoubt("", e.window(), e.stored(ctx))
	if err != nil {
		return err
	}
	for _, c := range calls {
		ev := OutboxEvent{Key: Thread(c.SagaID, c.Seq) + "/" + string(wire.EventInDoubt), Thread: Thread(c.SagaID, c.Seq), At: Truncate(e.now()),
			Event: wire.Event{Type: wire.EventInDoubt, SagaID: c.SagaID, JournalSeq: c.Seq, Tool: c.ToolName, Requester: c.Requester}}
		if err := e.noticeOnce(ctx, ev.said("a call of %s in saga %s (seq %d) is in doubt: it started %s and has no outcome; "+
			"a person must find out what it did", c.ToolName, c.SagaID, c.Seq, c.StartedAt.UTC().Format(time.RFC3339))); err != nil {
			return err
		}
	}
	if err := e.noticeHealth(ctx); err != nil {
		return err
	}
	if why := e.Halted(); why != "" {
		sum := sha256.Sum256([]byte(why))
		ev := OutboxEvent{Key: "log/halted/" + hex.EncodeToString(sum[:8]), At: Truncate(e.now()), Event: wire.Event{Type: wire.EventHalted}}
		return e.noticeOnce(ctx, ev.said("executions of IRREVERSIBLE tools are halted: %s", why))
	}
	return nil
}

// noticeOnce tells of ev unless this process did already; its key makes
// it once across processes.
func (e *Engine) noticeOnce(ctx context.Context, ev OutboxEvent) error {
	if _, done := e.noticed.Load(ev.Key); done {
		return nil
	}
	if err := e.store.Update(ctx, func(tx Tx) error { return e.tell(tx, ev) }); err != nil {
		return err
	}
	e.noticed.Store(ev.Key, true)
	return nil
}

// noticeEvery is how often the Notifier looks for escalations, calls in
// doubt and halts nobody has been told of.
const noticeEvery = 15 * time.Second

// Notifier runs Notice every Every (default noticeEvery): a service the
// server runs on every replica when it has notifications.
type Notifier struct {
	Engine *Engine
	Every  time.Duration
	Logger *slog.Logger
	service.Base
}

// Start runs Notice now and then every Every until Stop or until ctx
// ends.
func (n *Notifier) Start(ctx context.Context) error {
	return n.Run(ctx, service.Work{Loops: []service.Loop{n.Engine.tries(n.Logger, cmp.Or(n.Every, noticeEvery),
		"noticing escalations, calls in doubt and halts failed; trying again later", n.Engine.Notice)}})
}
