package notify

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"mime"
	"mime/quotedprintable"
	"net"
	"net/mail"
	"net/smtp"
	"net/textproto"
	"strings"
	"time"
)

// Email sends a plain-text mail per event through an SMTP server, one
// thread per request: a request's first mail starts it, and the later
// ones reply to it (In-Reply-To, References), so that mail clients show
// a request's mails together. A mail says what happened and links to
// the console; nobody decides by mail.
type Email struct {
	// Addr is the SMTP server, host:port.
	Addr string
	// From is the sender's address; To are the recipients'.
	From string
	To   []string
	// Username and Password, when set, sign in with AUTH PLAIN.
	Username, Password string
	// TLS is how the connection is secured: "starttls" (the default:
	// the server must offer STARTTLS), "tls" (implicit TLS, port 465),
	// or "none", only to a server on the loopback interface.
	TLS string
	// Hostname is the domain of the Message-IDs, and the name the
	// client gives in EHLO; From's domain when "". An IP address is
	// written as a literal: [192.0.2.1], [IPv6:2001:db8::1].
	Hostname string
	// Now dates the mails and tells the time left to decide; time.Now
	// when nil.
	Now func() time.Time
	// Timeout bounds a mail's delivery, from dialing to the server's
	// answer to its data; 30 seconds when 0.
	Timeout time.Duration
}

// emailConfig is an Email's configuration, read.
type emailConfig struct {
	host     string // Addr's
	from     *mail.Address
	to       []*mail.Address
	hostname string
}

// Check says what is wrong in e's configuration: an address that does
// not parse, an unknown TLS mode, "none" to a server not on the loopback
// interface (mails and a password would cross the network in clear: so
// AUTH only ever goes over TLS or to loopback), a password without a
// username, or a Hostname that is neither a domain nor an address.
func (e *Email) Check() error {
	_, err := e.config()
	return err
}

func (e *Email) config() (emailConfig, error) {
	var c emailConfig
	host, _, err := net.SplitHostPort(e.Addr)
	if err != nil {
		return c, fmt.Errorf("email: server %q: %w", e.Addr, err)
	}
	c.host = host
	if c.from, err = mail.ParseAddress(e.From); err != nil {
		return c, fmt.Errorf("email: from %q: %w", e.From, err)
	}
	if len(e.To) == 0 {
		return c, errors.New("email: no recipient")
	}
	for _, s := range e.To {
		to, err := mail.ParseAddress(s)
		if err != nil {
			return c, fmt.Errorf("email: to %q: %w", s, err)
		}
		c.to = append(c.to, to)
	}
	switch e.TLS {
	case "", "starttls", "tls":
	case "none":
		if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
			return c, fmt.Errorf("email: TLS \"none\" to %s: only a server on the loopback interface may be reached without TLS", host)
		}
	default:
		return c, fmt.Errorf("email: TLS %q: want starttls, tls or none", e.TLS)
	}
	if e.Password != "" && e.Username == "" {
		return c, errors.New("email: a password without a username")
	}
	c.hostname = e.Hostname
	if c.hostname == "" {
		c.hostname = c.from.Address[strings.LastIndexByte(c.from.Address, '@')+1:]
	}
	// An address, as a public URL may have, is written as a literal.
	switch ip := net.ParseIP(c.hostname); {
	case ip != nil && ip.To4() != nil:
		c.hostname = "[" + ip.String() + "]"
	case ip != nil:
		c.hostname = "[IPv6:" + ip.String() + "]"
	case !domain(c.hostname):
		return c, fmt.Errorf("email: hostname %q is not a domain or an address", c.hostname)
	}
	return c, nil
}

// domain reports whether s is a plain DNS name: letters, digits, hyphens
// and dots.
func domain(s string) bool {
	for _, r := range s {
		if !('a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' || r == '-' || r == '.') {
			return false
		}
	}
	return s != "" && s[0] != '.' && s[0] != '-'
}

