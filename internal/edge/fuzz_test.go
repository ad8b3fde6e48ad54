package edge

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/sagacity-go/sagacity/internal/engine"
	"github.com/sagacity-go/sagacity/wire"
)

// fuzzDecode feeds decode anything as the body of a request: it never
// panics, refuses with a clean client error (Invalid, or 415 for the
// media type), and what it accepts is exactly representable text.
func fuzzDecode[T any](f *testing.F, seeds []string, check func(t *testing.T, body []byte, v T)) {
	for _, s := range seeds {
		f.Add([]byte(s), "application/json")
	}
	f.Add([]byte(`{}`), "text/plain")
	f.Add([]byte(`{}`), "application/json; charset=utf-8")
	f.Fuzz(func(t *testing.T, body []byte, contentType string) {
		r := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(string(body)))
		r.Header.Set("Content-Type", contentType)
		var v T
		err := decode(r, &v, true)
		if err != nil {
			if !engine.IsKind(err, engine.Invalid) && !errors.Is(err, ErrMediaType) {
				t.Errorf("decode(%q, %q) error %v, want invalid", body, contentType, err)
			}
			return
		}
		check(t, body, v)
	})
}

func validText(t *testing.T, body []byte, what, s string) {
	if !utf8.ValidString(s) {
		t.Errorf("decode(%q) accepted %s %q, which is not UTF-8", body, what, s)
	}
}

// FuzzDecodeCall: the gateway's body.
func FuzzDecodeCall(f *testing.F) {
	fuzzDecode(f, []string{
		`{"tool":"reserveInventory","input":"{\"sku\":\"A\"}"}`,
		`{"tool":"reserveInventory","tool":"sendWireTransfer","input":"{}"}`,
		`{"tool":"a","Tool":"b","input":"x"}`,
		`{"tool":"a","input":"\u0000"}`,
		`{"tool":"a","input":"\ud800"}`,
		"{\"tool\":\"\xff\",\"input\":\"\"}",
		`{"tool":"a","input":null}`,
		`{"tool":"a","input":"x"} {}`,
		`[`, ``,
	}, func(t *testing.T, body []byte, v wire.CallRequest) {
		validText(t, body, "tool", v.Tool)
		if v.Input != nil {
			validText(t, body, "input", *v.Input)
		}
	})
}

// FuzzDecodeDecision: approve and reject bodies.
func FuzzDecodeDecision(f *testing.F) {
	fuzzDecode(f, []string{
		`{"approver":"manager@company.com","reason":"ok"}`,
		`{"approver":"a","approver":"b"}`,
		`{"Approver":"a"}`,
		`{"reason":"a\nauth=oidc"}`,
		`{"reason":1}`,
	}, func(t *testing.T, body []byte, v wire.DecisionRequest) {
		validText(t, body, "approver", v.Approver)
		validText(t, body, "reason", v.Reason)
	})
}

// FuzzDecodeResume: resume bodies, whose payload is the bytes to execute.
func FuzzDecodeResume(f *testing.F) {
	fuzzDecode(f, []string{
		`{"payload":"{\"amount\":\"100\",\"to\":\"alice\"}"}`,
		`{"payload":"a","payload":"b"}`,
		`{"Payload":"a"}`,
		`{"payload":"\u0000\ud83d\ude00"}`,
	}, func(t *testing.T, body []byte, v wire.ResumeRequest) {
		if v.Payload != nil {
			validText(t, body, "payload", *v.Payload)
		}
	})
}
