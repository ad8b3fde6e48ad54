package client

import (
	"context"
	"crypto/rand"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/sagacity-go/sagacity/wire"
)

// Call runs a tool with input, the exact bytes the tool receives, in a
// saga: POST /sagacity/sagas/{sagaID}/calls. The first call creates the
// saga, with the caller as its initiator. An IRREVERSIBLE tool does not
// run: the call is AwaitingApproval until a person approves the result's
// Seq, and Resume runs it.
//
// When the tool failed, the saga was compensated: Call returns the result
// (Status Compensated or CompensationFailed, and the Error) with an *Error
// of status 422. Other errors: ErrNotFound for an unknown tool (nothing
// is journaled), ErrForbidden for another agent's saga, ErrConflict when
// the saga is final, compensating or ended, or has a call in doubt
// (Code CodeInDoubt), ErrInvalid for an input the tool's schema refuses.
//
// With Wait set, a gated call waits for its request's decision (see the
// package doc). Call sends the call under a new idempotency key and
// retries it under that key as CallWithKey does; an agent that must go on asking after
// RetryFor, or after its own restart, uses CallWithKey with a key it
// keeps.
func (c *Client) Call(ctx context.Context, sagaID, tool, input string) (CallResult, error) {
	return c.Ask(ctx, sagaID, Ask{Tool: tool, Input: input})
}

// Ask is a call as the agent makes it: the tool, its exact input, and
// optionally its idempotency key (a new one when empty) and why the
// agent asks, which is journaled with the call and shown to the people
// who decide it.
type Ask struct {
	Tool, Input string
	Key, Reason string
}

// Ask is Call with a's key (a new one when empty) and reason.
func (c *Client) Ask(ctx context.Context, sagaID string, a Ask) (CallResult, error) {
	if a.Key == "" {
		a.Key = rand.Text()
	}
	return c.callOnce(ctx, sagaID, a)
}

// CallWithKey is Call under the idempotency key key: 1 to 255 printable
// ASCII characters, one per logical call, kept by the server for the
// saga's life. The same call sent again under key runs nothing and
// answers the first one's outcome: executed, awaiting approval, failed,
// or InDoubt when the server went away while it ran. CallWithKey sends it
// again itself while the answer is lost or the call still runs, for up
// to RetryFor besides the time the server held it (see Wait), waiting
// longer each time. The key sent with another tool or input is refused:
// an *Error of status 422, Code CodeKeyReused.
func (c *Client) CallWithKey(ctx context.Context, sagaID, tool, input, key string) (CallResult, error) {
	return c.callOnce(ctx, sagaID, Ask{Tool: tool, Input: input, Key: key})
}

// callOnce sends one logical call, again under its key while its answer is
// lost (see CallWithKey).
func (c *Client) callOnce(ctx context.Context, sagaID string, a Ask) (CallResult, error) {
	key := a.Key
	body := wire.CallRequest{Tool: a.Tool, Input: &a.Input, Reason: a.Reason}
	if len(key) == 0 || len(key) > 255 || strings.ContainsFunc(key, func(r rune) bool { return r < 0x20 || r > 0x7e }) {
		return CallResult{}, fmt.Errorf("sagacity: an idempotency key is 1 to 255 printable ASCII characters, not %q", key)
	}
	path := sagaPath("sagas", sagaID) + "/calls"
	header := http.Header{"Idempotency-Key": {strconv.Quote(key)}} // an sf-string
	retryFor := c.RetryFor
	if retryFor == 0 {
		retryFor = time.Minute
	}
	held := time.Now().Add(c.Wait)
	give := time.Now().Add(retryFor)
	wait := 100 * time.Millisecond
	for {
		sent := time.Now()
		a, err := c.sendUntil(ctx, http.MethodPost, path, nil, header, body, held)
		if c.Wait > 0 {
			give = give.Add(time.Since(sent)) // the time it was held is no retrying
		}
		if !lost(a, err) || ctx.Err() != nil || time.Now().Add(wait).After(give) {
			if err != nil {
				return CallResult{}, err
			}
			return read[CallResult](a, http.StatusUnprocessableEntity)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return CallResult{}, ctx.Err()
		case <-t.C:
		}
		wait = min(2*wait, 2*time.Second)
	}
}

