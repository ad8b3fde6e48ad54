package notify

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sagacity-go/sagacity/internal/payload"
	"github.com/sagacity-go/sagacity/wire"
)

// vector is a published signature, from testdata/webhooks.json.
type vector struct {
	Source     string `json:"source"`
	Secret     string `json:"secret"`
	SigningKey string `json:"signingKey"`
	PublicKey  string `json:"publicKey"`
	ID         string `json:"id"`
	Timestamp  int64  `json:"timestamp"`
	Body       string `json:"body"`
	Signature  string `json:"signature"`
}

func vectors(t *testing.T) []vector {
	t.Helper()
	b, err := os.ReadFile("testdata/webhooks.json")
	if err != nil {
		t.Fatal(err)
	}
	var f struct{ Vectors []vector }
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	return f.Vectors
}

// keys are the vectors' secret and key pair.
func keys(t *testing.T) ([]byte, ed25519.PrivateKey, ed25519.PublicKey) {
	t.Helper()
	secret, err := ParseSecret("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	if err != nil {
		t.Fatal(err)
	}
	key, err := ParseSigningKey("whsk_6Xb/dCcHpPea21PS1N9VY/NZW723CEc77N4rJCubMbfVKIDij2HKpMKkioLlX0dRqSKJp4AJ6p9lMicMFs6Kvg==")
	if err != nil {
		t.Fatal(err)
	}
	return secret, key, key.Public().(ed25519.PublicKey)
}

func TestSignVectors(t *testing.T) {
	for _, v := range vectors(t) {
		t.Run(v.Signature[:8], func(t *testing.T) {
			var secret []byte
			var key ed25519.PrivateKey
			var pub ed25519.PublicKey
			var err error
			if v.Secret != "" {
				if secret, err = ParseSecret(v.Secret); err != nil {
					t.Fatalf("ParseSecret: %v", err)
				}
			}
			if v.SigningKey != "" {
				if key, err = ParseSigningKey(v.SigningKey); err != nil {
					t.Fatalf("ParseSigningKey: %v", err)
				}
				if pub, err = ParsePublicKey(v.PublicKey); err != nil {
					t.Fatalf("ParsePublicKey: %v", err)
				}
				if !pub.Equal(key.Public()) {
					t.Fatalf("ParsePublicKey(%q) is not the signing key's public key", v.PublicKey)
				}
			}
			ts := time.Unix(v.Timestamp, 0)
			if got := Sign(v.ID, ts, []byte(v.Body), secret, key); got != v.Signature {
				t.Errorf("Sign(%q, %d, %q) = %q, want %q (%s)", v.ID, v.Timestamp, v.Body, got, v.Signature, v.Source)
			}
			h := header(v.ID, strconv.FormatInt(v.Timestamp, 10), v.Signature)
			if err := Verify(h, []byte(v.Body), secret, pub, ts); err != nil {
				t.Errorf("Verify(%v, %q) = %v, want nil", h, v.Body, err)
			}
		})
	}
}

func TestSignBoth(t *testing.T) {
	secret, key, _ := keys(t)
	ts := time.Unix(1614265330, 0)
	got := Sign("msg_p5jXN8AQM9LWM0D4loKWxJek", ts, []byte(`{"test": 2432232314}`), secret, key)
	want := "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE= v1a,hnO3f9T8Ytu9HwrXslvumlUpqtNVqkhqw/enGzPCXe5BdqzCInXqYXFymVJaA7AZdpXwVLPo3mNl8EM+m7TBAg=="
	if got != want {
		t.Errorf("Sign with secret and key = %q, want %q", got, want)
	}
}

// header is a delivery's Standard Webhooks headers.
func header(id, ts, sig string) http.Header {
	h := http.Header{}
	for k, v := range map[string]string{headerID: id, headerTimestamp: ts, headerSignature: sig} {
		if v != "" {
			h.Set(k, v)
		}
	}
	return h
}

