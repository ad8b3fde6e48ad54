package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sagacity-go/sagacity/internal/testkit"
)

// TestVerifyReceipt: a decision's receipt, downloaded from the server with
// its public key, is checked offline against the payload's bytes, without
// the server.
func TestVerifyReceipt(t *testing.T) {
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
		if err := run(context.Background(), args, env(nil), &bytes.Buffer{}); err == nil || err.(exitError).code != 2 {
			t.Errorf("%v = %v, want exit 2", args, err)
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
	skey, vkey := keyPair(t)
	if !strings.HasPrefix(skey, "PRIVATE+KEY+other.test+") || !strings.HasPrefix(vkey, "other.test+") {
		t.Errorf("keygen printed %q and %q, want a signing key and its public key named other.test", skey, vkey)
	}
	for _, args := range [][]string{{"keygen", "-name", "has space"}, {"keygen", "-name", "a+b"}, {"keygen", "extra"}} {
		if err := run(context.Background(), args, env(nil), &bytes.Buffer{}); err == nil || err.(exitError).code != 2 {
			t.Errorf("%v = %v, want exit 2", args, err)
		}
	}
}
