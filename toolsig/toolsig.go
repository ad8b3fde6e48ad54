// Package toolsig signs and verifies the requests Sagacity sends to tool
// servers, so that a tool server can refuse any call that did not come
// through Sagacity (and so did not pass its approval gate).
//
// Every request carries the header
//
//	Sagacity-Signature: t=<unix seconds>,v2=<hex HMAC-SHA256(secret, M)>
//
// keyed with the signing secret shared by Sagacity and the tool server. M is
// the concatenation of eight fields, each written as its byte length in
// ASCII decimal, a colon and the bytes, with nothing between fields (so the
// field "POST" is "4:POST"); the length prefixes make field boundaries
// unambiguous. In order:
//
//	"sagacity-v2", t, method, request target (escaped path and query, as
//	sent), Sagacity-Tool, Idempotency-Key, Sagacity-Phase, body
//
// The header fields are the values as sent. So a signature says which tool,
// call and phase its body was sent for. The host is not signed (a proxy may
// change it), so a tool server must check that the tool and phase are its
// own: otherwise a request signed for a harmless tool could be replayed to
// an irreversible tool served at the same path on another host. Handler
// does:
//
//	secret := []byte(os.Getenv("SAGACITY_TOOL_SIGNING_SECRET"))
//	want := toolsig.Expect{Tool: "sendWireTransfer", Phase: toolsig.Execute}
//	http.Handle("POST /wire", toolsig.Handler(secret, want, 1<<20, wire))
//
// It answers 401 without calling the wrapped handler unless the request is
// signed, fresh, for want's tool and phase, and its Idempotency-Key is
// <Sagacity-Saga-Id>/<Sagacity-Seq> (plus "/compensate" for a compensation),
// which binds the unsigned saga and seq headers through the signed key.
// Servers that read the body themselves call VerifyRequest with the exact
// bytes received. A proxy in front of a tool server must pass the method,
// request target, these headers and the body unchanged.
//
// A signature stays valid for DefaultTolerance, so a recorded request can be
// replayed to the same endpoint within that window; tool servers deduplicate
// with the Idempotency-Key.
//
// To rotate the secret, a signer may send several v2 values, one per secret;
// a header is valid when any of them matches.
//
// examples/toolserver in this repository is a whole tool server on this
// package, with the Sagacity configuration that declares its tool. The
// module path is not published yet, so go get cannot fetch the package;
// until it is, a module of one's own uses it from a checkout of the
// repository with a replace directive, as docs/tools.md shows:
//
//	go mod edit -replace github.com/sagacity-go/sagacity=../sagacity
//	go mod tidy
//
// The earlier v1 scheme signed only the time and the body. It is not
// accepted, not even for a transition: a verifier that still accepted v1
// would accept exactly the cross-tool replay v2 exists to stop, since any
// v1 value (alone, or kept from a header that also carried v2) can be sent
// to any tool. Sagacity and its tool servers upgrade together.
package toolsig

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// The headers Sagacity sends with every call.
const (
	Header      = "Sagacity-Signature"
	HeaderSaga  = "Sagacity-Saga-Id"
	HeaderSeq   = "Sagacity-Seq"
	HeaderTool  = "Sagacity-Tool"
	HeaderPhase = "Sagacity-Phase"
	HeaderKey   = "Idempotency-Key"
)

// Phase says whether a request executes a call or compensates it.
type Phase string

// The phases, as sent in HeaderPhase.
const (
	Execute    Phase = "execute"
	Compensate Phase = "compensate"
)

// DefaultTolerance is how far a signature's timestamp may be from the
// verifier's clock, in either direction, by default.
const DefaultTolerance = 5 * time.Minute

// DefaultMaxBody is the body cap Handler applies when given a non-positive
// maxBody.
const DefaultMaxBody = 1 << 20

// The errors Verify and VerifyRequest return wrap one of these, with detail
// that never includes the secret, a header value or an expected signature.
// Test with errors.Is.
var (
	// ErrMissing means the request carries no signature.
	ErrMissing = errors.New("missing signature")
	// ErrMalformed means the header cannot be parsed.
	ErrMalformed = errors.New("malformed signature")
	// ErrExpired means the timestamp is too old or in the future.
	ErrExpired = errors.New("signature expired")
	// ErrMismatch means no signature in the header matches the request.
	ErrMismatch = errors.New("signature mismatch")
	// ErrWrongTool means the signature is valid but the request is for
	// another tool or phase, or its Idempotency-Key does not match its
	// saga and seq headers.
	ErrWrongTool = errors.New("signature not for this endpoint")
)

