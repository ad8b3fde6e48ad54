package edge

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/sagacity-go/sagacity/internal/engine"
	"github.com/sagacity-go/sagacity/wire"
)

// TestClassify: every engine kind answers its status and wire kind, a
// refusal of the edge its own, wrapped or not, and anything else is
// internal; a refusal's body carries the engine error's saga, seq and
// code, and the message the server chose.
func TestClassify(t *testing.T) {
	for _, tt := range []struct {
		name   string
		err    error
		status int
		kind   wire.Kind
	}{
		{"invalid", engine.Errorf(engine.Invalid, "x"), 400, wire.KindInvalid},
		{"unauthenticated", engine.Errorf(engine.Unauthenticated, "x"), 401, wire.KindUnauthenticated},
		{"forbidden", engine.Errorf(engine.Forbidden, "x"), 403, wire.KindForbidden},
		{"not found", engine.Errorf(engine.NotFound, "x"), 404, wire.KindNotFound},
		{"conflict", engine.Errorf(engine.Conflict, "x"), 409, wire.KindConflict},
		{"unprocessable", engine.Errorf(engine.Unprocessable, "x"), 422, wire.KindUnprocessable},
		{"unavailable", engine.Errorf(engine.Unavailable, "x"), 503, wire.KindUnavailable},
		{"internal", engine.Errorf(engine.Internal, "x"), 500, wire.KindInternal},
		{"not the engine's", errors.New("boom"), 500, wire.KindInternal},
		{"the media type", ErrMediaType, 415, wire.KindMediaType},
		{"an edge refusal, wrapped", fmt.Errorf("route: %w", &Error{Status: 429, Kind: wire.KindTooManyRequests, Msg: "slow down"}),
			429, wire.KindTooManyRequests},
	} {
		if status, kind := Classify(tt.err); status != tt.status || kind != tt.kind {
			t.Errorf("Classify(%s) = %d %s, want %d %s", tt.name, status, kind, tt.status, tt.kind)
		}
	}
	err := &engine.Error{Kind: engine.Forbidden, Msg: "step up", SagaID: "pay", Seq: 3, Code: wire.CodeStepUp}
	want := wire.Error{Problem: wire.Problem{Error: "shown", Kind: wire.KindForbidden, Code: wire.CodeStepUp}, SagaID: "pay", JournalSeq: 3}
	if diff := cmp.Diff(want, Refusal(fmt.Errorf("vote: %w", err), "shown")); diff != "" {
		t.Errorf("Refusal(a step-up) (-want +got):\n%s", diff)
	}
}

// TestDecode: a body over the server's cap is 413, another media type
// 415, an empty body Invalid unless it may be empty, and a problem with
// the JSON is said in words without echoing the body.
func TestDecode(t *testing.T) {
	req := func(body, contentType string, limit int64) *http.Request {
		r := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(body))
		r.Header.Set("Content-Type", contentType)
		r.Body = http.MaxBytesReader(httptest.NewRecorder(), r.Body, limit)
		return r
	}
	var v wire.DecisionRequest
	for _, tt := range []struct {
		name   string
		r      *http.Request
		decode func(*http.Request, any) error
		status int
		msg    string
	}{
		{"too large", req(`{"reason":"far too long"}`, "application/json", 8), Decode, 413, "request body is larger than 8 bytes"},
		{"text", req(`{}`, "text/plain", 1<<10), Decode, 415, "Content-Type must be application/json"},
		{"empty", req(``, "application/json", 1<<10), Decode, 400, "request body is empty; send a JSON object"},
		{"a field misspelt", req(`{"Reason":"secret"}`, "application/json", 1<<10), Decode, 400, `invalid JSON body: unknown field "Reason"`},
		{"empty, allowed", req(``, "", 1<<10), DecodeOptional, 0, ""},
	} {
		err := tt.decode(tt.r, &v)
		status, _ := Classify(err)
		if tt.status == 0 && err != nil || tt.status != 0 && (status != tt.status || err.Error() != tt.msg) {
			t.Errorf("decoding %s = %d %v, want %d %q", tt.name, status, err, tt.status, tt.msg)
		}
	}
}
