package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/sagacity-go/sagacity/internal/engine"
	"github.com/sagacity-go/sagacity/internal/testkit"
)

// TestVerifyReceipt: a decision's receipt, downloaded from the server with
// its public key, is checked offline against the payload's bytes, without
// the server.
func TestVerifyReceipt(t *testing.T) {
	t.Parallel()
	base, _ := start(t, map[string]string{"SAGACITY_DATABASE_URL": testkit.SQLiteURL(t), "SAGACITY_DEMO": "true"})
	post := func(path, body string) {
		t.Helper()
		resp, err := http.Post(base+path, "application/json", strings.NewReader(body))
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("POST %s = %v, %v", path, resp, err)
		}
		resp.Body.Close()
	}
	post("/sagacity/approve/transfer-77/3", `{"approver":"manager@company.com"}`)
	dir := t.TempDir()
	code, receipt := get(t, base+"/sagacity/receipts/transfer-77/4")
	if code != 200 || !strings.HasPrefix(receipt, "sagacity decision receipt v1\n") {
		t.Fatalf("GET receipt = %d %q, want the signed note", code, receipt)
	}
	code, keys := get(t, base+"/sagacity/keys")
	var k struct{ Keys []string }
	if err := json.Unmarshal([]byte(keys), &k); code != 200 || err != nil || len(k.Keys) != 1 {
		t.Fatalf("GET keys = %d %s, want one public key", code, keys)
	}
	files := map[string]string{"receipt.note": receipt, "payload": `{"amount":"100","to":"alice"}`,
		"other": `{"amount":"100","to":"mallory"}`, "garbage": "not a note"}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	_, otherKey := keyPair(t)
	tests := []struct {
		name          string
		key           string
		receipt, data string
		code          int
		want          string
	}{
		{"the approved bytes, in dev mode", k.Keys[0], "receipt.note", "payload", 1,
			`"valid":false,"message":"the decision was made in dev mode (auth: dev): manager@company.com's name was typed, not verified`},
		{"the approved bytes", k.Keys[0] + " -allow-dev", "receipt.note", "payload", 0, `"valid":true,"message":"manager@company.com approved the request at seq=3 of saga transfer-77, about exactly these bytes"`},
		{"other bytes", k.Keys[0], "receipt.note", "other", 1, `"valid":false,"message":"the receipt is about other bytes than`},
		{"another key", otherKey, "receipt.note", "payload", 1, `"valid":false,"message":"the receipt's signature does not verify`},
		{"not a receipt", k.Keys[0], "garbage", "payload", 1, `"valid":false`},
	}
	for _, tt := range tests {
		args := append([]string{"verify-receipt", "-key"}, strings.Fields(tt.key)...)
		code, out, _ := offlineRun(t, append(args, filepath.Join(dir, tt.receipt), filepath.Join(dir, tt.data))...)
		if code != tt.code || !strings.Contains(out, tt.want) {
			t.Errorf("verify-receipt (%s) = exit %d %s, want exit %d with %s", tt.name, code, out, tt.code, tt.want)
		}
	}
	for _, args := range [][]string{{"verify-receipt"}, {"verify-receipt", "-key", "nope", "a", "b"}, {"verify-receipt", "-key", k.Keys[0], filepath.Join(dir, "none"), filepath.Join(dir, "payload")}} {
		err := run(context.Background(), args, env(nil), &bytes.Buffer{})
		if ee, ok := errors.AsType[exitError](err); !ok || ee.code != 2 {
			t.Errorf("%v = %v, want exit 2", args, err)
		}
	}
}

