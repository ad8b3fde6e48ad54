package notify

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"

	"github.com/sagacity-go/sagacity/wire"
)

// routingKey is an integration key as PagerDuty makes them: 32
// characters.
const routingKey = "R0a1b2c3d4e5f6a7b8c9d0e1f2a3b4c5"

// pagerDutyAPI is an Events API v2 endpoint: it checks each event
// against the API's schema and answers as the API does, 202 to a valid
// event and 400 to any other, and records the valid ones.
type pagerDutyAPI struct {
	t *testing.T

	mu     sync.Mutex
	bodies []string
}

func (a *pagerDutyAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err == nil {
		err = checkPagerDutyEvent(r.Header, body)
	}
	w.Header().Set("Content-Type", "application/json")
	if err != nil {
		a.t.Errorf("PagerDuty: %s: %v", body, err)
		w.WriteHeader(http.StatusBadRequest)
		_ = json.NewEncoder(w).Encode(map[string]any{"status": "invalid event", "message": "Event object is invalid", "errors": []string{err.Error()}})
		return
	}
	a.mu.Lock()
	a.bodies = append(a.bodies, string(body))
	a.mu.Unlock()
	var ev struct {
		DedupKey string `json:"dedup_key"`
	}
	_ = json.Unmarshal(body, &ev)
	w.WriteHeader(http.StatusAccepted)
	_ = json.NewEncoder(w).Encode(map[string]string{"status": "success", "message": "Event processed", "dedup_key": ev.DedupKey})
}

// events are the events it took so far, decoded.
func (a *pagerDutyAPI) events(t *testing.T) []map[string]any {
	t.Helper()
	a.mu.Lock()
	defer a.mu.Unlock()
	var evs []map[string]any
	for _, b := range a.bodies {
		var ev map[string]any
		if err := json.Unmarshal([]byte(b), &ev); err != nil {
			t.Fatal(err)
		}
		evs = append(evs, ev)
	}
	return evs
}

