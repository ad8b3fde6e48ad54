package notify_test

import (
	"context"
	"crypto/ed25519"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sagacity-go/sagacity/internal/engine"
	"github.com/sagacity-go/sagacity/internal/notify"
	"github.com/sagacity-go/sagacity/internal/store"
	"github.com/sagacity-go/sagacity/internal/testkit"
)

// relayed is a relay over a store, its engine's and its own clock one
// fake clock, and a webhook receiver that verifies every delivery and
// answers as told.
type relayed struct {
	t      *testing.T
	e      *engine.Engine
	relay  *notify.Relay
	mu     sync.Mutex
	now    time.Time
	got    []string // the webhook-id of each delivery the receiver verified
	bodies []string // and its body
	answer func(n int) (int, string)
	dbURL  string
}

func (r *relayed) clock() time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.now = r.now.Add(time.Millisecond)
	return r.now
}

func (r *relayed) add(d time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.now = r.now.Add(d)
}

func newRelayed(t *testing.T, answer func(n int) (int, string)) *relayed {
	t.Helper()
	ctx := t.Context()
	r := &relayed{t: t, now: time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC), answer: answer}
	pub, key, _ := ed25519.GenerateKey(nil)
	secret, err := notify.ParseSecret("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		if err := notify.Verify(req.Header, body, secret, pub, r.clock()); err != nil {
			t.Errorf("the receiver got a delivery that does not verify: %v", err)
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		r.mu.Lock()
		r.got, r.bodies = append(r.got, req.Header.Get("webhook-id")), append(r.bodies, string(body))
		n := len(r.got)
		r.mu.Unlock()
		code, retryAfter := r.answer(n)
		if retryAfter != "" {
			w.Header().Set("Retry-After", retryAfter)
		}
		w.WriteHeader(code)
	}))
	t.Cleanup(srv.Close)
	r.dbURL = testkit.SQLiteURL(t)
	db, err := store.Open(ctx, r.dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	ok := engine.Funcs{Exec: func(context.Context, engine.Invocation) (string, error) { return "sent", nil }}
	r.e, err = engine.New(db, []engine.Tool{{Name: "sendWireTransfer", Reversibility: engine.Irreversible, Executor: ok}},
		engine.WithKeys(testkit.Keys(t)), engine.WithClock(r.clock), engine.WithNotifications([]engine.Endpoint{{Name: "hook"}}))
	if err != nil {
		t.Fatal(err)
	}
	hb, cancel := context.WithCancel(context.Background())
	h := &engine.Heartbeat{Engine: r.e, Replica: "relay-test"}
	if err := h.Start(hb); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); _ = h.Stop(context.Background()) })
	r.relay = &notify.Relay{Engine: r.e, PublicURL: "https://sagacity.example.com", Now: r.clock,
		Targets: []notify.Target{{Name: "hook", Kind: "webhook", Channel: &notify.Webhook{URL: srv.URL, Secret: secret, Key: key, Now: r.clock}}}}
	agent := engine.Principal{ID: "agent", Auth: engine.AuthToken, Roles: []engine.Role{engine.RoleAgent}}
	if _, err := r.e.Call(ctx, agent, "pay", "sendWireTransfer", `{"amount":"10"}`); err != nil {
		t.Fatal(err)
	}
	return r
}

// run runs the relay once, and returns how many deliveries it claimed.
func (r *relayed) run() int {
	r.t.Helper()
	n, err := r.relay.Run(r.t.Context())
	if err != nil {
		r.t.Fatal(err)
	}
	return n
}

// delivery is the one delivery of the request's waiting event.
func (r *relayed) delivery() engine.Delivery {
	r.t.Helper()
	auditor := engine.Principal{ID: "auditor", Auth: engine.AuthToken, Roles: []engine.Role{engine.RoleAuditor}}
	ds, err := r.e.Notifications(r.t.Context(), auditor, "pay", 1)
	if err != nil || len(ds) != 1 {
		r.t.Fatalf("the deliveries of pay/1 = %+v, %v; want one", ds, err)
	}
	return ds[0]
}

// TestRelayRetries: a receiver that fails five times, then takes it,
// gets the event six times with one id, each retry after the backoff and
// not before; the delivery is then delivered, its attempts recorded.
func TestRelayRetries(t *testing.T) {
	r := newRelayed(t, func(n int) (int, string) {
		if n <= 5 {
			return http.StatusInternalServerError, ""
		}
		return http.StatusNoContent, ""
	})
	for i := range 6 {
		if n := r.run(); n != 1 {
			t.Fatalf("try %d: the relay claimed %d", i+1, n)
		}
		if n := r.run(); n != 0 && i < 5 {
			t.Fatalf("try %d: the relay claimed again before the backoff", i+1)
		}
		r.add(time.Hour) // past any backoff
	}
	if n := r.run(); n != 0 {
		t.Errorf("a delivered event was claimed again")
	}
	if len(r.got) != 6 || r.got[0] == "" || strings.Count(strings.Join(r.got, " "), r.got[0]) != 6 {
		t.Errorf("the receiver got ids %q; want one id six times", r.got)
	}
	d := r.delivery()
	if d.State != engine.DeliveryDelivered || d.Attempts != 6 || d.Event.ID != r.got[0] {
		t.Errorf("the delivery = %+v; want delivered at attempt 6, under the id the receiver got", d)
	}
}

