package enginetest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sagacity-go/sagacity/internal/engine"
	"github.com/sagacity-go/sagacity/wire"
)

// testOutboxClaims: two processes claiming at once never hold one
// delivery together; a delivery leased by a process that is gone is
// taken over at once.
func testOutboxClaims(t *testing.T, v *env) {
	ctx := context.Background()
	v.opts = []engine.Option{engine.WithNotifications([]engine.Endpoint{{Name: "chat"}})}
	v.e, v.log = v.engine(v.db)
	beat(t, v.e, "replica-a")
	other, _ := v.process(v.db)
	beat(t, other, "replica-b")
	const n = 60
	for i := range n {
		v.gate(fmt.Sprintf("claims-%d", i))
	}
	var mu sync.Mutex
	held := map[int64]int{}
	var wg sync.WaitGroup
	for _, e := range []*engine.Engine{v.e, other} {
		wg.Go(func() {
			for {
				ds, err := e.ClaimDeliveries(ctx, time.Hour, 7)
				if err != nil {
					t.Error(err)
					return
				}
				if len(ds) == 0 {
					return
				}
				mu.Lock()
				for _, d := range ds {
					held[d.ID]++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(held) != n {
		t.Errorf("the two processes claimed %d deliveries; want %d", len(held), n)
	}
	for id, k := range held {
		if k != 1 {
			t.Errorf("delivery %d was claimed %d times while its lease held", id, k)
		}
	}

	// A process that is gone: its leases are taken over.
	v.gate("orphan")
	gone, _ := v.process(v.db)
	stop := beat(t, gone, "replica-c")
	leased, err := gone.ClaimDeliveries(ctx, time.Hour, 10)
	if err != nil || len(leased) != 1 {
		t.Fatalf("the leaving process's claim = %v, %v; want the orphan's request", leased, err)
	}
	stop()
	if got := claim(t, v.e); len(got) != 1 || got[0].ID != leased[0].ID {
		t.Errorf("after its process left, the claim = %+v; want its delivery taken over", got)
	}
}

// beat registers e's process as a runner of replica, and returns what
// stops it (retiring the runner).
func beat(t *testing.T, e *engine.Engine, replica string) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	h := &engine.Heartbeat{Engine: e, Replica: replica}
	if err := h.Start(ctx); err != nil {
		t.Fatal(err)
	}
	stop = sync.OnceFunc(func() { cancel(); _ = h.Stop(context.Background()) })
	t.Cleanup(stop)
	return stop
}

// claim claims what is due for an hour.
func claim(t *testing.T, e *engine.Engine) []engine.Delivery {
	t.Helper()
	ds, err := e.ClaimDeliveries(context.Background(), time.Hour, 10)
	if err != nil {
		t.Fatal(err)
	}
	return ds
}

// finish records attempt a of d, now.
func finish(t *testing.T, e *engine.Engine, d engine.Delivery, a engine.Attempt) {
	t.Helper()
	if a.At.IsZero() {
		a.At = d.Lease.Add(-time.Hour)
	}
	if err := e.FinishDelivery(context.Background(), d, a); err != nil {
		t.Fatal(err)
	}
}

// testOutboxForged: outbox rows written or changed by another hand (one
// with the database's privileges, never the server's key) are never
// claimed to be sent: an event and its delivery inserted, a genuine
// event's delivery to an endpoint it was never meant for, an event whose
// body, saga or type was changed, a delivery moved to another endpoint
// or thread, a thread's handle replaced (a Slack message to overwrite).
// Each is refused, shows so before and after its claim, and the genuine
// deliveries still go; an endpoint added by hand to those told of a
// thread hears nothing of it; a request's bytes changed in the journal
// are not shown as its fields.
func testOutboxForged(t *testing.T, v *env) {
	ctx := context.Background()
	v.opts = []engine.Option{engine.WithNotifications([]engine.Endpoint{{Name: "chat"}, {Name: "pager", OnEscalation: true}})}
	v.e, v.log = v.engine(v.db)
	beat(t, v.e, "replica-a")
	deliveries := func(saga string, seq int64) []engine.Delivery {
		t.Helper()
		ds, err := v.e.Notifications(ctx, auditor, saga, seq)
		if err != nil {
			t.Fatal(err)
		}
		return ds
	}
	// A request whose first message was delivered, with a handle: its
	// next event's message would update that one.
	handled := v.gate("handled")
	first := claim(t, v.e)
	if len(first) != 1 {
		t.Fatalf("the first claim = %+v; want handled's waiting event", first)
	}
	finish(t, v.e, first[0], engine.Attempt{State: engine.DeliveryDelivered, Thread: "C1/1733.1"})
	v.approve("handled", handled)
	v.h.Exec(t, "UPDATE outbox_threads SET handle = 'C1/1999.9' WHERE thread = $1", engine.Thread("handled", handled))

	ok := v.gate("ok")
	okThread := engine.Thread("ok", ok)
	okWaiting := deliveries("ok", ok)[0]
	tampered := map[string]string{} // saga: what its refusal says
	seqs := map[string]int64{}
	for saga, sql := range map[string]string{
		"body": "UPDATE outbox_events SET body = replace(body, '\"requester\":\"agent-1\"', '\"requester\":\"cfo@example.com\"') WHERE saga_id = $1",
		"saga": "UPDATE outbox_events SET saga_id = 'ok' WHERE saga_id = $1",
		"type": "UPDATE outbox_events SET type = 'request.approved' WHERE saga_id = $1",
		"endpoint": "UPDATE outbox_deliveries SET endpoint = 'pager' WHERE event_id IN" +
			" (SELECT id FROM outbox_events WHERE saga_id = $1)",
		"thread": "UPDATE outbox_deliveries SET thread = 'ok/" + fmt.Sprint(ok) + "' WHERE event_id IN" +
			" (SELECT id FROM outbox_events WHERE saga_id = $1)",
	} {
		seqs[saga] = v.gate(saga)
		v.h.Exec(t, sql, saga)
		tampered[saga] = "its event is not one this server wrote"
		if saga == "endpoint" || saga == "thread" {
			tampered[saga] = "its delivery is not one this server wrote"
		}
	}
	// Rows inserted, each with a seal of a genuine row: an event of ok's
	// that never happened, ok's waiting event to pager (which hears of
	// ok only once an escalation names it), and pager among those told
	// of ok.
	v.h.Exec(t, "INSERT INTO outbox_events (id, key, type, saga_id, seq, thread, receipt_seq, body, created_at, seal)"+
		" SELECT 'evt_forged', 'forged', 'request.approved', saga_id, seq, thread, receipt_seq,"+
		" replace(body, '\"type\":\"request.waiting\"', '\"type\":\"request.approved\",\"decidedBy\":\"cfo@example.com\"'), created_at, seal"+
		" FROM outbox_events WHERE id = $1", okWaiting.Event.ID)
	v.h.Exec(t, "INSERT INTO outbox_deliveries (event_id, endpoint, thread, state, next_at, created_at, seal)"+
		" SELECT 'evt_forged', endpoint, thread, 'pending', next_at, created_at, seal FROM outbox_deliveries WHERE id = $1", okWaiting.ID)
	v.h.Exec(t, "INSERT INTO outbox_deliveries (event_id, endpoint, thread, state, next_at, created_at, seal)"+
		" SELECT event_id, 'pager', thread, 'pending', next_at, created_at, seal FROM outbox_deliveries WHERE id = $1", okWaiting.ID)
	v.h.Exec(t, "INSERT INTO outbox_threads (endpoint, thread, seal) SELECT 'pager', thread, seal FROM outbox_threads WHERE thread = $1", okThread)

	// Shown refused before anything claims them.
	if d := deliveries("body", seqs["body"])[0]; d.State != engine.DeliveryRefused || !strings.Contains(d.LastError, tampered["body"]) {
		t.Errorf("the delivery of an event whose body was changed shows %s (%q); want refused, saying why", d.State, d.LastError)
	}
	var sent []string
	for range 10 {
		for _, d := range claim(t, v.e) {
			sent = append(sent, d.Event.SagaID+" "+d.Endpoint+" "+string(d.Event.Type))
			a := engine.Attempt{State: engine.DeliveryDelivered}
			if d.First {
				a.Thread = "C1/" + d.Event.SagaID
			}
			finish(t, v.e, d, a)
		}
	}
	if !slices.Equal(sent, []string{"ok chat request.waiting"}) {
		t.Errorf("the claims got %q; want ok's waiting event alone", sent)
	}
	wantRefused := func(d engine.Delivery, why string) {
		t.Helper()
		if d.State != engine.DeliveryRefused || !strings.Contains(d.LastError, why) {
			t.Errorf("delivery %d (%s of %s/%d to %s) = %s (%q); want refused: %s", d.ID, d.Event.Type, d.Event.SagaID, d.Event.JournalSeq,
				d.Endpoint, d.State, d.LastError, why)
		}
	}
	for saga, why := range tampered {
		ds := deliveries(saga, seqs[saga])
		if saga == "thread" {
			ds = slices.DeleteFunc(deliveries("ok", ok), func(d engine.Delivery) bool { return d.Event.SagaID != "thread" })
		}
		if len(ds) != 1 {
			t.Errorf("%s's deliveries = %+v; want its one", saga, ds)
			continue
		}
		wantRefused(ds[0], why)
	}
	for _, d := range deliveries("ok", ok) {
		switch {
		case d.Event.ID == "evt_forged":
			wantRefused(d, "its event is not one this server wrote")
		case d.Endpoint == "pager":
			wantRefused(d, "its delivery is not one this server wrote")
		}
	}
	hs := deliveries("handled", handled)
	if len(hs) != 2 || hs[0].Event.Type != wire.EventApproved {
		t.Fatalf("handled's deliveries = %+v; want the waiting one and the approval", hs)
	}
	wantRefused(hs[0], "the message it would update is not one the endpoint answered")
	_, failing, err := v.e.Outbox(ctx, auditor)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(slices.DeleteFunc(failing, func(d engine.Delivery) bool { return d.State != engine.DeliveryRefused })); n != 8 {
		t.Errorf("the outbox lists %d refused deliveries; want the 8 refused", n)
	}
	if err := v.e.RetryDelivery(ctx, approver, hs[0].ID); !engine.IsKind(err, engine.Conflict) {
		t.Errorf("retrying a refused delivery: %v; want Conflict", err)
	}

	// ok's next event goes to chat alone, after its genuine first: pager,
	// listed by hand among those told of ok, is told nothing.
	v.approve("ok", ok)
	next := claim(t, v.e)
	if len(next) != 1 || next[0].Endpoint != "chat" || next[0].Event.Type != wire.EventApproved || next[0].First || next[0].Thread != "C1/ok" {
		t.Errorf("after ok's approval, the claim = %+v; want its approval to chat, updating the first message", next)
	}
	for _, d := range deliveries("ok", ok) {
		if d.Endpoint == "pager" && d.Event.Type == wire.EventApproved {
			t.Errorf("pager, added by hand to those told of ok, was told of its approval: %+v", d)
		}
	}

	// A message shows a request's fields only from the bytes its sealed
	// event names: none once the journal's row holds others.
	if in, err := v.e.RequestInput(ctx, okWaiting.Event); err != nil || in != transfer {
		t.Errorf("RequestInput(ok's waiting event) = %q, %v; want its bytes", in, err)
	}
	v.h.Exec(t, "UPDATE journal SET input = $3 WHERE saga_id = $1 AND seq = $2", "ok", ok, `{"amount":"1","to":"mallory"}`)
	if in, err := v.e.RequestInput(ctx, okWaiting.Event); !engine.IsKind(err, engine.Conflict) {
		t.Errorf("RequestInput(ok's waiting event), its bytes changed in the journal = %q, %v; want Conflict", in, err)
	}
}
