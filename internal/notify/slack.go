package notify

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/sagacity-go/sagacity/wire"
)

// Slack posts to a Slack channel with a bot token, through the Web API:
// a request's first event posts a message (chat.postMessage), and its
// later events edit that same message (chat.update), so that the channel
// shows each request once, as it stands. An open request's message has
// one button, a link that opens it in the console; a closed one's has
// none. Nobody decides in Slack.
type Slack struct {
	// API is the Web API's base URL; https://slack.com/api when "".
	API string
	// Token is the bot token (xoxb-…), with the chat:write scope.
	Token string
	// Channel is the channel's id (C…); the bot must be a member.
	Channel string
	// Client makes the calls; nil means one with a 10 s timeout.
	Client *http.Client
	// Now tells the time left to decide; time.Now when nil.
	Now func() time.Time
}

// Send posts m, or updates the message its thread ("<channel id>/<ts>")
// names. It returns a *Failure for an answer that is not ok: Permanent
// for an error retrying cannot mend (invalid_auth, channel_not_found,
// invalid_blocks, message_not_found, …), with RetryAfter for a rate
// limit (429, ratelimited); and the cause of a call that got no answer.
func (s *Slack) Send(ctx context.Context, m Message) (thread string, err error) {
	now := clock(s.Now)
	call := slackCall{
		Text:   slackFit(slackEscape(revealed(m.Event.Message)), slackTextMax),
		Blocks: slackBlocks(m, now),
	}
	if m.Thread == "" {
		call.Channel = s.Channel
		a, err := s.call(ctx, "chat.postMessage", call, now)
		if err != nil {
			return "", err
		}
		return a.Channel + "/" + a.TS, nil
	}
	var ok bool
	call.Channel, call.TS, ok = strings.Cut(m.Thread, "/")
	if !ok {
		return "", &Failure{Permanent: true, Err: fmt.Errorf("slack: thread %q is not <channel>/<ts>", m.Thread)}
	}
	_, err = s.call(ctx, "chat.update", call, now)
	return "", err
}

// slackCall is the body of chat.postMessage and chat.update.
type slackCall struct {
	Channel string       `json:"channel"`
	TS      string       `json:"ts,omitempty"`
	Text    string       `json:"text"`
	Blocks  []slackBlock `json:"blocks"`
}

// slackAnswer is what the Web API answers with status 200.
type slackAnswer struct {
	OK      bool   `json:"ok"`
	Error   string `json:"error"`
	Channel string `json:"channel"`
	TS      string `json:"ts"`
}

// slackPermanent are the errors a retry of the same call cannot mend.
var slackPermanent = map[string]bool{
	"invalid_auth": true, "not_authed": true, "account_inactive": true, "token_revoked": true,
	"missing_scope": true, "not_allowed_token_type": true,
	"channel_not_found": true, "is_archived": true, "not_in_channel": true,
	"msg_too_long": true, "invalid_blocks": true, "invalid_arguments": true,
	"message_not_found": true, "cant_update_message": true, "edit_window_closed": true,
}

func (s *Slack) call(ctx context.Context, method string, body slackCall, now time.Time) (slackAnswer, error) {
	var a slackAnswer
	b, err := json.Marshal(body)
	if err != nil {
		return a, err
	}
	api := strings.TrimSuffix(s.API, "/")
	if api == "" {
		api = "https://slack.com/api"
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, api+"/"+method, bytes.NewReader(b))
	if err != nil {
		return a, &Failure{Permanent: true, Err: fmt.Errorf("slack %s: %w", method, err)}
	}
	req.Header.Set("Authorization", "Bearer "+s.Token)
	req.Header.Set("Content-Type", "application/json; charset=utf-8")
	client := s.Client
	if client == nil {
		client = defaultClient
	}
	resp, err := client.Do(req)
	if err != nil {
		return a, fmt.Errorf("slack %s: %w", method, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return a, HTTPFailure(resp.StatusCode, resp.Header.Get("Retry-After"), excerpt(resp.Body), now)
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<16)).Decode(&a); err != nil {
		return a, fmt.Errorf("slack %s: unreadable answer: %w", method, err)
	}
	if a.OK {
		return a, nil
	}
	f := &Failure{Status: resp.StatusCode, Err: fmt.Errorf("slack %s: %s", method, a.Error), Permanent: slackPermanent[a.Error]}
	if a.Error == "ratelimited" || a.Error == "rate_limited" {
		f.RetryAfter = parseRetryAfter(resp.Header.Get("Retry-After"), now)
	}
	return a, f
}

// The Block Kit objects a message is made of.
type (
	slackText struct {
		Type     string `json:"type"`
		Text     string `json:"text"`
		Verbatim bool   `json:"verbatim,omitempty"`
	}
	slackBlock struct {
		Type     string      `json:"type"`
		Text     *slackText  `json:"text,omitempty"`
		Fields   []slackText `json:"fields,omitempty"`
		Elements []any       `json:"elements,omitempty"`
	}
	slackButton struct {
		Type     string    `json:"type"`
		Text     slackText `json:"text"`
		URL      string    `json:"url"`
		ActionID string    `json:"action_id"`
	}
)

