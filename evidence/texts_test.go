package evidence

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"
)

// signedTexts are the golden vectors of every kind of text the server
// signs: receipts, passkey ballots, export heads, the notes of its own
// sagas' entries (policies, passkeys, sign-ins, notifications,
// delegations) and runners' retirements. Each is a header line, then
// "key: value" lines.
const signedTexts = "testdata/signed-texts.json"

// signedText is one vector: the text, and its header and lines as the
// grammar reads them.
type signedText struct {
	Name   string      `json:"name"`
	Header string      `json:"header"`
	Lines  [][2]string `json:"lines"`
	Text   string      `json:"text"`
}

// textSamples are what the vectors are made of, by name: each writes
// its text with the code that signs it.
func textSamples() []struct {
	name string
	text func() string
} {
	h := PayloadHash
	at := time.Date(2026, 11, 30, 10, 15, 3, 123456000, time.UTC)
	signIn := time.Date(2026, 11, 30, 10, 2, 41, 0, time.UTC)
	policy := "sagacity-policy/1 four-eyes=initiator,requester share-sagas=false" // the engine's access policy
	approvals := h("the approval policy document")
	enrolled := `{"credential":"AQIDBAUGBwgJCgsMDQ4PEA","identity":"https://idp.example.com#248289761001","issuer":"https://idp.example.com",` +
		`"subject":"248289761001","publicKey":"pQECAyYgASFYIA","rpId":"sagacity.example.com","origin":"https://sagacity.example.com","counter":7}`
	return []struct {
		name string
		text func() string
	}{
		{"receipt: a token's approval, vote 1 of 1", func() string {
			return Receipt{SagaID: "transfer-77", Seq: 3, Entry: h("entry 3"), PayloadSHA256: h(`{"amount":"100","to":"alice"}`),
				Decision: DecidedApproved, Decider: "token:approver", Auth: AuthToken, Time: at, Policy: policy,
				ApprovalPolicy: approvals, Rule: "default#1", EligibleAs: "approver", Vote: 1, Quorum: 1}.Text()
		}},
		{"receipt: an OIDC identity's rejection, with its sign-in and a reason", func() string {
			return Receipt{SagaID: "payout: 9", Seq: 12, Entry: h("entry 12"), PayloadSHA256: h(`{"amount":"25000"}`),
				Decision: DecidedRejected, Decider: "https://idp.example.com#248289761001", Issuer: "https://idp.example.com",
				Subject: "248289761001", AuthTime: signIn, Auth: AuthOIDC, SignIn: h("the ID token"), Time: at, Policy: policy,
				ApprovalPolicy: approvals, Rule: "large", EligibleAs: "finance-leads", Reason: "not this month: ask again in June"}.Text()
		}},
		{"receipt: a passkey vote, 2 of 3", func() string {
			return Receipt{SagaID: "transfer-77", Seq: 3, Entry: h("entry 3"), PayloadSHA256: h(`{"amount":"100","to":"alice"}`),
				Decision: DecidedApproved, Decider: "https://idp.example.com#248289761001", Issuer: "https://idp.example.com",
				Subject: "248289761001", AuthTime: signIn, Auth: AuthOIDC, SignIn: SignInByAccessToken, Time: at, Policy: policy,
				ApprovalPolicy: approvals, Rule: "large", EligibleAs: "finance-leads", Vote: 2, Quorum: 3, Reason: "invoice 77 checked",
				Passkey: &PasskeyProof{Credential: "AQIDBAUGBwgJCgsMDQ4PEA", Time: at.Add(-20 * time.Second), Nonce: "oKGio6SlpqeoqaqrrK2urw",
					AuthenticatorData: "SZYN5YgOjGh0NBcPZHZgW4_krrmihjLHmVzzuoMdl2MFAAAACA", ClientData: "eyJ0eXBlIjoid2ViYXV0aG4uZ2V0In0",
					Signature: "MEUCIQDx"}}.Text()
		}},
		{"receipt: a delegate's approval on behalf of its delegator", func() string {
			return Receipt{SagaID: "transfer-77", Seq: 3, Entry: h("entry 3"), PayloadSHA256: h(`{"amount":"100","to":"alice"}`),
				Decision: DecidedApproved, Decider: "carol@company.com", Auth: AuthOIDC, Time: at, Policy: policy,
				ApprovalPolicy: approvals, Rule: "large", EligibleAs: "finance-leads", OnBehalfOf: "https://idp.example.com#248289761001",
				Delegation: 4, Vote: 1, Quorum: 2}.Text()
		}},
		{"receipt: a call in doubt that happened, with the result reported", func() string {
			return Receipt{SagaID: "order-42", Seq: 5, Entry: h("entry 5"), PayloadSHA256: h(`{"sku":"A-1"}`), Decision: DecidedHappened,
				Decider: "token:operator", Auth: AuthToken, Time: at, Policy: policy, Reason: "the bank confirms it",
				ResultSHA256: h("sent 8c1e")}.Text()
		}},
		{"receipt: the server's expiry of a request", func() string {
			return Receipt{SagaID: "transfer-78", Seq: 3, Entry: h("entry 3"), PayloadSHA256: h(`{"amount":"200"}`), Decision: DecidedExpired,
				Decider: ServerDecider, Auth: AuthServer, Time: at, Policy: policy, ApprovalPolicy: approvals, Rule: "large"}.Text()
		}},
		{"receipt: a dev-mode approval from before approval policies", func() string {
			return Receipt{SagaID: "s1", Seq: 1, Entry: h("entry 1"), PayloadSHA256: h("{}"), Decision: DecidedApproved, Decider: "alice",
				Auth: AuthDev, Time: at, Policy: policy}.Text()
		}},
		{"passkey ballot: an approval with a reason", func() string {
			return PasskeyBallot{SagaID: "transfer-77", Seq: 3, Entry: h("entry 3"), PayloadSHA256: h(`{"amount":"100","to":"alice"}`),
				Decision: DecidedApproved, Reason: "invoice 77 checked", ApprovalPolicy: approvals, Rule: "large",
				Voter: "https://idp.example.com#248289761001", Credential: "AQIDBAUGBwgJCgsMDQ4PEA", Time: at}.Text()
		}},
		{"passkey ballot: a rejection without a reason", func() string {
			return PasskeyBallot{SagaID: "payout: 9", Seq: 12, Entry: h("entry 12"), PayloadSHA256: h(`{"amount":"25000"}`),
				Decision: DecidedRejected, ApprovalPolicy: approvals, Rule: "large", Voter: "token:approver",
				Credential: "AQIDBAUGBwgJCgsMDQ4PEA", Time: at}.Text()
		}},
		{"export head", func() string {
			return Head{SagaID: "transfer-77", Seq: 5, Hash: h("entry 5"), Time: at}.Text()
		}},
		{"policy: an approval policy document that took effect", func() string { return PolicyNote(approvals) }},
		{"passkey: an enrolment", func() string { return PasskeyNotes.EntryNote(PasskeyEnrolled, enrolled) }},
		{"passkey: a removal", func() string {
			return PasskeyNotes.EntryNote(PasskeyRemoved, `{"credential":"AQIDBAUGBwgJCgsMDQ4PEA","identity":"https://idp.example.com#248289761001"}`)
		}},
		{"passkey: a vote's counter", func() string {
			return PasskeyNotes.EntryNote(PasskeyUsed, `{"credential":"AQIDBAUGBwgJCgsMDQ4PEA","identity":"https://idp.example.com#248289761001",`+
				`"counter":8,"saga":"transfer-77","seq":3}`)
		}},
		{"sign-in: a provider key", func() string {
			return SignInNotes.EntryNote(ProviderKeyTool, `{"issuer":"https://idp.example.com","key":{"kty":"OKP","crv":"Ed25519","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"}}`)
		}},
		{"sign-in: a sign-in", func() string {
			return SignInNotes.EntryNote(SignedInTool, `{"identity":"https://idp.example.com#248289761001","issuer":"https://idp.example.com",`+
				`"subject":"248289761001","clientId":"sagacity","authTime":"2026-11-30T10:02:41Z","reauth":true,"key":"kid-1","idToken":"eyJ.eyJ.sig"}`)
		}},
		{"notification: a delivery retried", func() string {
			return NotificationNotes.EntryNote(DeliveryRetried, `{"delivery":41,"event":"transfer-77/3","type":"request.created","endpoint":"ops","by":"token:approver","auth":"token"}`)
		}},
		{"notification: an endpoint enabled", func() string {
			return NotificationNotes.EntryNote(EndpointEnabled, `{"endpoint":"ops","by":"token:approver","auth":"token"}`)
		}},
		{"delegation: a delegation", func() string {
			return DelegationNotes.EntryNote(Delegated, `{"from":"https://idp.example.com#248289761001","to":"carol@company.com",`+
				`"rules":["large"],"roles":["approver"],"groups":["finance-leads"],"start":"2026-11-30T10:15:03.123456Z",`+
				`"until":"2026-12-07T10:15:03.123456Z","reason":"on holiday"}`)
		}},
		{"delegation: a revocation", func() string {
			return DelegationNotes.EntryNote(DelegationRevoked, `{"from":"https://idp.example.com#248289761001","to":"carol@company.com",`+
				`"seq":4,"by":"carol@company.com"}`)
		}},
		{"runner: a retirement", func() string {
			return RetiredNote("b9b0c3c1-6a5e-4d1f-9c55-2f0ad4c1e2b7", "0f8a7d2e-3c4b-4a59-8e6f-1d2c3b4a5968")
		}},
	}
}

