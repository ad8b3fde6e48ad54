package notify_test

import (
	"context"
	"errors"
	"net"
	"net/textproto"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sagacity-go/sagacity/internal/notify"
	"github.com/sagacity-go/sagacity/internal/notify/mailtest"
	"github.com/sagacity-go/sagacity/wire"
)

// newEmail mails to mp without TLS, which its loopback address allows.
func newEmail(mp *mailtest.Mailpit) *notify.Email {
	return &notify.Email{
		Addr: mp.SMTP, From: "Sagacity <sagacity@example.com>", To: []string{"ops@example.com", "Bob <bob@example.com>"},
		Username: "sagacity", Password: "secret", TLS: "none", Hostname: "sagacity.example", Now: clock,
	}
}

func TestEmailThread(t *testing.T) {
	mp := mailtest.Start(t)
	e := newEmail(mp)
	ctx := context.Background()

	waiting := requestEvent(wire.EventWaiting)
	thread, err := e.Send(ctx, notify.Message{Event: waiting, Fields: someFields, More: 2, First: true})
	if want := "<evt_request_waiting@sagacity.example>"; err != nil || thread != want {
		t.Fatalf("Send(%s) = %q, %v; want %q, nil", waiting.Type, thread, err, want)
	}
	voted := requestEvent(wire.EventVoted)
	voted.ApprovedBy, voted.Decision, voted.DecidedBy = []string{"alice"}, "approved", "alice"
	executed := requestEvent(wire.EventExecuted)
	executed.Message = "sendWireTransfer in saga transfer-77 was executed"
	executed.ApprovedBy = []string{"alice", "carol"}
	executed.Receipt = "https://sagacity.example/receipts/transfer-77/12"
	executed.Votes = []wire.EventVote{{By: "alice", Reason: "matches invoice 4711", JournalSeq: 13, Receipt: "https://sagacity.example/receipts/transfer-77/13"},
		{By: "carol", JournalSeq: 14, Receipt: "https://sagacity.example/receipts/transfer-77/14"}}
	for _, ev := range []wire.Event{voted, executed} {
		if got, err := e.Send(ctx, notify.Message{Event: ev, Thread: thread}); err != nil || got != "" {
			t.Fatalf("Send(%s, thread %q) = %q, %v; want \"\", nil", ev.Type, thread, got, err)
		}
	}

	msgs := mp.Messages(t)
	if len(msgs) != 3 {
		t.Fatalf("Mailpit took %d mails; want 3", len(msgs))
	}
	subject := "[Sagacity] sendWireTransfer in saga transfer-77, seq 12"
	type threading struct{ MessageID, InReplyTo, References, Subject, AutoSubmitted, Suppress string }
	var got []threading
	for _, m := range msgs {
		got = append(got, threading{m.MessageID, m.InReplyTo, m.References, m.Subject, m.AutoSubmitted, m.Header.Get("X-Auto-Response-Suppress")})
		if diff := cmp.Diff(m.To, []string{"ops@example.com", "bob@example.com"}); m.From != "sagacity@example.com" || diff != "" {
			t.Errorf("mail %s from %q to (-got +want):\n%s", m.MessageID, m.From, diff)
		}
	}
	want := []threading{
		{thread, "", "", subject, "auto-generated", "All"},
		{"<evt_request_voted@sagacity.example>", thread, thread, "Re: " + subject, "auto-generated", "All"},
		{"<evt_request_executed@sagacity.example>", thread, thread, "Re: " + subject, "auto-generated", "All"},
	}
	if diff := cmp.Diff(got, want); diff != "" {
		t.Errorf("mails (-got +want):\n%s", diff)
	}

	wantText := `sendWireTransfer in saga transfer-77 waits for approval

Tool:            sendWireTransfer
Saga:            transfer-77, seq 12
Requester:       agent-7
Rule:            two-person
Votes:           0 of 2
Expires:         in 3h59m (2026-12-02 16:00 UTC)
Fingerprint:     79c2 a241 5f1c 9e0d
Payload SHA-256: 79c2a2415f1c9e0d8f3c1e4a9b0d2c6e7f1a3b5c9d8e0f2a4b6c8d0e1f3a5b7c

Payload:
  amount: 100
  to: DE89 3704
  +2 more

Open in Sagacity: https://sagacity.example/sagas/transfer-77/12

This message cannot approve anything: open the link to decide in Sagacity.
`
	if diff := cmp.Diff(strings.ReplaceAll(msgs[0].Text, "\r\n", "\n"), wantText); diff != "" {
		t.Errorf("waiting mail's text (-got +want):\n%s", diff)
	}
	for _, want := range []string{
		"Votes:           2 of 2: alice, carol",
		"Approved by:     alice: matches invoice 4711 (receipt https://sagacity.example/receipts/transfer-77/13)",
		"Approved by:     carol (receipt https://sagacity.example/receipts/transfer-77/14)",
		"Open in Sagacity: https://sagacity.example/sagas/transfer-77/12",
		"Receipt: https://sagacity.example/receipts/transfer-77/12",
		"This message cannot approve anything: open the link to decide in Sagacity.",
	} {
		if !strings.Contains(msgs[2].Text, want) {
			t.Errorf("executed mail's text:\n%s\nlacks %q", msgs[2].Text, want)
		}
	}
}

