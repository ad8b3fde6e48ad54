// Package httptool runs tools that live behind HTTP endpoints: an
// engine.Executor that POSTs each call, signed with toolsig, to the tool's
// execute URL and each undo to its compensate URL.
//
// Every request carries these headers, so that a tool server can check the
// call and deduplicate retries:
//
//	Content-Type:       application/json
//	Sagacity-Saga-Id:   <saga id>
//	Sagacity-Seq:       <seq>, the request's for a resumed call, else the INTENT's
//	Sagacity-Tool:      <tool name>
//	Sagacity-Phase:     execute, or compensate
//	Idempotency-Key:    <saga id>/<seq>, or <saga id>/<seq>/compensate
//	Sagacity-Signature: toolsig.Sign(secret, now, request, body)
//
// The signature binds the method (POST), the request target (the URL's
// escaped path and query), the tool, the idempotency key and the phase as
// well as the body, so a tool server that checks its own tool and phase
// (toolsig.Handler) refuses a request signed for another tool.
//
// Saga ids and tool names are UTF-8 and may hold what a header value should
// not (non-ASCII, or spaces a server would trim). They are sent as
// toolsig.HeaderValue makes them: as they are when made only of visible
// ASCII other than '%', percent-encoded as by url.PathEscape otherwise. So a
// header value that contains '%' is encoded and a tool server decodes it
// (url.PathUnescape in Go, decodeURIComponent in JavaScript), and two ids
// never share a value. The seq is always the last '/'-separated part of an
// Idempotency-Key before "/compensate", so a '/' left in a saga id is not
// ambiguous.
//
// Errors are journaled and shown to API callers, so their messages name the
// tool but never its URL, credentials or the signing secret.
package httptool

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/sagacity-go/sagacity/internal/engine"
	"github.com/sagacity-go/sagacity/toolsig"
)

// Defaults for a Tool's zero values.
const (
	DefaultTimeout   = 10 * time.Second
	DefaultMaxResult = 1 << 20
)

// snippetLen is how much of a failed answer's body goes into the error.
const snippetLen = 200

// Endpoint is a URL that a tool's calls are POSTed to.
type Endpoint struct {
	URL     string        // absolute http or https URL
	Timeout time.Duration // for the whole exchange; DefaultTimeout if zero
}

// Tool is an HTTP tool. It is an engine.Executor and safe for concurrent
// use. Its fields are named Exec and Undo because Execute and Compensate
// are its methods.
type Tool struct {
	Name      string    // used in messages and the Sagacity-Tool header; the invocation's tool when empty
	Exec      Endpoint  // where Execute POSTs
	Undo      *Endpoint // where Compensate POSTs; nil for an IRREVERSIBLE tool
	Secret    []byte    // the signing secret
	MaxResult int64     // the largest result body accepted, in bytes; DefaultMaxResult if not positive

	// Client sends the requests; nil means a client built on a clone of
	// http.DefaultTransport. Whatever the client, redirects are not
	// followed: a signed request must not be re-sent to another server.
	Client *http.Client
	Now    func() time.Time // the signature's clock; time.Now if nil
}

// defaultClient keeps a connection to a tool for each call to it that
// runs at once (up to the transport's 100 idle connections in all): with
// the default of two a host, a busy tool's calls dialled anew, and at 64
// at once dialling was a tenth of what the server spent.
var defaultClient = &http.Client{Transport: func() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = t.MaxIdleConns
	return t
}()}

