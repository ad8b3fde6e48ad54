package slacktest_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sagacity-go/sagacity/internal/notify/slacktest"
)

// call calls method with body and the bearer token, and returns the
// answer's status, Retry-After and JSON.
func call(t *testing.T, s *slacktest.Server, method, token, contentType, body string) (int, string, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, s.URL+"/"+method, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var answer map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&answer)
	return resp.StatusCode, resp.Header.Get("Retry-After"), answer
}

const (
	token    = "xoxb-test"
	jsonType = "application/json; charset=utf-8"
	button   = `[{"type":"actions","elements":[{"type":"button","text":{"type":"plain_text","text":"Open"},"url":"https://x.example","action_id":"open"}]}]`
)

func TestServer(t *testing.T) {
	s := slacktest.New(t, token, "C1")
	post := `{"channel":"C1","text":"one","blocks":` + button + `}`
	tests := []struct {
		name, method, token, contentType, body string
		want                                   map[string]any
	}{
		{"posted", "chat.postMessage", token, jsonType, post,
			map[string]any{"ok": true, "channel": "C1", "ts": "1733150000.000100", "message": map[string]any{"type": "message", "text": "one", "ts": "1733150000.000100"}}},
		{"posted again", "chat.postMessage", token, jsonType, `{"channel":"C1","text":"two"}`,
			map[string]any{"ok": true, "channel": "C1", "ts": "1733150000.000200", "message": map[string]any{"type": "message", "text": "two", "ts": "1733150000.000200"}}},
		{"updated", "chat.update", token, jsonType, `{"channel":"C1","ts":"1733150000.000100","text":"one, again"}`,
			map[string]any{"ok": true, "channel": "C1", "ts": "1733150000.000100", "text": "one, again"}},
		{"no token", "chat.postMessage", "", jsonType, post, map[string]any{"ok": false, "error": "not_authed"}},
		{"other token", "chat.postMessage", "xoxb-other", jsonType, post, map[string]any{"ok": false, "error": "invalid_auth"}},
		{"no content type", "chat.postMessage", token, "", post, map[string]any{"ok": false, "error": "missing_post_type"}},
		{"form", "chat.postMessage", token, "application/x-www-form-urlencoded", "channel=C1&text=x", map[string]any{"ok": false, "error": "invalid_form_data"}},
		{"not JSON", "chat.postMessage", token, jsonType, `{"channel":`, map[string]any{"ok": false, "error": "invalid_json"}},
		{"not an object", "chat.postMessage", token, jsonType, `[]`, map[string]any{"ok": false, "error": "json_not_object"}},
		{"no text", "chat.postMessage", token, jsonType, `{"channel":"C1"}`, map[string]any{"ok": false, "error": "no_text"}},
		{"unknown channel", "chat.postMessage", token, jsonType, `{"channel":"C2","text":"x"}`, map[string]any{"ok": false, "error": "channel_not_found"}},
		{"unknown ts", "chat.update", token, jsonType, `{"channel":"C1","ts":"1.000000","text":"x"}`, map[string]any{"ok": false, "error": "message_not_found"}},
		{"long button", "chat.postMessage", token, jsonType, `{"channel":"C1","blocks":` + strings.Replace(button, "Open", strings.Repeat("x", 76), 1) + `}`,
			map[string]any{"ok": false, "error": "invalid_blocks"}},
		{"unknown block", "chat.postMessage", token, jsonType, `{"channel":"C1","blocks":[{"type":"approve"}]}`, map[string]any{"ok": false, "error": "invalid_blocks"}},
		{"unknown method", "chat.delete", token, jsonType, `{"channel":"C1","ts":"1733150000.000100"}`, map[string]any{"ok": false, "error": "unknown_method"}},
	}
	for _, tt := range tests {
		status, _, got := call(t, s, tt.method, tt.token, tt.contentType, tt.body)
		if diff := cmp.Diff(got, tt.want); status != http.StatusOK || diff != "" {
			t.Errorf("%s: %s %s = %d (-got +want):\n%s", tt.name, tt.method, tt.body, status, diff)
		}
	}

	msgs := s.Messages("C1")
	if len(msgs) != 2 {
		t.Fatalf("Messages(C1) = %d messages; want 2", len(msgs))
	}
	if got := msgs[0]; got.Text != "one, again" || got.Updates() != 1 || got.History[0].Text != "one" || len(got.History[0].Blocks) != 1 {
		t.Errorf("Messages(C1)[0] = %+v; want \"one, again\", once \"one\" with its button", got)
	}
}

