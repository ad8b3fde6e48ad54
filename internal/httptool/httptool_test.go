package httptool_test

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sagacity-go/sagacity/internal/engine"
	"github.com/sagacity-go/sagacity/internal/httptool"
	"github.com/sagacity-go/sagacity/toolsig"
)

const (
	secret   = "signing-secret-0123456789abcdef!"
	password = "s3cret-pass"
)

var inv = engine.Invocation{SagaID: "saga-1", Seq: 7, Tool: "transfer", Input: `{"amount":100}`}

// request is what a tool server received.
type request struct {
	Path   string
	Header http.Header
	Body   string
}

// toolServer is a real tool server for one tool: /execute and /compensate,
// each behind toolsig.Handler with its own phase, so every request that
// reaches respond was signed with secret over its exact body, for that tool
// and phase. It records those requests.
type toolServer struct {
	*httptest.Server
	mu   sync.Mutex
	reqs []request
}

// newToolServer serves the tool newTool calls, "transfer".
func newToolServer(t *testing.T, respond http.HandlerFunc) *toolServer {
	t.Helper()
	return newToolServerFor(t, "transfer", respond)
}

func newToolServerFor(t *testing.T, tool string, respond http.HandlerFunc) *toolServer {
	t.Helper()
	s := &toolServer{}
	record := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			t.Errorf("tool server: reading body: %v", err)
		}
		s.mu.Lock()
		s.reqs = append(s.reqs, request{Path: r.URL.Path, Header: r.Header.Clone(), Body: string(b)})
		s.mu.Unlock()
		r.Body = io.NopCloser(strings.NewReader(string(b)))
		respond(w, r)
	})
	mux := http.NewServeMux()
	for path, phase := range map[string]toolsig.Phase{"/execute": toolsig.Execute, "/compensate": toolsig.Compensate} {
		mux.Handle("POST "+path, toolsig.Handler([]byte(secret), toolsig.Expect{Tool: tool, Phase: phase}, 16<<20, record))
	}
	s.Server = httptest.NewServer(mux)
	t.Cleanup(s.Close)
	return s
}

func (s *toolServer) requests() []request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]request(nil), s.reqs...)
}

// withUserinfo puts credentials in a URL, which must never show in errors.
func withUserinfo(u string) string {
	return strings.Replace(u, "http://", "http://user:"+password+"@", 1)
}

// newTool returns a tool calling srv, signing at a fixed time so that tests
// can recompute the signature.
func newTool(srv string, now time.Time) *httptool.Tool {
	return &httptool.Tool{
		Name:   "transfer",
		Exec:   httptool.Endpoint{URL: srv + "/execute"},
		Undo:   &httptool.Endpoint{URL: srv + "/compensate"},
		Secret: []byte(secret),
		Now:    func() time.Time { return now },
	}
}

func echo(w http.ResponseWriter, r *http.Request) { _, _ = io.Copy(w, r.Body) }

func TestExecuteSendsExactBody(t *testing.T) {
	srv := newToolServer(t, echo)
	now := time.Now()
	tool := newTool(srv.URL, now)
	inputs := map[string]string{
		"json":       `{"amount":100}`,
		"empty":      "",
		"unicode":    `{"payee":"Zoë Łukasz 李","memo":"😀 ✓"}`,
		"whitespace": "  {\r\n\t\"a\" :\u00a0 1 ,\n\n}\t \u2028 ",
		"not json":   "plain text, \"quoted\", \\ backslash",
	}
	for name, input := range inputs {
		t.Run(name, func(t *testing.T) {
			in := inv
			in.Input = input
			got, err := tool.Execute(context.Background(), in)
			if err != nil || got != input {
				t.Fatalf("Execute(input %q) = %q, %v; want the echoed input, nil", input, got, err)
			}
			reqs := srv.requests()
			last := reqs[len(reqs)-1]
			if last.Body != input {
				t.Errorf("Execute(input %q): server received body %q", input, last.Body)
			}
			signed := toolsig.Request{Method: "POST", Path: "/execute", Tool: "transfer", Key: "saga-1/7", Phase: toolsig.Execute}
			if got, want := last.Header.Get(toolsig.Header), toolsig.Sign([]byte(secret), now, signed, []byte(input)); got != want {
				t.Errorf("Execute(input %q): %s = %q, want %q", input, toolsig.Header, got, want)
			}
			if last.Path != "/execute" {
				t.Errorf("Execute(input %q) posted to %q, want /execute", input, last.Path)
			}
		})
	}
}

