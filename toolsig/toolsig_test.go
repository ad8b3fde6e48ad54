package toolsig_test

import (
	"bytes"
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
)

// TestSign pins the wire format against values computed independently with
// `openssl dgst -sha256 -hmac test-secret`.
func TestSign(t *testing.T) {
	tests := []struct {
		at   time.Time
		body string
		want string
	}{
		{t0, `{"amount":100}`, "t=1700000000,v1=dc9ec957622f8d1f7f7e1a5e17ce747c58a4fd577544848668b6d2010808fea1"},
		{t0.Add(999 * time.Millisecond), "", "t=1700000000,v1=02135fb92b9e5ac01b6ffb10fb1ce695acf10403dc760ecd132a9fd9d96d71d1"},
	}
	for _, tt := range tests {
		if got := toolsig.Sign(secret, tt.at, []byte(tt.body)); got != tt.want {
			t.Errorf("Sign(%q, %v, %q) = %q, want %q", secret, tt.at, tt.body, got, tt.want)
		}
	}
}

func TestRoundTrip(t *testing.T) {
	bodies := map[string]string{
		"empty":   "",
		"json":    `{"to":"acct-1","amount":100}`,
		"unicode": "{\"name\": \"Zoë 😀\"}\r\n\t ",
		"binary":  "\x00\xff\xfe,t=1,v1=",
	}
	for name, body := range bodies {
		t.Run(name, func(t *testing.T) {
			h := toolsig.Sign(secret, t0, []byte(body))
			if err := toolsig.Verify(secret, h, []byte(body), t0.Add(time.Minute), toolsig.DefaultTolerance); err != nil {
				t.Errorf("Verify(Sign(%q)) = %v, want nil", body, err)
			}
		})
	}
}

func TestVerify(t *testing.T) {
	const body = `{"amount":100}`
	valid := toolsig.Sign(secret, t0, []byte(body))
	other := toolsig.Sign([]byte("other-secret"), t0, []byte(body))
	otherV1 := other[strings.Index(other, "v1="):]
	validV1 := valid[strings.Index(valid, "v1="):]
	hex64 := strings.Repeat("ab", 32)

	type verifyCase struct {
		name      string
		header    string
		body      string // the signed body when empty
		now       time.Time
		tolerance time.Duration
		want      error // a sentinel, or nil
	}
	tests := []verifyCase{
		{name: "valid", header: valid, now: t0},
		{name: "tampered body", header: valid, body: `{"amount":1000}`, now: t0, want: toolsig.ErrMismatch},
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
		{name: "second v1 matches", header: "t=1700000000," + otherV1 + "," + validV1, now: t0},
		{name: "first v1 matches", header: valid + "," + otherV1, now: t0},
		{name: "no v1 matches", header: other + ",v1=" + hex64, now: t0, want: toolsig.ErrMismatch},
		{name: "unknown fields ignored", header: "v0=zzz," + valid + ",v2=whatever,x=", now: t0},
		{name: "spaces around fields", header: " t=1700000000 , " + validV1 + " ", now: t0},
		{name: "fields in any order", header: validV1 + ",t=1700000000", now: t0},
		{name: "uppercase hex digits", header: "t=1700000000,v1=" + strings.ToUpper(validV1[3:]), now: t0},
	}
	// The empty header is missing rather than malformed (see above).
	malformed := []string{
		"t=",
		"v1=ab",
		"v1=" + hex64,
		"t=abc,v1=" + hex64,
		"t=1,v1=zz",
		"t=1,v1=" + hex64[:62],
		"t=1,v1=" + hex64 + "ab",
		"t=1",
		"t=1,v1=",
		"t=-1,v1=" + hex64,
		"t=+1,v1=" + hex64,
		"t=1.5,v1=" + hex64,
		"t=99999999999999999999,v1=" + hex64,
		"t=1,t=1,v1=" + hex64,
		"t=1,v1=" + hex64 + ",",
		"t=1,,v1=" + hex64,
		"garbage",
		",",
		"t:1;v1:" + hex64,
		"T=1,V1=" + hex64,
	}
	for _, h := range malformed {
		tests = append(tests, verifyCase{name: "malformed " + h, header: h, now: t0, want: toolsig.ErrMalformed})
	}

	sentinels := []error{toolsig.ErrMissing, toolsig.ErrMalformed, toolsig.ErrExpired, toolsig.ErrMismatch}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := body
			if tt.body != "" {
				b = tt.body
			}
			err := toolsig.Verify(secret, tt.header, []byte(b), tt.now, tt.tolerance)
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
				if s != tt.want && errors.Is(err, s) {
					t.Errorf("Verify(%q) = %v, which also matches %v", tt.header, err, s)
				}
			}
			msg := err.Error()
			if strings.Contains(msg, string(secret)) || strings.Contains(msg, validV1[3:]) {
				t.Errorf("Verify(%q) = %q, which contains the secret or the expected signature", tt.header, msg)
			}
		})
	}
}

