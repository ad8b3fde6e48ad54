package store

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/sagacity-go/sagacity/internal/engine"
)

// The outbox: events written with the journal entries that cause them,
// their deliveries to endpoints, every attempt, and escalation's clock.

// Notify writes the event and its deliveries, with their seals, held
// back with the transaction's next statement: an event whose key is
// there already inserts nothing, and its deliveries, naming an id no
// event has, none.
func (t *tx) Notify(ev engine.OutboxEvent, to []engine.Recipient) error {
	if err := t.c.queue(t.ctx, "INSERT INTO outbox_events (id, key, type, saga_id, seq, thread, receipt_seq, body, created_at, seal)"+
		" VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) ON CONFLICT (key) DO NOTHING",
		ev.ID, ev.Key, string(ev.Type), ev.SagaID, ev.JournalSeq, ev.Thread, ev.ReceiptSeq, ev.Body, ev.At, ev.Seal); err != nil {
		return mapErr(err)
	}
	for _, r := range to {
		if err := t.c.queue(t.ctx, "INSERT INTO outbox_deliveries (event_id, endpoint, thread, state, next_at, created_at, seal)"+
			" SELECT id, $2, thread, 'pending', created_at, created_at, $3 FROM outbox_events WHERE id = $1",
			ev.ID, r.Endpoint, r.DeliverySeal); err != nil {
			return mapErr(err)
		}
		// A member row another hand wrote first gets the server's seal.
		if err := t.c.queue(t.ctx, "INSERT INTO outbox_threads (endpoint, thread, seal) SELECT $2, thread, $3 FROM outbox_events WHERE id = $1"+
			" ON CONFLICT (thread, endpoint) DO UPDATE SET seal = excluded.seal", ev.ID, r.Endpoint, r.Member); err != nil {
			return mapErr(err)
		}
	}
	return nil
}

func (t *tx) Told(thread string) ([]engine.Member, error) {
	return collect(t.ctx, t.c, func(r rows) (m engine.Member, err error) { return m, r.Scan(&m.Endpoint, &m.Seal) },
		"SELECT endpoint, seal FROM outbox_threads WHERE thread = $1 ORDER BY endpoint", thread)
}

func (t *tx) PutEscalation(sagaID string, seq int64, steps int, next time.Time) error {
	return mapErr(t.c.queue(t.ctx, "UPDATE approval_requests SET escalated = $3, escalate_at = $4 WHERE saga_id = $1 AND journal_seq = $2",
		sagaID, seq, steps, orNull(next)))
}

func (s *sqlStore) DueEscalations(ctx context.Context, t time.Time, limit int) ([]engine.ApprovalRequest, error) {
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	return collect(ctx, s.db, scanApproval, "SELECT "+approvalCols+" FROM approval_requests WHERE escalate_at <= $1 ORDER BY escalate_at LIMIT $2",
		t, min(limit, maxApprovals))
}

// deliveryRead reads a delivery d with its event e and its thread's
// handle t, and every column their seals cover.
const deliveryRead = "SELECT d.id, d.endpoint, d.state, d.attempts, d.next_at, d.created_at, d.last_at, d.last_status, d.last_error," +
	" d.leased_by, d.lease_until, d.thread, d.seal, e.id, e.key, e.type, e.saga_id, e.seq, e.thread, e.receipt_seq, e.body," +
	" e.created_at, e.seal, t.handle, t.handle_seal" +
	" FROM outbox_deliveries d JOIN outbox_events e ON e.id = d.event_id" +
	" LEFT JOIN outbox_threads t ON t.thread = d.thread AND t.endpoint = d.endpoint"

// scanDelivery reads a delivery. Its event is its body's, but for the
// columns its row holds of their own: those, which its seal covers with
// the body, are what the engine checks.
func scanDelivery(r rows) (d engine.Delivery, err error) {
	var body string
	var cols engine.OutboxEvent // the columns besides the body
	var owner, handle, handleSeal *string
	next, created, evAt := timeCol{col: col{name: "next_at"}}, timeCol{col: col{name: "created_at"}}, timeCol{col: col{name: "created_at"}}
	last, lease := nullTime{col: col{name: "last_at"}}, nullTime{col: col{name: "lease_until"}}
	err = r.Scan(&d.ID, &d.Endpoint, &d.State, &d.Attempts, &next, &created, &last, &d.LastStatus, &d.LastError,
		&owner, &lease, &d.RowThread, &d.Seal, &d.Event.ID, &d.Event.Key, &cols.Type, &cols.SagaID, &cols.JournalSeq,
		&d.Event.Thread, &d.Event.ReceiptSeq, &body, &evAt, &d.Event.Seal, &handle, &handleSeal)
	if err != nil {
		return d, err
	}
	if handleSeal != nil {
		d.HandleSeal = *handleSeal
	}
	d.Next, d.Created, d.LastAt, d.Lease, d.Event.At = next.v, created.v, last.v, lease.v, evAt.v
	if owner != nil {
		d.Owner = *owner
	}
	d.First = handle == nil
	if handle != nil {
		d.Thread = *handle
	}
	if bad := unreadable(&next.col, &created.col, &evAt.col, &last.col, &lease.col); bad != "" {
		return d, fmt.Errorf("delivery %d: %s", d.ID, bad)
	}
	id := d.Event.ID
	if err := json.Unmarshal([]byte(body), &d.Event.Event); err != nil {
		return d, fmt.Errorf("event %s: its body is no event: %w", id, err)
	}
	d.Event.ID, d.Event.Type, d.Event.SagaID, d.Event.JournalSeq, d.Event.Body = id, cols.Type, cols.SagaID, cols.JournalSeq, body
	return d, nil
}

