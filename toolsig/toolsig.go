// Package toolsig signs and verifies the requests Sagacity sends to tool
// servers, so that a tool server can refuse any call that did not come
// through Sagacity (and so did not pass its approval gate).
//
// Every request carries the header
//
//	Sagacity-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<body>")>
//
// keyed with the signing secret shared by Sagacity and the tool server.
//
// A tool server written in Go wraps its handler:
//
//	secret := []byte(os.Getenv("SAGACITY_TOOL_SIGNING_SECRET"))
//	http.Handle("POST /transfer", toolsig.Handler(secret, 1<<20, transfer))
//
// Handler answers 401 to an unsigned, badly signed or stale request without
// calling the wrapped handler, and hands it the verified body otherwise.
// Servers that read the body themselves call Verify with the exact bytes
// received.
//
// A signature stays valid for DefaultTolerance, so a recorded request can be
// replayed within that window; tool servers deduplicate with the
// Idempotency-Key header Sagacity also sends.
//
// To rotate the secret, a signer may send several v1 values, one per
// secret; a header is valid when any of them matches.
package toolsig

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Header is the name of the request header that carries the signature.
const Header = "Sagacity-Signature"

// DefaultTolerance is how far a signature's timestamp may be from the
// verifier's clock, in either direction, by default.
const DefaultTolerance = 5 * time.Minute

// DefaultMaxBody is the body cap Handler applies when given a non-positive
// maxBody.
const DefaultMaxBody = 1 << 20

// The errors Verify returns wrap one of these, with detail that never
// includes the secret or an expected signature. Test with errors.Is.
var (
	// ErrMissing means the request carries no signature.
	ErrMissing = errors.New("missing signature")
	// ErrMalformed means the header cannot be parsed.
	ErrMalformed = errors.New("malformed signature")
	// ErrExpired means the timestamp is too old or in the future.
	ErrExpired = errors.New("signature expired")
	// ErrMismatch means no signature in the header matches the body.
	ErrMismatch = errors.New("signature mismatch")
)

// Sign returns the Header value for body sent at time t, signed with secret.
func Sign(secret []byte, t time.Time, body []byte) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	return "t=" + ts + ",v1=" + hex.EncodeToString(mac(secret, ts, body))
}

func mac(secret []byte, ts string, body []byte) []byte {
	h := hmac.New(sha256.New, secret)
	h.Write([]byte(ts))
	h.Write([]byte{'.'})
	h.Write(body)
	return h.Sum(nil)
}

// Verify checks header, a Header value, against body. It returns nil when
// the header is well formed, one of its v1 signatures is the HMAC of body
// with secret, and its timestamp is within tolerance of now in either
// direction. Otherwise it returns an error wrapping ErrMissing,
// ErrMalformed, ErrMismatch or ErrExpired, checked in that order.
//
// Fields are comma-separated key=value pairs. Unknown keys are ignored so
// that the format can grow; there must be exactly one t and at least one v1.
// A non-positive tolerance means DefaultTolerance, so that an unset value
// cannot switch off replay protection.
func Verify(secret []byte, header string, body []byte, now time.Time, tolerance time.Duration) error {
	if strings.TrimSpace(header) == "" {
		return ErrMissing
	}
	ts, sec, sigs, err := parse(header)
	if err != nil {
		return err
	}
	want := mac(secret, ts, body)
	ok := false
	for _, s := range sigs {
		// Every candidate is compared, in constant time, so timing does not
		// reveal which one matched.
		if hmac.Equal(s, want) {
			ok = true
		}
	}
	if !ok {
		return fmt.Errorf("%w: no v1 signature matches the body", ErrMismatch)
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
// signed) and as a number, and its v1 signatures. Errors never quote the
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
		case "v1":
			b, err := hex.DecodeString(v)
			if err != nil || len(b) != sha256.Size {
				return fail(fmt.Sprintf("v1 is not %d hex digits", 2*sha256.Size))
			}
			sigs = append(sigs, b)
		}
	}
	switch {
	case !seenT:
		return fail("no timestamp")
	case len(sigs) == 0:
		return fail("no v1 signature")
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

// Handler returns a handler that verifies each request's signature before
// calling next. It reads the whole body, up to maxBody bytes
// (DefaultMaxBody if maxBody is not positive), and answers 413 when the
// body is larger, or 401 with a short plain-text reason when Verify fails
// with DefaultTolerance and the current time; next is not called then. On
// success next sees the same request with its body restored, byte for byte.
//
// Several Header lines are joined with commas, as HTTP allows a proxy to
// do, so they are verified as one header.
func Handler(secret []byte, maxBody int64, next http.Handler) http.Handler {
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
		header := strings.Join(r.Header.Values(Header), ",")
		if err := Verify(secret, header, body, time.Now(), DefaultTolerance); err != nil {
			w.Header().Set("WWW-Authenticate", Header)
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.ContentLength = int64(len(body))
		next.ServeHTTP(w, r)
	})
}
