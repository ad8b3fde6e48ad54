package app_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/sagacity-go/sagacity/internal/engine"
	"github.com/sagacity-go/sagacity/internal/testkit"
	"github.com/sagacity-go/sagacity/toolsig"
)

const transfer = `{"amount":"100","to":"alice"}`

// seedScenario is the seed's saga: reserveInventory executed,
// sendWireTransfer gated at seq 3.
func (e *apiEnv) seedScenario(saga string) {
	e.t.Helper()
	want(e.t, "reserve", e.call(saga, "reserveInventory", `{"item":"laptop"}`), 200)
	want(e.t, "wire", e.call(saga, "sendWireTransfer", transfer), 202)
}

func TestSeedEndpoints(t *testing.T) {
	t.Parallel()
	stores(t, func(t *testing.T, dbURL string) {
		e := newAPI(t, dbURL, envOptions{})
		e.seedScenario("transfer-77")
		e.seedScenario("other")

		r := e.get("/sagacity/approvals")
		want(t, "GET approvals", r, 200)
		if n := r.header.Get("X-Total-Count"); n != "2" {
			t.Errorf("GET approvals: X-Total-Count = %q, want 2", n)
		}
		var list []map[string]any
		if err := json.Unmarshal([]byte(r.body), &list); err != nil || len(list) != 2 {
			t.Fatalf("GET approvals = %s, want a list of 2", r.body)
		}
		policy, _ := engine.CompilePolicy(engine.DefaultPolicy)
		wantItem := map[string]any{"sagaId": "transfer-77", "journalSeq": 3.0, "toolName": "sendWireTransfer",
			"input": transfer, "inputHash": engine.PayloadHash(transfer), "requester": "anonymous",
			"rule": "default", "policy": policy.Hash, "quorum": 1.0, "approvedBy": []any{}}
		if diff := cmp.Diff(wantItem, list[0]); diff != "" {
			t.Errorf("first pending approval (-want +got):\n%s", diff)
		}
		if r := e.get("/sagacity/approvals/other"); r.code != 200 || strings.Count(r.body, `"sagaId"`) != 1 {
			t.Errorf("GET approvals/other = %d %s, want one item", r.code, r.body)
		}
		if r := e.get("/sagacity/approvals/no-such-saga"); r.code != 200 || r.body != "[]\n" {
			t.Errorf("GET approvals/no-such-saga = %d %q, want 200 []", r.code, r.body)
		}

		r = e.post("/sagacity/approve/transfer-77/3", `{"approver":"manager@company.com"}`)
		want(t, "approve with approver", r, 200)
		if m := r.json(t); m["approved"] != true || m["approverIdentity"] != "manager@company.com" ||
			m["sagaId"] != "transfer-77" || m["journalSeq"] != 3.0 || m["decidedAt"] == nil {
			t.Errorf("approve = %s, want approved by manager@company.com", r.body)
		}
		if slices.Contains(e.tools.paths(), "/wire") {
			t.Errorf("approve executed the tool: %v", e.tools.paths())
		}
		r = e.do("POST", "/sagacity/approve/other/3", "", "")
		want(t, "approve without a body", r, 200)
		if m := r.json(t); m["approverIdentity"] != "unknown" {
			t.Errorf("approve without approver = %s, want approverIdentity unknown", r.body)
		}

		want(t, "resume without payload", e.post("/sagacity/resume/transfer-77/3", `{}`), 400)
		if r := e.post("/sagacity/resume/transfer-77/3", `{}`); !strings.Contains(r.body, "must contain a 'payload' field") {
			t.Errorf("resume without payload = %s, want the seed's message", r.body)
		}
		r = e.post("/sagacity/resume/no-such-saga/99", e.payload(transfer))
		want(t, "resume with nothing pending", r, 404)
		if m := r.json(t); m["sagaId"] != "no-such-saga" || m["journalSeq"] != 99.0 || !strings.Contains(m["error"].(string), "No pending approval found") {
			t.Errorf("resume 404 body = %s, want sagaId, journalSeq and the error", r.body)
		}
		want(t, "end", e.post("/sagacity/sagas/transfer-77/end", ""), 200)
		r = e.post("/sagacity/resume/transfer-77/3", e.payload(transfer))
		want(t, "resume", r, 200)
		if r.body != `{"sagaId":"transfer-77","status":"COMPLETED","result":"transfer-ok","journalSeq":3,"outcome":"EXECUTED"}`+"\n" {
			t.Errorf("resume body = %s, want the seed's shape with result transfer-ok", r.body)
		}
		if again := e.post("/sagacity/resume/transfer-77/3", e.payload(transfer)); again.code != 200 || again.body != r.body {
			t.Errorf("second resume = %d %s; want what the first came to, %s", again.code, again.body, r.body)
		}
		if n := strings.Count(strings.Join(e.tools.paths(), " "), "/wire"); n != 1 {
			t.Errorf("tool server saw %d wire requests, want 1", n)
		}

		r = e.get("/sagacity/audit/transfer-77")
		want(t, "audit", r, 200)
		if ct := r.header.Get("Content-Type"); ct != "application/x-ndjson" {
			t.Errorf("audit Content-Type = %q, want application/x-ndjson", ct)
		}
		sc := bufio.NewScanner(strings.NewReader(r.body))
		n := 0
		for sc.Scan() {
			n++
			var line map[string]json.RawMessage
			if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
				t.Fatalf("audit line %d is not JSON: %s", n, sc.Text())
			}
			var keys []string
			for k := range line {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			if want := []string{"hash", "input", "payload", "phase", "sagaId", "seq", "timestamp", "toolName"}; !slices.Equal(keys, want) {
				t.Errorf("audit line %d keys = %v, want %v", n, keys, want)
			}
			var ts string
			_ = json.Unmarshal(line["timestamp"], &ts)
			if _, err := time.Parse(time.RFC3339, ts); err != nil || !strings.HasSuffix(ts, "Z") {
				t.Errorf("audit line %d timestamp %q is not RFC 3339 UTC", n, ts)
			}
		}
		if n != 6 {
			t.Errorf("audit has %d lines, want 6", n)
		}
		if r := e.get("/sagacity/audit/no-such-saga"); r.code != 200 || r.body != "" {
			t.Errorf("audit of an unknown saga = %d %q, want 200 and nothing", r.code, r.body)
		}

		r = e.get("/sagacity/audit/transfer-77/verify")
		if r.code != 200 || r.body != `{"valid":true,"entryCount":6,"breakAtIndex":-1,"message":"all 6 entries verified; seq=3 (rule default of policy `+
			policy.Hash+`): resumed, approved by manager@company.com"}`+"\n" {
			t.Errorf("verify = %d %s, want all 6 entries verified", r.code, r.body)
		}
		testkit.Exec(t, dbURL, "UPDATE journal SET payload = 'approver=mallory' WHERE saga_id = 'transfer-77' AND seq = 4")
		r = e.get("/sagacity/audit/transfer-77/verify")
		if r.code != 200 || r.body != `{"valid":false,"entryCount":6,"breakAtIndex":3,"message":"hash mismatch at seq=4 (entry 3)"}`+"\n" {
			t.Errorf("verify after tampering = %d %s, want broken at entry 3", r.code, r.body)
		}
	})
}

