package app_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/sagacity-go/sagacity/evidence"
	"github.com/sagacity-go/sagacity/internal/testkit"
	"golang.org/x/mod/sumdb/note"
)

// sequence appends the journal to the global log and signs a checkpoint,
// as the server's loop does; it returns the log's size.
func (e *apiEnv) sequence() int64 {
	e.t.Helper()
	st, err := e.log.Sequence(context.Background(), true)
	if err != nil {
		e.t.Fatal(err)
	}
	return st.Size
}

// TestLogAPI: the log's state, checkpoints, proofs and exports with
// proofs under /sagacity, and what they refuse, on both stores.
func TestLogAPI(t *testing.T) {
	t.Parallel()
	stores(t, func(t *testing.T, dbURL string) {
		e := newAPI(t, dbURL, envOptions{})
		e.seedScenario("pay")
		want(t, "no checkpoint yet", e.get("/sagacity/checkpoints/latest"), 404)
		want(t, "no proofs without a checkpoint", e.get("/sagacity/audit/pay?proofs=latest"), 404)
		r := e.get("/sagacity/log")
		want(t, "log before the first checkpoint", r, 200)
		if m := r.json(t); m["size"] != 0.0 || m["checkpoint"] != nil || m["halted"] != nil {
			t.Errorf("GET /sagacity/log = %s, want size 0, no checkpoint, not halted", r.body)
		}
		size1 := e.sequence()
		want(t, "approve", e.post("/sagacity/approve/pay/3", `{"approver":"manager@company.com"}`), 200)
		size2 := e.sequence()

		r = e.get("/sagacity/checkpoints/latest")
		want(t, "latest checkpoint", r, 200)
		v, err := note.NewVerifier(e.eng.VerifierKey())
		if err != nil {
			t.Fatal(err)
		}
		if n, err := note.Open([]byte(r.body), note.VerifierList(v)); err != nil || !strings.HasPrefix(n.Text, fmt.Sprintf("%s\n%d\n", v.Name(), size2)) {
			t.Errorf("latest checkpoint %q: %v; want size %d signed by the public key", r.body, err, size2)
		}
		if r := e.get("/sagacity/keys"); r.body != fmt.Sprintf(`{"keys":[%q]}`+"\n", e.eng.VerifierKey()) {
			t.Errorf("GET /sagacity/keys = %d %s, want the public key", r.code, r.body)
		}
		if rc := e.get("/sagacity/receipts/pay/4"); rc.code != 200 {
			t.Errorf("receipt of the approval at seq 4 = %d %q, want 200", rc.code, rc.body)
		} else if _, err := note.Open([]byte(rc.body), note.VerifierList(v)); err != nil {
			t.Errorf("receipt of the approval at seq 4 %q: %v; want a note signed by the public key", rc.body, err)
		}
		want(t, "receipt of a request, which is no decision", e.get("/sagacity/receipts/pay/3"), 404)
		if r1 := e.get(fmt.Sprintf("/sagacity/checkpoints/%d", size1)); r1.code != 200 || r1.body == r.body || r1.header.Get("Content-Type") != "text/plain; charset=utf-8" {
			t.Errorf("checkpoint of size %d = %d %q, want the older note", size1, r1.code, r1.body)
		}
		r = e.get("/sagacity/log")
		if m := r.json(t); m["size"] != float64(size2) || m["checkpoint"] == nil || m["signedAt"] == nil {
			t.Errorf("GET /sagacity/log = %s, want size %d and its checkpoint", r.body, size2)
		}
		r = e.get(fmt.Sprintf("/sagacity/checkpoints/consistency?from=%d&to=%d", size1, size2))
		want(t, "consistency proof", r, 200)
		if m := r.json(t); m["from"] != float64(size1) || m["to"] != float64(size2) || m["proof"] == nil {
			t.Errorf("consistency proof = %s", r.body)
		}
		r = e.get("/sagacity/audit/pay?proofs=latest")
		want(t, "export with proofs", r, 200)
		es, ps, err := evidence.ReadNDJSON(strings.NewReader(r.body))
		if err != nil || ps == nil || ps.TreeSize != size2 || len(es) != 4 {
			t.Fatalf("export with proofs = %s (%v), want 4 entries proved at size %d", r.body, err, size2)
		}
		if r := e.get("/sagacity/audit/pay"); strings.Contains(r.body, `"leaf"`) {
			t.Errorf("export without ?proofs = %s, want the seed's keys only", r.body)
		}
		for _, tt := range []struct {
			path string
			code int
			want string
		}{
			{"/sagacity/checkpoints/0", 400, "size must be latest or a checkpoint's size, a positive integer"},
			{"/sagacity/checkpoints/abc", 400, "size must be latest"},
			{"/sagacity/checkpoints/99999", 404, "this server keeps no checkpoint of size 99999"},
			{"/sagacity/checkpoints/consistency?from=2", 400, "from and to must be the sizes of two checkpoints"},
			{fmt.Sprintf("/sagacity/checkpoints/consistency?from=%d&to=%d", size2, size1), 400, "from and to must be sizes of the log, from no larger than to, and to at most"},
			{fmt.Sprintf("/sagacity/checkpoints/consistency?from=0&to=%d", size2+1), 400, "from and to must be sizes of the log, from no larger than to, and to at most"},
			{"/sagacity/audit/pay?proofs=-1", 400, "proofs must be latest or a checkpoint's size"},
			{fmt.Sprintf("/sagacity/audit/pay?proofs=%d", size2+1), 400, fmt.Sprintf("the log has %d leaves", size2)},
		} {
			r := e.get(tt.path)
			if r.code != tt.code || !strings.Contains(r.body, tt.want) {
				t.Errorf("GET %s = %d %s, want %d %q", tt.path, r.code, r.body, tt.code, tt.want)
			}
		}
	})
}