// TestSignedTarget checks that the signature binds the request target as
// sent, escaped path and query, and that a tool server agrees.
func TestSignedTarget(t *testing.T) {
	var got atomic.Value // string: the request target the server read
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { got.Store(r.URL.RequestURI()) })
	srv := httptest.NewServer(toolsig.Handler([]byte(secret), toolsig.Expect{Tool: "transfer", Phase: toolsig.Execute}, 1<<20, next))
	defer srv.Close()
	tests := []struct{ url, target string }{
		{"", "/"},
		{"/execute", "/execute"},
		{"/execute?region=eu&v=2", "/execute?region=eu&v=2"},
		{"/tools/a%20b/execute?q=%2F#fragment", "/tools/a%20b/execute?q=%2F"},
		{"/tools/a b/exécute", "/tools/a%20b/ex%C3%A9cute"},
	}
	for _, tt := range tests {
		now := time.Now()
		tool := newTool(srv.URL, now)
		tool.Exec.URL = srv.URL + tt.url
		if _, err := tool.Execute(context.Background(), inv); err != nil {
			t.Errorf("Execute to %q = %v, want nil", tt.url, err)
			continue
		}
		if got := got.Load(); got != tt.target {
			t.Errorf("Execute to %q: server read target %q, want %q", tt.url, got, tt.target)
		}
	}
}

// TestReplayToAnotherTool captures requests Sagacity really sent to a
// harmless tool and replays them, headers and body, to an IRREVERSIBLE wire
// transfer's endpoints: each is refused and the transfer never runs.
func TestReplayToAnotherTool(t *testing.T) {
	// The harmless tool is served at the same paths as the wire transfer,
	// on another host, so only the signed tool name tells them apart.
	notes := newToolServerFor(t, "saveNote", echo)
	tool := newTool(notes.URL, time.Now())
	tool.Name = "saveNote"
	in := engine.Invocation{SagaID: "saga-1", Seq: 7, Tool: "saveNote", Input: `{"amount":1000000,"to":"mallory"}`}
	if _, err := tool.Execute(context.Background(), in); err != nil {
		t.Fatalf("Execute(%+v) = %v", in, err)
	}
	if err := tool.Compensate(context.Background(), in, in.Input); err != nil {
		t.Fatalf("Compensate(%+v) = %v", in, err)
	}
	captured := notes.requests()
	if len(captured) != 2 {
		t.Fatalf("the harmless tool received %d requests, want 2", len(captured))
	}
	execute, compensate := captured[0], captured[1]

	var wired atomic.Int32
	wire := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		wired.Add(1)
		_, _ = io.WriteString(w, "transfer sent")
	})
	mux := http.NewServeMux()
	for _, path := range []string{"/execute", "/wire"} {
		mux.Handle("POST "+path, toolsig.Handler([]byte(secret), toolsig.Expect{Tool: "sendWireTransfer", Phase: toolsig.Execute}, 1<<20, wire))
	}
	bank := httptest.NewServer(mux)
	defer bank.Close()

	set := func(kv ...string) func(http.Header) {
		return func(h http.Header) {
			for i := 0; i+1 < len(kv); i += 2 {
				h.Set(kv[i], kv[i+1])
			}
		}
	}
	tests := []struct {
		name string
		req  request
		to   string
		edit func(http.Header)
		code int
		want string // start of the answer
	}{
		{"execute, as captured, same path", execute, bank.URL + "/execute", nil, 401, "signature not for this endpoint"},
		{"execute, as captured, another path", execute, bank.URL + "/wire", nil, 401, "signature mismatch"},
		{"execute, tool header rewritten", execute, bank.URL + "/execute", set(toolsig.HeaderTool, "sendWireTransfer"), 401, "signature mismatch"},
		{"compensate, as captured", compensate, bank.URL + "/execute", nil, 401, "signature mismatch"},
		{"compensate, phase and key rewritten", compensate, bank.URL + "/execute",
			set(toolsig.HeaderPhase, "execute", toolsig.HeaderKey, "saga-1/7"), 401, "signature mismatch"},
		// The capture is a valid request: back at its own tool, it passes.
		{"execute, back to its own tool", execute, notes.URL + "/execute", nil, 200, in.Input},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := http.NewRequest(http.MethodPost, tt.to, strings.NewReader(tt.req.Body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header = tt.req.Header.Clone()
			if tt.edit != nil {
				tt.edit(req.Header)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tt.code || !strings.HasPrefix(string(b), tt.want) {
				t.Errorf("replay of the %s request to %s = %d %q, want %d %q…", tt.req.Path, tt.to, resp.StatusCode, b, tt.code, tt.want)
			}
		})
	}
	if n := wired.Load(); n != 0 {
		t.Errorf("the wire transfer ran %d times, want 0", n)
	}
}