func TestVerify(t *testing.T) {
	secret, key, pub := keys(t)
	otherSecret, err := ParseSecret("whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD")
	if err != nil {
		t.Fatal(err)
	}
	otherPub, _, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	const id = "evt_1"
	body := []byte(`{"id":"evt_1","type":"request.waiting"}`)
	now := time.Unix(1_700_000_000, 0)
	ts := strconv.FormatInt(now.Unix(), 10)
	v1 := Sign(id, now, body, secret, nil)
	v1a := Sign(id, now, body, nil, key)
	_, v1Sig, _ := strings.Cut(v1, ",")
	_, v1aSig, _ := strings.Cut(v1a, ",")
	changed := []byte(`{"id":"evt_1","type":"request.waiTing"}`)

	tests := []struct {
		name   string
		h      http.Header
		body   []byte
		secret []byte
		pub    ed25519.PublicKey
		now    time.Time
		ok     bool
	}{
		{"v1", header(id, ts, v1), body, secret, nil, now, true},
		{"v1a", header(id, ts, v1a), body, nil, pub, now, true},
		{"v1a beside a v1 without its secret", header(id, ts, v1+" "+v1a), body, nil, pub, now, true},
		{"one of several", header(id, ts, "v1,Ceo5qEr07ixe2NLpvHk3FH9bwy/WavXrAFQ/9tdO6mc= v2,abc "+v1+" v1,"), body, secret, nil, now, true},
		{"4 minutes old", header(id, ts, v1), body, secret, nil, now.Add(4 * time.Minute), true},
		{"4 minutes ahead", header(id, ts, v1), body, secret, nil, now.Add(-4 * time.Minute), true},
		{"body changed by one byte", header(id, ts, v1+" "+v1a), changed, secret, pub, now, false},
		{"id changed", header("evt_2", ts, v1+" "+v1a), body, secret, pub, now, false},
		{"timestamp changed", header(id, strconv.FormatInt(now.Unix()+1, 10), v1+" "+v1a), body, secret, pub, now, false},
		{"another secret", header(id, ts, v1), body, otherSecret, nil, now, false},
		{"another public key", header(id, ts, v1a), body, nil, otherPub, now, false},
		{"6 minutes old", header(id, ts, v1), body, secret, nil, now.Add(6 * time.Minute), false},
		{"6 minutes ahead", header(id, ts, v1), body, secret, nil, now.Add(-6 * time.Minute), false},
		{"timestamp not in seconds", header(id, now.Format(time.RFC3339), v1), body, secret, nil, now, false},
		{"missing webhook-id", header("", ts, v1), body, secret, nil, now, false},
		{"missing webhook-timestamp", header(id, "", v1), body, secret, nil, now, false},
		{"missing webhook-signature", header(id, ts, ""), body, secret, nil, now, false},
		{"only unknown schemes", header(id, ts, "v2,"+v1Sig+" v1b,"+v1aSig+" v1,"+v1aSig+" v1a,"+v1Sig+" "+v1Sig), body, secret, pub, now, false},
		{"v1a without a public key", header(id, ts, v1a), body, secret, nil, now, false},
		{"v1 without a secret", header(id, ts, v1), body, nil, pub, now, false},
		{"cut signature", header(id, ts, v1[:12]), body, secret, nil, now, false},
		{"empty signature", header(id, ts, "v1,"), body, secret, nil, now, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Verify(tt.h, tt.body, tt.secret, tt.pub, tt.now)
			if (err == nil) != tt.ok {
				t.Errorf("Verify(%v, %q) = %v, want ok %v", tt.h, tt.body, err, tt.ok)
			}
		})
	}
}

func TestParseKeys(t *testing.T) {
	b64 := func(n int) string { return base64.StdEncoding.EncodeToString([]byte(strings.Repeat("k", n))) }
	_, key, _ := keys(t)
	mismatched := append(ed25519.PrivateKey{}, key...)
	mismatched[40] ^= 1
	tests := []struct {
		name  string
		parse func(string) error
		in    string
		ok    bool
	}{
		{"secret of 24 bytes", parseSecret, "whsec_" + b64(24), true},
		{"secret of 64 bytes", parseSecret, "whsec_" + b64(64), true},
		{"secret of 23 bytes", parseSecret, "whsec_" + b64(23), false},
		{"secret of 65 bytes", parseSecret, "whsec_" + b64(65), false},
		{"secret without its prefix", parseSecret, b64(24), false},
		{"secret not base64", parseSecret, "whsec_" + b64(24)[1:], false},
		{"secret as a signing key", parseSecret, "whsk_" + b64(24), false},
		{"signing key", parseSigningKey, "whsk_" + base64.StdEncoding.EncodeToString(key), true},
		{"signing key's seed alone", parseSigningKey, "whsk_" + base64.StdEncoding.EncodeToString(key.Seed()), false},
		{"signing key of another public key", parseSigningKey, "whsk_" + base64.StdEncoding.EncodeToString(mismatched), false},
		{"signing key as a public key", parseSigningKey, "whpk_" + base64.StdEncoding.EncodeToString(key), false},
		{"public key", parsePublicKey, "whpk_" + base64.StdEncoding.EncodeToString(key[32:]), true},
		{"public key of 31 bytes", parsePublicKey, "whpk_" + base64.StdEncoding.EncodeToString(key[33:]), false},
		{"public key not base64", parsePublicKey, "whpk_%%%", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.parse(tt.in)
			if (err == nil) != tt.ok {
				t.Fatalf("parse(%q) = %v, want ok %v", tt.in, err, tt.ok)
			}
			secret := tt.in
			if _, after, ok := strings.Cut(tt.in, "_"); ok {
				secret = after
			}
			if err != nil && strings.Contains(err.Error(), secret) {
				t.Errorf("parse(%q) = %v, which shows the key", tt.in, err)
			}
		})
	}
}

