// Package slacktest is a stand-in for Slack's Web API, for tests, which
// cannot reach Slack: it serves chat.postMessage and chat.update as
// Slack does (the bearer token, the JSON body, Block Kit's limits, the
// answers and their errors), keeps each message with the versions it
// had, and gives the answers a test asks for instead.
package slacktest

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"
)

// Server is a Slack workspace with a bot token and a few channels. It is
// safe for concurrent use.
type Server struct {
	// URL is the Web API's base, for notify.Slack's API.
	URL string

	token    string
	mu       sync.Mutex
	channels map[string][]*Message
	posted   int
	next     []Answer
}

// Message is a message in a channel: its current text and blocks, and
// the versions chat.update replaced.
type Message struct {
	Channel, TS string
	Version
	// History holds the message's earlier versions, oldest first.
	History []Version
}

// Updates counts the times chat.update changed the message.
func (m Message) Updates() int { return len(m.History) }

// Version is a message's text and blocks at one time.
type Version struct {
	Text   string
	Blocks []Block
}

// Block is a Block Kit block, as the server read it.
type Block struct {
	Type     string    `json:"type"`
	Text     *Text     `json:"text,omitempty"`
	Fields   []Text    `json:"fields,omitempty"`
	Elements []Element `json:"elements,omitempty"`
}

// Text is a Block Kit text object.
type Text struct {
	Type     string `json:"type"`
	Text     string `json:"text"`
	Verbatim bool   `json:"verbatim,omitempty"`
}

// Element is an element of an actions block (a button: Type "button",
// its label in Text), of a context block (a text: Type "mrkdwn" or
// "plain_text", the text in Text) or of a rich text block: a section
// (Type "rich_text_section", its runs in Elements), and in it a run of
// text (Type "text", Text.Text styled by RunStyle) or a link (Type
// "link", URL, its label in Text.Text).
type Element struct {
	Type     string
	Text     Text
	URL      string
	ActionID string
	Value    string
	Style    string // a button's
	RunStyle RunStyle
	Elements []Element
}

// RunStyle is how a run of rich text is styled: set by flags, never by
// what the run holds.
type RunStyle struct {
	Bold   bool `json:"bold,omitempty"`
	Italic bool `json:"italic,omitempty"`
	Strike bool `json:"strike,omitempty"`
	Code   bool `json:"code,omitempty"`
	// Unknown are the style's keys Slack does not know: invalid_blocks.
	Unknown []string `json:"-"`
}

