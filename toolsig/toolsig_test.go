package toolsig_test

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sagacity-go/sagacity/toolsig"
)

var (
	secret = []byte("test-secret")
	t0     = time.Unix(1700000000, 0)

	// wire is a call to an IRREVERSIBLE tool, as Sagacity signs it.
	wire     = toolsig.Request{Method: "POST", Path: "/wire?region=eu", Tool: "sendWireTransfer", Key: "transfer-77/5", Phase: toolsig.Execute}
	wireBody = `{"amount":100}`
)

// v1 is a genuine v1 header for wireBody at t0: the old scheme, which
// signed only "<t>.<body>".
const v1 = "t=1700000000,v1=dc9ec957622f8d1f7f7e1a5e17ce747c58a4fd577544848668b6d2010808fea1"

// TestSign pins the wire format. Each message is written out by hand from
// the layout in the package comment, and each MAC was computed from it
// independently with `printf '%s' M | openssl dgst -sha256 -hmac test-secret`.
func TestSign(t *testing.T) {
	tests := []struct {
		at      time.Time
		req     toolsig.Request
		body    string
		message string
		mac     string
	}{
		{
			t0, wire, wireBody,
			`11:sagacity-v210:17000000004:POST15:/wire?region=eu16:sendWireTransfer13:transfer-77/57:execute14:{"amount":100}`,
			"a27a916f08391df488b2a89378a760ffc8cbecf76b5dc7f1a9618e9aca03730e",
		},
		{
			t0.Add(999 * time.Millisecond),
			toolsig.Request{Method: "POST", Path: "/release", Tool: "%C3%BCberweisung", Key: "commande-%C3%A9/12/compensate", Phase: toolsig.Compensate},
			"",
			`11:sagacity-v210:17000000004:POST8:/release16:%C3%BCberweisung29:commande-%C3%A9/12/compensate10:compensate0:`,
			"d56cf2b3bfe9ad518b993f7033c78ab44916845846afc5a8216493868b130e53",
		},
	}
	for _, tt := range tests {
		h := hmac.New(sha256.New, secret)
		h.Write([]byte(tt.message))
		if got := hex.EncodeToString(h.Sum(nil)); got != tt.mac {
			t.Errorf("HMAC-SHA256(%q, %q) = %s, want the pinned %s", secret, tt.message, got, tt.mac)
		}
		want := "t=1700000000,v2=" + tt.mac
		if got := toolsig.Sign(secret, tt.at, tt.req, []byte(tt.body)); got != want {
			t.Errorf("Sign(%q, %v, %+v, %q) = %q, want %q", secret, tt.at, tt.req, tt.body, got, want)
		}
	}
}

