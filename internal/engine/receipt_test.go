package engine

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/mod/sumdb/note"
)

func TestKeys(t *testing.T) {
	for range 20 { // key data that holds '+' and '/' included
		skey, vkey, err := GenerateKeys("sagacity.example.com")
		if err != nil {
			t.Fatal(err)
		}
		k, err := NewKeys(skey + "\n")
		if err != nil || k.VerifierKey() != vkey || k.Name() != "sagacity.example.com" {
			t.Fatalf("NewKeys(%q) = %v, %v; want the verifier key %q", skey, k, err, vkey)
		}
		signed, err := k.Sign("hello\n")
		if err != nil {
			t.Fatal(err)
		}
		v, _ := note.NewVerifier(vkey)
		if n, err := note.Open([]byte(signed), note.VerifierList(v)); err != nil || n.Text != "hello\n" {
			t.Fatalf("note.Open(Sign(hello)) = %v, %v", n, err)
		}
	}
	for _, bad := range []string{"", "sagacity+0ac935d1+AdKiK3O/PLawPqlsHMQqYEF4kxMdCZBsYA/WsTU00r1J", "PRIVATE+KEY+x+00000000+AAAA"} {
		if _, err := NewKeys(bad); !IsKind(err, Invalid) || strings.Contains(err.Error(), bad+"x") {
			t.Errorf("NewKeys(%q) = %v, want invalid", bad, err)
		}
	}
}

func TestReceiptText(t *testing.T) {
	r := Receipt{SagaID: "order: 7", Seq: 3, Entry: strings.Repeat("a", 64), PayloadSHA256: strings.Repeat("b", 64),
		Decision: DecidedApproved, Decider: "https://id.example#248", Issuer: "https://id.example", Subject: "248",
		AuthTime: time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC), Auth: "oidc",
		Time: time.Date(2026, 11, 30, 9, 5, 0, 123456000, time.UTC), Policy: Policy{}.String()}
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
		if _, err := ParseReceipt(bad); !IsKind(err, Invalid) {
			t.Errorf("ParseReceipt(%q) = %v, want invalid", bad, err)
		}
	}
}
