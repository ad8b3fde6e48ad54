package notify_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sagacity-go/sagacity/internal/notify"
	"github.com/sagacity-go/sagacity/internal/testkit"
	"github.com/sagacity-go/sagacity/wire"
)

// verify is the receiver docs/notifications.md shows, verbatim: the
// standard library alone.
func verify(r *http.Request, body []byte, secret []byte) error { // secret: the whsec_ value's bytes, base64-decoded
	id, ts := r.Header.Get("webhook-id"), r.Header.Get("webhook-timestamp")
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || math.Abs(time.Since(time.Unix(sec, 0)).Minutes()) > 5 {
		return errors.New("webhook-timestamp is missing or more than 5 minutes off")
	}
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(id + "." + ts + "." + string(body)))
	want := "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil))
	for _, sig := range strings.Fields(r.Header.Get("webhook-signature")) {
		if hmac.Equal([]byte(sig), []byte(want)) {
			return nil
		}
	}
	return errors.New("no signature matches")
}

// TestReadmeReceiver: the documentation's few lines of Go (verify,
// above, which must be in README.md or a page of docs/ as written here)
// verify what the webhook channel sends, and refuse a body changed on the
// way.
func TestReadmeReceiver(t *testing.T) {
	src, err := os.ReadFile("receiver_test.go")
	if err != nil {
		t.Fatal(err)
	}
	start := strings.Index(string(src), "func verify(")
	fn := string(src)[start : start+strings.Index(string(src)[start:], "\n}\n")+3]
	if !slices.ContainsFunc(testkit.Pages(t), func(p testkit.Page) bool { return strings.Contains(p.Text, fn) }) {
		t.Errorf("neither README.md nor docs/*.md holds verify as this test runs it:\n%s", fn)
	}
	secret, err := notify.ParseSecret("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	if err != nil {
		t.Fatal(err)
	}
	var results []error
	tamper := false
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if tamper {
			body = append(body, ' ')
		}
		results = append(results, verify(r, body, secret))
	}))
	defer srv.Close()
	w := &notify.Webhook{URL: srv.URL, Secret: secret}
	m := notify.Message{Event: wire.Event{ID: "evt_x", Type: wire.EventWaiting, Message: "m", Link: "https://s.example/r"}}
	for _, tamper = range []bool{false, true} {
		if _, err := w.Send(context.Background(), m); err != nil {
			t.Fatal(err)
		}
	}
	if len(results) != 2 || results[0] != nil || results[1] == nil {
		t.Errorf("the README's receiver said %v; want the delivery verified and the changed body refused", results)
	}
}