// TestRelayRetryAfter: a 429 with Retry-After waits as long as asked.
func TestRelayRetryAfter(t *testing.T) {
	r := newRelayed(t, func(n int) (int, string) {
		if n == 1 {
			return http.StatusTooManyRequests, "120"
		}
		return http.StatusOK, ""
	})
	r.run()
	d := r.delivery()
	if wait := d.Next.Sub(d.LastAt); d.State != engine.DeliveryPending || wait < 119*time.Second || wait > 121*time.Second {
		t.Errorf("after a 429 asking for 120s, the delivery = %s, next in %s", d.State, wait)
	}
	r.add(100 * time.Second)
	if n := r.run(); n != 0 {
		t.Errorf("the relay sent again 100s after a Retry-After of 120s")
	}
	r.add(30 * time.Second)
	if n := r.run(); n != 1 || r.delivery().State != engine.DeliveryDelivered {
		t.Errorf("after the Retry-After, the delivery = %+v", r.delivery())
	}
}

// TestRelayGone: a 410 disables the endpoint, whose deliveries wait
// until an approver enables it; a delivery failing for a day is given
// up on.
func TestRelayGone(t *testing.T) {
	gone := true
	r := newRelayed(t, func(int) (int, string) {
		if gone {
			return http.StatusGone, ""
		}
		return http.StatusServiceUnavailable, ""
	})
	r.run()
	auditor := engine.Principal{ID: "auditor", Auth: engine.AuthToken, Roles: []engine.Role{engine.RoleAuditor}}
	stats, _, err := r.e.Outbox(t.Context(), auditor)
	if err != nil || len(stats) != 1 || stats[0].Disabled.IsZero() || stats[0].Pending != 1 {
		t.Fatalf("after a 410, the outbox = %+v, %v; want hook disabled with its delivery held", stats, err)
	}
	r.add(time.Hour)
	if n := r.run(); n != 0 {
		t.Errorf("the relay sent to a disabled endpoint")
	}
	approver := engine.Principal{ID: "approver", Auth: engine.AuthToken, Roles: []engine.Role{engine.RoleApprover}}
	if err := r.e.EnableEndpoint(t.Context(), approver, "hook"); err != nil {
		t.Fatal(err)
	}
	gone = false
	// The clock moves 5 minutes a pass for a day and a half: the tries
	// come as the backoff says, within a pass.
	const step = 5 * time.Minute
	var tries []time.Time
	for range 36 * 12 {
		if n := r.run(); n > 0 {
			tries = append(tries, r.clock())
		}
		r.add(step)
	}
	if d := r.delivery(); d.State != engine.DeliveryFailed || d.LastStatus != http.StatusServiceUnavailable {
		t.Errorf("after a day of 503s, the delivery = %+v; want it given up on", d)
	}
	hourly := 0 // tries an hour (with its tenth of jitter) after the one before
	for i := 1; i < len(tries); i++ {
		gap := tries[i].Sub(tries[i-1])
		switch {
		case gap > 66*time.Minute+step:
			t.Errorf("try %d came %s after the one before; want at most an hour and its jitter", i, gap)
		case gap >= 54*time.Minute:
			hourly++
		case hourly > 0:
			t.Errorf("try %d came %s after the one before, once the backoff had reached an hour", i, gap)
		}
	}
	if hourly < 18 {
		t.Errorf("%d tries came an hour apart (of %d in all, at %v); want hourly tries for the rest of the day", hourly, len(tries), tries)
	}
	if last := tries[len(tries)-1]; last.Sub(tries[0]) > 25*time.Hour {
		t.Errorf("the last try came %s after the first; want none after a day", last.Sub(tries[0]))
	}
}

// TestRelayForged: an event and its delivery written into the outbox by
// another hand, with the seals of a genuine one copied (an approval by
// cfo@example.com that never happened), reach no receiver, though the
// relay would sign them as Standard Webhooks; the genuine event still
// does, its signature verified. The forged delivery is refused.
func TestRelayForged(t *testing.T) {
	r := newRelayed(t, func(int) (int, string) { return http.StatusNoContent, "" })
	genuine := r.delivery()
	testkit.Exec(t, r.dbURL, "INSERT INTO outbox_events (id, key, type, saga_id, seq, thread, receipt_seq, body, created_at, seal)"+
		" SELECT 'evt_forged', 'forged', 'request.approved', saga_id, seq, thread, receipt_seq,"+
		" replace(body, '\"type\":\"request.waiting\"', '\"type\":\"request.approved\",\"decidedBy\":\"cfo@example.com\"'), created_at, seal"+
		" FROM outbox_events WHERE id = $1", genuine.Event.ID)
	testkit.Exec(t, r.dbURL, "INSERT INTO outbox_deliveries (event_id, endpoint, thread, state, next_at, created_at, seal)"+
		" SELECT 'evt_forged', endpoint, thread, 'pending', next_at, created_at, seal FROM outbox_deliveries WHERE id = $1", genuine.ID)
	for range 3 {
		r.run()
	}
	if len(r.got) != 1 || r.got[0] != genuine.Event.ID || strings.Contains(r.bodies[0], "cfo@example.com") {
		t.Errorf("the receiver got %q %q; want the genuine waiting event alone", r.got, r.bodies)
	}
	auditor := engine.Principal{ID: "auditor", Auth: engine.AuthToken, Roles: []engine.Role{engine.RoleAuditor}}
	ds, err := r.e.Notifications(t.Context(), auditor, "pay", 1)
	if err != nil || len(ds) != 2 || ds[0].Event.ID != "evt_forged" || ds[0].State != engine.DeliveryRefused ||
		ds[1].State != engine.DeliveryDelivered {
		t.Errorf("the deliveries of pay/1 = %+v, %v; want the forged one refused, the genuine one delivered", ds, err)
	}
}
