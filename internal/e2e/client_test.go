package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"strings"
	"sync"
	"time"

	sagacity "github.com/sagacity-go/sagacity/client"
)

// requestTimeout bounds one request to the server.
const requestTimeout = 45 * time.Second

// client calls the API with one bearer token from one source address, so
// that it has a rate-limit budget of its own on each server process.
type client struct {
	name      string // the token's name; the principal is token:<name>
	token     string
	ip        string
	transport http.RoundTripper
	tr        *transcript
}

func newClient(name, token, ip string, tr *transcript) *client {
	d := &net.Dialer{Timeout: 5 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
	return &client{name: name, token: token, ip: ip, tr: tr,
		transport: &http.Transport{DialContext: d.DialContext, MaxIdleConnsPerHost: 16, IdleConnTimeout: 30 * time.Second}}
}

// principal is the identity the server journals for the client.
func (c *client) principal() string { return "token:" + c.name }

// answer is one exchange, as it went over the wire. err is set when no
// complete answer came back (the connection failed or was reset): the
// outcome is then unknown.
type answer struct {
	who    string
	method string
	path   string
	code   int
	body   string
	err    error
	bad    error // a body the public client could not read as documented
	wrote  bool  // the request was written to a connection, once at least
}

func (a answer) String() string {
	if a.err != nil {
		return fmt.Sprintf("%s %s (%s): no answer: %v", a.method, a.path, a.who, a.err)
	}
	s := fmt.Sprintf("%s %s (%s): %d %s", a.method, a.path, a.who, a.code, strings.TrimSpace(a.body))
	if a.bad != nil {
		s += fmt.Sprintf(" [undecodable: %v]", a.bad)
	}
	return s
}

// is reports a complete, well-formed answer with status code.
func (a answer) is(code int) bool { return a.err == nil && a.bad == nil && a.code == code }

// ask makes one request to s through the public client, which fn is
// given, and returns the exchange, which the transcript records too. The
// client sends a call once: a test that retries says so (retrying).
func (c *client) ask(ctx context.Context, s *server, fn func(ctx context.Context, api *sagacity.Client) error) answer {
	return c.retrying(ctx, s, -1, fn)
}

// endpoint is where a client sends its requests: a server, or what
// stands in front of it.
type endpoint interface {
	URL() string
	generation() string
}

// retrying is ask with a client that sends a call again for up to
// retryFor while its answer is lost; the answer is the last exchange.
func (c *client) retrying(ctx context.Context, s endpoint, retryFor time.Duration, fn func(ctx context.Context, api *sagacity.Client) error) answer {
	gen := s.generation()
	a := answer{who: c.name + "@" + gen}
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	hc := &http.Client{
		Transport:     &recorder{c: c, gen: gen, a: &a},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	err := fn(ctx, &sagacity.Client{BaseURL: s.URL(), Token: c.token, HTTPClient: hc, RetryFor: retryFor})
	if _, refused := errors.AsType[*sagacity.Error](err); err != nil && !refused && a.err == nil {
		a.bad = err
	}
	return a
}

// recorder is the transport of one exchange: it keeps the status and body
// in its answer, and writes the exchange to the transcript once the body
// is read.
type recorder struct {
	c   *client
	gen string
	a   *answer
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	var sent []byte
	if req.GetBody != nil {
		if b, err := req.GetBody(); err == nil {
			sent, _ = io.ReadAll(b)
		}
	}
	r.a.method, r.a.path = req.Method, req.URL.RequestURI()
	line := fmt.Sprintf("%s@%s %s %s %s %s", r.c.name, r.c.ip, r.gen, req.Method, r.a.path, sent)
	req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
		WroteRequest: func(httptrace.WroteRequestInfo) { r.a.wrote = true },
	}))
	resp, err := r.c.transport.RoundTrip(req)
	if err != nil {
		r.a.err = err
		r.c.tr.add("%s → error %v", line, err)
		return nil, err
	}
	r.a.code = resp.StatusCode
	resp.Body = &taped{ReadCloser: resp.Body, done: func(body string, err error) {
		r.a.body, r.a.err = body, err
		if err != nil {
			r.c.tr.add("%s → error %v", line, err)
			return
		}
		if len(body) > 400 {
			body = body[:400] + "…"
		}
		r.c.tr.add("%s → %d %s", line, r.a.code, strings.TrimSpace(body))
	}}
	return resp, nil
}

// taped is a response body that keeps what is read of it, and hands it,
// with the error that cut it short if any, to done when closed.
type taped struct {
	io.ReadCloser
	buf    bytes.Buffer
	err    error
	done   func(body string, err error)
	closed bool
}

func (t *taped) Read(p []byte) (int, error) {
	n, err := t.ReadCloser.Read(p)
	t.buf.Write(p[:n])
	if err != nil && err != io.EOF {
		t.err = err
	}
	return n, err
}

func (t *taped) Close() error {
	err := t.ReadCloser.Close()
	if !t.closed {
		t.closed = true
		t.done(t.buf.String(), t.err)
	}
	return err
}