func TestHeaderValue(t *testing.T) {
	tests := []struct{ in, want string }{
		{"sendWireTransfer", "sendWireTransfer"},
		{"tenant/42", "tenant/42"},
		{"", ""},
		{"überweisung", "%C3%BCberweisung"},
		{" saga 1", "%20saga%201"},
		{"commande-%C3%A9", "commande-%25C3%25A9"},
		{"tab\there", "tab%09here"},
	}
	for _, tt := range tests {
		if got := toolsig.HeaderValue(tt.in); got != tt.want {
			t.Errorf("HeaderValue(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestRoundTrip(t *testing.T) {
	bodies := map[string]string{
		"empty":   "",
		"json":    `{"to":"acct-1","amount":100}`,
		"unicode": "{\"name\": \"Zoë 😀\"}\r\n\t ",
		"binary":  "\x00\xff\xfe,t=1,v2=",
	}
	for name, body := range bodies {
		t.Run(name, func(t *testing.T) {
			h := toolsig.Sign(secret, t0, wire, []byte(body))
			if err := toolsig.Verify(secret, h, wire, []byte(body), t0.Add(time.Minute), toolsig.DefaultTolerance); err != nil {
				t.Errorf("Verify(Sign(%+v, %q)) = %v, want nil", wire, body, err)
			}
		})
	}
}

// v2Part is a signature header's v2 part, from "v2=" on ("v2=" alone
// when it has none, which no check accepts).
func v2Part(header string) string {
	_, v2, _ := strings.Cut(header, "v2=")
	return "v2=" + v2
}

// TestVerifyBindsEveryField changes one signed field at a time: each
// change must break the signature.
func TestVerifyBindsEveryField(t *testing.T) {
	header := toolsig.Sign(secret, t0, wire, []byte(wireBody))
	v2 := v2Part(header)
	changed := func(f func(*toolsig.Request)) toolsig.Request {
		r := wire
		f(&r)
		return r
	}
	tests := []struct {
		name   string
		header string
		req    toolsig.Request
		body   string
	}{
		{"method", header, changed(func(r *toolsig.Request) { r.Method = "PUT" }), wireBody},
		{"path", header, changed(func(r *toolsig.Request) { r.Path = "/balance?region=eu" }), wireBody},
		{"query", header, changed(func(r *toolsig.Request) { r.Path = "/wire?region=us" }), wireBody},
		{"query dropped", header, changed(func(r *toolsig.Request) { r.Path = "/wire" }), wireBody},
		{"tool", header, changed(func(r *toolsig.Request) { r.Tool = "getBalance" }), wireBody},
		{"key", header, changed(func(r *toolsig.Request) { r.Key = "transfer-77/6" }), wireBody},
		{"phase", header, changed(func(r *toolsig.Request) { r.Phase = toolsig.Compensate }), wireBody},
		{"body", header, wire, `{"amount":1000}`},
		{"t", "t=1700000001," + v2, wire, wireBody},
		// The same bytes split differently: only the length prefixes
		// tell these apart.
		{"boundary between tool and key", header, changed(func(r *toolsig.Request) { r.Tool, r.Key = "sendWireTransfert", "ransfer-77/5" }), wireBody},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := toolsig.Verify(secret, tt.header, tt.req, []byte(tt.body), t0, toolsig.DefaultTolerance)
			if !errors.Is(err, toolsig.ErrMismatch) {
				t.Errorf("Verify(%q, %+v, %q) = %v, want %v", tt.header, tt.req, tt.body, err, toolsig.ErrMismatch)
			}
		})
	}
}

func TestVerify(t *testing.T) {
	valid := toolsig.Sign(secret, t0, wire, []byte(wireBody))
	other := toolsig.Sign([]byte("other-secret"), t0, wire, []byte(wireBody))
	otherV2 := v2Part(other)
	validV2 := v2Part(valid)
	hex64 := strings.Repeat("ab", 32)

	type verifyCase struct {
		name      string
		header    string
		body      string // wireBody when empty
		now       time.Time
		tolerance time.Duration
		want      error // a sentinel, or nil
	}
	tests := []verifyCase{
		{name: "valid", header: valid, now: t0},
		{name: "other secret", header: other, now: t0, want: toolsig.ErrMismatch},
		{name: "4m59s old", header: valid, now: t0.Add(4*time.Minute + 59*time.Second), want: nil},
		{name: "exactly at tolerance", header: valid, now: t0.Add(5 * time.Minute), want: nil},
		{name: "stale", header: valid, now: t0.Add(5*time.Minute + time.Second), want: toolsig.ErrExpired},
		{name: "future", header: valid, now: t0.Add(-5*time.Minute - time.Second), want: toolsig.ErrExpired},
		{name: "stale with custom tolerance", header: valid, now: t0.Add(2 * time.Minute), tolerance: time.Minute, want: toolsig.ErrExpired},
		{name: "zero tolerance means default", header: valid, now: t0.Add(4 * time.Minute), tolerance: 0, want: nil},
		{name: "negative tolerance means default", header: valid, now: t0.Add(6 * time.Minute), tolerance: -time.Hour, want: toolsig.ErrExpired},
		{name: "stale and wrong secret", header: other, now: t0.Add(time.Hour), want: toolsig.ErrMismatch},
		{name: "missing", header: "", now: t0, want: toolsig.ErrMissing},
		{name: "blank", header: "  ", now: t0, want: toolsig.ErrMissing},
		{name: "rotation: second v2 matches", header: "t=1700000000," + otherV2 + "," + validV2, now: t0},
		{name: "rotation: first v2 matches", header: valid + "," + otherV2, now: t0},
		{name: "rotation: no v2 matches", header: other + ",v2=" + hex64, now: t0, want: toolsig.ErrMismatch},
		{name: "v1 only", header: v1, now: t0, want: toolsig.ErrMalformed},
		{name: "v1 beside a wrong v2", header: v1 + ",v2=" + hex64, now: t0, want: toolsig.ErrMismatch},
		{name: "v1 beside a valid v2 is ignored", header: v1 + "," + validV2, now: t0},
		{name: "unknown fields ignored", header: "v0=zzz," + valid + ",v3=whatever,x=", now: t0},
		{name: "spaces around fields", header: " t=1700000000 , " + validV2 + " ", now: t0},
		{name: "fields in any order", header: validV2 + ",t=1700000000", now: t0},
		{name: "uppercase hex digits", header: "t=1700000000,v2=" + strings.ToUpper(validV2[3:]), now: t0},
	}
	// The empty header is missing rather than malformed (see above).
	malformed := []string{
		"t=",
		"v2=ab",
		"v2=" + hex64,
		"t=abc,v2=" + hex64,
		"t=1,v2=zz",
		"t=1,v2=" + hex64[:62],
		"t=1,v2=" + hex64 + "ab",
		"t=1",
		"t=1,v2=",
		"t=1,v1=" + hex64,
		"t=-1,v2=" + hex64,
		"t=+1,v2=" + hex64,
		"t=1.5,v2=" + hex64,
		"t=99999999999999999999,v2=" + hex64,
		"t=1,t=1,v2=" + hex64,
		"t=1,v2=" + hex64 + ",",
		"t=1,,v2=" + hex64,
		"garbage",
		",",
		"t:1;v2:" + hex64,
		"T=1,V2=" + hex64,
	}
	for _, h := range malformed {
		tests = append(tests, verifyCase{name: "malformed " + h, header: h, now: t0, want: toolsig.ErrMalformed})
	}

	sentinels := []error{toolsig.ErrMissing, toolsig.ErrMalformed, toolsig.ErrExpired, toolsig.ErrMismatch, toolsig.ErrWrongTool}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := wireBody
			if tt.body != "" {
				b = tt.body
			}
			err := toolsig.Verify(secret, tt.header, wire, []byte(b), tt.now, tt.tolerance)
			if tt.want == nil {
				if err != nil {
					t.Fatalf("Verify(%q, body %q, now %v, tolerance %v) = %v, want nil", tt.header, b, tt.now.Unix(), tt.tolerance, err)
				}
				return
			}
			if !errors.Is(err, tt.want) {
				t.Fatalf("Verify(%q, body %q, now %v, tolerance %v) = %v, want %v", tt.header, b, tt.now.Unix(), tt.tolerance, err, tt.want)
			}
			for _, s := range sentinels {
				if !errors.Is(s, tt.want) && errors.Is(err, s) {
					t.Errorf("Verify(%q) = %v, which also matches %v", tt.header, err, s)
				}
			}
			msg := err.Error()
			if strings.Contains(msg, string(secret)) || strings.Contains(msg, validV2[3:]) {
				t.Errorf("Verify(%q) = %q, which contains the secret or the expected signature", tt.header, msg)
			}
		})
	}
}