func TestHeaders(t *testing.T) {
	tests := []struct {
		name     string
		toolName string // Tool.Name
		inv      engine.Invocation
		saga     string // Sagacity-Saga-Id
		tool     string // Sagacity-Tool
	}{
		{"ascii", "transfer", engine.Invocation{SagaID: "saga-1", Seq: 7, Tool: "transfer"}, "saga-1", "transfer"},
		{"slash stays", "transfer", engine.Invocation{SagaID: "tenant/42", Seq: 1, Tool: "transfer"}, "tenant/42", "transfer"},
		{"non-ascii", "transfer", engine.Invocation{SagaID: "commande-é", Seq: 12, Tool: "transfer"}, "commande-%C3%A9", "transfer"},
		{"space", "transfer", engine.Invocation{SagaID: " saga 1", Seq: 3, Tool: "transfer"}, "%20saga%201", "transfer"},
		{"percent", "transfer", engine.Invocation{SagaID: "commande-%C3%A9", Seq: 12, Tool: "transfer"}, "commande-%25C3%25A9", "transfer"},
		{"non-ascii tool", "überweisung", engine.Invocation{SagaID: "s", Seq: 1, Tool: "überweisung"}, "s", "%C3%BCberweisung"},
		{"name from invocation", "", engine.Invocation{SagaID: "s", Seq: 1, Tool: "refund"}, "s", "refund"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Every case's tool is named tt.inv.Tool.
			srv := newToolServerFor(t, tt.inv.Tool, echo)
			tool := newTool(srv.URL, time.Now())
			tool.Name = tt.toolName
			if _, err := tool.Execute(context.Background(), tt.inv); err != nil {
				t.Fatalf("Execute(%+v) = %v", tt.inv, err)
			}
			if err := tool.Compensate(context.Background(), tt.inv, "result"); err != nil {
				t.Fatalf("Compensate(%+v) = %v", tt.inv, err)
			}
			reqs := srv.requests()
			if len(reqs) != 2 {
				t.Fatalf("server received %d requests, want 2", len(reqs))
			}
			seq := strconv.FormatInt(tt.inv.Seq, 10)
			for i, phase := range []toolsig.Phase{toolsig.Execute, toolsig.Compensate} {
				key := tt.saga + "/" + seq
				if phase == toolsig.Compensate {
					key += "/compensate"
				}
				want := map[string]string{
					"Content-Type":     "application/json",
					"Sagacity-Saga-Id": tt.saga,
					"Sagacity-Seq":     seq,
					"Sagacity-Tool":    tt.tool,
					"Sagacity-Phase":   string(phase),
					"Idempotency-Key":  key,
				}
				got := map[string]string{}
				for k := range want {
					got[k] = reqs[i].Header.Get(k)
				}
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("request %d (%s) for %+v: headers (-want +got):\n%s", i, reqs[i].Path, tt.inv, diff)
				}
			}
			// The encoding is reversible: a tool server gets the id back.
			if id, err := url.PathUnescape(tt.saga); strings.Contains(tt.saga, "%") && (err != nil || id != tt.inv.SagaID) {
				t.Errorf("PathUnescape(%q) = %q, %v; want %q", tt.saga, id, err, tt.inv.SagaID)
			}
		})
	}
}