// Send mails m. Its Message-ID is the event's id at Hostname; the first
// mail of a request's thread returns it, for the later ones to reply to.
// A configuration that Check refuses is a Permanent *Failure; so is a
// 5xx reply, and a 4xx reply is a *Failure to retry; the cause of a
// session that broke off is any other error.
func (e *Email) Send(ctx context.Context, m Message) (thread string, err error) {
	c, err := e.config()
	if err != nil {
		return "", &Failure{Permanent: true, Err: err}
	}
	id := "<" + idPart(m.Event.ID) + "@" + c.hostname + ">"
	if err := e.deliver(ctx, c, emailMessage(c, m, id, clock(e.Now))); err != nil {
		return "", err
	}
	if requestEvent(m.Event.Type) && m.Thread == "" {
		return id, nil
	}
	return "", nil
}

// idPart is an event id as the left part of a Message-ID: letters,
// digits, - and _ as they are, any other byte as %XX.
func idPart(id string) string {
	var b strings.Builder
	for i := range len(id) {
		c := id[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_' {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

// emailMessage is the mail: its header, then its text, quoted-printable.
func emailMessage(c emailConfig, m Message, id string, now time.Time) []byte {
	ev := m.Event
	to := make([]string, len(c.to))
	for i, a := range c.to {
		to[i] = a.String()
	}
	subject := "[Sagacity] " + revealed(ev.Message)
	if requestEvent(ev.Type) {
		subject = fmt.Sprintf("[Sagacity] %s in saga %s, seq %d", shown(ev.Tool), shown(ev.SagaID), ev.JournalSeq)
		if m.Thread != "" {
			subject = "Re: " + subject
		}
	}
	var b bytes.Buffer
	header := func(name, value string) {
		// Every value goes through here: none can end its field.
		value = strings.Map(func(r rune) rune {
			if r < ' ' || r == 0x7f {
				return -1
			}
			return r
		}, value)
		b.WriteString(name + ":")
		n := len(name) + 1
		for i, word := range strings.Split(value, " ") {
			if i > 0 && n+1+len(word) > 76 {
				b.WriteString("\r\n")
				n = 0
			}
			b.WriteString(" " + word)
			n += 1 + len(word)
		}
		b.WriteString("\r\n")
	}
	header("From", c.from.String())
	header("To", strings.Join(to, ", "))
	header("Date", now.Format(time.RFC1123Z))
	header("Subject", mime.QEncoding.Encode("utf-8", subject))
	header("Message-ID", id)
	if requestEvent(ev.Type) && m.Thread != "" {
		header("In-Reply-To", m.Thread)
		header("References", m.Thread)
	}
	header("MIME-Version", "1.0")
	header("Content-Type", "text/plain; charset=utf-8")
	header("Content-Transfer-Encoding", "quoted-printable")
	header("Auto-Submitted", "auto-generated")
	header("X-Auto-Response-Suppress", "All")
	b.WriteString("\r\n")
	qp := quotedprintable.NewWriter(&b)
	_, _ = qp.Write([]byte(emailText(m, now)))
	qp.Close()
	return b.Bytes()
}

// emailText is a mail's text: what happened, the request's facts, the
// links, and that a mail decides nothing.
func emailText(m Message, now time.Time) string {
	e := m.Event
	var b strings.Builder
	b.WriteString(revealed(e.Message) + "\n")
	first := true
	fact := func(name, value string) {
		if value == "" {
			return
		}
		if first {
			b.WriteString("\n")
			first = false
		}
		fmt.Fprintf(&b, "%-16s %s\n", name+":", value)
	}
	fact("Tool", shown(e.Tool))
	if e.SagaID != "" {
		fact("Saga", fmt.Sprintf("%s, seq %d", shown(e.SagaID), e.JournalSeq))
	}
	fact("Requester", shown(e.Requester))
	fact("Rule", shown(e.Rule))
	fact("Votes", votes(e))
	if requestOpen(e.Type) {
		fact("Expires", expires(e, now))
	}
	fact("Fingerprint", shown(e.Fingerprint))
	fact("Payload SHA-256", shown(e.PayloadSHA256))
	fact("Decision", shown(e.Decision))
	fact("Decided by", shown(e.DecidedBy))
	fact("Reason", shown(e.Reason))
	for _, v := range e.Votes {
		line := shown(v.By)
		if v.Reason != "" {
			line += ": " + shown(v.Reason)
		}
		fact("Approved by", line+" (receipt "+revealed(v.Receipt)+")")
	}
	if lines := fieldLines(m.Fields, m.More); len(lines) > 0 {
		b.WriteString("\nPayload:\n  " + strings.Join(lines, "\n  ") + "\n")
	}
	b.WriteString("\nOpen in Sagacity: " + revealed(e.Link) + "\n")
	if e.Receipt != "" {
		b.WriteString("Receipt: " + revealed(e.Receipt) + "\n")
	}
	b.WriteString("\nThis message cannot approve anything: open the link to decide in Sagacity.\n")
	return b.String()
}

// deliver hands msg to the server in one SMTP session.
func (e *Email) deliver(ctx context.Context, c emailConfig, msg []byte) error {
	timeout := e.Timeout
	if timeout == 0 {
		timeout = 30 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	raw, err := (&net.Dialer{}).DialContext(ctx, "tcp", e.Addr)
	if err != nil {
		return fmt.Errorf("email: %w", err)
	}
	defer raw.Close()
	deadline, _ := ctx.Deadline()
	_ = raw.SetDeadline(deadline)
	// Cancelling ctx ends the session at once: every read and write fails.
	stop := context.AfterFunc(ctx, func() { _ = raw.SetDeadline(time.Unix(1, 0)) })
	defer stop()

	conn, secure := raw, &tls.Config{ServerName: c.host}
	if e.TLS == "tls" {
		conn = tls.Client(raw, secure)
	}
	client, err := smtp.NewClient(conn, c.host)
	if err != nil {
		return smtpFailure("greeting", err)
	}
	if err := client.Hello(c.hostname); err != nil {
		return smtpFailure("EHLO", err)
	}
	if e.TLS == "" || e.TLS == "starttls" {
		if ok, _ := client.Extension("STARTTLS"); !ok {
			return fmt.Errorf("email: %s does not offer STARTTLS", e.Addr)
		}
		if err := client.StartTLS(secure); err != nil {
			return smtpFailure("STARTTLS", err)
		}
	}
	if e.Username != "" {
		if ok, _ := client.Extension("AUTH"); !ok {
			return fmt.Errorf("email: %s does not offer AUTH", e.Addr)
		}
		if err := client.Auth(smtp.PlainAuth("", e.Username, e.Password, c.host)); err != nil {
			return smtpFailure("AUTH", err)
		}
	}
	if err := client.Mail(c.from.Address); err != nil {
		return smtpFailure("MAIL FROM", err)
	}
	for _, to := range c.to {
		if err := client.Rcpt(to.Address); err != nil {
			return smtpFailure("RCPT TO", err)
		}
	}
	w, err := client.Data()
	if err != nil {
		return smtpFailure("DATA", err)
	}
	if _, err := w.Write(msg); err != nil {
		return smtpFailure("DATA", err)
	}
	if err := w.Close(); err != nil {
		return smtpFailure("DATA", err)
	}
	// The server took the mail; a QUIT that fails cannot undo that.
	_ = client.Quit()
	return nil
}

// smtpFailure classifies what went wrong at step: a reply the server
// gave is a *Failure (4xx retried, 5xx Permanent); any other cause is
// returned as is, to retry.
func smtpFailure(step string, err error) error {
	if r, ok := errors.AsType[*textproto.Error](err); ok {
		return &Failure{Status: r.Code, Permanent: r.Code >= 500, Err: fmt.Errorf("email: %s: %s", step, r.Msg)}
	}
	return fmt.Errorf("email: %s: %w", step, err)
}
