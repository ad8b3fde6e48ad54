package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
)

// requestTimeout bounds one request to the server.
const requestTimeout = 45 * time.Second

// client calls the API with one bearer token from one source address, so
// that it has a rate-limit budget of its own on each server process.
type client struct {
	name  string // the token's name; the principal is token:<name>
	token string
	ip    string
	hc    *http.Client
	tr    *transcript
}

func newClient(name, token, ip string, tr *transcript) *client {
	d := &net.Dialer{Timeout: 5 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
	transport := &http.Transport{DialContext: d.DialContext, MaxIdleConnsPerHost: 16, IdleConnTimeout: 30 * time.Second}
	return &client{name: name, token: token, ip: ip, tr: tr, hc: &http.Client{
		Transport:     transport,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
}

// principal is the identity the server journals for the client.
func (c *client) principal() string { return "token:" + c.name }

// answer is one exchange. err is set when no complete answer came back
// (the connection failed or was reset): the outcome is then unknown.
type answer struct {
	who    string
	method string
	path   string
	code   int
	body   string
	err    error
	bad    error // a body that does not decode as documented
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

func (c *client) do(ctx context.Context, s *server, method, path string, body any) answer {
	a := answer{who: c.name + "@" + s.generation(), method: method, path: path}
	var reqBody []byte
	if body != nil {
		reqBody, _ = json.Marshal(body)
	}
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, s.URL()+path, bytes.NewReader(reqBody))
	if err != nil {
		a.err = err
		return a
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.hc.Do(req)
	if err == nil {
		var b []byte
		b, err = io.ReadAll(io.LimitReader(resp.Body, 16<<20))
		resp.Body.Close()
		a.code, a.body = resp.StatusCode, string(b)
	}
	a.err = err
	shown := a.body
	if len(shown) > 400 {
		shown = shown[:400] + "…"
	}
	if a.err != nil {
		c.tr.add("%s@%s %s %s %s %s → error %v", c.name, c.ip, s.generation(), method, path, reqBody, a.err)
	} else {
		c.tr.add("%s@%s %s %s %s %s → %d %s", c.name, c.ip, s.generation(), method, path, reqBody, a.code, strings.TrimSpace(shown))
	}
	return a
}

// decode fills v from a JSON answer whose status is one of codes.
func decode(a *answer, v any, codes ...int) {
	if a.err != nil {
		return
	}
	for _, c := range codes {
		if a.code == c {
			if err := json.Unmarshal([]byte(a.body), v); err != nil {
				a.bad = err
			}
			return
		}
	}
}

func esc(s string) string { return url.PathEscape(s) }

// The API's answers, as the README documents them.
type (
	callResp struct {
		SagaID    string  `json:"sagaId"`
		Seq       int64   `json:"seq"`
		ToolName  string  `json:"toolName"`
		Status    string  `json:"status"`
		Result    *string `json:"result"`
		Message   string  `json:"message"`
		InputHash string  `json:"inputHash"`
		Error     string  `json:"error"`
	}
	decisionResp struct {
		SagaID           string `json:"sagaId"`
		JournalSeq       int64  `json:"journalSeq"`
		Approved         bool   `json:"approved"`
		ApproverIdentity string `json:"approverIdentity"`
		Status           string `json:"status"`
	}
	resumeResp struct {
		SagaID string  `json:"sagaId"`
		Status string  `json:"status"`
		Result *string `json:"result"`
		Reason string  `json:"reason"`
	}
	sagaResp struct {
		SagaID    string `json:"sagaId"`
		Status    string `json:"status"`
		Initiator string `json:"initiator"`
		Ended     bool   `json:"ended"`
		Reason    string `json:"reason"`
		HeadSeq   int64  `json:"headSeq"`
	}
	verification struct {
		Valid        bool   `json:"valid"`
		EntryCount   int    `json:"entryCount"`
		BreakAtIndex int    `json:"breakAtIndex"`
		Message      string `json:"message"`
	}
	entry struct {
		SagaID    string `json:"sagaId"`
		Seq       int64  `json:"seq"`
		ToolName  string `json:"toolName"`
		Phase     string `json:"phase"`
		Input     string `json:"input"`
		Payload   string `json:"payload"`
		Timestamp string `json:"timestamp"`
		Hash      string `json:"hash"`
	}
	doubtResp struct {
		SagaID   string `json:"sagaId"`
		Seq      int64  `json:"seq"`
		ToolName string `json:"toolName"`
		Input    string `json:"input"`
		State    string `json:"state"`
	}
	approvalResp struct {
		SagaID     string `json:"sagaId"`
		JournalSeq int64  `json:"journalSeq"`
		ToolName   string `json:"toolName"`
		Input      string `json:"input"`
		InputHash  string `json:"inputHash"`
	}
)

func (c *client) call(ctx context.Context, s *server, saga, tool, input string) (answer, callResp) {
	a := c.do(ctx, s, "POST", "/sagacity/sagas/"+esc(saga)+"/calls", map[string]string{"tool": tool, "input": input})
	var r callResp
	decode(&a, &r, 200, 202, 422)
	return a, r
}

func (c *client) end(ctx context.Context, s *server, saga string) (answer, sagaResp) {
	a := c.do(ctx, s, "POST", "/sagacity/sagas/"+esc(saga)+"/end", map[string]string{})
	var r sagaResp
	decode(&a, &r, 200)
	return a, r
}

func (c *client) approve(ctx context.Context, s *server, saga string, seq int64) (answer, decisionResp) {
	a := c.do(ctx, s, "POST", fmt.Sprintf("/sagacity/approve/%s/%d", esc(saga), seq), map[string]string{})
	var r decisionResp
	decode(&a, &r, 200)
	return a, r
}

func (c *client) reject(ctx context.Context, s *server, saga string, seq int64) (answer, decisionResp) {
	a := c.do(ctx, s, "POST", fmt.Sprintf("/sagacity/reject/%s/%d", esc(saga), seq), map[string]string{"reason": "e2e"})
	var r decisionResp
	decode(&a, &r, 200)
	return a, r
}

func (c *client) resume(ctx context.Context, s *server, saga string, seq int64, payload string) (answer, resumeResp) {
	a := c.do(ctx, s, "POST", fmt.Sprintf("/sagacity/resume/%s/%d", esc(saga), seq), map[string]string{"payload": payload})
	var r resumeResp
	decode(&a, &r, 200, 202, 409)
	return a, r
}

func (c *client) verify(ctx context.Context, s *server, saga string) (answer, verification) {
	a := c.do(ctx, s, "GET", "/sagacity/audit/"+esc(saga)+"/verify", nil)
	var r verification
	decode(&a, &r, 200)
	return a, r
}

func (c *client) audit(ctx context.Context, s *server, saga string) (answer, []entry) {
	a := c.do(ctx, s, "GET", "/sagacity/audit/"+esc(saga), nil)
	if !a.is(200) {
		return a, nil
	}
	var es []entry
	sc := bufio.NewScanner(strings.NewReader(a.body))
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		var e entry
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			a.bad = err
			return a, nil
		}
		es = append(es, e)
	}
	return a, es
}

func (c *client) approvals(ctx context.Context, s *server, saga string) (answer, []approvalResp) {
	a := c.do(ctx, s, "GET", "/sagacity/approvals/"+esc(saga), nil)
	var r []approvalResp
	decode(&a, &r, 200)
	return a, r
}

func (c *client) inDoubt(ctx context.Context, s *server, olderThan string) (answer, []doubtResp) {
	a := c.do(ctx, s, "GET", "/sagacity/in-doubt?olderThan="+olderThan, nil)
	var r []doubtResp
	decode(&a, &r, 200)
	return a, r
}

func (c *client) saga(ctx context.Context, s *server, saga string) (answer, sagaResp) {
	a := c.do(ctx, s, "GET", "/sagacity/sagas/"+esc(saga), nil)
	var r sagaResp
	decode(&a, &r, 200)
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