// TestSignedTextVectors holds every signed text to its golden vector in
// testdata/signed-texts.json, byte for byte: receipts and notes already
// journaled must verify as they were signed. -update rewrites the file.
func TestSignedTextVectors(t *testing.T) {
	var got []signedText
	for _, s := range textSamples() {
		text := s.text()
		lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
		v := signedText{Name: s.name, Header: lines[0], Text: text}
		for _, l := range lines[1:] {
			k, val, _ := strings.Cut(l, ": ")
			v.Lines = append(v.Lines, [2]string{k, val})
		}
		got = append(got, v)
	}
	if *update {
		if err := os.WriteFile(signedTexts, vectorsJSON(t, got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	b, err := os.ReadFile(signedTexts)
	if err != nil {
		t.Fatal(err)
	}
	var want []signedText
	if err := json.Unmarshal(b, &want); err != nil {
		t.Fatalf("%s: %v", signedTexts, err)
	}
	if len(got) != len(want) {
		t.Fatalf("%d samples, %d vectors in %s", len(got), len(want), signedTexts)
	}
	forms := map[string]Form{}
	for _, f := range []Form{receiptForm, ballotForm, headForm, policyForm, PasskeyNotes, SignInNotes, NotificationNotes, DelegationNotes, retiredForm} {
		forms[f.Header] = f
	}
	for i, v := range want {
		if got[i].Name != v.Name || got[i].Text != v.Text {
			t.Errorf("%s: the text written =\n%q\nwant %s's vector %q\n%q", got[i].Name, got[i].Text, signedTexts, v.Name, v.Text)
		}
		// The codec reads the vector's text as its lines, and writes
		// those lines as the text again.
		f, ok := forms[v.Header]
		if !ok {
			t.Errorf("%s: no form has the header %q", v.Name, v.Header)
			continue
		}
		var lines Fields
		for _, l := range v.Lines {
			lines = append(lines, Field{l[0], l[1]})
		}
		if fs, err := f.Decode(v.Text); err != nil || !slices.Equal(fs, lines) {
			t.Errorf("%s: Decode = %v, %v; want the vector's lines %v", v.Name, fs, err, lines)
		}
		if got := f.Encode(lines...); got != v.Text {
			t.Errorf("%s: Encode(its lines) = %q, want %q", v.Name, got, v.Text)
		}
	}
}

// TestSignedTextsRead: receipts and heads read back from their vectors'
// texts as what wrote them.
func TestSignedTextsRead(t *testing.T) {
	for _, s := range textSamples() {
		switch r, err := ParseReceipt(s.text()); {
		case strings.HasPrefix(s.name, "receipt: ") && (err != nil || r.Text() != s.text()):
			t.Errorf("%s: ParseReceipt = %+v, %v; want it to write the same text again", s.name, r, err)
		case !strings.HasPrefix(s.name, "receipt: ") && err == nil:
			t.Errorf("%s: ParseReceipt read %q as a receipt", s.name, s.text())
		}
	}
	signer, v := testKey(t)
	h := Head{SagaID: "transfer-77", Seq: 5, Hash: PayloadHash("entry 5"), Time: time.Date(2026, 11, 30, 10, 15, 3, 123456000, time.UTC)}
	signed, err := note.Sign(&note.Note{Text: h.Text()}, signer)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := OpenHead(string(signed), v); err != nil || got != h {
		t.Errorf("OpenHead(%q) = %+v, %v; want %+v", signed, got, err, h)
	}
}

// testKey is a new note key pair, for tests that sign.
func testKey(t *testing.T) (note.Signer, note.Verifier) {
	t.Helper()
	skey, vkey, err := note.GenerateKey(rand.Reader, "sagacity.example.com")
	if err != nil {
		t.Fatal(err)
	}
	signer, err := note.NewSigner(skey)
	if err != nil {
		t.Fatal(err)
	}
	v, err := note.NewVerifier(vkey)
	if err != nil {
		t.Fatal(err)
	}
	return signer, v
}

// vectorsJSON writes vectors as the file keeps them: a vector's name,
// header and text a line each, then its lines, one pair a line.
func vectorsJSON(t *testing.T, vs []signedText) []byte {
	t.Helper()
	js := func(v any) string {
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(v); err != nil {
			t.Fatal(err)
		}
		return strings.TrimSuffix(b.String(), "\n")
	}
	var b strings.Builder
	b.WriteString("[\n")
	for i, v := range vs {
		b.WriteString("  {\"name\": " + js(v.Name) + ",\n   \"header\": " + js(v.Header) + ",\n   \"text\": " + js(v.Text) + ",\n   \"lines\": [")
		for k, l := range v.Lines {
			if k > 0 {
				b.WriteString(",")
			}
			b.WriteString("\n     " + js(l))
		}
		b.WriteString("]}")
		if i < len(vs)-1 {
			b.WriteString(",")
		}
		b.WriteString("\n")
	}
	b.WriteString("]\n")
	return []byte(b.String())
}
