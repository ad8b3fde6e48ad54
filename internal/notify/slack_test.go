package notify_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sagacity-go/sagacity/internal/notify"
	"github.com/sagacity-go/sagacity/internal/notify/slacktest"
	"github.com/sagacity-go/sagacity/internal/payload"
	"github.com/sagacity-go/sagacity/wire"
)

// clock is 3h59m30s before requestEvent's deadline.
func clock() time.Time { return time.Date(2026, 12, 2, 12, 0, 30, 0, time.UTC) }

// requestEvent is an event of type typ about a request that asks two
// approvals by 16:00 UTC.
func requestEvent(typ wire.EventType) wire.Event {
	return wire.Event{
		ID:            "evt_" + strings.ReplaceAll(string(typ), ".", "_"),
		Type:          typ,
		Time:          "2026-12-02T12:00:00Z",
		Message:       "sendWireTransfer in saga transfer-77 waits for approval",
		SagaID:        "transfer-77",
		JournalSeq:    12,
		Tool:          "sendWireTransfer",
		PayloadSHA256: "79c2a2415f1c9e0d8f3c1e4a9b0d2c6e7f1a3b5c9d8e0f2a4b6c8d0e1f3a5b7c",
		Fingerprint:   "79c2 a241 5f1c 9e0d",
		Requester:     "agent-7",
		Rule:          "two-person",
		Quorum:        2,
		ExpiresAt:     "2026-12-02T16:00:00Z",
		Link:          "https://sagacity.example/sagas/transfer-77/12",
	}
}

// someFields are a payload's summary: two fields, two left out.
var someFields = []payload.Field{{Key: "amount", Value: "100"}, {Key: "to", Value: "DE89 3704"}}

const (
	slackToken   = "xoxb-test"
	slackChannel = "C0001"
)

func newSlack(t *testing.T) (*notify.Slack, *slacktest.Server) {
	srv := slacktest.New(t, slackToken, slackChannel)
	return &notify.Slack{API: srv.URL, Token: slackToken, Channel: slackChannel, Now: clock}, srv
}

// actions returns the actions blocks of blocks.
func actions(blocks []slacktest.Block) []slacktest.Block {
	var out []slacktest.Block
	for _, b := range blocks {
		if b.Type == "actions" {
			out = append(out, b)
		}
	}
	return out
}

// texts is every text of blocks as Slack shows them, to search.
func texts(blocks []slacktest.Block) string { return slacktest.Version{Blocks: blocks}.Shown() }

// links are the links of a message's rich text, "label url".
func links(v slacktest.Version) []string {
	var out []string
	for _, r := range v.Runs() {
		if r.Type == "link" {
			out = append(out, r.Text.Text+" "+r.URL)
		}
	}
	return out
}