func TestRefusedResumes(t *testing.T) {
	t.Parallel()
	stores(t, func(t *testing.T, dbURL string) {
		tests := []struct {
			name, payload, reason string
		}{
			{"stale payload", `{"amount":"999999","to":"mallory"}`, "payload changed"},
			{"whitespace only", `{ "amount": "100", "to": "alice" }`, "payload changed"},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				e := newAPI(t, dbURL, envOptions{})
				saga := "r-" + strings.ReplaceAll(tt.name, " ", "-")
				want(t, "order", e.call(saga, "createOrder", `{"sku":"SKU-9"}`), 200)
				e.seedScenario(saga)
				want(t, "approve", e.post("/sagacity/approve/"+saga+"/5", `{"approver":"manager@company.com"}`), 200)
				r := e.post("/sagacity/resume/"+saga+"/5", e.payload(tt.payload))
				want(t, "resume", r, 409)
				if m := r.json(t); m["sagaId"] != saga || m["status"] != "COMPENSATED" || !strings.Contains(m["reason"].(string), tt.reason) {
					t.Errorf("resume = %s, want COMPENSATED with a reason containing %q", r.body, tt.reason)
				}
				wantUndo(t, e, saga, "/wire")
				want(t, "resume again", e.post("/sagacity/resume/"+saga+"/5", e.payload(transfer)), 404)
			})
		}
		t.Run("reject", func(t *testing.T) {
			e := newAPI(t, dbURL, envOptions{})
			want(t, "order", e.call("rj", "createOrder", `{"sku":"SKU-9"}`), 200)
			e.seedScenario("rj")
			r := e.post("/sagacity/reject/rj/5", `{"approver":"manager@company.com","reason":"wrong vendor"}`)
			want(t, "reject", r, 200)
			if m := r.json(t); m["approved"] != false || m["status"] != "COMPENSATED" {
				t.Errorf("reject = %s, want approved false and COMPENSATED", r.body)
			}
			wantUndo(t, e, "rj", "/wire")
			want(t, "reject again", e.post("/sagacity/reject/rj/5", `{}`), 404)
			want(t, "resume after reject", e.post("/sagacity/resume/rj/5", e.payload(transfer)), 404)
		})
	})
}