// TestVerifyDetail checks the messages an operator sees: which way the
// clock is off, and that a v1 header is refused for want of v2.
func TestVerifyDetail(t *testing.T) {
	h := toolsig.Sign(secret, t0, wire, nil)
	tests := []struct {
		header string
		now    time.Time
		want   string
	}{
		{h, t0.Add(10 * time.Minute), "signature expired: timestamp is 10m0s old, more than 5m0s"},
		{h, t0.Add(-10*time.Minute - 500*time.Millisecond), "signature expired: timestamp is 10m0s in the future, more than 5m0s"},
		{v1, t0, "malformed signature: no v2 signature"},
	}
	for _, tt := range tests {
		err := toolsig.Verify(secret, tt.header, wire, nil, tt.now, 0)
		if err == nil || err.Error() != tt.want {
			t.Errorf("Verify(%q, now %v) = %v, want %q", tt.header, tt.now, err, tt.want)
		}
	}
}

// server runs Handler in a real HTTP server and records what reaches next.
type server struct {
	*httptest.Server
	calls atomic.Int32
	got   atomic.Value // []byte: the body next read
}

func newServer(t *testing.T, want toolsig.Expect, maxBody int64) *server {
	s := &server{}
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.calls.Add(1)
		b, err := io.ReadAll(r.Body)
		if err != nil {
			t.Errorf("next: reading body: %v", err)
		}
		s.got.Store(b)
		_, _ = io.WriteString(w, "done")
	})
	s.Server = httptest.NewServer(toolsig.Handler(secret, want, maxBody, next))
	t.Cleanup(s.Close)
	return s
}