func TestSlackThread(t *testing.T) {
	s, srv := newSlack(t)
	ctx := context.Background()

	waiting := requestEvent(wire.EventWaiting)
	thread, err := s.Send(ctx, notify.Message{Event: waiting, Fields: someFields, More: 2, First: true})
	if err != nil {
		t.Fatalf("Send(%s) = %v", waiting.Type, err)
	}
	voted := requestEvent(wire.EventVoted)
	voted.ApprovedBy, voted.Decision, voted.DecidedBy = []string{"alice"}, "approved", "alice"
	approved := requestEvent(wire.EventApproved)
	approved.ApprovedBy, approved.Decision, approved.DecidedBy = []string{"alice", "carol"}, "approved", "carol"
	executed := requestEvent(wire.EventExecuted)
	executed.ApprovedBy = []string{"alice", "carol"}
	executed.Votes = []wire.EventVote{{By: "alice", Reason: "matches invoice 4711", JournalSeq: 13, Receipt: "https://sagacity.example/receipts/transfer-77/13"},
		{By: "carol", JournalSeq: 14, Receipt: "https://sagacity.example/receipts/transfer-77/14"}}
	for _, e := range []wire.Event{voted, approved, executed} {
		got, err := s.Send(ctx, notify.Message{Event: e, Fields: someFields, More: 2, Thread: thread})
		if err != nil || got != "" {
			t.Fatalf("Send(%s, thread %q) = %q, %v; want \"\", nil", e.Type, thread, got, err)
		}
	}

	msgs := srv.Messages(slackChannel)
	if len(msgs) != 1 {
		t.Fatalf("channel has %d messages; want 1, posted then updated", len(msgs))
	}
	m := msgs[0]
	if want := slackChannel + "/" + m.TS; thread != want {
		t.Errorf("Send(%s) thread = %q; want %q", waiting.Type, thread, want)
	}
	if m.Updates() != 3 {
		t.Errorf("message updated %d times; want 3", m.Updates())
	}
	for i, v := range m.History {
		if n := len(actions(v.Blocks)); n != 1 {
			t.Errorf("version %d (open) has %d actions blocks; want 1", i, n)
		}
	}
	if n := len(actions(m.Blocks)); n != 0 {
		t.Errorf("executed message has %d actions blocks; want none", n)
	}
	// The closing message says the outcome, who decided and why, and
	// links to the console and to each vote's receipt.
	all := texts(m.Blocks)
	for _, want := range []string{
		"sendWireTransfer in saga transfer-77 was executed, approved by alice, carol",
		"Approved by\nalice: matches invoice 4711 · receipt\ncarol · receipt",
	} {
		if !strings.Contains(all, want) {
			t.Errorf("executed message:\n%s\nlacks %q", all, want)
		}
	}
	wantLinks := []string{"receipt https://sagacity.example/receipts/transfer-77/13", "receipt https://sagacity.example/receipts/transfer-77/14",
		"Open in Sagacity https://sagacity.example/sagas/transfer-77/12"}
	if diff := cmp.Diff(links(m.Version), wantLinks); diff != "" {
		t.Errorf("executed message's links (-got +want):\n%s", diff)
	}
}

func TestSlackWaiting(t *testing.T) {
	s, srv := newSlack(t)
	e := requestEvent(wire.EventWaiting)
	e.ApprovedBy = []string{"alice"}
	if _, err := s.Send(context.Background(), notify.Message{Event: e, Fields: someFields, More: 2, First: true}); err != nil {
		t.Fatalf("Send(%s) = %v", e.Type, err)
	}
	run := func(typ, text string, style slacktest.RunStyle) slacktest.Element {
		return slacktest.Element{Type: typ, Text: slacktest.Text{Type: typ, Text: text}, RunStyle: style}
	}
	plain := func(s string) slacktest.Element { return run("text", s, slacktest.RunStyle{}) }
	bold := func(s string) slacktest.Element { return run("text", s, slacktest.RunStyle{Bold: true}) }
	code := func(s string) slacktest.Element { return run("text", s, slacktest.RunStyle{Code: true}) }
	rich := func(runs ...slacktest.Element) slacktest.Block {
		return slacktest.Block{Type: "rich_text", Elements: []slacktest.Element{{Type: "rich_text_section", Elements: runs}}}
	}
	want := slacktest.Version{
		Text: "sendWireTransfer in saga transfer-77 waits for approval",
		Blocks: []slacktest.Block{
			rich(bold("sendWireTransfer"), plain(" in saga "), code("transfer-77"), plain(" waits for approval")),
			rich(bold("Requester: "), plain("agent-7"), plain("\n"), bold("Rule: "), plain("two-person"), plain("\n"),
				bold("Votes: "), plain("1 of 2: alice"), plain("\n"), bold("Expires: "), plain("in 3h59m (2026-12-02 16:00 UTC)"),
				plain("\n"), bold("Fingerprint: "), code("79c2 a241 5f1c 9e0d")),
			rich(bold("Payload"), plain("\namount: 100\nto: DE89 3704\n+2 more")),
			{Type: "actions", Elements: []slacktest.Element{{
				Type: "button", Text: slacktest.Text{Type: "plain_text", Text: "Open in Sagacity"},
				URL: e.Link, ActionID: "open",
			}}},
		},
	}
	if diff := cmp.Diff(srv.Messages(slackChannel)[0].Version, want); diff != "" {
		t.Errorf("Send(%s) posted (-got +want):\n%s", e.Type, diff)
	}
}

