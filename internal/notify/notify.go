// Package notify tells people what happened, where they are: it relays
// the engine's outbox (events written in the same transaction as the
// journal entries that cause them) to channels — signed webhooks
// (Standard Webhooks), Slack, email and PagerDuty — at least once, in
// order per request and endpoint, with retries. A notification is never
// a way to decide: it links to the console, where the engine's rules
// apply.
package notify

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/sagacity-go/sagacity/internal/payload"
	"github.com/sagacity-go/sagacity/wire"
)

// Message is what a channel sends for one event to one endpoint.
type Message struct {
	// Event is the event, its links absolute; every delivery of one
	// event carries the same.
	Event wire.Event
	// Fields are a few of the request's payload fields, for channels
	// that people read (Slack, email); webhooks and pagers never send
	// them. More counts those left out.
	Fields []payload.Field
	More   int
	// Thread is what the endpoint answered for the first message of the
	// thread this one belongs to (a request's messages, in order): ""
	// for the first. A channel that edits or replies to its first
	// message (Slack's channel and ts, an email's Message-ID) reads it.
	Thread string
	// First reports whether this is the thread's first message.
	First bool
}

// Channel delivers messages to one endpoint.
type Channel interface {
	// Send delivers m before ctx ends. For a thread's first message it
	// returns what later messages of the thread need (Thread); "" when
	// the channel needs nothing. An error that is a *Failure says what
	// the endpoint answered; any other error is retried.
	Send(ctx context.Context, m Message) (thread string, err error)
}

// Failure is a delivery the endpoint did not take.
type Failure struct {
	// Status is the HTTP status or SMTP reply code, 0 when none came.
	Status int
	// RetryAfter is how long the endpoint asked to wait (Retry-After,
	// 429), 0 when it did not say.
	RetryAfter time.Duration
	// Gone: the endpoint said it takes nothing more (410): it is
	// disabled until an approver enables it again.
	Gone bool
	// Permanent: retrying the same message cannot succeed (a 4xx other
	// than 408, 409, 425, 429; a 5xx SMTP reply); the delivery fails.
	Permanent bool
	Err       error
}

func (f *Failure) Error() string {
	if f.Status != 0 {
		return fmt.Sprintf("status %d: %v", f.Status, f.Err)
	}
	return f.Err.Error()
}

func (f *Failure) Unwrap() error { return f.Err }

// HTTPFailure classifies an HTTP answer that is not 2xx: 410 is Gone,
// 408, 409, 425, 429 and 5xx are retried (after Retry-After when given,
// in seconds or as an HTTP date), any other 4xx is Permanent. body is a
// bounded excerpt of the answer, for the operator.
func HTTPFailure(status int, retryAfter string, body string, now time.Time) *Failure {
	f := &Failure{Status: status, Err: errors.New(body), RetryAfter: parseRetryAfter(retryAfter, now)}
	if body == "" {
		f.Err = errors.New("no body")
	}
	switch {
	case status == 410:
		f.Gone = true
	case status == 408 || status == 409 || status == 425 || status == 429 || status >= 500:
	case status >= 400:
		f.Permanent = true
	}
	return f
}

// parseRetryAfter reads a Retry-After header: seconds, or an HTTP date.
// 0 when absent or unreadable.
func parseRetryAfter(v string, now time.Time) time.Duration {
	if v == "" {
		return 0
	}
	if s, err := strconv.Atoi(strings.TrimSpace(v)); err == nil && s >= 0 {
		return time.Duration(s) * time.Second
	}
	if t, err := time.Parse(time.RFC1123, v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}