func TestEmailHeaders(t *testing.T) {
	mp := mailtest.Start(t)
	e := newEmail(mp)
	tests := []struct {
		name               string
		event              func(*wire.Event)
		subject, messageID string
	}{
		{"non-ASCII", func(ev *wire.Event) { ev.SagaID = "überweisung-東京-77" },
			"[Sagacity] sendWireTransfer in saga überweisung-東京-77, seq 12", "<evt_request_waiting@sagacity.example>"},
		{"injection", func(ev *wire.Event) {
			ev.ID = "evt\r\nBcc: id@evil.example"
			ev.SagaID = "s\r\nBcc: x@evil.example"
			ev.Tool = "t\nX-Evil: 1\n\nbody"
		}, "[Sagacity] t⏎X-Evil: 1⏎⏎body in saga s⏎Bcc: x@evil.example, seq 12", "<evt%0D%0ABcc%3A%20id%40evil%2Eexample@sagacity.example>"},
		{"not a request", func(ev *wire.Event) {
			*ev = wire.Event{ID: "evt_doubt", Type: wire.EventInDoubt, Message: "a call to sendWireTransfer in saga s1\r\nBcc: y@evil.example has no outcome", Link: "https://sagacity.example/sagas/s1"}
		}, "[Sagacity] a call to sendWireTransfer in saga s1⏎Bcc: y@evil.example has no outcome", "<evt_doubt@sagacity.example>"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ev := requestEvent(wire.EventWaiting)
			tt.event(&ev)
			thread, err := e.Send(context.Background(), notify.Message{Event: ev, First: true})
			if err != nil {
				t.Fatalf("Send = %v", err)
			}
			if ev.Type == wire.EventInDoubt && thread != "" {
				t.Errorf("Send(%s) thread = %q; want none", ev.Type, thread)
			}
			m := mp.Messages(t)[i]
			if m.Subject != tt.subject {
				t.Errorf("Subject = %q; want %q", m.Subject, tt.subject)
			}
			for name := range m.Header {
				if name == "Bcc" || name == "X-Evil" {
					t.Errorf("mail has a header %s: %q", name, m.Header[name])
				}
			}
			if raw := m.Header.Get("Subject"); !strings.HasPrefix(raw, "=?utf-8?q?") {
				t.Errorf("raw Subject = %q; want it Q-encoded", raw)
			}
		})
	}
}