// TestSlackButtons: a message has at most one button, a link to the
// console, while its request is open, and none once it is closed.
func TestSlackButtons(t *testing.T) {
	decided := func(typ wire.EventType, by, reason string) wire.Event {
		e := requestEvent(typ)
		e.DecidedBy, e.Reason = by, reason
		return e
	}
	escalated := requestEvent(wire.EventEscalated)
	escalated.Escalation = 1
	tests := []struct {
		event wire.Event
		open  bool
		says  string
	}{
		{requestEvent(wire.EventWaiting), true, "waits for approval"},
		{requestEvent(wire.EventVoted), true, "waits for approval"},
		{requestEvent(wire.EventApproved), true, "awaits execution"},
		{escalated, true, "waits for approval; escalation step 1 tells more people"},
		{wire.Event{Type: wire.EventInDoubt, Message: "a call to sendWireTransfer has no outcome", Link: "https://sagacity.example/sagas/s1"}, true, "has no outcome"},
		{wire.Event{Type: wire.EventCompensationFailed, Message: "undoing saga s1 failed", Link: "https://sagacity.example/sagas/s1"}, true, "undoing saga s1 failed"},
		{wire.Event{Type: wire.EventHalted, Message: "the log is halted", Link: "https://sagacity.example/log"}, true, "the log is halted"},
		{decided(wire.EventRejected, "bob", "wrong IBAN"), false, "was rejected by bob\nReason: wrong IBAN"},
		{decided(wire.EventChangesRequested, "bob", "split it"), false, "changes were requested by bob\nReason: split it"},
		{decided(wire.EventExpired, "server", ""), false, "expired by server"},
		{decided(wire.EventDismissed, "dave", ""), false, "was dismissed by dave"},
		{decided(wire.EventFailed, "", "timeout"), false, "its tool failed\nReason: timeout"},
		{decided(wire.EventRefused, "", "other bytes"), false, "was refused\nReason: other bytes"},
		{decided(wire.EventDropped, "", ""), false, "its saga failed before it was decided"},
	}
	for _, tt := range tests {
		t.Run(string(tt.event.Type), func(t *testing.T) {
			s, srv := newSlack(t)
			if _, err := s.Send(context.Background(), notify.Message{Event: tt.event, First: true}); err != nil {
				t.Fatalf("Send(%s) = %v", tt.event.Type, err)
			}
			blocks := srv.Messages(slackChannel)[0].Blocks
			if all := texts(blocks); !strings.Contains(all, tt.says) {
				t.Errorf("Send(%s) posted:\n%s\nwhich does not say %q", tt.event.Type, all, tt.says)
			}
			var buttons []slacktest.Element
			for _, b := range actions(blocks) {
				buttons = append(buttons, b.Elements...)
			}
			if !tt.open {
				if len(buttons) != 0 {
					t.Errorf("Send(%s) posted buttons %+v; want none", tt.event.Type, buttons)
				}
				return
			}
			want := []slacktest.Element{{
				Type: "button", Text: slacktest.Text{Type: "plain_text", Text: "Open in Sagacity"},
				URL: tt.event.Link, ActionID: "open",
			}}
			if diff := cmp.Diff(buttons, want); diff != "" {
				t.Errorf("Send(%s) buttons (-got +want):\n%s", tt.event.Type, diff)
			}
		})
	}
}