// wantUndo checks the tool server got one compensate request per executed
// step, newest first, with the compensation idempotency keys, and never
// the forbidden path.
func wantUndo(t *testing.T, e *apiEnv, saga, never string) {
	t.Helper()
	var undo []string
	for _, r := range e.tools.requests() {
		if r.Path == never {
			t.Errorf("tool server was called at %s", never)
		}
		if r.Path == "/cancel" || r.Path == "/release" {
			undo = append(undo, r.Path+" "+r.Header.Get("Idempotency-Key"))
		}
	}
	// createOrder ran at seq 1, reserveInventory at seq 3.
	wantUndo := []string{"/release " + saga + "/3/compensate", "/cancel " + saga + "/1/compensate"}
	if diff := cmp.Diff(wantUndo, undo); diff != "" {
		t.Errorf("compensate requests (-want +got):\n%s", diff)
	}
}

// TestGatewayScenario runs the seed's scenario end to end through the
// agent gateway against a real tool server.
func TestGatewayScenario(t *testing.T) {
	t.Parallel()
	stores(t, func(t *testing.T, dbURL string) {
		e := newAPI(t, dbURL, envOptions{})
		r := e.call("transfer-77", "reserveInventory", `{"item":"laptop"}`)
		if want := `{"sagaId":"transfer-77","journalSeq":1,"toolName":"reserveInventory","outcome":"EXECUTED","status":"RUNNING","result":"{\"reserved\":1}"}` + "\n"; r.code != 200 || r.body != want {
			t.Errorf("reserve = %d %s, want 200 %s", r.code, r.body, want)
		}
		r = e.call("transfer-77", "sendWireTransfer", transfer)
		want(t, "gated call", r, 202)
		m := r.json(t)
		if m["outcome"] != "AWAITING_APPROVAL" || m["status"] != "AWAITING_APPROVAL" || m["journalSeq"] != 3.0 || m["inputHash"] != engine.PayloadHash(transfer) ||
			m["message"] != "[AWAITING_APPROVAL] Tool 'sendWireTransfer' requires human approval before execution." {
			t.Errorf("gated call = %s, want AWAITING_APPROVAL at seq 3 with the model-facing message", r.body)
		}
		if r := e.get("/sagacity/sagas/transfer-77"); r.code != 200 || r.json(t)["status"] != "AWAITING_APPROVAL" {
			t.Errorf("GET saga = %d %s, want AWAITING_APPROVAL", r.code, r.body)
		}
		want(t, "end", e.post("/sagacity/sagas/transfer-77/end", ""), 200)
		want(t, "approve", e.post("/sagacity/approve/transfer-77/3", `{"approver":"manager@company.com"}`), 200)
		want(t, "resume", e.post("/sagacity/resume/transfer-77/3", e.payload(transfer)), 200)

		var wires []toolRequest
		for _, q := range e.tools.requests() {
			if q.Path == "/wire" {
				wires = append(wires, q)
			}
		}
		if len(wires) != 1 {
			t.Fatalf("tool server saw %d wire requests, want exactly 1", len(wires))
		}
		q := wires[0]
		if q.Body != transfer || q.Header.Get("Idempotency-Key") != "transfer-77/3" || q.Header.Get("Sagacity-Saga-Id") != "transfer-77" ||
			q.Header.Get("Sagacity-Seq") != "3" || q.Header.Get("Sagacity-Tool") != "sendWireTransfer" || q.Header.Get("Sagacity-Phase") != "execute" {
			t.Errorf("wire request = %+v, want the approved bytes, Idempotency-Key transfer-77/3 (the request's seq) and the Sagacity headers", q)
		}
		signed := toolsig.Request{Method: "POST", Path: "/wire", Tool: "sendWireTransfer", Key: "transfer-77/3", Phase: toolsig.Execute}
		if err := toolsig.Verify(secret, q.Header.Get(toolsig.Header), signed, []byte(q.Body), time.Now(), time.Minute); err != nil {
			t.Errorf("wire request signature: %v", err)
		}
		if r := e.get("/sagacity/sagas/transfer-77"); r.json(t)["status"] != "COMPLETED" {
			t.Errorf("saga after resume = %s, want COMPLETED", r.body)
		}
		if r := e.call("transfer-77", "reserveInventory", "{}"); r.code != 409 {
			t.Errorf("call on a completed saga = %d %s, want 409", r.code, r.body)
		}
	})
}

