package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/sagacity-go/sagacity/internal/notify"
	"github.com/sagacity-go/sagacity/internal/testkit"
	sagacitywire "github.com/sagacity-go/sagacity/wire"
)

// notifyRounds is how many times each store's server is killed while it
// delivers a notification.
const notifyRounds = 20

// hookSecret signs the suite's webhook deliveries (the Standard Webhooks
// test vector's secret).
const hookSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

// TestNotifyKill: each round, a request waits, and the server is killed
// by kill -9 while its webhook delivery is in flight (the receiver holds
// it); restarted, the server delivers it again, under the same event id.
// No event is lost, and none is delivered twice but under its one id.
func TestNotifyKill(t *testing.T) {
	t.Run("postgres", func(t *testing.T) {
		dbURL, settle := killablePostgres(t)
		killWhileNotifying(t, dbURL, settle)
	})
	t.Run("sqlite", func(t *testing.T) {
		killWhileNotifying(t, testkit.SQLiteURL(t), func(*fixture) {})
	})
}

// hookReceiver verifies every delivery's signature and records, by
// saga, the event ids it got; it holds a delivery it is told to hold
// until the test lets go.
type hookReceiver struct {
	*httptest.Server
	mu   sync.Mutex
	ids  map[string][]string // event ids, by saga
	hold map[string]bool     // sagas whose next delivery is held
	held chan string         // a held delivery's saga
	bad  []string
}

func newHookReceiver(t *testing.T) *hookReceiver {
	secret, err := notify.ParseSecret(hookSecret)
	if err != nil {
		t.Fatal(err)
	}
	h := &hookReceiver{ids: map[string][]string{}, hold: map[string]bool{}, held: make(chan string, 1)}
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var ev sagacitywire.Event
		err := notify.Verify(r.Header, body, secret, nil, time.Now())
		if err == nil {
			err = json.Unmarshal(body, &ev)
		}
		h.mu.Lock()
		if err != nil || ev.ID != r.Header.Get("webhook-id") {
			h.bad = append(h.bad, fmt.Sprintf("%v: %s", err, body))
			h.mu.Unlock()
			http.Error(w, "bad delivery", http.StatusBadRequest)
			return
		}
		h.ids[ev.SagaID] = append(h.ids[ev.SagaID], ev.ID)
		hold := h.hold[ev.SagaID]
		h.hold[ev.SagaID] = false
		h.mu.Unlock()
		if hold {
			h.held <- ev.SagaID
			<-r.Context().Done() // until the server that sent it is killed
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(h.Close)
	return h
}

func (h *hookReceiver) got(saga string) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.ids[saga]...)
}

func killWhileNotifying(t *testing.T, dbURL string, settle func(*fixture)) {
	start := time.Now()
	f := newFixture(t, 150*time.Second)
	hook := newHookReceiver(t)
	base, err := os.ReadFile(f.config)
	if err != nil {
		t.Fatal(err)
	}
	config := filepath.Join(t.TempDir(), "sagacity.yaml")
	if err := os.WriteFile(config, fmt.Appendf(base, `notifications:
  - name: hook
    webhook: {url: "%s", secretEnv: E2E_HOOK_SECRET}
`, hook.URL), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := newServer(t, "sagacity", f.env("sagacity", dbURL, map[string]string{"SAGACITY_CONFIG": config, "E2E_HOOK_SECRET": hookSecret}))
	srv.start()
	ctx := f.ctx
	for round := range notifyRounds {
		saga := fmt.Sprintf("notify-%d", round)
		hook.mu.Lock()
		hook.hold[saga] = true
		hook.mu.Unlock()
		agent := f.initiator(round)
		if a, r := agent.call(ctx, srv, saga, toolWire, fmt.Sprintf(`{"amount":"%d","to":"bob"}`, round)); !a.is(202) || r.JournalSeq != 1 {
			t.Fatalf("round %d: the gated call: %s", round, a)
		}
		select {
		case <-hook.held:
		case <-time.After(15 * time.Second):
			t.Fatalf("round %d: the request's notification never reached the receiver", round)
		}
		srv.kill()
		settle(f)
		srv.start()
		if !eventually(ctx, 20*time.Second, func() bool { return len(hook.got(saga)) >= 2 }) {
			t.Fatalf("round %d: the notification cut off by kill -9 was not delivered again (got %q)", round, hook.got(saga))
		}
	}
	// Every event arrived, each under one id: those cut off came again
	// with theirs, and none came twice but so.
	time.Sleep(2 * time.Second) // a late duplicate would show by now
	for round := range notifyRounds {
		saga := fmt.Sprintf("notify-%d", round)
		ids := hook.got(saga)
		for _, id := range ids {
			if id != ids[0] {
				t.Errorf("%s: the receiver got events %q; want one event, however often", saga, ids)
				break
			}
		}
	}
	if len(hook.bad) > 0 {
		t.Errorf("deliveries that did not verify: %q", hook.bad)
	}
	t.Logf("%d kills during delivery in %s", notifyRounds, time.Since(start).Round(time.Second))
}
