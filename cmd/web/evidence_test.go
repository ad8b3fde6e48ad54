package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sagacity-go/sagacity/evidence"
	"github.com/sagacity-go/sagacity/internal/engine"
	"github.com/sagacity-go/sagacity/internal/testkit"
)

// TestVerifyOffline: what an auditor downloads from the server (the
// public key, checkpoints, an export with proofs, a consistency proof)
// is checked by sagacity verify and verify-log without the server, and
// anything altered on the way is caught.
func TestVerifyOffline(t *testing.T) {
	t.Parallel()
	cfg := filepath.Join(t.TempDir(), "sagacity.yaml")
	if err := os.WriteFile(cfg, []byte("log: {checkpointEvery: 1, checkpointInterval: 100ms}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	base, _ := start(t, map[string]string{"SAGACITY_DATABASE_URL": testkit.SQLiteURL(t), "SAGACITY_DEMO": "true", "SAGACITY_CONFIG": cfg})
	dir := t.TempDir()
	save := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	post := func(path, body string) {
		t.Helper()
		resp, err := http.Post(base+path, "application/json", strings.NewReader(body))
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("POST %s = %v, %v", path, resp, err)
		}
		resp.Body.Close()
	}
	// covered waits until the newest checkpoint covers every entry of the
	// saga, and returns it with an export proved against it.
	covered := func() (checkpoint string, size int64, export string) {
		t.Helper()
		for range 100 {
			code, cp := get(t, base+"/sagacity/checkpoints/latest")
			lines := strings.SplitN(cp, "\n", 3)
			if code == 200 && len(lines) == 3 {
				_, _ = fmt.Sscan(lines[1], &size)
				code, export = get(t, base+fmt.Sprintf("/sagacity/audit/transfer-77?proofs=%d", size))
				// Every entry proved, and the signed head last.
				if code == 200 && strings.Count(export, `"leaf":`) == strings.Count(export, "\n")-1 {
					return cp, size, export
				}
			}
			time.Sleep(50 * time.Millisecond)
		}
		t.Fatal("no checkpoint came to cover the saga")
		return "", 0, ""
	}
	_, keys := get(t, base+"/sagacity/keys")
	var k struct{ Keys []string }
	_ = json.Unmarshal([]byte(keys), &k)
	key := k.Keys[0]

	post("/sagacity/approve/transfer-77/3", `{"approver":"manager@company.com"}`)
	cp1, size1, export := covered()
	cp1File := save("cp1.note", cp1)
	exportFile := save("export.ndjson", export)
	_, plain := get(t, base+"/sagacity/audit/transfer-77")
	plainFile := save("plain.ndjson", plain)
	post("/sagacity/resume/transfer-77/3", `{"payload":"{\"amount\":\"100\",\"to\":\"alice\"}"}`)
	cp2, size2, _ := covered()
	cp2File := save("cp2.note", cp2)
	_, consistency := get(t, base+fmt.Sprintf("/sagacity/checkpoints/consistency?from=%d&to=%d", size1, size2))
	proofFile := save("consistency.json", consistency)

	// Altered on the way: a proof's hash, and a checkpoint signed by
	// another key.
	es, proofs, err := evidence.ReadNDJSON(strings.NewReader(export))
	if err != nil {
		t.Fatal(err)
	}
	proofs.Of[0][0][0] ^= 1
	var altered bytes.Buffer
	_ = evidence.WriteNDJSON(&altered, es, proofs)
	alteredFile := save("altered.ndjson", altered.String())
	// Cut on the way: the last entry dropped (its head kept), the head
	// dropped, the first entry's proof dropped, the last entry's proof
	// dropped (an entry newer than the checkpoint, as far as the file
	// says). The policy lines stay.
	resave := func(name string, es []engine.Entry, ps *engine.Proofs) string {
		var b bytes.Buffer
		if err := evidence.WriteNDJSON(&b, es, ps); err != nil {
			t.Fatal(err)
		}
		return save(name, b.String())
	}
	es, proofs, err = evidence.ReadNDJSON(strings.NewReader(export)) // unaltered
	if err != nil {
		t.Fatal(err)
	}
	n := len(es)
	cutFile := resave("cut.ndjson", es[:n-1], &engine.Proofs{TreeSize: proofs.TreeSize, Of: proofs.Of[:n-1], Head: proofs.Head,
		Policies: proofs.Policies})
	headlessFile := resave("headless.ndjson", es, &engine.Proofs{TreeSize: proofs.TreeSize, Of: proofs.Of,
		Policies: proofs.Policies})
	unprove := func(i int) *engine.Proofs {
		of := slices.Clone(proofs.Of)
		of[i] = nil
		return &engine.Proofs{TreeSize: proofs.TreeSize, Of: of, Head: proofs.Head, Policies: proofs.Policies}
	}
	firstFile, lastFile := resave("first.ndjson", es, unprove(0)), resave("last.ndjson", es, unprove(n-1))

	otherKey, _ := keyPair(t)
	other, err := engine.NewKeys(otherKey)
	if err != nil {
		t.Fatal(err)
	}
	text, _, _ := strings.Cut(cp2, "\n\n")
	forged, err := other.Sign(text + "\n")
	if err != nil {
		t.Fatal(err)
	}
	forgedFile := save("forged.note", forged)

	tests := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"export with proofs", []string{"verify", "-key", key, "-allow-dev", "-checkpoint", cp1File, exportFile}, 0,
			fmt.Sprintf(`"valid":true,"entryCount":4,"breakAtIndex":-1,"message":"all 4 entries verified; 4 in the log the checkpoint of size %d signed"`, size1)},
		{"chain and receipts only", []string{"verify", "-key", key, "-allow-dev", plainFile}, 0, `"message":"all 4 entries verified"`},
		{"a decision made in dev mode", []string{"verify", "-key", key, plainFile}, 1,
			`"breakAtIndex":3,"message":"seq=4 (entry 3) was decided in dev mode (auth: dev): manager@company.com's name was typed, not verified`},
		{"a proof altered", []string{"verify", "-key", key, "-allow-dev", "-checkpoint", cp1File, alteredFile}, 1,
			fmt.Sprintf(`"message":"seq=1 (entry 0) is not in the log the checkpoint of size %d signed"`, size1)},
		{"the last entry cut", []string{"verify", "-key", key, "-allow-dev", "-checkpoint", cp1File, cutFile}, 1,
			`"message":"the export ends at seq=3, but the server exported the saga up to seq=4: entries were cut or added"`},
		{"the head dropped", []string{"verify", "-key", key, "-allow-dev", "-checkpoint", cp1File, headlessFile}, 1,
			`"message":"the export carries no signed head: its tail may have been cut"`},
		{"an old entry's proof dropped", []string{"verify", "-key", key, "-allow-dev", "-checkpoint", cp1File, "-allow-unproved", firstFile}, 1,
			fmt.Sprintf(`"message":"seq=1 (entry 0) carries no proof of inclusion in the log the checkpoint of size %d signed: the checkpoint covers seq=4, so it should cover this one"`, size1)},
		{"the last entry's proof dropped", []string{"verify", "-key", key, "-allow-dev", "-checkpoint", cp1File, lastFile}, 1,
			"-allow-unproved accepts entries newer than the checkpoint"},
		{"the last entry's proof dropped, allowed", []string{"verify", "-key", key, "-allow-dev", "-checkpoint", cp1File, "-allow-unproved", lastFile}, 0,
			fmt.Sprintf(`"message":"all 4 entries verified; 3 in the log the checkpoint of size %d signed (1 newer than it)"`, size1)},
		{"a checkpoint of another key", []string{"verify", "-key", key, "-checkpoint", forgedFile, exportFile}, 1, `the checkpoint's signature does not verify`},
		{"an export without proofs", []string{"verify", "-key", key, "-checkpoint", cp1File, plainFile}, 2, ""},
		{"proofs against another size", []string{"verify", "-key", key, "-checkpoint", cp2File, exportFile}, 2, ""},
		{"a checkpoint without a key", []string{"verify", "-checkpoint", cp1File, exportFile}, 2, ""},
		{"-allow-unproved without a checkpoint", []string{"verify", "-key", key, "-allow-unproved", plainFile}, 2, ""},
		{"the log grew", []string{"verify-log", "-key", key, "-proof", proofFile, cp1File, cp2File}, 0,
			fmt.Sprintf(`"valid":true,"message":"the log at size %d extends the log at size %d`, size2, size1)},
		{"checkpoints swapped", []string{"verify-log", "-key", key, "-proof", proofFile, cp2File, cp1File}, 2, ""},
		{"the newer forged", []string{"verify-log", "-key", key, "-proof", proofFile, cp1File, forgedFile}, 1, `the checkpoint's signature does not verify`},
		{"no proof", []string{"verify-log", "-key", key, cp1File, cp2File}, 2, ""},
	}
	for _, tt := range tests {
		code, out, why := offlineRun(t, tt.args...)
		if code != tt.code || !strings.Contains(out, tt.want) {
			t.Errorf("%s: sagacity %s = exit %d %s (%s), want exit %d with %s", tt.name, tt.args[0], code, out, why, tt.code, tt.want)
		}
	}

	// The root of the newer checkpoint rewritten: the consistency proof
	// fails.
	var p struct{ Proof [][]byte }
	_ = json.Unmarshal([]byte(consistency), &p)
	if len(p.Proof) > 0 {
		p.Proof[0][0] ^= 1
		b, _ := json.Marshal(map[string]any{"from": size1, "to": size2, "proof": p.Proof})
		var out bytes.Buffer
		err := run(context.Background(), []string{"verify-log", "-key", key, "-proof", save("bad.json", string(b)), cp1File, cp2File}, env(nil), &out)
		if ee, ok := errors.AsType[exitError](err); !ok || ee.code != 1 || !strings.Contains(out.String(), "is not a prefix of the log") {
			t.Errorf("verify-log with an altered proof = %v %s, want exit 1, not a prefix", err, out.String())
		}
	}
}