func (s *sqlStore) ClaimDeliveries(ctx context.Context, c engine.Claim) ([]engine.Delivery, error) {
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	skip := ""
	if s.postgres {
		skip = " FOR UPDATE SKIP LOCKED" // SQLite's writers take turns
	}
	until := c.Until.UTC().Truncate(time.Microsecond)
	var out []engine.Delivery
	err := s.begin(ctx, func(cn conn) error {
		if _, err := cn.exec(ctx, "WITH due AS (SELECT d.id FROM outbox_deliveries d"+
			" WHERE d.state = 'pending' AND d.next_at <= $1"+
			" AND (d.leased_by IS NULL OR d.lease_until < $1"+
			" OR (d.leased_by <> $4 AND NOT EXISTS (SELECT 1 FROM runners r WHERE r.id = d.leased_by AND r.seen_at >= $2)))"+
			" AND NOT EXISTS (SELECT 1 FROM outbox_endpoints x WHERE x.name = d.endpoint)"+
			" AND NOT EXISTS (SELECT 1 FROM outbox_deliveries p WHERE p.endpoint = d.endpoint AND p.thread = d.thread"+
			" AND p.state = 'pending' AND p.id < d.id)"+
			" ORDER BY d.next_at, d.id LIMIT $3"+skip+")"+
			" UPDATE outbox_deliveries SET leased_by = $4, lease_until = $5, attempts = attempts + 1 WHERE id IN (SELECT id FROM due)",
			c.Now, c.Alive, c.Limit, c.Owner, until); err != nil {
			return err
		}
		var err error
		out, err = collect(ctx, cn, scanDelivery, deliveryRead+" WHERE d.leased_by = $1 AND d.lease_until = $2 AND d.state = 'pending' ORDER BY d.id",
			c.Owner, until)
		return err
	})
	return out, mapErr(err)
}

func (s *sqlStore) FinishDelivery(ctx context.Context, d engine.Delivery, a engine.Attempt, handleSeal string) error {
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	return mapErr(s.begin(ctx, func(cn conn) error {
		n, err := cn.exec(ctx, "UPDATE outbox_deliveries SET state = $4, next_at = $5, last_at = $6, last_status = $7, last_error = $8,"+
			" leased_by = NULL, lease_until = NULL WHERE id = $1 AND leased_by = $2 AND lease_until = $3",
			d.ID, d.Owner, d.Lease.UTC().Truncate(time.Microsecond), string(a.State), cmpTime(a.Next, a.At), a.At, a.Status, a.Error)
		if err != nil {
			return err
		}
		if n == 0 {
			return engine.Errorf(engine.Conflict, "delivery %d: its lease was lost before the attempt was recorded", d.ID)
		}
		if _, err := cn.exec(ctx, "INSERT INTO outbox_attempts (delivery_id, n, at, status, error) VALUES ($1, $2, $3, $4, $5)",
			d.ID, d.Attempts, a.At, a.Status, a.Error); err != nil {
			return err
		}
		if a.State == engine.DeliveryDelivered {
			if _, err := cn.exec(ctx, "UPDATE outbox_threads SET handle = $3, handle_seal = $4 WHERE thread = $1 AND endpoint = $2 AND handle IS NULL",
				d.RowThread, d.Endpoint, a.Thread, handleSeal); err != nil {
				return err
			}
		}
		if a.Gone {
			_, err := cn.exec(ctx, "INSERT INTO outbox_endpoints (name, disabled_at, reason) VALUES ($1, $2, $3) ON CONFLICT (name) DO NOTHING",
				d.Endpoint, a.At, "it answered "+fmt.Sprint(a.Status)+": it takes nothing more")
			return err
		}
		return nil
	}))
}