// call is a request as Sagacity would send it: its headers, all signed
// unless sign says otherwise.
type call struct {
	tool, phase, saga, seq, key string
	body                        string
	// sign returns the Header value for the request as built; nil signs it
	// with secret now.
	sign func(req toolsig.Request, body []byte) string
	// dup names a header sent a second time, with another value, after
	// signing.
	dup string
}

// wireCall is Sagacity's call to the wire endpoint at saga-1/7.
var wireCall = call{tool: "sendWireTransfer", phase: "execute", saga: "saga-1", seq: "7", key: "saga-1/7", body: wireBody}

func (c call) request(t *testing.T, url string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(c.body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]string{toolsig.HeaderTool: c.tool, toolsig.HeaderPhase: c.phase,
		toolsig.HeaderSaga: c.saga, toolsig.HeaderSeq: c.seq, toolsig.HeaderKey: c.key} {
		if v != "" {
			req.Header.Set(k, v)
		}
	}
	sign := c.sign
	if sign == nil {
		sign = func(r toolsig.Request, b []byte) string { return toolsig.Sign(secret, time.Now(), r, b) }
	}
	if h := sign(toolsig.RequestOf(req), []byte(c.body)); h != "" {
		req.Header.Set(toolsig.Header, h)
	}
	if c.dup != "" {
		req.Header.Add(c.dup, "getBalance")
	}
	return req
}

func do(t *testing.T, req *http.Request) (int, http.Header, string) {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, string(b)
}

func TestHandlerAccepts(t *testing.T) {
	tests := []struct {
		name string
		want toolsig.Expect
		path string
		call call
	}{
		{"execute", toolsig.Expect{Tool: "sendWireTransfer", Phase: toolsig.Execute}, "/wire?region=eu", wireCall},
		{"compensate", toolsig.Expect{Tool: "reserveInventory", Phase: toolsig.Compensate}, "/release",
			call{tool: "reserveInventory", phase: "compensate", saga: "saga-1", seq: "3", key: "saga-1/3/compensate", body: `{"sagaId":"saga-1"}`}},
		{"encoded tool and saga id", toolsig.Expect{Tool: "überweisung", Phase: toolsig.Execute}, "/%C3%BCberweisung",
			call{tool: "%C3%BCberweisung", phase: "execute", saga: "tenant/commande-%C3%A9", seq: "12", key: "tenant/commande-%C3%A9/12", body: "{\"note\": \"Zoë  😀\"}\r\n\t\x00 "}},
		{"rotation: the old secret's v2, then ours", toolsig.Expect{Tool: "sendWireTransfer", Phase: toolsig.Execute}, "/wire",
			call{tool: "sendWireTransfer", phase: "execute", saga: "saga-1", seq: "7", key: "saga-1/7", body: wireBody,
				sign: func(r toolsig.Request, b []byte) string {
					now := time.Now()
					ours := toolsig.Sign(secret, now, r, b)
					return toolsig.Sign([]byte("old-secret"), now, r, b) + "," + v2Part(ours)
				}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newServer(t, tt.want, 1<<10)
			req := tt.call.request(t, s.URL+tt.path)
			code, _, resp := do(t, req)
			if code != http.StatusOK || resp != "done" {
				t.Fatalf("POST %s with %+v to Handler(%+v) = %d %q, want 200 \"done\"", tt.path, tt.call, tt.want, code, resp)
			}
			if got, _ := s.got.Load().([]byte); string(got) != tt.call.body {
				t.Errorf("next read body %q, want %q", got, tt.call.body)
			}
		})
	}
}