func parseSecret(s string) error     { _, err := ParseSecret(s); return err }
func parseSigningKey(s string) error { _, err := ParseSigningKey(s); return err }
func parsePublicKey(s string) error  { _, err := ParsePublicKey(s); return err }

// fieldValue is a payload field's value no channel that pages or posts
// to a machine may send.
const fieldValue = "FIELD-VALUE-NEVER-SENT"

// message is a request's message, with a payload field.
func message(typ wire.EventType) Message {
	return Message{Event: wire.Event{
		ID: "evt_q3vj4sbg7xm2c5kt0r6wdy8ha1", Type: typ, Time: "2026-03-01T09:30:00Z",
		Message: "agent-7 asks to run payments.transfer in saga sg_42 (seq 7): 0 of 2 approvals",
		SagaID:  "sg_42", JournalSeq: 7, Tool: "payments.transfer",
		PayloadSHA256: "79c2a2415f1c9e0d6a3b8e1f2c4d5a6b7c8d9e0f1a2b3c4d5e6f7a8b9c0d1e2f", Fingerprint: "79c2 a241 5f1c 9e0d",
		Requester: "agent-7", Rule: "two-person", Quorum: 2, ExpiresAt: "2026-03-01T10:30:00Z",
		Link: "https://sagacity.example/sagas/sg_42/requests/7",
	}, Fields: []payload.Field{{Key: "amount", Value: fieldValue}}, More: 1, First: true}
}

// delivery is a webhook delivery as its receiver got it.
type delivery struct {
	header http.Header
	body   []byte
}