func TestEmailCheck(t *testing.T) {
	ok := notify.Email{Addr: "smtp.example.com:587", From: "sagacity@example.com", To: []string{"ops@example.com"}}
	tests := []struct {
		name string
		edit func(*notify.Email)
		want string // in the error; "" for none
	}{
		{"starttls by default", func(e *notify.Email) {}, ""},
		{"implicit TLS", func(e *notify.Email) { e.Addr, e.TLS = "smtp.example.com:465", "tls" }, ""},
		{"none on loopback", func(e *notify.Email) { e.Addr, e.TLS, e.Username = "127.0.0.1:1025", "none", "u" }, ""},
		{"none on localhost", func(e *notify.Email) { e.Addr, e.TLS = "localhost:25", "none" }, ""},
		{"none elsewhere", func(e *notify.Email) { e.TLS = "none" }, "loopback"},
		{"none elsewhere with auth", func(e *notify.Email) { e.Addr, e.TLS, e.Username = "10.0.0.1:25", "none", "u" }, "loopback"},
		{"unknown TLS", func(e *notify.Email) { e.TLS = "ssl" }, "want starttls"},
		{"no port", func(e *notify.Email) { e.Addr = "smtp.example.com" }, "server"},
		{"bad from", func(e *notify.Email) { e.From = "sagacity" }, "from"},
		{"bad to", func(e *notify.Email) { e.To = []string{"ops@example.com", "x\r\nBcc: y@evil.example"} }, "to"},
		{"no to", func(e *notify.Email) { e.To = nil }, "no recipient"},
		{"password alone", func(e *notify.Email) { e.Password = "secret" }, "without a username"},
		{"address hostname", func(e *notify.Email) { e.Hostname = "::1" }, ""},
		{"bad hostname", func(e *notify.Email) { e.Hostname = "a b>" }, "not a domain"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := ok
			tt.edit(&e)
			err := e.Check()
			if tt.want == "" && err != nil || tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)) {
				t.Errorf("Check(%+v) = %v; want an error with %q", e, err, tt.want)
			}
		})
	}
}

// fakeSMTP is an SMTP server on loopback that gives replies ("RCPT":
// "550 …"; "." for the end of the data; "greeting") instead of its
// 2xx/3xx ones, for the replies Mailpit never gives.
func fakeSMTP(t *testing.T, replies map[string]string) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	reply := func(c *textproto.Conn, verb, ok string) {
		if r, set := replies[verb]; set {
			ok = r
		}
		_ = c.PrintfLine("%s", ok)
	}
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				c := textproto.NewConn(conn)
				defer c.Close()
				reply(c, "greeting", "220 fake ESMTP")
				for {
					line, err := c.ReadLine()
					if err != nil {
						return
					}
					switch verb, _, _ := strings.Cut(strings.ToUpper(line), " "); verb {
					case "EHLO":
						reply(c, verb, "250 fake")
					case "DATA":
						_ = c.PrintfLine("354 go ahead")
						if _, err := c.ReadDotBytes(); err != nil {
							return
						}
						reply(c, ".", "250 taken")
					case "QUIT":
						_ = c.PrintfLine("221 bye")
						return
					default:
						reply(c, verb, "250 ok")
					}
				}
			}()
		}
	}()
	return l.Addr().String()
}

func TestEmailFailures(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := l.Addr().String()
	l.Close()
	type failure struct {
		Status    int
		Permanent bool
	}
	tests := []struct {
		name string
		addr string
		tls  string
		want *failure // nil: not a *Failure
		says string   // in the error; "" for none
	}{
		{name: "taken by the fake", addr: fakeSMTP(t, nil)},
		{name: "451 to RCPT", addr: fakeSMTP(t, map[string]string{"RCPT": "451 4.3.0 try later"}), want: &failure{451, false}, says: "try later"},
		{name: "550 to RCPT", addr: fakeSMTP(t, map[string]string{"RCPT": "550 5.1.1 no such user"}), want: &failure{550, true}, says: "no such user"},
		{name: "421 greeting", addr: fakeSMTP(t, map[string]string{"greeting": "421 busy"}), want: &failure{421, false}, says: "busy"},
		{name: "554 to the data", addr: fakeSMTP(t, map[string]string{".": "554 5.7.1 spam"}), want: &failure{554, true}, says: "spam"},
		{name: "no STARTTLS", addr: fakeSMTP(t, nil), tls: "starttls", says: "does not offer STARTTLS"},
		{name: "refused", addr: closed, says: "refused"},
		{name: "misconfigured", addr: "smtp.example.com:25", want: &failure{0, true}, says: "loopback"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := &notify.Email{Addr: tt.addr, From: "sagacity@example.com", To: []string{"ops@example.com"}, TLS: "none", Now: clock}
			if tt.tls != "" {
				e.TLS = tt.tls
			}
			_, err := e.Send(context.Background(), notify.Message{Event: requestEvent(wire.EventWaiting), First: true})
			if tt.says == "" {
				if err != nil {
					t.Fatalf("Send = %v; want nil", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.says) {
				t.Fatalf("Send = %v; want an error with %q", err, tt.says)
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
			if diff := cmp.Diff(failure{f.Status, f.Permanent}, *tt.want); diff != "" {
				t.Errorf("Send = %v (-got +want):\n%s", err, diff)
			}
		})
	}
}