func TestHandlerRejects(t *testing.T) {
	endpoint := toolsig.Expect{Tool: "sendWireTransfer", Phase: toolsig.Execute}
	s := newServer(t, endpoint, 1<<10)
	// with returns wireCall changed by f, signed as changed.
	with := func(f func(*call)) call {
		c := wireCall
		f(&c)
		return c
	}
	signWith := func(key []byte, at time.Time) func(toolsig.Request, []byte) string {
		return func(r toolsig.Request, b []byte) string { return toolsig.Sign(key, at, r, b) }
	}
	tests := []struct {
		name string
		call call
		want error
	}{
		{"missing", with(func(c *call) { c.sign = func(toolsig.Request, []byte) string { return "" } }), toolsig.ErrMissing},
		{"garbage", with(func(c *call) { c.sign = func(toolsig.Request, []byte) string { return "t=1,v2=zz" } }), toolsig.ErrMalformed},
		{"v1 only", with(func(c *call) { c.sign = func(toolsig.Request, []byte) string { return v1 } }), toolsig.ErrMalformed},
		{"other secret", with(func(c *call) { c.sign = signWith([]byte("other"), time.Now()) }), toolsig.ErrMismatch},
		{"tampered body", with(func(c *call) {
			c.sign = func(r toolsig.Request, _ []byte) string {
				return toolsig.Sign(secret, time.Now(), r, []byte(`{"amount":1}`))
			}
		}), toolsig.ErrMismatch},
		{"tool header changed after signing", with(func(c *call) {
			c.sign = func(r toolsig.Request, b []byte) string {
				r.Tool = "getBalance"
				return toolsig.Sign(secret, time.Now(), r, b)
			}
		}), toolsig.ErrMismatch},
		{"stale", with(func(c *call) { c.sign = signWith(secret, time.Now().Add(-time.Hour)) }), toolsig.ErrExpired},
		{"future", with(func(c *call) { c.sign = signWith(secret, time.Now().Add(time.Hour)) }), toolsig.ErrExpired},
		{"signed for another tool", with(func(c *call) { c.tool = "getBalance" }), toolsig.ErrWrongTool},
		{"no phase", with(func(c *call) { c.phase = "" }), toolsig.ErrWrongTool},
		{"signed for compensate", with(func(c *call) { c.phase, c.key = "compensate", "saga-1/7/compensate" }), toolsig.ErrWrongTool},
		{"compensate key on execute endpoint", with(func(c *call) { c.key = "saga-1/7/compensate" }), toolsig.ErrWrongTool},
		{"saga id not the key's", with(func(c *call) { c.saga = "saga-2" }), toolsig.ErrWrongTool},
		{"seq not the key's", with(func(c *call) { c.seq = "8" }), toolsig.ErrWrongTool},
		{"seq not decimal", with(func(c *call) { c.saga, c.seq, c.key = "saga", "1/7", "saga/1/7" }), toolsig.ErrWrongTool},
		{"tool header twice", with(func(c *call) { c.dup = toolsig.HeaderTool }), toolsig.ErrMalformed},
		{"saga header twice", with(func(c *call) { c.dup = toolsig.HeaderSaga }), toolsig.ErrMalformed},
		{"key header twice", with(func(c *call) { c.dup = toolsig.HeaderKey }), toolsig.ErrMalformed},
		{"no saga id or seq", with(func(c *call) { c.saga, c.seq, c.key = "", "", "/" }), toolsig.ErrWrongTool},
		{"no key", with(func(c *call) { c.key = "" }), toolsig.ErrWrongTool},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := tt.call.request(t, s.URL+"/wire")
			err := toolsig.VerifyRequest(secret, endpoint, req, []byte(tt.call.body), time.Now(), 0)
			if !errors.Is(err, tt.want) {
				t.Errorf("VerifyRequest(%+v, %+v) = %v, want %v", endpoint, tt.call, err, tt.want)
			}
			code, header, resp := do(t, req)
			if code != http.StatusUnauthorized || !strings.HasPrefix(resp, tt.want.Error()) || header.Get("WWW-Authenticate") != toolsig.Header {
				t.Errorf("POST %+v to Handler(%+v) = %d %q (WWW-Authenticate %q), want 401 %q… (%s)",
					tt.call, endpoint, code, resp, header.Get("WWW-Authenticate"), tt.want, toolsig.Header)
			}
		})
	}
	if n := s.calls.Load(); n != 0 {
		t.Errorf("next was called %d times for rejected requests, want 0", n)
	}
}