// receiver is a webhook endpoint: it verifies every delivery as a
// receiver does, by each scheme, answers 401 to one that does not
// verify and 204 to one that does, and records it.
type receiver struct {
	t      *testing.T
	secret []byte
	pub    ed25519.PublicKey
	now    func() time.Time

	mu  sync.Mutex
	got []delivery
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		rc.t.Errorf("receiver: %v", err)
		return
	}
	for _, key := range []struct {
		secret []byte
		pub    ed25519.PublicKey
	}{{rc.secret, nil}, {nil, rc.pub}} {
		if err := Verify(r.Header, body, key.secret, key.pub, rc.now()); err != nil {
			rc.t.Errorf("receiver: Verify(%v, %s) = %v", r.Header, body, err)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
	}
	rc.mu.Lock()
	rc.got = append(rc.got, delivery{r.Header, body})
	rc.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

// deliveries are those it got so far.
func (rc *receiver) deliveries() []delivery {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return slices.Clone(rc.got)
}

func TestWebhookDelivers(t *testing.T) {
	secret, key, pub := keys(t)
	var sec atomic.Int64
	sec.Store(1_700_000_000)
	clock := func() time.Time { return time.Unix(sec.Load(), 0) }
	rc := &receiver{t: t, secret: secret, pub: pub, now: clock}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	w := &Webhook{URL: srv.URL + "/hooks/sagacity", Secret: secret, Key: key, Client: srv.Client(), Now: clock}

	m := message(wire.EventWaiting)
	for range 2 {
		if thread, err := w.Send(t.Context(), m); thread != "" || err != nil {
			t.Fatalf("Send(%s) = %q, %v; want \"\", nil", m.Event.ID, thread, err)
		}
		sec.Add(60) // a retry
	}

	got := rc.deliveries()
	if len(got) != 2 {
		t.Fatalf("receiver got %d deliveries, want 2", len(got))
	}
	for i, d := range got {
		if got := d.header.Get(headerID); got != m.Event.ID {
			t.Errorf("delivery %d: webhook-id %q, want %q (the event's, on every delivery)", i, got, m.Event.ID)
		}
		if got, want := d.header.Get(headerTimestamp), strconv.Itoa(1_700_000_000+60*i); got != want {
			t.Errorf("delivery %d: webhook-timestamp %q, want %q (when it is sent)", i, got, want)
		}
		if got := d.header.Get("Content-Type"); got != "application/json" {
			t.Errorf("delivery %d: Content-Type %q, want application/json", i, got)
		}
		if got := d.header.Get("User-Agent"); got != "Sagacity" {
			t.Errorf("delivery %d: User-Agent %q, want Sagacity", i, got)
		}
		if strings.Contains(string(d.body), fieldValue) {
			t.Errorf("delivery %d: body %s has a payload field", i, d.body)
		}
		var ev wire.Event
		if err := json.Unmarshal(d.body, &ev); err != nil {
			t.Fatalf("delivery %d: body %s: %v", i, d.body, err)
		}
		if diff := cmp.Diff(m.Event, ev); diff != "" {
			t.Errorf("delivery %d: body is not the event (-want +got):\n%s", i, diff)
		}
	}
}

func TestWebhookFailures(t *testing.T) {
	var redirected atomic.Int32
	mux := http.NewServeMux()
	mux.HandleFunc("/gone", func(w http.ResponseWriter, r *http.Request) { http.Error(w, "endpoint deleted", http.StatusGone) })
	mux.HandleFunc("/busy", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "7")
		http.Error(w, "slow down", http.StatusTooManyRequests)
	})
	mux.HandleFunc("/broken", func(w http.ResponseWriter, r *http.Request) { http.Error(w, "oops", http.StatusInternalServerError) })
	mux.HandleFunc("/invalid", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "{\n  \"error\": \"unknown event\"\n}", http.StatusBadRequest)
	})
	mux.HandleFunc("/moved", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/new", http.StatusMovedPermanently) })
	mux.HandleFunc("/new", func(w http.ResponseWriter, r *http.Request) { redirected.Add(1) })
	srv := httptest.NewServer(mux)
	defer srv.Close()
	secret, _, _ := keys(t)

	tests := []struct {
		path string
		want Failure
		err  string
	}{
		{"/gone", Failure{Status: 410, Gone: true}, "status 410: endpoint deleted"},
		{"/busy", Failure{Status: 429, RetryAfter: 7 * time.Second}, "status 429: slow down"},
		{"/broken", Failure{Status: 500}, "status 500: oops"},
		{"/invalid", Failure{Status: 400, Permanent: true}, `status 400: { "error": "unknown event" }`},
		{"/moved", Failure{Status: 301, Permanent: true}, "status 301: no body"},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			w := &Webhook{URL: srv.URL + tt.path, Secret: secret, Client: srv.Client()}
			_, err := w.Send(t.Context(), message(wire.EventWaiting))
			f, ok := errors.AsType[*Failure](err)
			if !ok {
				t.Fatalf("Send to %s = %v, want a *Failure", tt.path, err)
			}
			got := Failure{Status: f.Status, RetryAfter: f.RetryAfter, Gone: f.Gone, Permanent: f.Permanent}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Send to %s: Failure (-want +got):\n%s", tt.path, diff)
			}
			if err.Error() != tt.err {
				t.Errorf("Send to %s = %q, want %q", tt.path, err, tt.err)
			}
		})
	}
	if n := redirected.Load(); n != 0 {
		t.Errorf("the redirect was followed %d times, want 0", n)
	}
}

func TestWebhookNoAnswer(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	u := srv.URL + "/hooks?token=s3cr3t"
	srv.Close()
	secret, _, _ := keys(t)
	w := &Webhook{URL: u, Secret: secret}
	_, err := w.Send(t.Context(), message(wire.EventWaiting))
	if err == nil {
		t.Fatalf("Send to a closed port = nil, want an error")
	}
	if _, ok := errors.AsType[*Failure](err); ok {
		t.Errorf("Send to a closed port = %v, a *Failure; want a plain error, retried", err)
	}
	if strings.Contains(err.Error(), "s3cr3t") {
		t.Errorf("Send to a closed port = %q, which shows the URL's token", err)
	}
}

func TestWebhookUnsigned(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hits.Add(1) }))
	defer srv.Close()
	w := &Webhook{URL: srv.URL, Client: srv.Client()}
	_, err := w.Send(t.Context(), message(wire.EventWaiting))
	if f, ok := errors.AsType[*Failure](err); !ok || !f.Permanent {
		t.Errorf("Send without a secret or key = %v, want a Permanent *Failure", err)
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("Send without a secret or key posted %d times, want 0", n)
	}
}

func TestExcerpt(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"one line", "  bad request  ", "bad request"},
		{"lines and controls", "line 1\r\nline 2\t\x1b[31mred\x00", "line 1 line 2 [31mred"},
		{"invalid UTF-8", "\xff\xfe ok", "\uFFFD ok"},
		{"bounded", strings.Repeat("ab", 400), strings.Repeat("ab", 256)},
		{"bounded within a character", "x" + strings.Repeat("é", 300), "x" + strings.Repeat("é", 255) + "\uFFFD"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := excerpt(strings.NewReader(tt.in)); got != tt.want {
				t.Errorf("excerpt(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}
