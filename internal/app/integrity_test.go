package app_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sagacity-go/sagacity/internal/auth"
	"github.com/sagacity-go/sagacity/internal/engine"
	"github.com/sagacity-go/sagacity/internal/testkit"
)

// The gate's integrity, attacked from outside through the real server: each
// test here is a way an insider got an unapproved payload executed, or the
// evidence to lie, before it was closed.

const js = "application/json"

// callJSON is a gateway request body.
func callJSON(tool, input string) string {
	b, _ := json.Marshal(map[string]string{"tool": tool, "input": input})
	return string(b)
}

// TestFourEyesPerRequest: a principal holding the agent and approver roles
// adds its own IRREVERSIBLE call to somebody else's (shared) saga. It may
// not approve or reject what it requested, even though it did not start the
// saga; the journal names it as the requester.
func TestFourEyesPerRequest(t *testing.T) {
	t.Parallel()
	stores(t, func(t *testing.T, dbURL string) {
		agentT, agentTok := token("agent1", engine.RoleAgent)
		botT, botTok := token("bot", engine.RoleAgent, engine.RoleApprover)
		apprT, apprTok := token("alice", engine.RoleApprover)
		e := newAPI(t, dbURL, envOptions{tokens: []auth.Token{agentT, botT, apprT}, shareSagas: true})

		want(t, "agent1 starts the saga", e.do("POST", "/sagacity/sagas/s/calls", js, callJSON("reserveInventory", "{}"), bearer(agentTok)...), 200)
		want(t, "bot adds a wire", e.do("POST", "/sagacity/sagas/s/calls", js, callJSON("sendWireTransfer", transfer), bearer(botTok)...), 202)
		r := e.do("POST", "/sagacity/approve/s/3", js, `{}`, bearer(botTok)...)
		want(t, "bot approves its own request", r, 403)
		if !strings.Contains(r.body, "token:bot made this request and cannot decide it") {
			t.Errorf("refusal = %s, want it to say the requester cannot decide", r.body)
		}
		want(t, "bot rejects its own request", e.do("POST", "/sagacity/reject/s/3", js, `{}`, bearer(botTok)...), 403)
		want(t, "bot resumes unapproved", e.do("POST", "/sagacity/resume/s/3", js, e.payload(transfer), bearer(botTok)...), 409)
		if paths := e.tools.paths(); strings.Contains(strings.Join(paths, " "), "/wire") {
			t.Fatalf("the wire ran without a second person's approval: %v", paths)
		}

		// The requester is evidence: in the journal, and on the request.
		want(t, "bot adds another wire", e.do("POST", "/sagacity/sagas/t/calls", js, callJSON("reserveInventory", "{}"), bearer(agentTok)...), 200)
		want(t, "bot gates again", e.do("POST", "/sagacity/sagas/t/calls", js, callJSON("sendWireTransfer", transfer), bearer(botTok)...), 202)
		audit := e.do("GET", "/sagacity/audit/t", "", "", bearer(apprTok)...).body
		if !strings.Contains(audit, `"phase":"AWAITING_APPROVAL","input":"{\"amount\":\"100\",\"to\":\"alice\"}","payload":"requester=token:bot\nauth=token\nrule=default\npolicy=`) ||
			!strings.Contains(audit, `"phase":"INTENT","input":"{}","payload":"requester=token:agent1\nauth=token"`) {
			t.Errorf("journal = %s, want each call's first entry to name its requester", audit)
		}
		if r := e.do("GET", "/sagacity/approvals/t", "", "", bearer(apprTok)...); !strings.Contains(r.body, `"requester":"token:bot"`) {
			t.Errorf("approvals = %s, want the requester on the request", r.body)
		}
		want(t, "a second person approves", e.do("POST", "/sagacity/approve/t/3", js, `{}`, bearer(apprTok)...), 200)
		want(t, "resume", e.do("POST", "/sagacity/resume/t/3", js, e.payload(transfer), bearer(botTok)...), 200)
	})
}