// HeaderValue returns s as Sagacity sends it in a header: as it is if it is
// visible ASCII without '%', and percent-encoded by url.PathEscape
// otherwise, so that non-ASCII and spaces survive and two values never
// share an encoding. A tool server compares HeaderValue of its own tool
// name with HeaderTool.
func HeaderValue(s string) string {
	for i := range len(s) {
		if c := s[i]; c <= ' ' || c >= 0x7f || c == '%' {
			return url.PathEscape(s)
		}
	}
	return s
}

// Request is what a signature binds besides the time and the body.
type Request struct {
	Method string
	Path   string // the request target as sent: URL.RequestURI(), escaped path and query
	Tool   string // the HeaderTool value as sent
	Key    string // the HeaderKey value as sent
	Phase  Phase  // the HeaderPhase value as sent
}

// RequestOf returns the Request r binds: its method, r.URL.RequestURI()
// and its HeaderTool, HeaderKey and HeaderPhase values.
func RequestOf(r *http.Request) Request {
	return Request{
		Method: r.Method,
		Path:   r.URL.RequestURI(),
		Tool:   r.Header.Get(HeaderTool),
		Key:    r.Header.Get(HeaderKey),
		Phase:  Phase(r.Header.Get(HeaderPhase)),
	}
}

// Sign returns the Header value for req with body, sent at time t and
// signed with secret.
func Sign(secret []byte, t time.Time, req Request, body []byte) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	return "t=" + ts + ",v2=" + hex.EncodeToString(mac(secret, ts, req, body))
}

// mac computes the v2 MAC over the layout in the package comment.
func mac(secret []byte, ts string, req Request, body []byte) []byte {
	h := hmac.New(sha256.New, secret)
	for _, f := range []string{"sagacity-v2", ts, req.Method, req.Path, req.Tool, req.Key, string(req.Phase)} {
		field(h, []byte(f))
	}
	field(h, body)
	return h.Sum(nil)
}

func field(h hash.Hash, b []byte) {
	h.Write(strconv.AppendInt(nil, int64(len(b)), 10))
	h.Write([]byte{':'})
	h.Write(b)
}

// Verify checks header, a Header value, against req and body. It returns
// nil when the header is well formed, one of its v2 signatures is the MAC
// of req and body with secret, and its timestamp is within tolerance of now
// in either direction. Otherwise it returns an error wrapping ErrMissing,
// ErrMalformed, ErrMismatch or ErrExpired, checked in that order.
//
// Fields are comma-separated key=value pairs. Unknown keys, v1 among them,
// are ignored so that the format can grow; there must be exactly one t and
// at least one v2. A non-positive tolerance means DefaultTolerance, so that
// an unset value cannot switch off replay protection.
func Verify(secret []byte, header string, req Request, body []byte, now time.Time, tolerance time.Duration) error {
	if strings.TrimSpace(header) == "" {
		return ErrMissing
	}
	ts, sec, sigs, err := parse(header)
	if err != nil {
		return err
	}
	want := mac(secret, ts, req, body)
	ok := false
	for _, s := range sigs {
		// Every candidate is compared, in constant time, so timing does not
		// reveal which one matched.
		if hmac.Equal(s, want) {
			ok = true
		}
	}
	if !ok {
		return fmt.Errorf("%w: no v2 signature matches the request", ErrMismatch)
	}
	// The signature is checked before the timestamp so that ErrExpired
	// reliably means an authentic but stale (or replayed) request, or a
	// clock out of step, rather than noise.
	if tolerance <= 0 {
		tolerance = DefaultTolerance
	}
	age := now.Sub(time.Unix(sec, 0))
	switch {
	case age > tolerance:
		return fmt.Errorf("%w: timestamp is %s old, more than %s", ErrExpired, age.Truncate(time.Second), tolerance)
	case age < -tolerance:
		return fmt.Errorf("%w: timestamp is %s in the future, more than %s", ErrExpired, (-age).Truncate(time.Second), tolerance)
	}
	return nil
}

