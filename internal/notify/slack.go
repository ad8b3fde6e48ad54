package notify

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
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

// A message's text is Block Kit rich text: runs of text, each styled by
// a flag (bold, code) and never by what it holds, and links. Slack reads
// no markup in a run, so no value from a saga id, tool, requester,
// reason, rule or payload can change the formatting around it, mention
// anyone or link anywhere, whatever it holds (backticks, asterisks,
// underscores, tildes, "<!channel>"): only the text of the notification
// Slack shows outside the channel is mrkdwn, its mentions escaped.

// The Block Kit objects a message is made of.
type (
	slackText struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	slackBlock struct {
		Type     string `json:"type"`
		Elements []any  `json:"elements"`
	}
	slackButton struct {
		Type     string    `json:"type"`
		Text     slackText `json:"text"`
		URL      string    `json:"url"`
		ActionID string    `json:"action_id"`
	}
	// slackSection is a rich_text_section: a paragraph of runs.
	slackSection struct {
		Type     string     `json:"type"`
		Elements []slackRun `json:"elements"`
	}
	// slackRun is a rich text element: text (Type "text") or a link to
	// one of the server's own URLs ("link").
	slackRun struct {
		Type  string      `json:"type"`
		Text  string      `json:"text,omitempty"`
		URL   string      `json:"url,omitempty"`
		Style *slackStyle `json:"style,omitempty"`
	}
	slackStyle struct {
		Bold bool `json:"bold,omitempty"`
		Code bool `json:"code,omitempty"`
	}
)

// slackTextMax is the most characters of the notification text.
const slackTextMax = 3000

// Runs of rich text.
func slackPlain(s string) slackRun { return slackRun{Type: "text", Text: s} }
func slackBold(s string) slackRun {
	return slackRun{Type: "text", Text: s, Style: &slackStyle{Bold: true}}
}
func slackCode(s string) slackRun {
	return slackRun{Type: "text", Text: s, Style: &slackStyle{Code: true}}
}
func slackLink(url, label string) slackRun {
	return slackRun{Type: "link", URL: url, Text: label}
}

// paragraph is a rich text block of one section, its empty runs (and
// links to nowhere) left out: Slack refuses an empty text.
func paragraph(runs ...slackRun) slackBlock {
	var kept []slackRun
	for _, r := range runs {
		if r.Type == "text" && r.Text != "" || r.Type == "link" && r.URL != "" {
			kept = append(kept, r)
		}
	}
	return slackBlock{Type: "rich_text", Elements: []any{slackSection{Type: "rich_text_section", Elements: kept}}}
}

// slackBlocks is the message for m: what happened, the request's facts
// and a few payload fields, then, while the request is open, one link
// button to the console; once it is closed, links to the console and to
// its receipts, and no button.
func slackBlocks(m Message, now time.Time) []slackBlock {
	e := m.Event
	button := slackBlock{Type: "actions", Elements: []any{slackButton{
		Type: "button", Text: slackText{Type: "plain_text", Text: "Open in Sagacity"},
		URL: e.Link, ActionID: "open",
	}}}
	headline := slackHeadline(e)
	if headline == nil {
		return []slackBlock{paragraph(slackPlain(fit(revealed(e.Message), slackTextMax))), button}
	}
	var facts []slackRun
	fact := func(name string, value slackRun) {
		if value.Text != "" {
			if len(facts) > 0 {
				facts = append(facts, slackPlain("\n"))
			}
			facts = append(facts, slackBold(name+": "), value)
		}
	}
	fact("Requester", slackPlain(shown(e.Requester)))
	fact("Rule", slackPlain(shown(e.Rule)))
	fact("Votes", slackPlain(votes(e)))
	if requestOpen(e.Type) {
		fact("Expires", slackPlain(expires(e, now)))
	}
	fact("Fingerprint", slackCode(shown(e.Fingerprint)))
	blocks := []slackBlock{paragraph(headline...)}
	if len(facts) > 0 {
		blocks = append(blocks, paragraph(facts...))
	}
	if lines := fieldLines(m.Fields, m.More); len(lines) > 0 {
		blocks = append(blocks, paragraph(slackBold("Payload"), slackPlain("\n"+strings.Join(lines, "\n"))))
	}
	if len(e.Votes) > 0 {
		runs := []slackRun{slackBold("Approved by")}
		for _, v := range e.Votes {
			runs = append(runs, slackPlain("\n"+shown(v.By)))
			if v.Reason != "" {
				runs = append(runs, slackPlain(": "+shown(v.Reason)))
			}
			runs = append(runs, slackPlain(" · "), slackLink(v.Receipt, "receipt"))
		}
		blocks = append(blocks, paragraph(runs...))
	}
	if requestOpen(e.Type) {
		return append(blocks, button)
	}
	links := []slackRun{slackLink(e.Link, "Open in Sagacity")}
	if e.Receipt != "" {
		links = append(links, slackPlain(" · "), slackLink(e.Receipt, "receipt"))
	}
	return append(blocks, paragraph(links...))
}