func (c *client) call(ctx context.Context, s *server, saga, tool, input string) (a answer, r sagacity.CallResult) {
	a = c.ask(ctx, s, func(ctx context.Context, api *sagacity.Client) (err error) {
		r, err = api.Call(ctx, saga, tool, input)
		return err
	})
	return a, r
}

func (c *client) end(ctx context.Context, s *server, saga string) (a answer, r sagacity.Saga) {
	a = c.ask(ctx, s, func(ctx context.Context, api *sagacity.Client) (err error) {
		r, err = api.End(ctx, saga)
		return err
	})
	return a, r
}

func (c *client) approve(ctx context.Context, s *server, saga string, seq int64) (a answer, r sagacity.Decision) {
	a = c.ask(ctx, s, func(ctx context.Context, api *sagacity.Client) (err error) {
		r, err = api.Approve(ctx, saga, seq, "")
		return err
	})
	return a, r
}

func (c *client) reject(ctx context.Context, s *server, saga string, seq int64) (a answer, r sagacity.Decision) {
	a = c.ask(ctx, s, func(ctx context.Context, api *sagacity.Client) (err error) {
		r, err = api.Reject(ctx, saga, seq, "e2e")
		return err
	})
	return a, r
}

func (c *client) resume(ctx context.Context, s *server, saga string, seq int64, payload string) (a answer, r sagacity.ResumeResult) {
	a = c.ask(ctx, s, func(ctx context.Context, api *sagacity.Client) (err error) {
		r, err = api.Resume(ctx, saga, seq, payload)
		return err
	})
	return a, r
}

func (c *client) verify(ctx context.Context, s *server, saga string) (a answer, r sagacity.Verification) {
	a = c.ask(ctx, s, func(ctx context.Context, api *sagacity.Client) (err error) {
		r, err = api.Verify(ctx, saga)
		return err
	})
	return a, r
}

func (c *client) audit(ctx context.Context, s *server, saga string) (a answer, es []sagacity.Entry) {
	a = c.ask(ctx, s, func(ctx context.Context, api *sagacity.Client) (err error) {
		es, err = api.Audit(ctx, saga)
		return err
	})
	return a, es
}

func (c *client) approvals(ctx context.Context, s *server, saga string) (a answer, r sagacity.ApprovalList) {
	a = c.ask(ctx, s, func(ctx context.Context, api *sagacity.Client) (err error) {
		r, err = api.Approvals(ctx, saga)
		return err
	})
	return a, r
}

func (c *client) inDoubt(ctx context.Context, s *server, olderThan time.Duration) (a answer, r []sagacity.CallInDoubt) {
	a = c.ask(ctx, s, func(ctx context.Context, api *sagacity.Client) (err error) {
		r, err = api.CallsInDoubt(ctx, olderThan)
		return err
	})
	return a, r
}

func (c *client) saga(ctx context.Context, s *server, saga string) (a answer, r sagacity.Saga) {
	a = c.ask(ctx, s, func(ctx context.Context, api *sagacity.Client) (err error) {
		r, err = api.Saga(ctx, saga)
		return err
	})
	return a, r
}

// pool hands out clients of one role for decisions (approve, reject,
// resume), which the server rate limits per client IP and per principal:
// each client is used at most decisionBudget times per server process.
type pool struct {
	mu      sync.Mutex
	clients []*client
	next    int
	used    map[*client]map[string]int // client → server generation → decisions
}

// decisionBudget stays under the server's burst of 60 decisions a
// principal (120 an IP), ignoring the refill.
const decisionBudget = 50

func newPool(clients []*client) *pool {
	return &pool{clients: clients, used: map[*client]map[string]int{}}
}

// take returns a client with budget left on s's current process, or nil.
func (p *pool) take(s *server) *client {
	gen := s.generation()
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := range p.clients {
		c := p.clients[(p.next+i)%len(p.clients)]
		if p.used[c] == nil {
			p.used[c] = map[string]int{}
		}
		if p.used[c][gen] < decisionBudget {
			p.used[c][gen]++
			p.next = (p.next + i + 1) % len(p.clients)
			return c
		}
	}
	return nil
}

func (c *client) callWithKey(ctx context.Context, s endpoint, retryFor time.Duration, saga, tool, input, key string) (a answer, r sagacity.CallResult) {
	a = c.retrying(ctx, s, retryFor, func(ctx context.Context, api *sagacity.Client) (err error) {
		r, err = api.CallWithKey(ctx, saga, tool, input, key)
		return err
	})
	return a, r
}

func (c *client) resolve(ctx context.Context, s *server, saga string, seq int64, happened bool, reason string) (a answer, r sagacity.Saga) {
	a = c.ask(ctx, s, func(ctx context.Context, api *sagacity.Client) (err error) {
		r, err = api.Resolve(ctx, saga, seq, happened, "", reason)
		return err
	})
	return a, r
}
