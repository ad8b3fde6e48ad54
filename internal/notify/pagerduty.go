package notify

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"
	"unicode/utf8"

	"github.com/sagacity-go/sagacity/wire"
)

// pagerDutyURL is where the Events API v2 takes events.
const pagerDutyURL = "https://events.pagerduty.com/v2/enqueue"

// PagerDuty pages through the Events API v2
// (https://github.com/PagerDuty/developer-docs/blob/main/docs/events-API-v2/02-Trigger-Events.md).
// A request's alert is triggered by its first event, updated by the
// others while it waits, and resolved by its last; a call in doubt, a
// failed compensation and a halted log each trigger one.
type PagerDuty struct {
	// URL is the Events API's; "" means PagerDuty's own.
	URL string
	// RoutingKey is the integration key of the service paged.
	RoutingKey string
	// Client sends, without following redirects; nil means one with a
	// 10 s timeout.
	Client *http.Client
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// pdEvent is an Events API v2 event: a resolve has no payload.
type pdEvent struct {
	RoutingKey  string     `json:"routing_key"`
	EventAction string     `json:"event_action"`
	DedupKey    string     `json:"dedup_key"`
	Payload     *pdPayload `json:"payload,omitempty"`
	Links       []pdLink   `json:"links,omitempty"`
}

// pdPayload is a trigger's alert.
type pdPayload struct {
	Summary       string    `json:"summary"`
	Source        string    `json:"source"`
	Severity      string    `json:"severity"`
	Timestamp     string    `json:"timestamp,omitempty"`
	Component     string    `json:"component,omitempty"`
	Group         string    `json:"group,omitempty"`
	Class         string    `json:"class"`
	CustomDetails pdDetails `json:"custom_details,omitzero"`
}

// pdDetails are what an alert shows of its event beyond the summary.
type pdDetails struct {
	Fingerprint   string   `json:"fingerprint,omitempty"`
	PayloadSHA256 string   `json:"payloadSha256,omitempty"`
	Requester     string   `json:"requester,omitempty"`
	Rule          string   `json:"rule,omitempty"`
	Quorum        int      `json:"quorum,omitempty"`
	ApprovedBy    []string `json:"approvedBy,omitempty"`
	ExpiresAt     string   `json:"expiresAt,omitempty"`
	Escalation    int      `json:"escalation,omitempty"`
}

// pdLink is a link an alert shows.
type pdLink struct {
	Href string `json:"href"`
	Text string `json:"text"`
}

// summaryBytes is the most of a message an alert's summary shows: the
// API takes 1024 characters.
const summaryBytes = 1024

// requestActions are what a request's events do to its alert: each
// waiting one triggers (or updates) it, its last resolves it.
var requestActions = map[wire.EventType]string{
	wire.EventWaiting: "trigger", wire.EventVoted: "trigger", wire.EventApproved: "trigger", wire.EventEscalated: "trigger",
	wire.EventRejected: "resolve", wire.EventChangesRequested: "resolve", wire.EventExpired: "resolve", wire.EventDismissed: "resolve",
	wire.EventCancelled: "resolve",
	wire.EventExecuted:  "resolve", wire.EventFailed: "resolve", wire.EventRefused: "resolve", wire.EventDropped: "resolve",
}

// alert is what ev does to PagerDuty: its action, the dedup key of the
// alert it is about and, for a trigger, the alert's severity; ok is
// false for an event that pages no one.
func alert(ev wire.Event) (action, key, severity string, ok bool) {
	request := fmt.Sprintf("sagacity/%s/%d", ev.SagaID, ev.JournalSeq)
	switch {
	case ev.SagaID != "" && requestActions[ev.Type] != "":
		return requestActions[ev.Type], request, "warning", true
	case ev.SagaID != "" && ev.Type == wire.EventInDoubt:
		return "trigger", request + "/in-doubt", "error", true
	case ev.SagaID != "" && ev.Type == wire.EventCompensationFailed:
		return "trigger", "sagacity/" + ev.SagaID + "/compensation", "error", true
	case ev.Type == wire.EventHalted:
		return "trigger", "sagacity/log-halted", "critical", true
	case ev.Type == wire.EventUnmeetable:
		return "trigger", "sagacity/unmeetable/" + ev.Rule, "warning", true
	case ev.SagaID != "" && ev.Type == wire.EventBreakGlass:
		return "trigger", request + "/break-glass", "critical", true
	case ev.SagaID != "" && ev.Type == wire.EventRatified:
		return "resolve", request + "/break-glass", "", true
	}
	return "", "", "", false
}

// Send sends m's event to PagerDuty, never its fields. A 2xx (202) takes
// it; any other answer is a *Failure (HTTPFailure's: an invalid event's
// 400 is Permanent, 429 and 5xx are retried), and a delivery that got no
// answer a plain error. An event that pages no one is a Permanent
// Failure.
func (p *PagerDuty) Send(ctx context.Context, m Message) (string, error) {
	ev := m.Event
	action, key, severity, ok := alert(ev)
	if !ok {
		return "", &Failure{Permanent: true, Err: fmt.Errorf("pagerduty: %s pages no one", ev.Type)}
	}
	e := pdEvent{RoutingKey: p.RoutingKey, EventAction: action, DedupKey: key}
	if action == "trigger" {
		e.Payload = &pdPayload{
			Summary: cmp.Or(truncate(ev.Message, summaryBytes), string(ev.Type)), Source: "sagacity", Severity: severity,
			Timestamp: ev.Time, Component: ev.Tool, Group: ev.SagaID, Class: string(ev.Type),
			CustomDetails: pdDetails{Fingerprint: ev.Fingerprint, PayloadSHA256: ev.PayloadSHA256, Requester: ev.Requester,
				Rule: ev.Rule, Quorum: ev.Quorum, ApprovedBy: ev.ApprovedBy, ExpiresAt: ev.ExpiresAt, Escalation: ev.Escalation},
		}
		if ev.Link != "" {
			e.Links = []pdLink{{Href: ev.Link, Text: "Open in Sagacity"}}
		}
	}
	body, err := json.Marshal(e)
	if err != nil {
		return "", &Failure{Permanent: true, Err: err}
	}
	return "", postJSON(ctx, p.Client, cmp.Or(p.URL, pagerDutyURL), body, nil, clock(p.Now))
}

// truncate is s cut to at most n bytes, at a character.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