// TestReplayToWire replays the exact request Sagacity sent for an
// ungated reserveInventory call to the IRREVERSIBLE wire transfer's
// endpoint: the tool server refuses it, so the gate cannot be bypassed with
// bytes signed for another tool.
func TestReplayToWire(t *testing.T) {
	t.Parallel()
	e := newAPI(t, testkit.SQLiteURL(t), envOptions{})
	// An agent can be talked into sending any input to an ungated tool,
	// such as a wire transfer's.
	want(t, "reserve", e.call("r", "reserveInventory", transfer), 200)
	reqs := e.tools.requests()
	if len(reqs) != 1 || reqs[0].Path != "/reserve" {
		t.Fatalf("tool server received %+v, want one request to /reserve", reqs)
	}
	captured := reqs[0]
	tests := []struct {
		path string
		code int
	}{
		{"/wire", http.StatusUnauthorized},
		// The capture is a valid request: back at its own endpoint it
		// passes, and a real tool would deduplicate it by its
		// Idempotency-Key.
		{"/reserve", http.StatusOK},
	}
	for _, tt := range tests {
		req, err := http.NewRequest(http.MethodPost, e.tools.URL+tt.path, strings.NewReader(captured.Body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header = captured.Header.Clone()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tt.code {
			t.Errorf("replay of the reserveInventory request to %s = %d %q, want %d", tt.path, resp.StatusCode, b, tt.code)
		}
	}
	if got, wantPaths := e.tools.paths(), []string{"/reserve", "/reserve"}; !slices.Equal(got, wantPaths) {
		t.Errorf("tool server ran %v, want %v and no /wire", got, wantPaths)
	}
}

func TestBadInput(t *testing.T) {
	t.Parallel()
	stores(t, func(t *testing.T, dbURL string) {
		e := newAPI(t, dbURL, envOptions{maxBody: 4 << 10, maxResult: 1 << 20})
		e.seedScenario("s")
		long := strings.Repeat("x", engine.MaxIDLen+1)
		tests := []struct {
			name, method, path, contentType, body string
			code                                  int
			msg                                   string
		}{
			{"malformed JSON", "POST", "/sagacity/sagas/s/calls", "application/json", `{"tool":`, 400, "invalid JSON body"},
			{"wrong type", "POST", "/sagacity/sagas/s/calls", "application/json", `{"tool":"reserveInventory","input":7}`, 400, `field "input" must be a string`},
			{"unknown field", "POST", "/sagacity/approve/s/3", "application/json", `{"approver":"a","extra":1}`, 400, `unknown field "extra"`},
			{"two JSON values", "POST", "/sagacity/approve/s/3", "application/json", `{} {}`, 400, "after top-level value"},
			// The engine and a reviewer must read the same bytes: no key twice,
			// no key in another case, no bytes JSON cannot carry as they are.
			{"duplicate key", "POST", "/sagacity/sagas/s/calls", "application/json",
				`{"tool":"reserveInventory","tool":"sendWireTransfer","input":"{}"}`, 400, "duplicate object member name"},
			{"case-variant key", "POST", "/sagacity/sagas/s/calls", "application/json",
				`{"tool":"reserveInventory","Tool":"sendWireTransfer","input":"{}"}`, 400, `unknown field "Tool"`},
			{"invalid UTF-8", "POST", "/sagacity/sagas/s/calls", "application/json",
				"{\"tool\":\"reserveInventory\",\"input\":\"\xff\"}", 400, "invalid UTF-8"},
			{"lone surrogate", "POST", "/sagacity/sagas/s/calls", "application/json",
				`{"tool":"reserveInventory","input":"\ud800"}`, 400, "invalid surrogate pair"},
			{"NUL in the input", "POST", "/sagacity/sagas/s/calls", "application/json",
				`{"tool":"reserveInventory","input":"{\"sku\":\"a\u0000\"}"}`, 400, "contains a NUL character"},
			{"NUL in a gated input", "POST", "/sagacity/sagas/s/calls", "application/json",
				`{"tool":"sendWireTransfer","input":"\u0000"}`, 400, "contains a NUL character"},
			// An input that tools and reviewers would read differently.
			{"a gated input with a name twice", "POST", "/sagacity/sagas/s/calls", "application/json",
				`{"tool":"sendWireTransfer","input":"{\"amount\":\"1\",\"to\":\"alice\"\n\n,\"amount\":\"250000\"}"}`, 400,
				`tools and reviewers could read differently: duplicate object member name "amount"`},
			{"a gated input with a name escaped", "POST", "/sagacity/sagas/s/calls", "application/json",
				`{"tool":"sendWireTransfer","input":"{\"amount\":\"1\",\"\\u0061mount\":\"2\"}"}`, 400, `duplicate object member name "amount"`},
			{"a gated input with a lone surrogate escaped", "POST", "/sagacity/sagas/s/calls", "application/json",
				`{"tool":"sendWireTransfer","input":"{\"to\":\"\\ud800\"}"}`, 400, "invalid surrogate pair"},
			{"a gated input with a NUL escaped", "POST", "/sagacity/sagas/s/calls", "application/json",
				`{"tool":"sendWireTransfer","input":"{\"to\":\"a\\u0000\"}"}`, 400, "a string holds a NUL character"},
			{"array body", "POST", "/sagacity/resume/s/3", "application/json", `[]`, 400, "must be a JSON object"},
			{"seq zero", "POST", "/sagacity/approve/s/0", "application/json", `{}`, 400, "seq must be a positive integer"},
			{"seq negative", "POST", "/sagacity/resume/s/-3", "application/json", `{"payload":""}`, 400, "seq must be a positive integer"},
			{"seq not a number", "POST", "/sagacity/reject/s/three", "application/json", `{}`, 400, "seq must be a positive integer"},
			{"seq too large", "POST", "/sagacity/approve/s/99999999999999999999", "application/json", `{}`, 400, "seq must be a positive integer"},
			{"over-long saga id", "POST", "/sagacity/sagas/" + long + "/calls", "application/json", `{"tool":"reserveInventory","input":"{}"}`, 400, "longer than 200 bytes"},
			{"control character in saga id", "POST", "/sagacity/sagas/a%0Ab/calls", "application/json", `{"tool":"reserveInventory","input":"{}"}`, 400, "control characters"},
			// Ids that read as the server's own sagas: escaped in the path,
			// in another case, with a fullwidth colon, or holding "%3A".
			{"a server saga's id", "POST", "/sagacity/sagas/sagacity%3Apasskeys/calls", "application/json", `{"tool":"reserveInventory","input":"{}"}`, 400, "are the server's own"},
			{"a server saga's id, fullwidth colon", "POST", "/sagacity/sagas/Sagacity%EF%BC%9Apolicies/calls", "application/json", `{"tool":"reserveInventory","input":"{}"}`, 400, "are the server's own"},
			{"a server saga's id, %3A in it", "POST", "/sagacity/sagas/sagacity%253Apasskeys/calls", "application/json", `{"tool":"reserveInventory","input":"{}"}`, 400, "are the server's own"},
			{"body over the cap", "POST", "/sagacity/sagas/s/calls", "application/json", `{"tool":"reserveInventory","input":"` + strings.Repeat("x", 8<<10) + `"}`, 413, "larger than 4096 bytes"},
			{"text/plain body", "POST", "/sagacity/sagas/s/calls", "text/plain", `{"tool":"reserveInventory","input":"{}"}`, 415, "Content-Type must be application/json"},
			{"missing tool", "POST", "/sagacity/sagas/s/calls", "application/json", `{"input":"{}"}`, 400, `must contain "tool" and "input"`},
			{"unknown tool", "POST", "/sagacity/sagas/s/calls", "application/json", `{"tool":"launchMissiles","input":"{}"}`, 404, `unknown tool "launchMissiles"`},
			{"GET on a POST route", "GET", "/sagacity/approve/s/3", "", "", 405, "method not allowed here"},
			{"unknown endpoint", "GET", "/sagacity/nope", "", "", 404, "no such page"},
			{"bad limit", "GET", "/sagacity/sagas?limit=501", "", "", 400, "limit must be an integer from 1 to 500"},
			{"bad cursor", "GET", "/sagacity/sagas?cursor=zzz", "", "", 400, "cursor is not one this server returned"},
			{"bad status", "GET", "/sagacity/sagas?status=DONE", "", "", 400, `unknown status "DONE"`},
			{"bad olderThan", "GET", "/sagacity/in-doubt?olderThan=soon", "", "", 400, "olderThan must be a duration"},
			{"negative olderThan", "GET", "/sagacity/in-doubt?olderThan=-1s", "", "", 400, "olderThan must be a duration"},
			{"reason with a newline", "POST", "/sagacity/reject/s/3", "application/json", `{"reason":"ok\nauth=oidc"}`, 400, "control characters"},
		}
		for _, tt := range tests {
			r := e.do(tt.method, tt.path, tt.contentType, tt.body)
			if r.code != tt.code || r.header.Get("Content-Type") != "application/json" || !strings.Contains(r.json(t)["error"].(string), tt.msg) {
				t.Errorf("%s: %s %s = %d %s, want %d with an error containing %q", tt.name, tt.method, tt.path, r.code, r.body, tt.code, tt.msg)
			}
		}
		// None of that touched the saga.
		if r := e.get("/sagacity/audit/s/verify"); !strings.Contains(r.body, `"entryCount":3`) {
			t.Errorf("after bad input the journal changed: %s", r.body)
		}
		if r := e.get("/sagacity/approvals/s"); strings.Count(r.body, "sagaId") != 1 {
			t.Errorf("after bad input the pending request changed: %s", r.body)
		}
	})
}

// TestFailingTools covers tool servers that fail in the ways networks do:
// each call fails, is journaled FAILED, compensates and answers 422.
func TestFailingTools(t *testing.T) {
	t.Parallel()
	stores(t, func(t *testing.T, dbURL string) {
		tests := []struct{ tool, errText string }{
			{"scheduleShipment", "tool scheduleShipment answered 503: no carrier available"},
			{"unreachable", "tool unreachable unreachable: connection refused"},
			{"slowTool", "tool slowTool timed out after 200ms"},
			{"hugeTool", "tool hugeTool result exceeds 1048576 bytes"},
		}
		for _, tt := range tests {
			t.Run(tt.tool, func(t *testing.T) {
				e := newAPI(t, dbURL, envOptions{})
				saga := "f-" + tt.tool
				want(t, "reserve", e.call(saga, "reserveInventory", "{}"), 200)
				start := time.Now()
				r := e.call(saga, tt.tool, `{"n":1}`)
				want(t, tt.tool, r, 422)
				m := r.json(t)
				if m["status"] != "COMPENSATED" || !strings.Contains(m["error"].(string), tt.errText) {
					t.Errorf("call %s = %s, want COMPENSATED with an error like %q", tt.tool, r.body, tt.errText)
				}
				if d := time.Since(start); d > 4*time.Second {
					t.Errorf("call %s took %s", tt.tool, d)
				}
				var phases []string
				for _, l := range strings.Split(strings.TrimSpace(e.get("/sagacity/audit/"+saga).body), "\n") {
					var en struct{ ToolName, Phase string }
					_ = json.Unmarshal([]byte(l), &en)
					phases = append(phases, en.ToolName+" "+en.Phase)
				}
				wantPhases := []string{"reserveInventory INTENT", "reserveInventory EXECUTED", tt.tool + " INTENT", tt.tool + " FAILED", "reserveInventory COMPENSATED"}
				if diff := cmp.Diff(wantPhases, phases); diff != "" {
					t.Errorf("journal (-want +got):\n%s", diff)
				}
				if v := e.get("/sagacity/audit/" + saga + "/verify"); !strings.Contains(v.body, `"valid":true`) {
					t.Errorf("verify = %s", v.body)
				}
			})
		}
	})
}

func TestApprovalEndpointsDisabled(t *testing.T) {
	t.Parallel()
	e := newAPI(t, testkit.SQLiteURL(t), envOptions{noApprovalEndpoints: true})
	e.seedScenario("s")
	for _, path := range []string{"/sagacity/approve/s/3", "/sagacity/reject/s/3", "/sagacity/resume/s/3"} {
		want(t, path, e.post(path, e.payload(transfer)), 404)
	}
	want(t, "approvals still listed", e.get("/sagacity/approvals"), 200)
}

func TestSagaListing(t *testing.T) {
	t.Parallel()
	stores(t, func(t *testing.T, dbURL string) {
		e := newAPI(t, dbURL, envOptions{})
		for i := range 5 {
			want(t, "call", e.call(fmt.Sprintf("s%d", i), "createOrder", "{}"), 200)
		}
		e.seedScenario("w")
		var ids []string
		next := "/sagacity/sagas?limit=2"
		for next != "" {
			r := e.get(next)
			want(t, "list", r, 200)
			var page struct {
				Sagas []struct {
					SagaID string `json:"sagaId"`
				}
				NextCursor string `json:"nextCursor"`
			}
			_ = json.Unmarshal([]byte(r.body), &page)
			for _, s := range page.Sagas {
				ids = append(ids, s.SagaID)
			}
			next = ""
			if page.NextCursor != "" {
				next = "/sagacity/sagas?limit=2&cursor=" + page.NextCursor
			}
		}
		// The oldest is the server's own: the approval policy it took
		// effect with (engine.PolicySaga).
		if want := []string{"w", "s4", "s3", "s2", "s1", "s0", engine.PolicySaga}; !slices.Equal(ids, want) {
			t.Errorf("paged sagas = %v, want %v", ids, want)
		}
		r := e.get("/sagacity/sagas?status=AWAITING_APPROVAL")
		if strings.Count(r.body, `"sagaId"`) != 1 || !strings.Contains(r.body, `"sagaId":"w"`) {
			t.Errorf("sagas awaiting approval = %s, want only w", r.body)
		}
		want(t, "abort", e.post("/sagacity/sagas/w/abort", `{"reason":"user cancelled"}`), 200)
		if r := e.get("/sagacity/sagas/w"); r.json(t)["status"] != "COMPENSATED" {
			t.Errorf("after abort = %s, want COMPENSATED", r.body)
		}
		want(t, "unknown saga", e.get("/sagacity/sagas/nope"), 404)
		want(t, "in doubt", e.get("/sagacity/in-doubt?olderThan=0s"), 200)
	})
}

// TestStorageDown: a database that is gone answers 503, never 404, and
// says nothing of SQL.
func TestStorageDown(t *testing.T) {
	t.Parallel()
	e := newAPI(t, testkit.SQLiteURL(t), envOptions{})
	e.seedScenario("s")
	e.db.Close()
	for _, r := range []response{
		e.post("/sagacity/resume/s/3", e.payload(transfer)),
		e.get("/sagacity/approvals"),
		e.call("s", "reserveInventory", "{}"),
		e.get("/readyz"),
	} {
		if r.code != 503 || strings.Contains(strings.ToLower(r.body), "sql") {
			t.Errorf("with the database closed: %d %q, want 503 without SQL detail", r.code, r.body)
		}
	}
}

// TestCallIdempotencyKey: the Idempotency-Key header of a call, bare or
// as the IETF draft's sf-string, names one logical call: sent again it
// answers the first call's outcome, with other bytes 422 naming the
// first; a key that cannot be one is 400, nothing journaled.
func TestCallIdempotencyKey(t *testing.T) {
	t.Parallel()
	stores(t, func(t *testing.T, dbURL string) {
		e := newAPI(t, dbURL, envOptions{})
		call := func(input, key string) response {
			t.Helper()
			b, _ := json.Marshal(map[string]string{"tool": "reserveInventory", "input": input})
			return e.do("POST", "/sagacity/sagas/keyed/calls", "application/json", string(b), "Idempotency-Key", key)
		}
		first := call(`{"item":"laptop"}`, `"order-1"`)
		want(t, "first call", first, 200)
		for _, key := range []string{`"order-1"`, `order-1`, ` "order-1" `} {
			if r := call(`{"item":"laptop"}`, key); r.code != 200 || r.body != first.body {
				t.Errorf("the call again under %s = %d %s; want the first answer %s", key, r.code, r.body, first.body)
			}
		}
		if n := strings.Count(strings.Join(e.tools.paths(), " "), "/reserve"); n != 1 {
			t.Errorf("the tool ran %d times, want once", n)
		}
		r := call(`{"item":"phone"}`, "order-1")
		if r.code != 422 || r.json(t)["code"] != "KEY_REUSED" || r.json(t)["journalSeq"] != 1.0 || !strings.Contains(r.body, "seq=1") {
			t.Errorf("the key with other bytes = %d %s; want 422 KEY_REUSED naming seq 1", r.code, r.body)
		}
		if r := call(`{"item":"desk"}`, `"a\"b\\c"`); r.code != 200 {
			t.Errorf("a key with escapes = %d %s; want it taken", r.code, r.body)
		}
		if r := call(`{"item":"desk"}`, `a"b\c`); r.code != 200 || !strings.Contains(r.body, `"journalSeq":3`) {
			t.Errorf("the same key bare = %d %s; want the call it named", r.code, r.body)
		}
		entries := len(e.get("/sagacity/audit/keyed").body)
		for _, key := range []string{`""`, `"a\x"`, `"a"b"`, "café", strings.Repeat("k", 256)} {
			if r := call(`{"item":"chair"}`, key); r.code != 400 {
				t.Errorf("key %q = %d %s; want 400", key, r.code, r.body)
			}
		}
		b, _ := json.Marshal(map[string]string{"tool": "reserveInventory", "input": `{"item":"chair"}`})
		req, _ := http.NewRequest("POST", e.url+"/sagacity/sagas/keyed/calls", strings.NewReader(string(b)))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Add("Idempotency-Key", "one")
		req.Header.Add("Idempotency-Key", "two")
		if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 400 {
			t.Errorf("two keys = %v, %v; want 400", resp, err)
		} else {
			resp.Body.Close()
		}
		if n := len(e.get("/sagacity/audit/keyed").body); n != entries {
			t.Errorf("refused keys journaled something")
		}

		// A gated call sent again after its request was executed answers
		// the execution, not the request it was.
		wire := func() response {
			t.Helper()
			b, _ := json.Marshal(map[string]string{"tool": "sendWireTransfer", "input": transfer})
			return e.do("POST", "/sagacity/sagas/wired/calls", "application/json", string(b), "Idempotency-Key", "wire-1")
		}
		want(t, "the gated call", wire(), 202)
		want(t, "approve", e.post("/sagacity/approve/wired/1", `{"approver":"manager@company.com"}`), 200)
		want(t, "resume", e.post("/sagacity/resume/wired/1", e.payload(transfer)), 200)
		if r := wire(); r.code != 200 || !strings.Contains(r.body, `"journalSeq":1,"toolName":"sendWireTransfer","outcome":"EXECUTED"`) ||
			!strings.Contains(r.body, `"result":"transfer-ok"`) {
			t.Errorf("the gated call again once executed = %d %s; want 200 EXECUTED with its result", r.code, r.body)
		}
		if n := strings.Count(strings.Join(e.tools.paths(), " "), "/wire"); n != 1 {
			t.Errorf("the wire ran %d times, want once", n)
		}
	})
}

// TestGateRefusal: a call no rule of the approval policy applies to is
// answered 409 REFUSED, as the OpenAPI document says, with the request
// and its refusal journaled and the saga compensated.
func TestGateRefusal(t *testing.T) {
	t.Parallel()
	policy, err := engine.CompilePolicy(engine.PolicySpec{Tools: map[string][]engine.RuleSpec{
		"sendWireTransfer": {{Name: "up-to-1000", When: `double(payload.amount) <= 1000.0`}}}})
	if err != nil {
		t.Fatal(err)
	}
	e := newAPI(t, testkit.SQLiteURL(t), envOptions{approvals: policy})
	want(t, "reserve", e.call("g", "reserveInventory", `{"item":"desk"}`), 200)
	want(t, "a small transfer", e.call("g", "sendWireTransfer", `{"amount":"100","to":"alice"}`), 202)
	r := e.call("h", "sendWireTransfer", `{"amount":"250000","to":"alice"}`)
	body := r.json(t)
	if r.code != 409 || body["outcome"] != "REFUSED" || body["code"] != "REFUSED" || body["kind"] != "conflict" ||
		body["status"] != "COMPENSATED" || !strings.Contains(fmt.Sprint(body["error"]), engine.RefusedNoRule) {
		t.Errorf("a transfer no rule applies to = %d %s; want 409 REFUSED, the saga compensated", r.code, r.body)
	}
	if audit := e.get("/sagacity/audit/h").body; !strings.Contains(audit, `"phase":"REJECTED"`) || !strings.Contains(audit, `policy=`+policy.Hash) {
		t.Errorf("journal = %s; want the request under the policy and its refusal", audit)
	}
}