func TestCompensateBody(t *testing.T) {
	srv := newToolServer(t, func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "undone") })
	now := time.Now()
	tool := newTool(srv.URL, now)
	in := engine.Invocation{SagaID: "saga-é", Seq: 42, Tool: "transfer", Input: "{\"amount\": 100,\n \"memo\": \"<b>&\"}"}
	result := `{"id":"tx-9","note":"Zoë"}`
	if err := tool.Compensate(context.Background(), in, result); err != nil {
		t.Fatalf("Compensate(%+v, %q) = %v, want nil", in, result, err)
	}
	reqs := srv.requests()
	if len(reqs) != 1 || reqs[0].Path != "/compensate" {
		t.Fatalf("server received %+v, want one request to /compensate", reqs)
	}
	body := reqs[0].Body
	signed := toolsig.Request{Method: "POST", Path: "/compensate", Tool: "transfer", Key: "saga-%C3%A9/42/compensate", Phase: toolsig.Compensate}
	if got, want := reqs[0].Header.Get(toolsig.Header), toolsig.Sign([]byte(secret), now, signed, []byte(body)); got != want {
		t.Errorf("Compensate: %s = %q, want %q", toolsig.Header, got, want)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal([]byte(body), &raw); err != nil {
		t.Fatalf("Compensate sent %q, which is not a JSON object: %v", body, err)
	}
	if got, want := string(raw["seq"]), "42"; got != want {
		t.Errorf("Compensate sent seq %s, want the JSON number %s", got, want)
	}
	var got map[string]any
	if err := json.Unmarshal([]byte(body), &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"sagaId": in.SagaID, "seq": 42.0, "toolName": "transfer", "input": in.Input, "result": result}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Compensate sent %s (-want +got):\n%s", body, diff)
	}
}

func TestCompensateWithoutEndpoint(t *testing.T) {
	tool := &httptool.Tool{Name: "wire", Exec: httptool.Endpoint{URL: "http://127.0.0.1:1/"}, Secret: []byte(secret)}
	err := tool.Compensate(context.Background(), inv, "r")
	if want := "tool wire has no compensate endpoint"; err == nil || err.Error() != want {
		t.Errorf("Compensate on a tool without Undo = %v, want %q", err, want)
	}
}

// checkMessage fails unless err's message is want and holds nothing secret.
func checkMessage(t *testing.T, call string, err error, want string) {
	t.Helper()
	if err == nil {
		t.Errorf("%s = nil error, want %q", call, want)
		return
	}
	msg := err.Error()
	if msg != want {
		t.Errorf("%s = %q, want %q", call, msg, want)
	}
	for _, s := range []string{secret, password, "user:", "127.0.0.1", "http://"} {
		if strings.Contains(msg, s) {
			t.Errorf("%s = %q, which contains %q", call, msg, s)
		}
	}
}

func TestFailures(t *testing.T) {
	long := "database\nexploded\t" + strings.Repeat("x", 1000)
	tests := []struct {
		name    string
		respond http.HandlerFunc
		want    string // for Execute; Compensate says "tool transfer compensation …"
	}{
		{
			"500 with a long body",
			func(w http.ResponseWriter, r *http.Request) { http.Error(w, long, 500) },
			"tool transfer answered 500: database exploded " + strings.Repeat("x", 200-len("database exploded ")) + "…",
		},
		{
			"503 without a body",
			func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(503) },
			"tool transfer answered 503",
		},
		{
			"body echoing the secret and password",
			func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(http.StatusForbidden)
				_, _ = io.WriteString(w, "secret "+secret+" and "+password+" and user:"+password+" and invalid \xff UTF-8")
			},
			"tool transfer answered 403: secret [redacted] and [redacted] and [redacted] and invalid \uFFFD UTF-8",
		},
		{
			"201 is success",
			func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(201) },
			"",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newToolServer(t, tt.respond)
			tool := newTool(withUserinfo(srv.URL), time.Now())
			_, err := tool.Execute(context.Background(), inv)
			cerr := tool.Compensate(context.Background(), inv, "r")
			if tt.want == "" {
				if err != nil || cerr != nil {
					t.Errorf("Execute, Compensate = %v, %v; want nil, nil", err, cerr)
				}
				return
			}
			checkMessage(t, "Execute", err, tt.want)
			checkMessage(t, "Compensate", cerr, strings.Replace(tt.want, "tool transfer", "tool transfer compensation", 1))
			if n := len(srv.requests()); n != 2 {
				t.Errorf("server received %d signed requests, want 2", n)
			}
		})
	}
}