// TestSlackHostile: values that are markup in Slack's mrkdwn (bold,
// italics, strike, code, quotes, links, mentions, entities) in the saga
// id, tool, requester, rule, decider, reason and payload change nothing
// around them: the message holds no mrkdwn at all, each value is one run
// of rich text of its own, styled only as its place says (the tool bold,
// the saga id code), and the notification text escapes mentions.
func TestSlackHostile(t *testing.T) {
	s, srv := newSlack(t)
	e := requestEvent(wire.EventRejected)
	e.Tool = "*sendWireTransfer*"
	e.SagaID = "`x` *approved by cfo*"
	e.Requester = "_agent_ ~7~"
	e.Rule = "> quoted"
	e.DecidedBy = "<@U0123> <!here>"
	e.Reason = "*approved* &amp; <http://evil|click> ~not~ `rejected`\u202e"
	e.Message = "sendWireTransfer in saga <!here> was rejected"
	fields := []payload.Field{{Key: "note", Value: "<!channel> *pay now*"}, {Key: "<http://evil|click>", Value: "_a_"}}
	if _, err := s.Send(context.Background(), notify.Message{Event: e, Fields: fields, First: true}); err != nil {
		t.Fatalf("Send = %v", err)
	}
	m := srv.Messages(slackChannel)[0]
	for _, b := range m.Blocks {
		if b.Type != "rich_text" {
			t.Errorf("the message has a %s block; want rich text alone, markup in none of it: %+v", b.Type, b)
		}
	}
	runs := map[string]slacktest.Element{}
	for _, r := range m.Runs() {
		runs[r.Text.Text] = r
	}
	for _, tt := range []struct {
		value string
		style slacktest.RunStyle
	}{
		{"*sendWireTransfer*", slacktest.RunStyle{Bold: true}},
		{"`x` *approved by cfo*", slacktest.RunStyle{Code: true}},
		{"_agent_ ~7~", slacktest.RunStyle{}},
		{"> quoted", slacktest.RunStyle{}},
		{"*approved* &amp; <http://evil|click> ~not~ `rejected`[U+202E]", slacktest.RunStyle{}},
	} {
		r, ok := runs[tt.value]
		if !ok || r.Type != "text" || !cmp.Equal(r.RunStyle, tt.style) {
			t.Errorf("the message's runs hold %q as %+v; want one text run of it alone, styled %+v:\n%s", tt.value, r, tt.style, m.Shown())
		}
	}
	for _, want := range []string{" was rejected by <@U0123> <!here>", "\nnote: <!channel> *pay now*\n<http://evil|click>: _a_"} {
		if !strings.Contains(m.Shown(), want) {
			t.Errorf("the message:\n%s\nlacks %q, as written", m.Shown(), want)
		}
	}
	var styled []string
	for _, r := range m.Runs() {
		if !cmp.Equal(r.RunStyle, slacktest.RunStyle{}) && r.Text.Text != e.Tool && r.Text.Text != e.SagaID {
			styled = append(styled, r.Text.Text)
		}
	}
	if diff := cmp.Diff(styled, []string{"\nReason: ", "Requester: ", "Rule: ", "Votes: ", "Fingerprint: ", "79c2 a241 5f1c 9e0d", "Payload"}); diff != "" {
		t.Errorf("the runs styled besides the tool and the saga (-got +want):\n%s", diff)
	}
	if strings.Contains(m.Text, "<!here>") || !strings.Contains(m.Text, "&lt;!here&gt;") {
		t.Errorf("the notification text = %q; want its mention escaped", m.Text)
	}
}