// slackOutcomes says how each of a request's last events closed it.
var slackOutcomes = map[wire.EventType]string{
	wire.EventRejected:         "was rejected",
	wire.EventChangesRequested: "was sent back: changes were requested",
	wire.EventExpired:          "expired",
	wire.EventDismissed:        "was dismissed",
	wire.EventCancelled:        "was cancelled by its requester",
	wire.EventExecuted:         "was executed",
	wire.EventFailed:           "was executed, and its tool failed",
	wire.EventRefused:          "was refused",
	wire.EventDropped:          "was dropped: its saga failed before it was decided",
	wire.EventBreakGlass:       "was executed by break-glass, without its quorum,",
	wire.EventRatified:         "had its break-glass execution ratified",
}

// slackHeadline says what happened to e's request, in runs; nil when e
// is not a request's event.
func slackHeadline(e wire.Event) []slackRun {
	what := []slackRun{slackBold(shown(e.Tool)), slackPlain(" in saga "), slackCode(shown(e.SagaID))}
	said := func(s ...slackRun) []slackRun { return slices.Concat(what, s) }
	switch e.Type {
	case wire.EventWaiting, wire.EventVoted:
		if e.Decision == "withdrawn" && e.DecidedBy != "" {
			return said(slackPlain(" waits for approval: " + shown(e.DecidedBy) + " withdrew an approval"))
		}
		return said(slackPlain(" waits for approval"))
	case wire.EventEscalated:
		return said(slackPlain(fmt.Sprintf(" waits for approval; escalation step %d tells more people", e.Escalation)))
	case wire.EventApproved:
		return said(slackPlain(" is approved and awaits execution"))
	}
	outcome, ok := slackOutcomes[e.Type]
	if !ok {
		return nil
	}
	headline := " " + outcome
	switch {
	case (e.Type == wire.EventExecuted || e.Type == wire.EventFailed || e.Type == wire.EventRatified) && len(e.ApprovedBy) > 0:
		headline += ", approved by " + names(e.ApprovedBy)
	case e.DecidedBy != "":
		headline += " by " + shown(e.DecidedBy)
	}
	runs := said(slackPlain(headline))
	if e.Reason != "" {
		runs = append(runs, slackBold("\nReason: "), slackPlain(shown(e.Reason)))
	}
	return runs
}

// slackEscape escapes the three characters Slack reads as markup in a
// notification's text, so that "<!channel>" or "<http://evil|click>" is
// shown, not acted on.
var slackEscape = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace

// slackFit cuts escaped text to max characters, marking the cut, and
// never inside an escape such as &amp;.
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

// fit cuts s to max characters, marking the cut.
func fit(s string, max int) string {
	if r := []rune(s); len(r) > max {
		return string(r[:max-1]) + "…"
	}
	return s
}
