package mailtest_test

import (
	"net/smtp"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/sagacity-go/sagacity/internal/notify/mailtest"
)

func TestMailpit(t *testing.T) {
	mp := mailtest.Start(t)
	for _, mail := range []string{
		"From: a@example.com\r\nTo: b@example.com\r\nSubject: first\r\nMessage-ID: <1@example.com>\r\n\r\none\r\n",
		"From: a@example.com\r\nTo: B <b@example.com>, c@example.com\r\nSubject: =?utf-8?q?caf=C3=A9?=\r\n" +
			"Message-ID: <2@example.com>\r\nIn-Reply-To: <1@example.com>\r\nReferences: <1@example.com>\r\n" +
			"Auto-Submitted: auto-generated\r\nContent-Type: text/plain; charset=utf-8\r\n" +
			"Content-Transfer-Encoding: quoted-printable\r\n\r\ntwo caf=C3=A9\r\n",
	} {
		if err := smtp.SendMail(mp.SMTP, nil, "a@example.com", []string{"b@example.com"}, []byte(mail)); err != nil {
			t.Fatalf("SendMail(%s) = %v", mp.SMTP, err)
		}
	}
	want := []mailtest.Message{
		{MessageID: "<1@example.com>", Subject: "first", From: "a@example.com", To: []string{"b@example.com"}, Text: "one\r\n"},
		{MessageID: "<2@example.com>", InReplyTo: "<1@example.com>", References: "<1@example.com>", AutoSubmitted: "auto-generated",
			Subject: "café", From: "a@example.com", To: []string{"b@example.com", "c@example.com"}, Text: "two café\r\n"},
	}
	got := mp.Messages(t)
	if diff := cmp.Diff(got, want, cmpopts.IgnoreFields(mailtest.Message{}, "ID", "Header")); diff != "" {
		t.Errorf("Messages (-got +want):\n%s", diff)
	}
	if len(got) == 2 && got[1].Header.Get("Subject") != "=?utf-8?q?caf=C3=A9?=" {
		t.Errorf("Header[Subject] = %q; want it as sent", got[1].Header.Get("Subject"))
	}
}