// TestSagaOwnership: by default only a saga's initiator acts on it as an
// agent; sharing is a configured choice.
func TestSagaOwnership(t *testing.T) {
	t.Parallel()
	stores(t, func(t *testing.T, dbURL string) {
		agentT, agentTok := token("agent1", engine.RoleAgent)
		otherT, otherTok := token("agent2", engine.RoleAgent)
		botT, botTok := token("bot", engine.RoleAgent, engine.RoleApprover)
		apprT, apprTok := token("alice", engine.RoleApprover)
		e := newAPI(t, dbURL, envOptions{tokens: []auth.Token{agentT, otherT, botT, apprT}})

		want(t, "agent1 starts", e.do("POST", "/sagacity/sagas/s/calls", js, callJSON("reserveInventory", "{}"), bearer(agentTok)...), 200)
		want(t, "agent1 gates", e.do("POST", "/sagacity/sagas/s/calls", js, callJSON("sendWireTransfer", transfer), bearer(agentTok)...), 202)
		want(t, "alice approves", e.do("POST", "/sagacity/approve/s/3", js, `{}`, bearer(apprTok)...), 200)
		// A principal that is also an approver may still abort or resume
		// (as a person would), but not act as an agent in the saga.
		for _, tt := range []struct{ who, tok, what, path, body string }{
			{"agent2", otherTok, "calls", "/sagacity/sagas/s/calls", callJSON("sendWireTransfer", transfer)},
			{"agent2", otherTok, "ends", "/sagacity/sagas/s/end", ""},
			{"agent2", otherTok, "aborts", "/sagacity/sagas/s/abort", ""},
			{"agent2", otherTok, "resumes", "/sagacity/resume/s/3", e.payload(transfer)},
			{"bot", botTok, "calls", "/sagacity/sagas/s/calls", callJSON("sendWireTransfer", transfer)},
			{"bot", botTok, "ends", "/sagacity/sagas/s/end", ""},
		} {
			r := e.do("POST", tt.path, js, tt.body, bearer(tt.tok)...)
			if r.code != 403 || !strings.Contains(r.body, "saga s belongs to token:agent1") {
				t.Errorf("%s %s in agent1's saga = %d %s, want 403", tt.who, tt.what, r.code, r.body)
			}
		}
		if got := e.do("GET", "/sagacity/audit/s/verify", "", "", bearer(apprTok)...).body; !strings.Contains(got, `"entryCount":4`) {
			t.Errorf("refused requests changed the journal: %s", got)
		}
		// Nor read it: its journal names payees, approvers and sessions.
		for _, path := range []string{"/sagacity/audit/s", "/sagacity/audit/s?proofs=latest", "/sagacity/sagas/s", "/sagacity/receipts/s/4"} {
			if r := e.do("GET", path, "", "", bearer(otherTok)...); r.code != 403 || !strings.Contains(r.body, "saga s is not yours to read") {
				t.Errorf("agent2 GET %s in agent1's saga = %d %s, want 403", path, r.code, r.body)
			}
		}
		want(t, "agent1 reads its own", e.do("GET", "/sagacity/audit/s", "", "", bearer(agentTok)...), 200)
		want(t, "agent2 starts its own", e.do("POST", "/sagacity/sagas/v/calls", js, callJSON("reserveInventory", "{}"), bearer(otherTok)...), 200)
		if r := e.do("GET", "/sagacity/sagas", "", "", bearer(otherTok)...); r.code != 200 || strings.Contains(r.body, `"sagaId":"s"`) ||
			!strings.Contains(r.body, `"sagaId":"v"`) {
			t.Errorf("agent2 lists sagas = %d %s, want its own alone", r.code, r.body)
		}
		want(t, "the initiator resumes", e.do("POST", "/sagacity/resume/s/3", js, e.payload(transfer), bearer(agentTok)...), 200)
		// A person may stop any saga.
		want(t, "agent1 starts another", e.do("POST", "/sagacity/sagas/u/calls", js, callJSON("reserveInventory", "{}"), bearer(agentTok)...), 200)
		want(t, "an approver aborts it", e.do("POST", "/sagacity/sagas/u/abort", js, `{"reason":"runaway"}`, bearer(apprTok)...), 200)

		shared := newAPI(t, testkit.SQLiteURL(t), envOptions{tokens: []auth.Token{agentT, otherT}, shareSagas: true})
		want(t, "shared: agent1 starts", shared.do("POST", "/sagacity/sagas/s/calls", js, callJSON("reserveInventory", "{}"), bearer(agentTok)...), 200)
		want(t, "shared: agent2 calls", shared.do("POST", "/sagacity/sagas/s/calls", js, callJSON("reserveInventory", "{}"), bearer(otherTok)...), 200)
		want(t, "shared: agent2 ends", shared.do("POST", "/sagacity/sagas/s/end", js, "", bearer(otherTok)...), 200)
		want(t, "shared: agent2 reads", shared.do("GET", "/sagacity/audit/s", "", "", bearer(otherTok)...), 200)
	})
}

