// Package client calls Sagacity's JSON API from Go: the agent gateway
// (call a tool in a saga, end it, abort it), the approval endpoints
// (approve, reject, resume), and what an auditor reads (journals,
// verification, receipts, the global log's checkpoints and proofs). Its
// types are package wire's, the API's one declaration, and it imports
// nothing of the server, so any module can use it.
//
// A Client is the server's address and a bearer token:
//
//	agent := &client.Client{BaseURL: "https://sagacity.example.com", Token: os.Getenv("SAGACITY_TOKEN")}
//	res, err := agent.Call(ctx, "order-42", "sendWireTransfer", `{"amount":"100","to":"alice"}`)
//	if err != nil {
//		return err
//	}
//	if res.Outcome == client.Gated {
//		// Once a person approves res.JournalSeq: agent.Resume(ctx, "order-42", res.JournalSeq, <the same input>).
//	}
//
// Every answer that is not 2xx is returned as an *Error holding the status
// and what the server said (its message, kind and code), and errors.Is
// matches it against ErrInvalid (400), ErrUnauthorized (401), ErrForbidden
// (403), ErrNotFound (404) and ErrConflict (409); other statuses (413,
// 422, 429, 503…) are of no kind. A few refusals are outcomes too: a call
// or a resume whose tool failed (422) and a refused resume (409) also
// return their result, which says how the saga was compensated. A 2xx
// answer may still not be an execution: a gated call's Outcome is Gated,
// and a tool that ran but whose outcome could not be journaled is InDoubt
// (do not call it again). Status is always the saga's.
//
// Call sends each call under an idempotency key of its own and, while
// the answer is lost (a transport error, a restarting server: 429, 502,
// 503, 504) or the call still runs (409 IN_PROGRESS), sends it again
// under the same key for up to RetryFor: the server runs it at most once
// and answers each repeat with the first call's outcome. No other request
// is retried; a transport error is returned as net/http gives it, and the
// outcome of a request that changes something is then unknown. Answers
// are read up to 64 MiB.
//
// With Wait set, a call of a gated tool and a resume wait for the
// request's decision (RFC 7240, "Prefer: wait"): the server holds the
// answer until people decide, for up to Wait (or its own cap,
// policy.maxWait), then answers as it would then. A held call answers
// the tool's result when the request's rule executes on approval,
// Gated with a message saying it was approved under the default rule
// (Resume it with the same bytes), or the refusal (rejected, sent back,
// expired); a wait that ends first answers Gated as at once. A held call
// whose answer is lost is sent again under its key, which holds the same
// request again, for what is left of Wait (the time it was held does not
// count against RetryFor): the server never makes a second request of
// it.
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Client calls one Sagacity server. Its zero value is not usable: set
// BaseURL. A Client is safe for concurrent use.
type Client struct {
	// BaseURL is where the server listens, such as
	// "https://sagacity.example.com"; the API is under /sagacity.
	BaseURL string
	// Token is sent as "Authorization: Bearer <Token>". "" sends none,
	// which only a server in dev mode accepts.
	Token string
	// HTTPClient sends the requests; nil means http.DefaultClient.
	HTTPClient *http.Client
	// RetryFor bounds how long a call is sent again under its key (see
	// CallWithKey), besides the time the server held it; 0 means a
	// minute, and a negative value sends it once.
	RetryFor time.Duration
	// Wait is how long a call of a gated tool, or a resume, waits for
	// its request's decision (Prefer: wait=<seconds>, rounded up); 0
	// answers at once. The HTTP client's Timeout, when shorter, is
	// lengthened to cover it.
	Wait time.Duration
}

// waitMargin is how much longer than its wait a held request may take,
// as the server allows itself to write a held answer.
const waitMargin = 30 * time.Second