// lost reports whether a call's answer is not its outcome: the request
// or its answer was lost, the server could not take it yet, or the call
// still runs.
func lost(a answer, err error) bool {
	if err != nil {
		return true
	}
	switch a.code {
	case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	case http.StatusConflict:
		return newError(a).Code == CodeInProgress
	}
	return false
}

// End says the agent's run is over: POST /sagacity/sagas/{sagaID}/end. The
// saga is COMPLETED, or AWAITING_APPROVAL until its last request is
// resumed or rejected. ErrNotFound, ErrForbidden, ErrConflict.
func (c *Client) End(ctx context.Context, sagaID string) (Saga, error) {
	return do[Saga](ctx, c, http.MethodPost, sagaPath("sagas", sagaID)+"/end", nil, nil)
}

// Abort fails the saga, compensates its executed calls and drops its
// pending requests: POST /sagacity/sagas/{sagaID}/abort. reason may be "".
// ErrNotFound, ErrForbidden, ErrConflict.
func (c *Client) Abort(ctx context.Context, sagaID, reason string) (Saga, error) {
	return do[Saga](ctx, c, http.MethodPost, sagaPath("sagas", sagaID)+"/abort", nil, wire.AbortRequest{Reason: reason})
}

// Saga reads one saga: GET /sagacity/sagas/{sagaID}. ErrNotFound.
func (c *Client) Saga(ctx context.Context, sagaID string) (Saga, error) {
	return do[Saga](ctx, c, http.MethodGet, sagaPath("sagas", sagaID), nil, nil)
}

// SagaQuery selects a page of sagas.
type SagaQuery struct {
	Status Status // "" for any
	Limit  int    // 1 to 500; 0 means the server's default, 50
	Cursor string // a page's NextCursor, to read the page after it
}

// Sagas lists sagas, newest first: GET /sagacity/sagas. ErrInvalid for a
// limit out of bounds, an unknown status or a cursor the server did not
// give.
func (c *Client) Sagas(ctx context.Context, q SagaQuery) (SagaPage, error) {
	v := url.Values{}
	if q.Status != "" {
		v.Set("status", string(q.Status))
	}
	if q.Limit != 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	if q.Cursor != "" {
		v.Set("cursor", q.Cursor)
	}
	return do[SagaPage](ctx, c, http.MethodGet, "/sagacity/sagas", v, nil)
}

// Requests says what became of each request of a saga, as its agent
// reads it: pending (and where its votes stand), approved, executed,
// rejected, or sent back with what to change (Message):
// GET /sagacity/sagas/{sagaID}/requests. ErrNotFound for no such saga,
// ErrForbidden for another agent's.
func (c *Client) Requests(ctx context.Context, sagaID string) (SagaRequests, error) {
	return do[SagaRequests](ctx, c, http.MethodGet, sagaPath("sagas", sagaID)+"/requests", nil, nil)
}

// CallsInDoubt lists the calls whose outcome the journal does not know:
// those a server process left when it went away, at once, and those that
// have not moved for at least olderThan (a negative olderThan means the
// server's in-doubt window, after which a person may resolve them):
// GET /sagacity/in-doubt. Nothing re-runs them, and their saga takes no
// other call; a person finds out what happened and Resolves them.
// ErrForbidden without the approver or auditor role.
func (c *Client) CallsInDoubt(ctx context.Context, olderThan time.Duration) ([]CallInDoubt, error) {
	var q url.Values
	if olderThan >= 0 {
		q = url.Values{"olderThan": {olderThan.String()}}
	}
	return do[[]CallInDoubt](ctx, c, http.MethodGet, "/sagacity/in-doubt", q, nil)
}

// Resolve records what became of the call in doubt at seq, and returns the
// saga: POST /sagacity/in-doubt/{sagaID}/{seq}/resolve. A call that did
// not happen fails, and the saga is compensated. ErrNotFound for no such
// call, ErrConflict when it is not in doubt, ErrForbidden for the saga's
// initiator or the call's requester (four-eyes) and without the approver
// role.
func (c *Client) Resolve(ctx context.Context, sagaID string, seq int64, happened bool, result, reason string) (Saga, error) {
	path := fmt.Sprintf("%s/%d/resolve", sagaPath("in-doubt", sagaID), seq)
	return do[Saga](ctx, c, http.MethodPost, path, nil, wire.Resolution{Happened: &happened, Result: result, Reason: reason})
}