// checkPagerDutyEvent checks an event against the Events API v2
// (https://github.com/PagerDuty/developer-docs/blob/main/docs/events-API-v2/02-Trigger-Events.md):
// the fields each action requires, their values, and no field the API
// does not know.
func checkPagerDutyEvent(h http.Header, body []byte) error {
	if ct := h.Get("Content-Type"); ct != "application/json" {
		return fmt.Errorf("Content-Type %q", ct)
	}
	var ev struct {
		RoutingKey  string `json:"routing_key"`
		EventAction string `json:"event_action"`
		DedupKey    string `json:"dedup_key"`
		Payload     *struct {
			Summary       string         `json:"summary"`
			Source        string         `json:"source"`
			Severity      string         `json:"severity"`
			Timestamp     string         `json:"timestamp"`
			Component     string         `json:"component"`
			Group         string         `json:"group"`
			Class         string         `json:"class"`
			CustomDetails map[string]any `json:"custom_details"`
		} `json:"payload"`
		Images []map[string]string `json:"images"`
		Links  []struct {
			Href string `json:"href"`
			Text string `json:"text"`
		} `json:"links"`
		Client    string `json:"client"`
		ClientURL string `json:"client_url"`
	}
	dec := json.NewDecoder(strings.NewReader(string(body)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&ev); err != nil {
		return err
	}
	switch {
	case len(ev.RoutingKey) != 32:
		return fmt.Errorf("routing_key of %d characters, want 32", len(ev.RoutingKey))
	case utf8.RuneCountInString(ev.DedupKey) > 255:
		return errors.New("dedup_key longer than 255 characters")
	case ev.EventAction == "acknowledge" || ev.EventAction == "resolve":
		if ev.DedupKey == "" {
			return fmt.Errorf("%s without a dedup_key", ev.EventAction)
		}
		return nil
	case ev.EventAction != "trigger":
		return fmt.Errorf("event_action %q", ev.EventAction)
	case ev.Payload == nil:
		return errors.New("trigger without a payload")
	}
	p := ev.Payload
	switch {
	case p.Summary == "" || utf8.RuneCountInString(p.Summary) > 1024:
		return fmt.Errorf("summary of %d characters, want 1 to 1024", utf8.RuneCountInString(p.Summary))
	case p.Source == "":
		return errors.New("no source")
	case !slices.Contains([]string{"critical", "error", "warning", "info"}, p.Severity):
		return fmt.Errorf("severity %q", p.Severity)
	}
	if p.Timestamp != "" {
		if _, err := time.Parse(time.RFC3339, p.Timestamp); err != nil {
			return fmt.Errorf("timestamp: %w", err)
		}
	}
	for _, l := range ev.Links {
		if l.Href == "" {
			return errors.New("link without an href")
		}
	}
	return nil
}

// pagerDuty is a PagerDuty channel to api.
func pagerDuty(t *testing.T, api http.Handler) *PagerDuty {
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	return &PagerDuty{URL: srv.URL + "/v2/enqueue", RoutingKey: routingKey, Client: srv.Client()}
}

func TestPagerDutyRequest(t *testing.T) {
	api := &pagerDutyAPI{t: t}
	p := pagerDuty(t, api)
	waiting := message(wire.EventWaiting)
	voted := message(wire.EventVoted)
	voted.Event.Message, voted.Event.ApprovedBy = "alice approved payments.transfer in saga sg_42 (seq 7): 1 of 2 approvals (alice)", []string{"alice"}
	executed := message(wire.EventExecuted)
	for _, m := range []Message{waiting, voted, executed} {
		if thread, err := p.Send(t.Context(), m); thread != "" || err != nil {
			t.Fatalf("Send(%s) = %q, %v; want \"\", nil", m.Event.Type, thread, err)
		}
	}

	want := []map[string]any{}
	for _, s := range []string{`{
		"routing_key": "R0a1b2c3d4e5f6a7b8c9d0e1f2a3b4c5", "event_action": "trigger", "dedup_key": "sagacity/sg_42/7",
		"payload": {
			"summary": "agent-7 asks to run payments.transfer in saga sg_42 (seq 7): 0 of 2 approvals",
			"source": "sagacity", "severity": "warning", "timestamp": "2026-03-01T09:30:00Z",
			"component": "payments.transfer", "group": "sg_42", "class": "request.waiting",
			"custom_details": {
				"fingerprint": "79c2 a241 5f1c 9e0d", "payloadSha256": "79c2a2415f1c9e0d6a3b8e1f2c4d5a6b7c8d9e0f1a2b3c4d5e6f7a8b9c0d1e2f",
				"requester": "agent-7", "rule": "two-person", "quorum": 2, "expiresAt": "2026-03-01T10:30:00Z"
			}
		},
		"links": [{"href": "https://sagacity.example/sagas/sg_42/requests/7", "text": "Open in Sagacity"}]
	}`, `{
		"routing_key": "R0a1b2c3d4e5f6a7b8c9d0e1f2a3b4c5", "event_action": "trigger", "dedup_key": "sagacity/sg_42/7",
		"payload": {
			"summary": "alice approved payments.transfer in saga sg_42 (seq 7): 1 of 2 approvals (alice)",
			"source": "sagacity", "severity": "warning", "timestamp": "2026-03-01T09:30:00Z",
			"component": "payments.transfer", "group": "sg_42", "class": "request.voted",
			"custom_details": {
				"fingerprint": "79c2 a241 5f1c 9e0d", "payloadSha256": "79c2a2415f1c9e0d6a3b8e1f2c4d5a6b7c8d9e0f1a2b3c4d5e6f7a8b9c0d1e2f",
				"requester": "agent-7", "rule": "two-person", "quorum": 2, "approvedBy": ["alice"], "expiresAt": "2026-03-01T10:30:00Z"
			}
		},
		"links": [{"href": "https://sagacity.example/sagas/sg_42/requests/7", "text": "Open in Sagacity"}]
	}`, `{"routing_key": "R0a1b2c3d4e5f6a7b8c9d0e1f2a3b4c5", "event_action": "resolve", "dedup_key": "sagacity/sg_42/7"}`} {
		var ev map[string]any
		if err := json.Unmarshal([]byte(s), &ev); err != nil {
			t.Fatal(err)
		}
		want = append(want, ev)
	}
	if diff := cmp.Diff(want, api.events(t)); diff != "" {
		t.Errorf("PagerDuty got (-want +got):\n%s", diff)
	}
	api.mu.Lock()
	defer api.mu.Unlock()
	for _, b := range api.bodies {
		if strings.Contains(b, fieldValue) {
			t.Errorf("PagerDuty got %s, with a payload field", b)
		}
	}
}

func TestPagerDutyAlerts(t *testing.T) {
	tests := []struct {
		typ                   wire.EventType
		saga                  string
		action, key, severity string
	}{
		{wire.EventApproved, "sg_42", "trigger", "sagacity/sg_42/7", "warning"},
		{wire.EventEscalated, "sg_42", "trigger", "sagacity/sg_42/7", "warning"},
		{wire.EventRejected, "sg_42", "resolve", "sagacity/sg_42/7", ""},
		{wire.EventChangesRequested, "sg_42", "resolve", "sagacity/sg_42/7", ""},
		{wire.EventExpired, "sg_42", "resolve", "sagacity/sg_42/7", ""},
		{wire.EventDismissed, "sg_42", "resolve", "sagacity/sg_42/7", ""},
		{wire.EventFailed, "sg_42", "resolve", "sagacity/sg_42/7", ""},
		{wire.EventRefused, "sg_42", "resolve", "sagacity/sg_42/7", ""},
		{wire.EventDropped, "sg_42", "resolve", "sagacity/sg_42/7", ""},
		{wire.EventInDoubt, "sg_42", "trigger", "sagacity/sg_42/7/in-doubt", "error"},
		{wire.EventCompensationFailed, "sg_42", "trigger", "sagacity/sg_42/compensation", "error"},
		{wire.EventHalted, "", "trigger", "sagacity/log-halted", "critical"},
	}
	for _, tt := range tests {
		t.Run(string(tt.typ), func(t *testing.T) {
			api := &pagerDutyAPI{t: t}
			m := message(tt.typ)
			m.Event.SagaID = tt.saga
			if tt.saga == "" {
				m.Event.JournalSeq, m.Event.Tool = 0, ""
			}
			if _, err := pagerDuty(t, api).Send(t.Context(), m); err != nil {
				t.Fatalf("Send(%s) = %v", tt.typ, err)
			}
			evs := api.events(t)
			if len(evs) != 1 {
				t.Fatalf("Send(%s) sent %d events, want 1", tt.typ, len(evs))
			}
			ev := evs[0]
			payload, _ := ev["payload"].(map[string]any)
			severity, _ := payload["severity"].(string)
			got := []string{ev["event_action"].(string), ev["dedup_key"].(string), severity}
			if want := []string{tt.action, tt.key, tt.severity}; !slices.Equal(got, want) {
				t.Errorf("Send(%s) sent action, dedup_key, severity %q, want %q", tt.typ, got, want)
			}
		})
	}
}

func TestPagerDutyPagesNoOne(t *testing.T) {
	api := &pagerDutyAPI{t: t}
	p := pagerDuty(t, api)
	unknown := message("request.reminded")
	sagaless := message(wire.EventWaiting)
	sagaless.Event.SagaID = ""
	for _, m := range []Message{unknown, sagaless} {
		_, err := p.Send(t.Context(), m)
		if f, ok := errors.AsType[*Failure](err); !ok || !f.Permanent {
			t.Errorf("Send(%s, saga %q) = %v, want a Permanent *Failure", m.Event.Type, m.Event.SagaID, err)
		}
	}
	if evs := api.events(t); len(evs) != 0 {
		t.Errorf("PagerDuty got %v, want nothing", evs)
	}
}

func TestPagerDutySummary(t *testing.T) {
	api := &pagerDutyAPI{t: t}
	m := message(wire.EventWaiting)
	m.Event.Message = "x" + strings.Repeat("é", 600)
	if _, err := pagerDuty(t, api).Send(t.Context(), m); err != nil {
		t.Fatalf("Send with a message of %d bytes = %v", len(m.Event.Message), err)
	}
	got := api.events(t)[0]["payload"].(map[string]any)["summary"].(string)
	if want := "x" + strings.Repeat("é", 511); got != want {
		t.Errorf("summary of %d bytes, valid UTF-8 %v; want the message's first 1023 bytes", len(got), utf8.ValidString(got))
	}
}

func TestPagerDutyFailures(t *testing.T) {
	tests := []struct {
		name    string
		handler http.HandlerFunc
		want    Failure
		err     string
	}{
		{"rate limited", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Retry-After", "30")
			w.WriteHeader(http.StatusTooManyRequests)
		}, Failure{Status: 429, RetryAfter: 30 * time.Second}, "status 429: no body"},
		{"invalid event", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			_, _ = io.WriteString(w, `{"status":"invalid event","message":"Event object is invalid","errors":["Length of 'routing_key' is incorrect (should be 32 characters)"]}`)
		}, Failure{Status: 400, Permanent: true},
			`status 400: {"status":"invalid event","message":"Event object is invalid","errors":["Length of 'routing_key' is incorrect (should be 32 characters)"]}`},
		{"server error", func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "internal", http.StatusBadGateway)
		}, Failure{Status: 502}, "status 502: internal"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := pagerDuty(t, tt.handler).Send(t.Context(), message(wire.EventWaiting))
			f, ok := errors.AsType[*Failure](err)
			if !ok {
				t.Fatalf("Send = %v, want a *Failure", err)
			}
			got := Failure{Status: f.Status, RetryAfter: f.RetryAfter, Gone: f.Gone, Permanent: f.Permanent}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Send: Failure (-want +got):\n%s", diff)
			}
			if err.Error() != tt.err {
				t.Errorf("Send = %q, want %q", err, tt.err)
			}
		})
	}
}

// roundTrip is a transport that answers every request with f.
type roundTrip func(*http.Request) (*http.Response, error)

func (f roundTrip) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func TestPagerDutyDefaultURL(t *testing.T) {
	var got string
	client := &http.Client{Transport: roundTrip(func(r *http.Request) (*http.Response, error) {
		got = r.Method + " " + r.URL.String()
		return &http.Response{StatusCode: http.StatusAccepted, Body: io.NopCloser(strings.NewReader(`{"status":"success"}`))}, nil
	})}
	p := &PagerDuty{RoutingKey: routingKey, Client: client}
	if _, err := p.Send(t.Context(), message(wire.EventWaiting)); err != nil {
		t.Fatalf("Send = %v", err)
	}
	if want := "POST https://events.pagerduty.com/v2/enqueue"; got != want {
		t.Errorf("Send posted to %q, want %q", got, want)
	}
}