// prefer adds the wait preference for what is left of the wait until
// to header, and returns the HTTP client to send it with: hc, or a copy
// whose Timeout covers the wait.
func prefer(header http.Header, hc *http.Client, until time.Time) *http.Client {
	left := time.Until(until)
	if left <= 0 {
		return hc
	}
	header.Set("Prefer", "wait="+strconv.FormatInt(int64((left+time.Second-1)/time.Second), 10))
	if hc.Timeout == 0 || hc.Timeout >= left+waitMargin {
		return hc
	}
	longer := *hc
	longer.Timeout = left + waitMargin
	return &longer
}

// maxAnswer caps how much of an answer is read.
const maxAnswer = 64 << 20

// answer is a response read whole, with the request it answers.
type answer struct {
	method, path string
	code         int
	header       http.Header
	body         []byte
}

// send makes one request to path, with query, header, and a JSON body
// when in is not nil, and reads the answer.
func (c *Client) send(ctx context.Context, method, path string, query url.Values, header http.Header, in any) (answer, error) {
	return c.sendUntil(ctx, method, path, query, header, in, time.Time{})
}

// sendUntil is send, asking the server to hold its answer until the
// request it makes or names is decided, or until (see Wait).
func (c *Client) sendUntil(ctx context.Context, method, path string, query url.Values, header http.Header, in any, until time.Time) (answer, error) {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return answer{}, err
		}
		body = bytes.NewReader(b)
	}
	u := strings.TrimSuffix(c.BaseURL, "/") + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return answer{}, err
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	hc := c.HTTPClient
	if hc == nil {
		hc = http.DefaultClient
	}
	hc = prefer(req.Header, hc, until)
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return answer{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer+1))
	if err != nil {
		return answer{}, fmt.Errorf("sagacity: %s %s: reading the answer: %w", method, path, err)
	}
	if len(b) > maxAnswer {
		return answer{}, fmt.Errorf("sagacity: %s %s: the answer is longer than %d bytes", method, path, maxAnswer)
	}
	return answer{method, path, resp.StatusCode, resp.Header, b}, nil
}

// ok reports a 2xx status.
func (a answer) ok() bool { return a.code >= 200 && a.code < 300 }

// decode reads the answer's JSON body into out.
func (a answer) decode(out any) error {
	if err := json.Unmarshal(a.body, out); err != nil {
		return fmt.Errorf("sagacity: %s %s: %d answer is not the JSON expected: %w", a.method, a.path, a.code, err)
	}
	return nil
}

// do makes a request and decodes a JSON answer into a T: a 2xx answer's
// body, and that of a status in also, whose body says what happened as
// well as why it is an error (which is returned with it).
func do[T any](ctx context.Context, c *Client, method, path string, query url.Values, in any, also ...int) (T, error) {
	a, err := c.send(ctx, method, path, query, nil, in)
	if err != nil {
		var zero T
		return zero, err
	}
	return read[T](a, also...)
}

// read decodes an answer as do does.
func read[T any](a answer, also ...int) (T, error) {
	var out T
	if !a.ok() {
		if slices.Contains(also, a.code) {
			_ = json.Unmarshal(a.body, &out) // the body's outcome is extra; the error is the answer
		}
		return out, newError(a)
	}
	if err := a.decode(&out); err != nil {
		var zero T
		return zero, err
	}
	return out, nil
}

// text makes a GET request whose 2xx answer is text.
func (c *Client) text(ctx context.Context, path string) (string, error) {
	a, err := c.send(ctx, http.MethodGet, path, nil, nil, nil)
	if err != nil {
		return "", err
	}
	if !a.ok() {
		return "", newError(a)
	}
	return string(a.body), nil
}

// sagaPath is /sagacity/<prefix>/<sagaID>, the saga's id escaped (it may
// hold any printable character, "/" included).
func sagaPath(prefix, sagaID string) string {
	return "/sagacity/" + prefix + "/" + url.PathEscape(sagaID)
}

// Ready reports whether the server and its database answer: GET /readyz.
// It returns an *Error (503) while the database is unavailable.
func (c *Client) Ready(ctx context.Context) error {
	_, err := c.text(ctx, "/readyz")
	return err
}