func TestResultChecks(t *testing.T) {
	const limit = 1 << 10
	tests := []struct {
		name   string
		result string
		want   string // error, or "" for success
	}{
		{"exactly the cap", strings.Repeat("a", limit), ""},
		{"one byte over the cap", strings.Repeat("a", limit+1), "tool transfer result exceeds 1024 bytes"},
		// Bytes that are not text are still the result: the tool ran.
		{"invalid UTF-8", "{\"name\":\"\xff\xfe\"}", ""},
		{"truncated rune", "caf\xc3", ""},
		{"NUL", "ok\x00done", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newToolServer(t, func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, tt.result) })
			tool := newTool(srv.URL, time.Now())
			tool.MaxResult = limit
			got, err := tool.Execute(context.Background(), inv)
			if tt.want == "" {
				if err != nil || got != tt.result {
					t.Errorf("Execute with a %d-byte result = %d bytes, %v; want the result, nil", len(tt.result), len(got), err)
				}
				return
			}
			checkMessage(t, "Execute", err, tt.want)
		})
	}
}

// letters is an endless stream of 'a's.
type letters struct{}

func (letters) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'a'
	}
	return len(p), nil
}

// countingTransport counts the response body bytes its caller reads.
type countingTransport struct {
	base http.RoundTripper
	read atomic.Int64
}

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := c.base.RoundTrip(r)
	if err == nil {
		resp.Body = &countingBody{ReadCloser: resp.Body, n: &c.read}
	}
	return resp, err
}

type countingBody struct {
	io.ReadCloser
	n *atomic.Int64
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n.Add(int64(n))
	return n, err
}

// TestHugeResult checks that a 100 MiB answer is cut off after
// MaxResult+1 bytes rather than read to its end.
func TestHugeResult(t *testing.T) {
	const (
		total = 100 << 20
		limit = 1 << 20
	)
	var written atomic.Int64
	done := make(chan struct{})
	srv := newToolServer(t, func(w http.ResponseWriter, r *http.Request) {
		defer close(done)
		n, _ := io.Copy(w, io.LimitReader(letters{}, total))
		written.Store(n)
	})
	transport := &countingTransport{base: http.DefaultTransport.(*http.Transport).Clone()}
	tool := newTool(srv.URL, time.Now())
	tool.MaxResult = limit
	tool.Client = &http.Client{Transport: transport}

	start := time.Now()
	_, err := tool.Execute(context.Background(), inv)
	elapsed := time.Since(start)
	checkMessage(t, "Execute with a 100 MiB answer", err, "tool transfer result exceeds 1048576 bytes")
	if elapsed > 2*time.Second {
		t.Errorf("Execute with a 100 MiB answer took %v, want under 2s", elapsed)
	}
	if n := transport.read.Load(); n > limit+1 {
		t.Errorf("Execute read %d bytes of the answer, want at most MaxResult+1 = %d", n, limit+1)
	}
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the tool server was still writing 10s after Execute returned")
	}
	if n := written.Load(); n >= total {
		t.Errorf("the tool server wrote all %d bytes; want the connection dropped early", n)
	} else {
		t.Logf("the tool server wrote %d bytes before the connection closed", n)
	}
}

func TestRedirectNotFollowed(t *testing.T) {
	var hits atomic.Int32
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
	defer target.Close()
	tests := []struct {
		name   string
		status int
		client *http.Client
	}{
		{"302, default client", http.StatusFound, nil},
		{"307, default client", http.StatusTemporaryRedirect, nil},
		{"308, a client that follows redirects", http.StatusPermanentRedirect, &http.Client{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newToolServer(t, func(w http.ResponseWriter, r *http.Request) {
				http.Redirect(w, r, target.URL+"/elsewhere", tt.status)
			})
			tool := newTool(srv.URL, time.Now())
			tool.Client = tt.client
			_, err := tool.Execute(context.Background(), inv)
			checkMessage(t, "Execute", err, "tool transfer answered "+strconv.Itoa(tt.status))
			err = tool.Compensate(context.Background(), inv, "r")
			checkMessage(t, "Compensate", err, "tool transfer compensation answered "+strconv.Itoa(tt.status))
		})
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("the redirect target was hit %d times, want 0", n)
	}
}