func noRedirect(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// callError is a failed call. Its message is safe to journal and show; the
// cause, if any, is for logs and errors.Is.
type callError struct {
	msg string
	err error
}

func (e *callError) Error() string { return e.msg }
func (e *callError) Unwrap() error { return e.err }

// Execute POSTs inv.Input, byte for byte, to the execute endpoint and
// returns the body of a 2xx answer, whatever its bytes: the call happened,
// and the engine journals a result that is not text in a reversible
// encoding. Any other answer, a timeout, an unreachable server or a body
// larger than MaxResult is an error.
func (t *Tool) Execute(ctx context.Context, inv engine.Invocation) (string, error) {
	return t.post(ctx, toolsig.Execute, t.Exec, inv, inv.Key(engine.ToolExecute), []byte(inv.Input))
}

// compensation is the body of an undo request.
type compensation struct {
	SagaID   string `json:"sagaId"`
	Seq      int64  `json:"seq"`
	ToolName string `json:"toolName"`
	Input    string `json:"input"`
	Result   string `json:"result"`
}

// Compensate POSTs the call and its result as JSON,
// {"sagaId","seq","toolName","input","result"}, to the compensate endpoint.
// A result that JSON cannot carry byte for byte (invalid UTF-8) is sent as
// the journal keeps it, engine.EncodeText's "sagacity-base64:…". A 2xx
// answer means the call is undone; its body is ignored. A tool without a
// compensate endpoint returns an error.
func (t *Tool) Compensate(ctx context.Context, inv engine.Invocation, result string) error {
	name := t.name(inv)
	if t.Undo == nil {
		return &callError{msg: fmt.Sprintf("tool %s has no compensate endpoint", name)}
	}
	body, err := json.Marshal(compensation{SagaID: inv.SagaID, Seq: inv.KeySeq(), ToolName: name, Input: inv.Input, Result: engine.EncodeText(result)})
	if err != nil {
		// Cannot happen with strings and an integer.
		return &callError{msg: fmt.Sprintf("tool %s compensation: encoding the request failed", name), err: err}
	}
	_, err = t.post(ctx, toolsig.Compensate, *t.Undo, inv, inv.Key(engine.ToolCompensate), body)
	return err
}

func (t *Tool) name(inv engine.Invocation) string {
	if t.Name != "" {
		return t.Name
	}
	return inv.Tool
}

// post sends one signed request for phase and returns the result of an
// execution.
func (t *Tool) post(ctx context.Context, phase toolsig.Phase, ep Endpoint, inv engine.Invocation, key string, body []byte) (string, error) {
	name := t.name(inv)
	undo := phase == toolsig.Compensate
	prefix := "tool " + name
	if undo {
		prefix += " compensation"
	}
	fail := func(err error, format string, args ...any) (string, error) {
		return "", &callError{msg: prefix + " " + fmt.Sprintf(format, args...), err: err}
	}

	u, err := url.Parse(ep.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		// The parse error quotes the URL, which may hold a password.
		return fail(nil, "has an invalid %s URL", phase)
	}
	red := redactor(u, t.Secret)

	timeout := ep.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	// classify turns a transport error into a message; a deadline is ours
	// unless the caller's context ended first.
	classify := func(err error, broken string) (string, error) {
		switch {
		case ctx.Err() != nil:
			return fail(err, "canceled: %v", ctx.Err())
		case errors.Is(rctx.Err(), context.DeadlineExceeded):
			return fail(err, "timed out after %s", timeout)
		}
		return fail(err, "%s: %s", broken, snippet(clean(red(reason(err)))))
	}

	req, err := http.NewRequestWithContext(rctx, http.MethodPost, ep.URL, bytes.NewReader(body))
	if err != nil {
		return fail(nil, "cannot build a request")
	}
	now := time.Now
	if t.Now != nil {
		now = t.Now
	}
	tool := toolsig.HeaderValue(name)
	h := req.Header
	h.Set("Content-Type", "application/json")
	h.Set(toolsig.HeaderSaga, toolsig.HeaderValue(inv.SagaID))
	h.Set(toolsig.HeaderSeq, strconv.FormatInt(inv.KeySeq(), 10))
	h.Set(toolsig.HeaderTool, tool)
	h.Set(toolsig.HeaderPhase, string(phase))
	h.Set(toolsig.HeaderKey, key)
	signed := toolsig.Request{Method: http.MethodPost, Path: req.URL.RequestURI(), Tool: tool, Key: key, Phase: phase}
	h.Set(toolsig.Header, toolsig.Sign(t.Secret, now(), signed, body))

	client := *defaultClient
	if t.Client != nil {
		client = *t.Client
	}
	client.CheckRedirect = noRedirect
	resp, err := client.Do(req)
	if err != nil {
		return classify(err, "unreachable")
	}
	defer resp.Body.Close()

	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		// Read a little more than is shown so that a secret straddling
		// the cut is still found and redacted.
		// A read error leaves what arrived, which is all a message needs.
		b, _ := io.ReadAll(io.LimitReader(resp.Body, snippetLen+256))
		if s := snippet(clean(red(string(b)))); s != "" {
			return fail(nil, "answered %d: %s", resp.StatusCode, s)
		}
		return fail(nil, "answered %d", resp.StatusCode)
	}
	if undo {
		// Reading a short answer to its end lets the connection be reused.
		_, _ = io.CopyN(io.Discard, resp.Body, 4<<10)
		return "", nil
	}

	limit := t.MaxResult
	if limit <= 0 {
		limit = DefaultMaxResult
	}
	// One byte over the cap is enough to know the answer is too large;
	// the rest is never read, and closing the body drops the connection.
	b, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return classify(err, "answer was cut short")
	}
	if int64(len(b)) > limit {
		return fail(nil, "result exceeds %d bytes", limit)
	}
	return string(b), nil
}

// reason describes a transport error in a few words, without the URL or
// the addresses that net errors carry.
func reason(err error) string {
	if dns, ok := errors.AsType[*net.DNSError](err); ok {
		switch {
		case dns.IsNotFound:
			return "no such host"
		case dns.IsTimeout:
			return "DNS lookup timed out"
		}
		return "DNS lookup failed"
	}
	if _, ok := errors.AsType[*tls.CertificateVerificationError](err); ok {
		return "TLS certificate not trusted"
	}
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, syscall.ECONNRESET):
		return "connection reset"
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "connection closed"
	}
	if op, ok := errors.AsType[*net.OpError](err); ok && op.Err != nil {
		return op.Err.Error()
	}
	if ue, ok := errors.AsType[*url.Error](err); ok {
		err = ue.Err
	}
	return err.Error()
}

// redactor returns a function that hides u's userinfo and the secret.
func redactor(u *url.URL, secret []byte) func(string) string {
	var hide []string
	if u.User != nil {
		hide = append(hide, u.User.String())
		if p, ok := u.User.Password(); ok && p != "" {
			hide = append(hide, p)
		}
	}
	if len(secret) > 0 {
		hide = append(hide, string(secret))
	}
	return func(s string) string {
		for _, h := range hide {
			s = strings.ReplaceAll(s, h, "[redacted]")
		}
		return s
	}
}

// clean makes s fit in one line of a message: valid UTF-8, with control
// characters (newlines included) as spaces.
func clean(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	return strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, s)
}

// snippet trims s and cuts it to snippetLen bytes, on a rune boundary,
// marking a cut with an ellipsis.
func snippet(s string) string {
	s = strings.TrimSpace(s)
	if len(s) <= snippetLen {
		return s
	}
	cut := snippetLen
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return strings.TrimSpace(s[:cut]) + "…"
}