// TestVerifyExpiredDetail checks that an expired error says which way the
// clock is off, which is what an operator needs to fix it.
func TestVerifyExpiredDetail(t *testing.T) {
	h := toolsig.Sign(secret, t0, nil)
	tests := []struct {
		now  time.Time
		want string
	}{
		{t0.Add(10 * time.Minute), "signature expired: timestamp is 10m0s old, more than 5m0s"},
		{t0.Add(-10*time.Minute - 500*time.Millisecond), "signature expired: timestamp is 10m0s in the future, more than 5m0s"},
	}
	for _, tt := range tests {
		err := toolsig.Verify(secret, h, nil, tt.now, 0)
		if err == nil || err.Error() != tt.want {
			t.Errorf("Verify(%q, now %v) = %v, want %q", h, tt.now, err, tt.want)
		}
	}
}

// server runs Handler in a real HTTP server and records what reaches next.
type server struct {
	*httptest.Server
	calls atomic.Int32
	got   atomic.Value // []byte: the body next read
}

func newServer(t *testing.T, maxBody int64) *server {
	s := &server{}
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.calls.Add(1)
		b, err := io.ReadAll(r.Body)
		if err != nil {
			t.Errorf("next: reading body: %v", err)
		}
		s.got.Store(b)
		io.WriteString(w, "done")
	})
	s.Server = httptest.NewServer(toolsig.Handler(secret, maxBody, next))
	t.Cleanup(s.Close)
	return s
}

func post(t *testing.T, url, header string, body []byte) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if header != "" {
		req.Header.Set(toolsig.Header, header)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

func TestHandlerValid(t *testing.T) {
	s := newServer(t, 1<<10)
	body := []byte("{\"note\": \"Zoë  😀\"}\r\n\t\x00 ")
	code, resp := post(t, s.URL, toolsig.Sign(secret, time.Now(), body), body)
	if code != http.StatusOK || resp != "done" {
		t.Fatalf("POST with a valid signature: got %d %q, want 200 \"done\"", code, resp)
	}
	if got, _ := s.got.Load().([]byte); !bytes.Equal(got, body) {
		t.Errorf("next read body %q, want %q", got, body)
	}
}

func TestHandlerRejects(t *testing.T) {
	s := newServer(t, 1<<10)
	body := []byte(`{"amount":100}`)
	tests := []struct {
		name   string
		header string
		body   []byte
		want   string // start of the response body
	}{
		{"missing", "", body, "missing signature"},
		{"garbage", "t=1,v1=zz", body, "malformed signature"},
		{"other secret", toolsig.Sign([]byte("other"), time.Now(), body), body, "signature mismatch"},
		{"tampered body", toolsig.Sign(secret, time.Now(), body), []byte(`{"amount":999}`), "signature mismatch"},
		{"stale", toolsig.Sign(secret, time.Now().Add(-time.Hour), body), body, "signature expired"},
		{"future", toolsig.Sign(secret, time.Now().Add(time.Hour), body), body, "signature expired"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, resp := post(t, s.URL, tt.header, tt.body)
			if code != http.StatusUnauthorized || !strings.HasPrefix(resp, tt.want) {
				t.Errorf("POST %q with %s = %d %q, want 401 %q…", tt.body, tt.header, code, resp, tt.want)
			}
		})
	}
	if n := s.calls.Load(); n != 0 {
		t.Errorf("next was called %d times for rejected requests, want 0", n)
	}
}

func TestHandlerTooLarge(t *testing.T) {
	const max = 1 << 10
	s := newServer(t, max)
	for _, n := range []int{max, max + 1, 1 << 20} {
		body := bytes.Repeat([]byte("x"), n)
		code, _ := post(t, s.URL, toolsig.Sign(secret, time.Now(), body), body)
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
	f.Add("", []byte(nil))
	f.Add("t=", []byte("x"))
	f.Add("v1=ab", []byte("x"))
	f.Add("t=abc,v1=ab", []byte("x"))
	f.Add("t=1,v1=zz", []byte("x"))
	f.Add("t=1700000000,v1=dc9ec957622f8d1f7f7e1a5e17ce747c58a4fd577544848668b6d2010808fea1", []byte(`{"amount":100}`))
	f.Add("t=99999999999999999999,v1="+strings.Repeat("0", 64), []byte{0xff})
	f.Add(",,=,t==,v1==", []byte("\x00"))
	f.Fuzz(func(t *testing.T, header string, body []byte) {
		err := toolsig.Verify(secret, header, body, t0, toolsig.DefaultTolerance)
		if err != nil && !errors.Is(err, toolsig.ErrMissing) && !errors.Is(err, toolsig.ErrMalformed) &&
			!errors.Is(err, toolsig.ErrExpired) && !errors.Is(err, toolsig.ErrMismatch) {
			t.Errorf("Verify(%q, %q) = %v, which wraps none of the sentinels", header, body, err)
		}
		if err := toolsig.Verify(secret, toolsig.Sign(secret, t0, body), body, t0, toolsig.DefaultTolerance); err != nil {
			t.Errorf("Verify(Sign(%q)) = %v, want nil", body, err)
		}
	})
}