func TestTimeout(t *testing.T) {
	srv := newToolServer(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
	})
	tool := newTool(srv.URL, time.Now())
	tool.Exec.Timeout = 100 * time.Millisecond
	tool.Undo.Timeout = 100 * time.Millisecond

	start := time.Now()
	_, err := tool.Execute(context.Background(), inv)
	checkMessage(t, "Execute", err, "tool transfer timed out after 100ms")
	err = tool.Compensate(context.Background(), inv, "r")
	checkMessage(t, "Compensate", err, "tool transfer compensation timed out after 100ms")
	if elapsed := time.Since(start); elapsed > 2*time.Second {
		t.Errorf("two calls with a 100ms timeout took %v", elapsed)
	}
}

// TestTimeoutWhileReading times out a server that answers 200 and then
// stalls in the middle of its body.
func TestTimeoutWhileReading(t *testing.T) {
	srv := newToolServer(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, `{"partial":`)
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
	})
	tool := newTool(srv.URL, time.Now())
	tool.Exec.Timeout = 100 * time.Millisecond
	_, err := tool.Execute(context.Background(), inv)
	checkMessage(t, "Execute", err, "tool transfer timed out after 100ms")
}

func TestCanceled(t *testing.T) {
	srv := newToolServer(t, echo)
	tool := newTool(srv.URL, time.Now())
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := tool.Execute(ctx, inv)
	checkMessage(t, "Execute with a canceled context", err, "tool transfer canceled: context canceled")
}

func TestUnreachable(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	u := withUserinfo("http://" + addr)
	tool := newTool(u, time.Now())
	_, err = tool.Execute(context.Background(), inv)
	checkMessage(t, "Execute on "+addr, err, "tool transfer unreachable: connection refused")
	err = tool.Compensate(context.Background(), inv, "r")
	checkMessage(t, "Compensate on "+addr, err, "tool transfer compensation unreachable: connection refused")
}

func TestInvalidURL(t *testing.T) {
	urls := []string{
		"",
		"/relative",
		"ftp://user:" + password + "@example.com/",
		"http://user:" + password + "@exa mple.com/",
		"http://user:" + password + "%zz@example.com/",
		"http:///no-host",
		"::",
	}
	for _, u := range urls {
		tool := &httptool.Tool{Name: "transfer", Exec: httptool.Endpoint{URL: u}, Undo: &httptool.Endpoint{URL: u}, Secret: []byte(secret)}
		_, err := tool.Execute(context.Background(), inv)
		checkMessage(t, "Execute with URL "+u, err, "tool transfer has an invalid execute URL")
		err = tool.Compensate(context.Background(), inv, "r")
		checkMessage(t, "Compensate with URL "+u, err, "tool transfer compensation has an invalid compensate URL")
	}
}

// The engine accepts the tool as an executor.
var _ engine.Executor = (*httptool.Tool)(nil)

// TestConnectionsKept: calls to a tool, many at once, round after round,
// reuse the connections of the round before, where keeping two a host
// dialled most calls anew.
func TestConnectionsKept(t *testing.T) {
	const calls, rounds = 16, 10
	var mu sync.Mutex
	conns := map[string]bool{} // the client's addresses: one a connection
	release := make(chan struct{})
	var waiting sync.WaitGroup
	srv := newToolServer(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		conns[r.RemoteAddr] = true
		mu.Unlock()
		waiting.Done()
		<-release // all of a round's calls are open at once
		echo(w, r)
	})
	tool := newTool(srv.URL, time.Now())
	tool.Now = nil
	for round := range rounds {
		waiting.Add(calls)
		var done sync.WaitGroup
		for i := range calls {
			done.Go(func() {
				in := inv
				in.Seq = int64(round*calls + i)
				if _, err := tool.Execute(context.Background(), in); err != nil {
					t.Error(err)
				}
			})
		}
		waiting.Wait()
		for range calls {
			release <- struct{}{}
		}
		done.Wait()
	}
	if n := len(conns); n > calls {
		t.Errorf("%d rounds of %d calls at once opened %d connections, want at most %d", rounds, calls, n, calls)
	}
}