// TestRequestRowSubstitution: with write access to the database, an
// insider rewrites the approved request's input and hash (not the
// journal). Resume executes nothing, and verify says why.
func TestRequestRowSubstitution(t *testing.T) {
	t.Parallel()
	stores(t, func(t *testing.T, dbURL string) {
		e := newAPI(t, dbURL, envOptions{})
		e.seedScenario("s")
		want(t, "approve", e.post("/sagacity/approve/s/3", `{"approver":"manager@company.com"}`), 200)
		evil := `{"amount":"100000","to":"mallory"}`
		testkit.Exec(t, dbURL, "UPDATE approval_requests SET input = $1, input_hash = $2 WHERE saga_id = 's'", evil, engine.PayloadHash(evil))
		for _, p := range []string{evil, transfer} {
			r := e.post("/sagacity/resume/s/3", e.payload(p))
			if r.code != 409 || !strings.Contains(r.body, "approval request at seq=3 does not match the journal") {
				t.Errorf("resume with %s after the request row was rewritten = %d %s, want 409 naming the mismatch", p, r.code, r.body)
			}
		}
		if paths := strings.Join(e.tools.paths(), " "); strings.Contains(paths, "/wire") {
			t.Fatalf("the wire ran after the request row was rewritten: %s", paths)
		}
		r := e.get("/sagacity/audit/s/verify")
		if want := `{"valid":false,"entryCount":4,"breakAtIndex":2,"message":"approval request at seq=3 does not match the journal (entry 2)"}`; r.body != want+"\n" {
			t.Errorf("verify = %s, want %s", r.body, want)
		}
	})
}

// TestHostAllowlist: a page on another site whose name resolves to this
// server (DNS rebinding) is same-origin with it as far as the browser
// knows. Only the configured host names, and loopback, are served; the
// refusal (421) carries the security headers every answer does.
func TestHostAllowlist(t *testing.T) {
	t.Parallel()
	e := newAPI(t, testkit.SQLiteURL(t), envOptions{hosts: []string{"sagacity.example"}})
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(e.url, "http://"))
	do := func(method, path, host, body string) response {
		req, err := http.NewRequest(method, e.url+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Host = host
		req.Header.Set("Origin", "http://"+host)
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		resp, err := noRedirects.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		return response{code: resp.StatusCode, header: resp.Header}
	}
	evil := "evil.example:" + port
	for _, tt := range []struct{ method, path, body string }{
		{"GET", "/", ""}, {"POST", "/login", "name=mallory"}, {"GET", "/sagacity/approvals", ""},
		{"POST", "/sagacity/approve/transfer-77/3", ""}, {"GET", "/healthz", ""}, {"GET", "/static/app.css", ""},
	} {
		r := do(tt.method, tt.path, evil, tt.body)
		if r.code != http.StatusMisdirectedRequest {
			t.Errorf("%s %s for host %s = %d, want 421", tt.method, tt.path, evil, r.code)
		}
		// The refusal is an answer like any other: the host check runs
		// inside the security headers, not before them.
		if missing := missingSecureHeaders(r.header); missing != "" {
			t.Errorf("%s %s for host %s: the 421 lacks %s (headers %v)", tt.method, tt.path, evil, missing, r.header)
		}
	}
	if r := do("POST", "/login", evil, "name=mallory"); r.header.Get("Set-Cookie") != "" {
		t.Errorf("a rebinding page was handed a session cookie")
	}
	for _, host := range []string{"localhost:" + port, "127.0.0.1:" + port, "[::1]:" + port, "sagacity.example", "SAGACITY.example.", "sagacity.example:443"} {
		if r := do("GET", "/healthz", host, ""); r.code != 200 {
			t.Errorf("GET /healthz for host %s = %d, want 200", host, r.code)
		}
	}
}