func TestHandlerTooLarge(t *testing.T) {
	const max = 1 << 10
	s := newServer(t, toolsig.Expect{Tool: "sendWireTransfer", Phase: toolsig.Execute}, max)
	for _, n := range []int{max, max + 1, 1 << 20} {
		c := wireCall
		c.body = strings.Repeat("x", n)
		code, _, _ := do(t, c.request(t, s.URL))
		want := http.StatusOK
		if n > max {
			want = http.StatusRequestEntityTooLarge
		}
		if code != want {
			t.Errorf("POST of %d bytes to Handler(maxBody %d) = %d, want %d", n, max, code, want)
		}
	}
	if n := s.calls.Load(); n != 1 {
		t.Errorf("next was called %d times, want 1 (for the body of exactly maxBody)", n)
	}
}

// FuzzVerify checks that Verify never panics, always fails with one of its
// sentinels, and that a signature made by Sign always verifies.
func FuzzVerify(f *testing.F) {
	f.Add("", "/wire", []byte(nil))
	f.Add("t=", "/", []byte("x"))
	f.Add("v2=ab", "/", []byte("x"))
	f.Add("t=abc,v2=ab", "/", []byte("x"))
	f.Add("t=1,v2=zz", "/", []byte("x"))
	f.Add(v1, "/wire", []byte(wireBody))
	f.Add("t=1700000000,v2=a27a916f08391df488b2a89378a760ffc8cbecf76b5dc7f1a9618e9aca03730e", "/wire?region=eu", []byte(wireBody))
	f.Add("t=99999999999999999999,v2="+strings.Repeat("0", 64), "/", []byte{0xff})
	f.Add(",,=,t==,v2==", "", []byte("\x00"))
	f.Fuzz(func(t *testing.T, header, path string, body []byte) {
		req := wire
		req.Path = path
		err := toolsig.Verify(secret, header, req, body, t0, toolsig.DefaultTolerance)
		if err != nil && !errors.Is(err, toolsig.ErrMissing) && !errors.Is(err, toolsig.ErrMalformed) &&
			!errors.Is(err, toolsig.ErrExpired) && !errors.Is(err, toolsig.ErrMismatch) {
			t.Errorf("Verify(%q, %+v, %q) = %v, which wraps none of the sentinels", header, req, body, err)
		}
		if err := toolsig.Verify(secret, toolsig.Sign(secret, t0, req, body), req, body, t0, toolsig.DefaultTolerance); err != nil {
			t.Errorf("Verify(Sign(%+v, %q)) = %v, want nil", req, body, err)
		}
	})
}

// TestRequestOf reads what a server received.
func TestRequestOf(t *testing.T) {
	r := httptest.NewRequest(http.MethodPost, "/tools/a%20b/wire?region=eu&x=%2F", bytes.NewReader(nil))
	r.Header.Set(toolsig.HeaderTool, "sendWireTransfer")
	r.Header.Set(toolsig.HeaderKey, "saga-1/7")
	r.Header.Set(toolsig.HeaderPhase, "execute")
	want := toolsig.Request{Method: "POST", Path: "/tools/a%20b/wire?region=eu&x=%2F", Tool: "sendWireTransfer", Key: "saga-1/7", Phase: toolsig.Execute}
	if got := toolsig.RequestOf(r); got != want {
		t.Errorf("RequestOf(%s %s) = %+v, want %+v", r.Method, r.RequestURI, got, want)
	}
}