func TestServerInject(t *testing.T) {
	s := slacktest.New(t, token, "C1")
	s.Inject(slacktest.Answer{Status: 429, RetryAfter: "30"}, slacktest.Answer{Status: 503}, slacktest.Answer{Error: "fatal_error"})
	post := `{"channel":"C1","text":"x"}`
	type answer struct {
		Status     int
		RetryAfter string
		Error      any
	}
	var got []answer
	for range 4 {
		status, retryAfter, a := call(t, s, "chat.postMessage", token, jsonType, post)
		got = append(got, answer{status, retryAfter, a["error"]})
	}
	want := []answer{{429, "30", "ratelimited"}, {503, "", nil}, {200, "", "fatal_error"}, {200, "", nil}}
	if diff := cmp.Diff(got, want); diff != "" {
		t.Errorf("answers (-got +want):\n%s", diff)
	}
	if n := len(s.Messages("C1")); n != 1 {
		t.Errorf("Messages(C1) = %d messages; want 1, the call after the injected answers", n)
	}
}

// TestServerRichText: rich text is taken as Slack takes it, runs of text
// styled by flags and links, and an empty run, a style Slack does not
// know or a link to no web page is invalid_blocks; a message shows its
// runs joined.
func TestServerRichText(t *testing.T) {
	s := slacktest.New(t, token, "C1")
	rich := func(runs string) string {
		return `{"channel":"C1","text":"x","blocks":[{"type":"rich_text","elements":[{"type":"rich_text_section","elements":[` + runs + `]}]}]}`
	}
	for _, tt := range []struct{ name, runs, err string }{
		{"runs", `{"type":"text","text":"sendWireTransfer","style":{"bold":true}},{"type":"text","text":" in saga "},` +
			`{"type":"text","text":"*x*","style":{"code":true}},{"type":"link","url":"https://s.example/r","text":"open"}`, ""},
		{"an empty run", `{"type":"text","text":""}`, "invalid_blocks"},
		{"an unknown style", `{"type":"text","text":"x","style":{"blink":true}}`, "invalid_blocks"},
		{"a script link", `{"type":"link","url":"javascript:alert(1)","text":"x"}`, "invalid_blocks"},
		{"a mention", `{"type":"broadcast","range":"channel"}`, "invalid_blocks"},
	} {
		_, _, got := call(t, s, "chat.postMessage", token, jsonType, rich(tt.runs))
		if ok := got["ok"] == true; ok != (tt.err == "") || tt.err != "" && got["error"] != tt.err {
			t.Errorf("%s: chat.postMessage = %v; want error %q", tt.name, got, tt.err)
		}
	}
	msgs := s.Messages("C1")
	if len(msgs) != 1 {
		t.Fatalf("Messages(C1) = %d messages; want the one valid", len(msgs))
	}
	if got := msgs[0].Shown(); got != "sendWireTransfer in saga *x*open" {
		t.Errorf("Shown() = %q", got)
	}
	if runs := msgs[0].Runs(); len(runs) != 4 || !runs[0].RunStyle.Bold || !runs[2].RunStyle.Code || runs[3].URL != "https://s.example/r" {
		t.Errorf("Runs() = %+v; want four, styled as sent", runs)
	}
}