// missingSecureHeaders names the first security header h lacks, as
// every answer carries them, or "".
func missingSecureHeaders(h http.Header) string {
	for name, want := range map[string]string{"X-Content-Type-Options": "nosniff", "Referrer-Policy": "same-origin",
		"Cache-Control": "no-store", "X-Frame-Options": "DENY"} {
		if h.Get(name) != want {
			return name + ": " + want
		}
	}
	if csp := h.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'self'") || !strings.Contains(csp, "frame-ancestors 'none'") {
		return "Content-Security-Policy"
	}
	return ""
}

// TestMethods: a wrong method is 405 with Allow, and HEAD works where GET does.
func TestMethods(t *testing.T) {
	t.Parallel()
	e := newAPI(t, testkit.SQLiteURL(t), envOptions{})
	for _, tt := range []struct{ method, path, allow string }{
		{"GET", "/sagacity/approve/s/3", "POST"},
		{"POST", "/healthz", "GET, HEAD"},
		{"DELETE", "/sagacity/sagas/s", "GET, HEAD"},
	} {
		r := e.do(tt.method, tt.path, "", "")
		if r.code != 405 || r.header.Get("Allow") != tt.allow {
			t.Errorf("%s %s = %d, Allow %q; want 405, Allow %q", tt.method, tt.path, r.code, r.header.Get("Allow"), tt.allow)
		}
	}
	for _, path := range []string{"/healthz", "/readyz", "/static/app.css"} {
		if r := e.do("HEAD", path, "", ""); r.code != 200 || r.body != "" {
			t.Errorf("HEAD %s = %d %q, want 200 with no body", path, r.code, r.body)
		}
	}
}

// TestStalledBody: a client that stops sending half-way through its body
// is answered 400 when the server's read timeout fires, and logged as the
// client's problem, not as a server error.
func TestStalledBody(t *testing.T) {
	t.Parallel()
	e := newAPI(t, testkit.SQLiteURL(t), envOptions{readTimeout: 300 * time.Millisecond})
	for _, path := range []string{"/sagacity/sagas/s/calls", "/login"} {
		conn, err := net.Dial("tcp", strings.TrimPrefix(e.url, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"tool\":", path)
		_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatalf("POST %s with a stalled body: %v", path, err)
		}
		resp.Body.Close()
		conn.Close()
		if resp.StatusCode != 400 {
			t.Errorf("POST %s with a stalled body = %d, want 400", path, resp.StatusCode)
		}
	}
	if logs := e.logs.String(); strings.Contains(logs, "level=ERROR") {
		t.Errorf("a stalled client was logged as a server error:\n%s", logs)
	}
}

// TestUnstorableBytes: bytes no store keeps as they are never make the two
// stores disagree, never leave an effect unjournaled, and never let a
// resume off the hook.
func TestUnstorableBytes(t *testing.T) {
	t.Parallel()
	stores(t, func(t *testing.T, dbURL string) {
		e := newAPI(t, dbURL, envOptions{})
		// A result that is not text: the call happened and is journaled,
		// encoded.
		r := e.call("b", "binaryTool", "{}")
		enc := engine.EncodeText("\xff\x00ok")
		if r.code != 200 || r.json(t)["result"] != enc {
			t.Errorf("call whose result is not text = %d %s, want 200 with the result as %q", r.code, r.body, enc)
		}
		if doubt := e.get("/sagacity/in-doubt?olderThan=0s").body; doubt != "[]\n" {
			t.Errorf("in doubt after a binary result: %s, want none", doubt)
		}
		// Its undo gets the result back as the journal keeps it.
		want(t, "a failing step", e.call("b", "scheduleShipment", "{}"), 422)
		var undo toolRequest
		for _, q := range e.tools.requests() {
			if q.Path == "/unbinary" {
				undo = q
			}
		}
		if !strings.Contains(undo.Body, `"result":"`+enc+`"`) {
			t.Errorf("compensation body = %q, want the encoded result", undo.Body)
		}
		if v := e.get("/sagacity/audit/b/verify").body; !strings.Contains(v, `"valid":true`) {
			t.Errorf("verify = %s", v)
		}

		// A stale resume presenting a NUL is refused, journaled and compensated.
		e.seedScenario("n")
		want(t, "approve", e.post("/sagacity/approve/n/3", `{"approver":"manager@company.com"}`), 200)
		r = e.post("/sagacity/resume/n/3", `{"payload":"{\"amount\":\"100\",\"to\":\"alice\"}\u0000"}`)
		if r.code != 409 || !strings.Contains(r.body, `"status":"COMPENSATED"`) {
			t.Errorf("resume with a NUL = %d %s, want 409 COMPENSATED", r.code, r.body)
		}
		audit := e.get("/sagacity/audit/n").body
		if attempted := engine.EncodeText(transfer + "\x00"); !strings.Contains(audit, `attempted=`+attempted) {
			t.Errorf("journal = %s, want the refusal with attempted=%s", audit, attempted)
		}
	})
}