// Block Kit's limits, in characters: a text object, a section's field.
const (
	slackTextMax  = 3000
	slackFieldMax = 2000
)

// mrkdwn is a text object for markup this file wrote, every user string
// in it escaped. Verbatim: Slack links no bare URL, channel or name in it.
func mrkdwn(s string, max int) *slackText {
	return &slackText{Type: "mrkdwn", Text: slackFit(s, max), Verbatim: true}
}

// slackBlocks is the message for m: what happened, the request's facts
// and a few payload fields, then, while the request is open, one link
// button to the console; once it is closed, links to the console and to
// its receipt, and no button.
func slackBlocks(m Message, now time.Time) []slackBlock {
	e := m.Event
	button := slackBlock{Type: "actions", Elements: []any{slackButton{
		Type: "button", Text: slackText{Type: "plain_text", Text: "Open in Sagacity"},
		URL: e.Link, ActionID: "open",
	}}}
	headline := slackHeadline(e)
	if headline == "" {
		return []slackBlock{{Type: "section", Text: mrkdwn(slackEscape(revealed(e.Message)), slackTextMax)}, button}
	}
	var facts []slackText
	fact := func(name, value string) {
		if value != "" {
			facts = append(facts, *mrkdwn("*"+name+"*\n"+value, slackFieldMax))
		}
	}
	fact("Requester", slackEscape(shown(e.Requester)))
	fact("Rule", slackEscape(shown(e.Rule)))
	fact("Votes", slackEscape(votes(e)))
	if requestOpen(e.Type) {
		fact("Expires", slackEscape(expires(e, now)))
	}
	if e.Fingerprint != "" {
		fact("Fingerprint", "`"+slackEscape(shown(e.Fingerprint))+"`")
	}
	blocks := []slackBlock{{Type: "section", Text: mrkdwn(headline, slackTextMax), Fields: facts}}
	if lines := fieldLines(m.Fields, m.More); len(lines) > 0 {
		text := "*Payload*\n" + slackEscape(strings.Join(lines, "\n"))
		blocks = append(blocks, slackBlock{Type: "section", Text: mrkdwn(text, slackTextMax)})
	}
	if requestOpen(e.Type) {
		return append(blocks, button)
	}
	links := slackLink(e.Link, "Open in Sagacity")
	if e.Receipt != "" {
		links += " · " + slackLink(e.Receipt, "receipt")
	}
	return append(blocks, slackBlock{Type: "context", Elements: []any{mrkdwn(links, slackTextMax)}})
}

// slackOutcomes says how each of a request's last events closed it.
var slackOutcomes = map[wire.EventType]string{
	wire.EventRejected:         "was rejected",
	wire.EventChangesRequested: "was sent back: changes were requested",
	wire.EventExpired:          "expired",
	wire.EventDismissed:        "was dismissed",
	wire.EventExecuted:         "was executed",
	wire.EventFailed:           "was executed, and its tool failed",
	wire.EventRefused:          "was refused",
	wire.EventDropped:          "was dropped: its saga failed before it was decided",
}

// slackHeadline says in mrkdwn what happened to e's request; "" when e
// is not a request's event.
func slackHeadline(e wire.Event) string {
	what := "*" + slackEscape(shown(e.Tool)) + "* in saga `" + slackEscape(shown(e.SagaID)) + "`"
	switch e.Type {
	case wire.EventWaiting, wire.EventVoted:
		if e.Decision == "withdrawn" && e.DecidedBy != "" {
			return what + " waits for approval: " + slackEscape(shown(e.DecidedBy)) + " withdrew an approval"
		}
		return what + " waits for approval"
	case wire.EventEscalated:
		return fmt.Sprintf("%s waits for approval; escalation step %d tells more people", what, e.Escalation)
	case wire.EventApproved:
		return what + " is approved and awaits execution"
	}
	outcome, ok := slackOutcomes[e.Type]
	if !ok {
		return ""
	}
	headline := what + " " + outcome
	switch {
	case (e.Type == wire.EventExecuted || e.Type == wire.EventFailed) && len(e.ApprovedBy) > 0:
		headline += ", approved by " + slackEscape(names(e.ApprovedBy))
	case e.DecidedBy != "":
		headline += " by " + slackEscape(shown(e.DecidedBy))
	}
	if e.Reason != "" {
		headline += "\n*Reason:* " + slackEscape(shown(e.Reason))
	}
	return headline
}

// slackEscape escapes the three characters Slack reads as markup, so
// that "<!channel>" or "<http://evil|click>" is shown, not acted on.
var slackEscape = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace

// slackLink is a mrkdwn link to one of the server's own URLs.
func slackLink(url, label string) string {
	return "<" + strings.ReplaceAll(slackEscape(url), "|", "%7C") + "|" + label + ">"
}

// slackFit cuts mrkdwn to max characters, marking the cut, and never
// inside an escape such as &amp;.
func slackFit(s string, max int) string {
	if utf8.RuneCountInString(s) <= max {
		return s
	}
	s = string([]rune(s)[:max-1])
	if i := strings.LastIndexByte(s, '&'); i >= 0 && !strings.Contains(s[i:], ";") {
		s = s[:i]
	}
	return s + "…"
}

// The text people read, in Slack and in email.