// UnmarshalJSON reads an element, whose text is an object for a button
// and a string for a context's text.
func (e *Element) UnmarshalJSON(b []byte) error {
	var raw struct {
		Type     string          `json:"type"`
		Text     json.RawMessage `json:"text"`
		Verbatim bool            `json:"verbatim"`
		URL      string          `json:"url"`
		ActionID string          `json:"action_id"`
		Value    string          `json:"value"`
		Style    json.RawMessage `json:"style"`
		Elements []Element       `json:"elements"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	*e = Element{Type: raw.Type, URL: raw.URL, ActionID: raw.ActionID, Value: raw.Value, Elements: raw.Elements}
	switch {
	case len(raw.Style) > 0 && raw.Style[0] == '"':
		if err := json.Unmarshal(raw.Style, &e.Style); err != nil {
			return err
		}
	case len(raw.Style) > 0:
		var flags map[string]bool
		if err := json.Unmarshal(raw.Style, &flags); err != nil {
			return err
		}
		for k, on := range flags {
			switch k {
			case "bold":
				e.RunStyle.Bold = on
			case "italic":
				e.RunStyle.Italic = on
			case "strike":
				e.RunStyle.Strike = on
			case "code":
				e.RunStyle.Code = on
			default:
				e.RunStyle.Unknown = append(e.RunStyle.Unknown, k)
			}
		}
	}
	if len(raw.Text) > 0 && raw.Text[0] == '"' {
		e.Text = Text{Type: raw.Type, Verbatim: raw.Verbatim}
		return json.Unmarshal(raw.Text, &e.Text.Text)
	}
	if len(raw.Text) > 0 {
		return json.Unmarshal(raw.Text, &e.Text)
	}
	return nil
}

// Answer is an answer the server gives instead of serving a call.
type Answer struct {
	// Status is the HTTP status; 200 when 0.
	Status int
	// RetryAfter is the Retry-After header, when set.
	RetryAfter string
	// Error is the error of {"ok":false,"error":…}: for a 429,
	// "ratelimited" when "". A 5xx without one has a text body.
	Error string
}

// New starts a server that takes the bot token token and knows the
// channels (ids, "C0123"), and stops it when t ends.
func New(t testing.TB, token string, channels ...string) *Server {
	s := &Server{token: token, channels: map[string][]*Message{}}
	for _, c := range channels {
		s.channels[c] = nil
	}
	srv := httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(srv.Close)
	s.URL = srv.URL
	return s
}

// Inject makes the next calls get answers, one each, in order.
func (s *Server) Inject(answers ...Answer) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.next = append(s.next, answers...)
}

// Messages returns channel's messages, in the order they were posted.
func (s *Server) Messages(channel string) []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Message
	for _, m := range s.channels[channel] {
		c := *m
		c.History = slices.Clone(m.History)
		out = append(out, c)
	}
	return out
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.next) > 0 {
		a := s.next[0]
		s.next = s.next[1:]
		a.write(w)
		return
	}
	method := strings.TrimPrefix(r.URL.Path, "/")
	if r.Method != http.MethodPost || (method != "chat.postMessage" && method != "chat.update") {
		answer(w, fail("unknown_method"))
		return
	}
	auth := r.Header.Get("Authorization")
	if auth == "" {
		answer(w, fail("not_authed"))
		return
	}
	if token, ok := strings.CutPrefix(auth, "Bearer "); !ok || token != s.token {
		answer(w, fail("invalid_auth"))
		return
	}
	call, code := read(r)
	if code != "" {
		answer(w, fail(code))
		return
	}
	msgs, ok := s.channels[call.Channel]
	if !ok {
		answer(w, fail("channel_not_found"))
		return
	}
	v := Version{Text: call.Text, Blocks: call.Blocks}
	if method == "chat.postMessage" {
		s.posted++
		ts := fmt.Sprintf("%d.%06d", 1733150000+s.posted/10000, s.posted%10000*100)
		s.channels[call.Channel] = append(msgs, &Message{Channel: call.Channel, TS: ts, Version: v})
		answer(w, map[string]any{"ok": true, "channel": call.Channel, "ts": ts, "message": map[string]any{"type": "message", "text": v.Text, "ts": ts}})
		return
	}
	i := slices.IndexFunc(msgs, func(m *Message) bool { return m.TS == call.TS })
	if i < 0 {
		answer(w, fail("message_not_found"))
		return
	}
	m := msgs[i]
	m.History = append(m.History, m.Version)
	m.Version = v
	answer(w, map[string]any{"ok": true, "channel": call.Channel, "ts": call.TS, "text": v.Text})
}

// call is the body of chat.postMessage and chat.update.
type call struct {
	Channel string  `json:"channel"`
	TS      string  `json:"ts"`
	Text    string  `json:"text"`
	Blocks  []Block `json:"blocks"`
}

// read reads a call's JSON body, or says which error Slack answers.
func read(r *http.Request) (call, string) {
	var c call
	ct := r.Header.Get("Content-Type")
	if ct == "" {
		return c, "missing_post_type"
	}
	if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
		return c, "invalid_form_data"
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil || !json.Valid(body) {
		return c, "invalid_json"
	}
	if body[0] != '{' {
		return c, "json_not_object"
	}
	if err := json.Unmarshal(body, &c); err != nil {
		return c, "invalid_blocks_format"
	}
	switch {
	case c.Text == "" && len(c.Blocks) == 0:
		return c, "no_text"
	case utf8.RuneCountInString(c.Text) > 40000:
		return c, "msg_too_long"
	case !valid(c.Blocks):
		return c, "invalid_blocks"
	}
	return c, ""
}

// valid checks blocks against Block Kit's rules for the blocks it knows.
func valid(blocks []Block) bool {
	text := func(t Text, max int) bool {
		n := utf8.RuneCountInString(t.Text)
		return (t.Type == "mrkdwn" || t.Type == "plain_text") && n >= 1 && n <= max
	}
	actionIDs := map[string]bool{}
	for _, b := range blocks {
		switch b.Type {
		case "section":
			if b.Text == nil && len(b.Fields) == 0 || b.Text != nil && !text(*b.Text, 3000) || len(b.Fields) > 10 {
				return false
			}
			for _, f := range b.Fields {
				if !text(f, 2000) {
					return false
				}
			}
		case "actions":
			if len(b.Elements) < 1 || len(b.Elements) > 25 {
				return false
			}
			for _, e := range b.Elements {
				if e.Type != "button" || e.Text.Type != "plain_text" || !text(e.Text, 75) ||
					len(e.URL) > 3000 || len(e.ActionID) > 255 || actionIDs[e.ActionID] {
					return false
				}
				if e.ActionID != "" {
					actionIDs[e.ActionID] = true
				}
			}
		case "context":
			if len(b.Elements) < 1 || len(b.Elements) > 10 {
				return false
			}
			for _, e := range b.Elements {
				if !text(e.Text, 3000) {
					return false
				}
			}
		case "rich_text":
			if len(b.Elements) < 1 {
				return false
			}
			for _, sec := range b.Elements {
				if sec.Type != "rich_text_section" || len(sec.Elements) < 1 {
					return false
				}
				for _, run := range sec.Elements {
					switch run.Type {
					case "text":
						if run.Text.Text == "" || len(run.RunStyle.Unknown) > 0 {
							return false
						}
					case "link":
						if !strings.HasPrefix(run.URL, "https://") && !strings.HasPrefix(run.URL, "http://") || len(run.URL) > 3000 {
							return false
						}
					default:
						return false
					}
				}
			}
		case "divider":
		default:
			return false
		}
	}
	return len(blocks) <= 50
}

// Runs are the message's runs of rich text, in order.
func (v Version) Runs() []Element {
	var out []Element
	for _, b := range v.Blocks {
		if b.Type == "rich_text" {
			for _, sec := range b.Elements {
				out = append(out, sec.Elements...)
			}
		}
	}
	return out
}

// Shown is the message's text as Slack shows it in the channel, blocks
// on lines of their own: rich text runs joined (a link by its label),
// sections' texts and fields, contexts' texts, buttons' labels. Markup
// in a mrkdwn text is left as written.
func (v Version) Shown() string {
	var blocks []string
	for _, b := range v.Blocks {
		var s strings.Builder
		if b.Text != nil {
			s.WriteString(b.Text.Text)
		}
		for _, f := range b.Fields {
			s.WriteString("\n" + f.Text)
		}
		for _, el := range b.Elements {
			switch el.Type {
			case "rich_text_section":
				for _, run := range el.Elements {
					s.WriteString(cmp.Or(run.Text.Text, run.URL))
				}
			default:
				s.WriteString(el.Text.Text)
			}
		}
		blocks = append(blocks, s.String())
	}
	return strings.Join(blocks, "\n")
}

func fail(code string) map[string]any { return map[string]any{"ok": false, "error": code} }

func answer(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	_ = json.NewEncoder(w).Encode(v)
}

func (a Answer) write(w http.ResponseWriter) {
	if a.RetryAfter != "" {
		w.Header().Set("Retry-After", a.RetryAfter)
	}
	status := a.Status
	if status == 0 {
		status = http.StatusOK
	}
	code := a.Error
	if code == "" && status == http.StatusTooManyRequests {
		code = "ratelimited"
	}
	if code == "" {
		http.Error(w, http.StatusText(status), status)
		return
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(fail(code))
}
