package evidence

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestReceiptText(t *testing.T) {
	r := Receipt{SagaID: "order: 7", Seq: 3, Entry: strings.Repeat("a", 64), PayloadSHA256: strings.Repeat("b", 64),
		Decision: DecidedApproved, Decider: "https://id.example#248", Issuer: "https://id.example", Subject: "248",
		AuthTime: time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC), Auth: "oidc",
		Time: time.Date(2026, 11, 30, 9, 5, 0, 123456000, time.UTC), Policy: "sagacity-policy/1 four-eyes=initiator,requester share-sagas=false"}
	want := "sagacity decision receipt v1\nsaga: order: 7\nseq: 3\nentry: " + r.Entry + "\npayload-sha256: " + r.PayloadSHA256 +
		"\ndecision: approved\ndecider: https://id.example#248\nissuer: https://id.example\nsubject: 248\nauth-time: 2026-11-30T09:00:00Z\n" +
		"auth: oidc\ntime: 2026-11-30T09:05:00.123456Z\npolicy: sagacity-policy/1 four-eyes=initiator,requester share-sagas=false\n"
	if got := r.Text(); got != want {
		t.Errorf("Text() = %q, want %q", got, want)
	}
	back, err := ParseReceipt(want)
	if err != nil || !cmp.Equal(back, r) {
		t.Errorf("ParseReceipt(Text()) = %+v, %v; want %+v", back, err, r)
	}
	for _, bad := range []string{"", "receipt\n", strings.Replace(want, "seq: 3", "seq: x", 1), strings.Replace(want, "decision: approved\n", "", 1),
		want + "extra: 1\n", strings.Replace(want, "saga: order: 7\n", "saga: order: 7\nsaga: again\n", 1)} {
		if _, err := ParseReceipt(bad); !isEvidence(err) {
			t.Errorf("ParseReceipt(%q) = %v, want invalid", bad, err)
		}
	}
}