func (s *sqlStore) RefuseDelivery(ctx context.Context, d engine.Delivery, why string, at time.Time) error {
	return s.small(ctx, func(cn conn) error {
		n, err := cn.exec(ctx, "UPDATE outbox_deliveries SET state = 'refused', last_at = $4, last_error = $5, leased_by = NULL, lease_until = NULL"+
			" WHERE id = $1 AND leased_by = $2 AND lease_until = $3", d.ID, d.Owner, d.Lease.UTC().Truncate(time.Microsecond), at, why)
		if err == nil && n == 0 {
			return engine.Errorf(engine.Conflict, "delivery %d: its lease was lost before it was refused", d.ID)
		}
		return err
	})
}

// cmpTime is t, or else when t is zero.
func cmpTime(t, or time.Time) time.Time {
	if t.IsZero() {
		return or
	}
	return t
}

func (s *sqlStore) Deliveries(ctx context.Context, f engine.DeliveryFilter) ([]engine.Delivery, error) {
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	w := &where{}
	if f.ID != 0 {
		w.add("d.id = %s", f.ID)
	}
	if f.Thread != "" {
		w.add("d.thread = %s", f.Thread)
	}
	if f.Endpoint != "" {
		w.add("d.endpoint = %s", f.Endpoint)
	}
	if len(f.States) > 0 {
		in := make([]string, len(f.States))
		for i, st := range f.States {
			in[i] = "'" + string(st) + "'" // the engine's constants, never input
		}
		w.add("d.state IN (" + strings.Join(in, ", ") + ")")
	}
	return collect(ctx, s.db, scanDelivery, deliveryRead+w.String()+" ORDER BY d.id DESC"+w.limit(min(max(f.Limit, 1), maxApprovals)), w.args...)
}

func (s *sqlStore) OutboxStats(ctx context.Context) ([]engine.EndpointStats, error) {
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	stats, err := collect(ctx, s.db, func(r rows) (st engine.EndpointStats, err error) {
		oldest, last := nullTime{col: col{name: "oldest"}}, nullTime{col: col{name: "last_at"}}
		var why *string
		err = r.Scan(&st.Name, &st.Pending, &st.Failing, &st.Failed, &oldest, &last, &why)
		st.Oldest, st.LastAt = oldest.v, last.v
		if why != nil {
			st.LastError = *why
		}
		return st, err
	}, "SELECT d.endpoint,"+
		" SUM(CASE WHEN d.state = 'pending' THEN 1 ELSE 0 END),"+
		" SUM(CASE WHEN d.state = 'pending' AND d.last_at IS NOT NULL THEN 1 ELSE 0 END),"+
		" SUM(CASE WHEN d.state = 'failed' THEN 1 ELSE 0 END),"+
		" MIN(CASE WHEN d.state = 'pending' THEN d.created_at END), MAX(d.last_at),"+
		" (SELECT x.last_error FROM outbox_deliveries x WHERE x.endpoint = d.endpoint AND x.state <> 'delivered' AND x.last_error <> ''"+
		" ORDER BY x.last_at DESC LIMIT 1)"+
		" FROM outbox_deliveries d WHERE d.state <> 'delivered' GROUP BY d.endpoint ORDER BY d.endpoint")
	if err != nil {
		return nil, err
	}
	disabled, err := collect(ctx, s.db, func(r rows) (st engine.EndpointStats, err error) {
		at := timeCol{col: col{name: "disabled_at"}}
		err = r.Scan(&st.Name, &at, &st.DisabledWhy)
		st.Disabled = at.v
		return st, err
	}, "SELECT name, disabled_at, reason FROM outbox_endpoints ORDER BY name")
	if err != nil {
		return nil, err
	}
	for _, d := range disabled {
		i := 0
		for i < len(stats) && stats[i].Name < d.Name {
			i++
		}
		if i == len(stats) || stats[i].Name != d.Name {
			stats = append(stats[:i], append([]engine.EndpointStats{{Name: d.Name}}, stats[i:]...)...)
		}
		stats[i].Disabled, stats[i].DisabledWhy = d.Disabled, d.DisabledWhy
	}
	return stats, nil
}

func (t *tx) EnableEndpoint(name string) error {
	n, err := t.c.exec(t.ctx, "DELETE FROM outbox_endpoints WHERE name = $1", name)
	if err == nil && n == 0 {
		return engine.Errorf(engine.Conflict, "endpoint %q is not disabled", name)
	}
	return mapErr(err)
}

func (t *tx) RetryDelivery(id int64, at time.Time) error {
	n, err := t.c.exec(t.ctx, "UPDATE outbox_deliveries SET state = 'pending', next_at = $2, leased_by = NULL, lease_until = NULL"+
		" WHERE id = $1 AND state IN ('pending', 'failed')", id, at)
	if err == nil && n == 0 {
		return engine.Errorf(engine.Conflict, "delivery %d is neither pending nor failed any more", id)
	}
	return mapErr(err)
}