// TestVerifyReceiptOutput: verify-receipt prints the receipt in the API's
// camelCase, each line of the receipt's text a field and no field for a
// line it lacks; a payload file that differs from the decided bytes only
// by a line break at its end is told so.
func TestVerifyReceiptOutput(t *testing.T) {
	t.Parallel()
	keys := testkit.Keys(t)
	const payload = `{"amount":"100","to":"alice"}`
	at := time.Date(2026, 11, 30, 10, 15, 3, 123456000, time.UTC)
	minimal := engine.Receipt{SagaID: "transfer-77", Seq: 3, Entry: "5f1c", PayloadSHA256: engine.PayloadHash(payload),
		Decision: engine.DecidedApproved, Decider: "manager@company.com", Auth: engine.AuthToken, Time: at,
		Policy: "sagacity-policy/1 four-eyes=initiator,requester share-sagas=false"}
	full := minimal
	full.Auth, full.Issuer, full.Subject, full.AuthTime = engine.AuthOIDC, "https://idp.example.com", "2f8e", at.Add(-time.Hour).Truncate(time.Second)
	full.ApprovalPolicy, full.Rule, full.EligibleAs, full.Vote, full.Quorum = "1f2e", "large", "finance-leads", 2, 2
	full.Reason, full.ResultSHA256 = "matches invoice 7", engine.PayloadHash("transfer-ok")
	full.Passkey = &engine.PasskeyProof{Credential: "cred-1", Time: at, Nonce: "n0", AuthenticatorData: "ad", ClientData: "cd", Signature: "sig"}
	dir := t.TempDir()
	file := func(name, content string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	signed := func(name string, r engine.Receipt) string {
		n, err := keys.Sign(r.Text())
		if err != nil {
			t.Fatal(err)
		}
		return file(name, n)
	}
	decided := file("payload.json", payload)
	for _, tt := range []struct {
		name    string
		receipt engine.Receipt
		code    int
		want    string
	}{
		{"a token's approval", minimal, 0, `{"valid":true,"message":"manager@company.com approved the request at seq=3 of saga transfer-77, about exactly these bytes",` +
			`"receipt":{"sagaId":"transfer-77","seq":3,"entry":"5f1c","payloadSha256":"79c2a2413a3be71034f0a649bde0d50c5c3e32d5482db1d21549e82c59653e9b",` +
			`"decision":"approved","decider":"manager@company.com","auth":"token","time":"2026-11-30T10:15:03.123456Z",` +
			`"policy":"sagacity-policy/1 four-eyes=initiator,requester share-sagas=false"}}` + "\n"},
		{"a passkey vote with every line", full, 1, `{"valid":false,"message":"the vote carries manager@company.com's passkey assertion, which only the passkey's enrolment checks: give -passkeys an export with proofs of saga transfer-77",` +
			`"receipt":{"sagaId":"transfer-77","seq":3,"entry":"5f1c","payloadSha256":"79c2a2413a3be71034f0a649bde0d50c5c3e32d5482db1d21549e82c59653e9b",` +
			`"decision":"approved","decider":"manager@company.com","issuer":"https://idp.example.com","subject":"2f8e","authTime":"2026-11-30T09:15:03Z",` +
			`"auth":"oidc","time":"2026-11-30T10:15:03.123456Z","policy":"sagacity-policy/1 four-eyes=initiator,requester share-sagas=false",` +
			`"approvalPolicy":"1f2e","rule":"large","eligibleAs":"finance-leads","vote":2,"quorum":2,"reason":"matches invoice 7",` +
			`"resultSha256":"` + engine.PayloadHash("transfer-ok") + `",` +
			`"passkey":{"credential":"cred-1","time":"2026-11-30T10:15:03.123456Z","nonce":"n0","authenticatorData":"ad","clientData":"cd","signature":"sig"}}}` + "\n"},
	} {
		code, out, _ := offlineRun(t, "verify-receipt", "-key", keys.VerifierKey(), signed(tt.name+".note", tt.receipt), decided)
		if diff := cmp.Diff(tt.want, out); code != tt.code || diff != "" {
			t.Errorf("verify-receipt (%s) = exit %d, want %d; output (-want +got):\n%s", tt.name, code, tt.code, diff)
		}
	}

	receipt := signed("receipt.note", minimal)
	withNL := minimal
	withNL.PayloadSHA256 = engine.PayloadHash(payload + "\n")
	for _, tt := range []struct {
		name, receipt, content, want string
	}{
		{"a line break added", receipt, payload + "\n",
			`: it ends with a line break ("\n") that the decided bytes do not have; without it they are the same`},
		{"a Windows line break added", receipt, payload + "\r\n",
			`: it ends with a line break ("\r\n") that the decided bytes do not have; without it they are the same`},
		{"the decided line break dropped", signed("nl.note", withNL), payload,
			`: the decided bytes end with a line break ("\n") that it lacks; with it they are the same`},
		{"other bytes", receipt, `{"amount":"100","to":"mallory"}` + "\n", ""},
	} {
		data := file("data", tt.content)
		code, out, _ := offlineRun(t, "verify-receipt", "-key", keys.VerifierKey(), tt.receipt, data)
		var got struct{ Message string }
		if err := json.Unmarshal([]byte(out), &got); err != nil {
			t.Fatalf("verify-receipt (%s) printed %q: %v", tt.name, out, err)
		}
		if want := "the receipt is about other bytes than " + data + tt.want; code != 1 || !strings.HasPrefix(got.Message, want) ||
			(tt.want == "" && got.Message != want) {
			t.Errorf("verify-receipt (%s) = exit %d %q; want exit 1 with %q", tt.name, code, got.Message, want)
		}
	}
}

// keyPair is a new signing key and its public key, as sagacity keygen
// prints them.
func keyPair(t *testing.T) (skey, vkey string) {
	var out bytes.Buffer
	if err := run(context.Background(), []string{"keygen", "-name", "other.test"}, env(nil), &out); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(out.String(), "\n")
	return lines[0], lines[len(lines)-2]
}

func TestKeygen(t *testing.T) {
	t.Parallel()
	skey, vkey := keyPair(t)
	if !strings.HasPrefix(skey, "PRIVATE+KEY+other.test+") || !strings.HasPrefix(vkey, "other.test+") {
		t.Errorf("keygen printed %q and %q, want a signing key and its public key named other.test", skey, vkey)
	}
	for _, args := range [][]string{{"keygen", "-name", "has space"}, {"keygen", "-name", "a+b"}, {"keygen", "extra"}} {
		err := run(context.Background(), args, env(nil), &bytes.Buffer{})
		if ee, ok := errors.AsType[exitError](err); !ok || ee.code != 2 {
			t.Errorf("%v = %v, want exit 2", args, err)
		}
	}
}