func TestSlackFailures(t *testing.T) {
	type failure struct {
		Status     int
		RetryAfter time.Duration
		Permanent  bool
	}
	gone := httptest.NewServer(nil)
	gone.Close()
	tests := []struct {
		name   string
		inject []slacktest.Answer
		slack  func(*notify.Slack)
		thread string
		want   *failure // nil: not a *Failure
	}{
		{name: "429", inject: []slacktest.Answer{{Status: 429, RetryAfter: "7"}}, want: &failure{429, 7 * time.Second, false}},
		{name: "ratelimited", inject: []slacktest.Answer{{Error: "ratelimited", RetryAfter: "3"}}, want: &failure{200, 3 * time.Second, false}},
		{name: "500", inject: []slacktest.Answer{{Status: 500}}, want: &failure{500, 0, false}},
		{name: "internal_error", inject: []slacktest.Answer{{Error: "internal_error"}}, want: &failure{200, 0, false}},
		{name: "invalid_auth", slack: func(s *notify.Slack) { s.Token = "xoxb-other" }, want: &failure{200, 0, true}},
		{name: "channel_not_found", slack: func(s *notify.Slack) { s.Channel = "C0404" }, want: &failure{200, 0, true}},
		{name: "message_not_found", thread: slackChannel + "/1733150000.999900", want: &failure{200, 0, true}},
		{name: "no answer", slack: func(s *notify.Slack) { s.API = gone.URL }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, srv := newSlack(t)
			srv.Inject(tt.inject...)
			if tt.slack != nil {
				tt.slack(s)
			}
			m := notify.Message{Event: requestEvent(wire.EventVoted), Thread: tt.thread, First: tt.thread == ""}
			_, err := s.Send(context.Background(), m)
			if err == nil {
				t.Fatalf("Send = nil; want an error")
			}
			f, ok := errors.AsType[*notify.Failure](err)
			if tt.want == nil {
				if ok {
					t.Errorf("Send = %#v; want an error that is not a *Failure", f)
				}
				return
			}
			if !ok {
				t.Fatalf("Send = %v; want a *Failure", err)
			}
			if diff := cmp.Diff(failure{f.Status, f.RetryAfter, f.Permanent}, *tt.want); diff != "" {
				t.Errorf("Send = %v (-got +want):\n%s", err, diff)
			}
			if !strings.Contains(err.Error(), tt.name) && f.Status == 200 {
				t.Errorf("Send = %v; want it to name %s", err, tt.name)
			}
		})
	}

	t.Run("retried after 429", func(t *testing.T) {
		s, srv := newSlack(t)
		srv.Inject(slacktest.Answer{Status: 429, RetryAfter: "1"})
		m := notify.Message{Event: requestEvent(wire.EventWaiting), First: true}
		if _, err := s.Send(context.Background(), m); err == nil {
			t.Fatalf("first Send = nil; want the 429")
		}
		if _, err := s.Send(context.Background(), m); err != nil {
			t.Fatalf("second Send = %v", err)
		}
		if n := len(srv.Messages(slackChannel)); n != 1 {
			t.Errorf("channel has %d messages; want 1", n)
		}
	})
}

// TestSlackLimits: however long a request's strings, and however many
// escapes they need, the message keeps within Block Kit's limits, which
// the stand-in checks as Slack does (invalid_blocks).
func TestSlackLimits(t *testing.T) {
	long := strings.Repeat("<&>", 1000)
	for _, typ := range []wire.EventType{wire.EventVoted, wire.EventRejected, wire.EventExecuted} {
		t.Run(string(typ), func(t *testing.T) {
			s, srv := newSlack(t)
			e := requestEvent(typ)
			e.Message, e.Tool, e.SagaID, e.Requester, e.Rule, e.DecidedBy, e.Reason = long, long, long, long, long, long, long
			e.ApprovedBy = []string{long, long, long, long, long, long, long, long, long, long}
			fields := []payload.Field{{Key: long[:80], Value: long[:80], KeyCut: 2920, Cut: 2920}, {Key: "k", Value: long[:80]}}
			if _, err := s.Send(context.Background(), notify.Message{Event: e, Fields: fields, More: 9, First: true}); err != nil {
				t.Fatalf("Send = %v", err)
			}
			all := texts(srv.Messages(slackChannel)[0].Blocks)
			if !strings.Contains(all, "…") {
				t.Errorf("message:\n%s\nmarks no cut", all)
			}
		})
	}
}