// TestVerifyUnreadableRow: a row holding a value that is not of its
// column's type is a break in the chain, not a server error.
func TestVerifyUnreadableRow(t *testing.T) {
	t.Parallel()
	stores(t, func(t *testing.T, dbURL string) {
		e := newAPI(t, dbURL, envOptions{})
		e.seedScenario("s")
		testkit.Exec(t, dbURL, "UPDATE journal SET timestamp = 'infinity' WHERE saga_id = 's' AND seq = 2")
		r := e.get("/sagacity/audit/s/verify")
		if r.code != 200 || !strings.Contains(r.body, `"valid":false,"entryCount":3,"breakAtIndex":1,"message":"unreadable entry at seq=2 (entry 1)`) {
			t.Errorf("verify with a garbage timestamp = %d %s, want 200 broken at entry 1", r.code, r.body)
		}
		want(t, "approve on it", e.post("/sagacity/approve/s/3", `{"approver":"manager@company.com"}`), 409)
	})
}

// TestVerifyLeafTakenAway: GET /sagacity/audit/{id}/verify names an
// entry of a logged saga whose leaf was taken away at once, on both
// stores: the log holds it, and the journal must too.
func TestVerifyLeafTakenAway(t *testing.T) {
	t.Parallel()
	stores(t, func(t *testing.T, dbURL string) {
		e := newAPI(t, dbURL, envOptions{})
		e.seedScenario("s")
		e.sequence()
		want(t, "verify, logged", e.get("/sagacity/audit/s/verify"), 200)
		testkit.Exec(t, dbURL, "UPDATE journal SET leaf = NULL WHERE saga_id = 's' AND seq = 3")
		r := e.get("/sagacity/audit/s/verify")
		if r.code != 200 || !strings.Contains(r.body, `"valid":false,"entryCount":3,"breakAtIndex":2,"message":"seq=3 (entry 2) has no leaf, but the log holds the saga's entries through seq=3`) {
			t.Errorf("verify with the newest leaf taken away = %d %s, want 200 broken at entry 2", r.code, r.body)
		}
	})
}

// TestForgedNotice: the notice after a decision is what the journal says,
// so a link cannot paint a decision that never happened.
func TestForgedNotice(t *testing.T) {
	t.Parallel()
	e := newAPI(t, testkit.SQLiteURL(t), envOptions{})
	e.seedScenario("s")
	c := e.session(t, "alice@example.com")
	for _, path := range []string{"/?decided=s&seq=3", "/?decided=approved&saga=s&seq=3", "/?decided=%3Cb%3Eyes&seq=9"} {
		if page := e.do("GET", path, "", "", "Cookie", c.String()).body; strings.Contains(page, "Approved") || strings.Contains(page, "Rejected") {
			t.Errorf("GET %s painted a decision nobody made", path)
		}
	}
}