// TestConsoleDownloads: an auditor downloads from the console what the
// offline commands check: a decision's receipt (named as the API names
// it), a checkpoint (named as the checkpoint directory keeps it), and the
// journal with proofs against it.
func TestConsoleDownloads(t *testing.T) {
	t.Parallel()
	e := newAPI(t, testkit.SQLiteURL(t), envOptions{})
	e.seedScenario("pay")
	want(t, "approve", e.post("/sagacity/approve/pay/3", `{"approver":"manager@company.com"}`), 200)
	size := e.sequence()
	c := e.session(t, "auditor@example.com")
	get := func(path string) response { return e.do("GET", path, "", "", "Cookie", c.Name+"="+c.Value) }

	r := get("/audit/receipt?id=pay&seq=4")
	v, _ := note.NewVerifier(e.eng.VerifierKey())
	if _, err := note.Open([]byte(r.body), note.VerifierList(v)); r.code != 200 || err != nil ||
		r.header.Get("Content-Disposition") != `attachment; filename="receipt-pay-4.note"; filename*=UTF-8''receipt-pay-4.note` {
		t.Errorf("receipt download = %d %v %q: %v", r.code, r.header, r.body, err)
	}
	// The API names a receipt as the console does.
	if api := e.get("/sagacity/receipts/pay/4"); api.code != 200 || api.body != r.body || api.header.Get("Content-Disposition") != r.header.Get("Content-Disposition") {
		t.Errorf("API receipt download = %d %q %q; want the console's bytes and name", api.code, api.header.Get("Content-Disposition"), api.body)
	}
	// A checkpoint downloads under the name the checkpoint directory keeps
	// it by.
	r = get(fmt.Sprintf("/audit/checkpoint?size=%d", size))
	if r.code != 200 || r.body != e.get("/sagacity/checkpoints/latest").body || !strings.Contains(r.header.Get("Content-Disposition"), fmt.Sprintf(`filename="%020d.checkpoint"`, size)) {
		t.Errorf("checkpoint download = %d %v %q", r.code, r.header, r.body)
	}
	r = get(fmt.Sprintf("/audit/export?id=pay&size=%d", size))
	if _, ps, err := evidence.ReadNDJSON(strings.NewReader(r.body)); r.code != 200 || err != nil || ps == nil || ps.TreeSize != size {
		t.Errorf("export with proofs = %d %q: %v", r.code, r.body, err)
	}
	for path, code := range map[string]int{
		"/audit/receipt?id=pay&seq=3":  404, // a request, not a decision
		"/audit/receipt?id=pay&seq=x":  400,
		"/audit/checkpoint?size=12345": 404,
		"/audit/checkpoint?size=":      400,
		"/audit/export?id=pay&size=0":  400,
	} {
		if r := get(path); r.code != code {
			t.Errorf("GET %s = %d, want %d", path, r.code, code)
		}
	}
	r = get("/audit/saga?id=pay")
	// The dev-mode decisions of this suite need -allow-dev, and the page
	// says why.
	for _, want := range []string{"✓ signed", "download", fmt.Sprintf("-checkpoint %020d.checkpoint -allow-dev sagacity-pay.ndjson", size),
		"some decisions were made in dev mode",
		fmt.Sprintf("in the log as the checkpoint of size %d signed it", size)} {
		if !strings.Contains(r.body, want) {
			t.Errorf("verification page lacks %q:\n%s", want, r.body)
		}
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(e.get("/sagacity/log").body), &m); err != nil || m["halted"] != nil {
		t.Errorf("log = %v, %v; want not halted", m, err)
	}
}