// parse splits a header into its timestamp, as sent (which is what was
// signed) and as a number, and its v2 signatures. Errors never quote the
// header, which is attacker-controlled and may be echoed in a response.
func parse(header string) (ts string, sec int64, sigs [][]byte, err error) {
	fail := func(detail string) (string, int64, [][]byte, error) {
		return "", 0, nil, fmt.Errorf("%w: %s", ErrMalformed, detail)
	}
	seenT := false
	for field := range strings.SplitSeq(header, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(field), "=")
		if !ok {
			return fail("field without '='")
		}
		switch k {
		case "t":
			if seenT {
				return fail("more than one timestamp")
			}
			if !isDigits(v) {
				return fail("timestamp is not a decimal number of seconds")
			}
			if sec, err = strconv.ParseInt(v, 10, 64); err != nil {
				return fail("timestamp is out of range")
			}
			seenT, ts = true, v
		case "v2":
			b, err := hex.DecodeString(v)
			if err != nil || len(b) != sha256.Size {
				return fail(fmt.Sprintf("v2 is not %d hex digits", 2*sha256.Size))
			}
			sigs = append(sigs, b)
		}
	}
	switch {
	case !seenT:
		return fail("no timestamp")
	case len(sigs) == 0:
		return fail("no v2 signature")
	}
	return ts, sec, sigs, nil
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := range len(s) {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// Expect is the tool and phase an endpoint serves.
type Expect struct {
	Tool  string // the tool's name, unencoded
	Phase Phase
}

// VerifyRequest checks r, whose body was body, as Handler does: Verify
// over RequestOf(r), then want. Several Header lines are joined with
// commas, as HTTP allows a proxy to do, so they are verified as one header.
// It returns Verify's errors, or one wrapping ErrWrongTool when the
// HeaderTool value is not HeaderValue(want.Tool), the HeaderPhase value is
// not want.Phase, or the HeaderKey value is not
// <HeaderSaga>/<HeaderSeq>, plus "/compensate" for Compensate, with a
// non-empty saga id and a decimal seq. Any of those headers sent twice is
// ErrMalformed: a handler reading the other copy would act on something
// that was not verified.
func VerifyRequest(secret []byte, want Expect, r *http.Request, body []byte, now time.Time, tolerance time.Duration) error {
	for _, h := range []string{HeaderTool, HeaderPhase, HeaderKey, HeaderSaga, HeaderSeq} {
		if len(r.Header.Values(h)) > 1 {
			return fmt.Errorf("%w: %s is sent more than once", ErrMalformed, h)
		}
	}
	header := strings.Join(r.Header.Values(Header), ",")
	req := RequestOf(r)
	if err := Verify(secret, header, req, body, now, tolerance); err != nil {
		return err
	}
	if req.Tool != HeaderValue(want.Tool) {
		return fmt.Errorf("%w: %s is not this endpoint's tool", ErrWrongTool, HeaderTool)
	}
	if req.Phase != want.Phase {
		return fmt.Errorf("%w: %s is not this endpoint's phase", ErrWrongTool, HeaderPhase)
	}
	saga, seq := r.Header.Get(HeaderSaga), r.Header.Get(HeaderSeq)
	key := saga + "/" + seq
	if want.Phase == Compensate {
		key += "/compensate"
	}
	// A decimal seq keeps the split of the key into saga id and seq
	// unambiguous, since a saga id may hold '/'.
	if saga == "" || !isDigits(seq) || req.Key != key {
		return fmt.Errorf("%w: %s does not match %s and %s", ErrWrongTool, HeaderKey, HeaderSaga, HeaderSeq)
	}
	return nil
}

// Handler returns a handler that calls next only for requests that pass
// VerifyRequest with want, DefaultTolerance and the current time. It reads
// the whole body, up to maxBody bytes (DefaultMaxBody if maxBody is not
// positive), and answers 413 when the body is larger, or 401 with a short
// plain-text reason when VerifyRequest fails; next is not called then. On
// success next sees the same request with its body restored, byte for byte.
func Handler(secret []byte, want Expect, maxBody int64, next http.Handler) http.Handler {
	if maxBody <= 0 {
		maxBody = DefaultMaxBody
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
		if err != nil {
			if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
				http.Error(w, fmt.Sprintf("request body is larger than %d bytes", maxBody), http.StatusRequestEntityTooLarge)
				return
			}
			http.Error(w, "cannot read request body", http.StatusBadRequest)
			return
		}
		if err := VerifyRequest(secret, want, r, body, time.Now(), DefaultTolerance); err != nil {
			w.Header().Set("WWW-Authenticate", Header)
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.ContentLength = int64(len(body))
		next.ServeHTTP(w, r)
	})
}