// TestResolveAPI: what a call in doubt came to is recorded by a person who
// neither started the saga nor asked for the call; the journal names them.
func TestResolveAPI(t *testing.T) {
	t.Parallel()
	stores(t, func(t *testing.T, dbURL string) {
		agentT, agentTok := token("agent1", engine.RoleAgent, engine.RoleApprover)
		apprT, apprTok := token("alice", engine.RoleApprover)
		e := newAPI(t, dbURL, envOptions{tokens: []auth.Token{agentT, apprT}})
		want(t, "reserve", e.do("POST", "/sagacity/sagas/lost/calls", js, callJSON("reserveInventory", "{}"), bearer(agentTok)...), 200)
		strandAs(t, dbURL, engine.Principal{ID: "token:agent1", Auth: "token", Roles: engine.Roles}, "lost", "createOrder", `{"sku":"A"}`)
		r := e.do("GET", "/sagacity/in-doubt?olderThan=0s", "", "", bearer(apprTok)...)
		if !strings.Contains(r.body, `"journalSeq":3,"toolName":"createOrder","input":"{\"sku\":\"A\"}","requester":"token:agent1","state":"RUNNING"`) {
			t.Fatalf("in-doubt = %s, want the stranded call with its requester", r.body)
		}
		body := `{"happened":true,"result":"order-7","reason":"the order service has it"}`
		want(t, "the initiator resolves", e.do("POST", "/sagacity/in-doubt/lost/3/resolve", js, body, bearer(agentTok)...), 403)
		want(t, "no happened", e.do("POST", "/sagacity/in-doubt/lost/3/resolve", js, `{"reason":"x"}`, bearer(apprTok)...), 400)
		// The answer is the saga, as the API documents it: neither the
		// result reported nor the journal entry's payload.
		if r := e.do("POST", "/sagacity/in-doubt/lost/3/resolve", js, body, bearer(apprTok)...); r.code != 200 ||
			!strings.HasPrefix(r.body, `{"sagaId":"lost","status":"RUNNING"`) || strings.Contains(r.body, "order-7") || strings.Contains(r.body, "receipt") {
			t.Errorf("a person resolves = %d %s; want 200 and the saga alone", r.code, r.body)
		}
		want(t, "twice", e.do("POST", "/sagacity/in-doubt/lost/3/resolve", js, body, bearer(apprTok)...), 409)
		audit := e.do("GET", "/sagacity/audit/lost", "", "", bearer(apprTok)...).body
		if !strings.Contains(audit, `"toolName":"approval-gate","phase":"EXECUTED","input":"seq=3","payload":"resolved-by=token:alice\nreason=the order service has it\nauth=token\nreceipt=`) ||
			!strings.Contains(audit, `\nresult=order-7"`) {
			t.Errorf("journal = %s, want the resolution under alice's name", audit)
		}
		// It did not happen: the saga compensates, and its reason says who
		// found what, in their words.
		want(t, "reserve", e.do("POST", "/sagacity/sagas/gone/calls", js, callJSON("reserveInventory", "{}"), bearer(agentTok)...), 200)
		strandAs(t, dbURL, engine.Principal{ID: "token:agent1", Auth: "token", Roles: engine.Roles}, "gone", "createOrder", `{"sku":"B"}`)
		if r := e.do("POST", "/sagacity/in-doubt/gone/3/resolve", js, `{"happened":false,"reason":"the shop has no such order"}`, bearer(apprTok)...); r.code != 200 ||
			!strings.Contains(r.body, `"status":"COMPENSATED"`) || strings.Contains(r.body, "receipt") ||
			!strings.Contains(r.body, `"reason":"tool createOrder did not happen, as token:alice found out: the shop has no such order"`) {
			t.Errorf("resolving that it did not happen = %d %s; want the saga COMPENSATED, its reason in the person's words", r.code, r.body)
		}
	})
}

// TestPendingSummaryBounded: a pending request whose fields are huge is
// summarised in the list at a bounded size, what is left out counted:
// the list is sent again every few seconds to every reviewer.
func TestPendingSummaryBounded(t *testing.T) {
	t.Parallel()
	e := newAPI(t, testkit.SQLiteURL(t), envOptions{})
	big := strings.Repeat("x", 200_000)
	input := fmt.Sprintf(`{"a":"%s","b":"%s","c":"%s","d":"%s"}`, big, big, big, big)
	want(t, "a gated call with huge fields", e.post("/sagacity/sagas/big/calls", callJSON("sendWireTransfer", input)), 202)
	c := e.session(t, "reviewer")
	page := e.do("GET", "/", "", "", "Cookie", c.String())
	if page.code != 200 || len(page.body) > 64<<10 || !strings.Contains(page.body, "… 199920 more bytes") {
		t.Errorf("pending list = %d, %d bytes; want it under 64 KiB, counting the 199920 bytes it leaves out of each field", page.code, len(page.body))
	}
}
