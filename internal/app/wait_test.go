package app_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/sagacity-go/sagacity/internal/engine"
	"github.com/sagacity-go/sagacity/internal/testkit"
)

// held sends a request with Prefer: wait=<wait> in the background, and
// returns where its answer comes once the server holds it.
func (e *apiEnv) held(path, body, wait string, holding int) <-chan response {
	e.t.Helper()
	ch := make(chan response, 1)
	before := e.eng.Held()
	go func() { ch <- e.do("POST", path, "application/json", body, "Prefer", "wait="+wait) }()
	for range 2000 {
		if e.eng.Held() >= before+holding {
			return ch
		}
		time.Sleep(5 * time.Millisecond)
	}
	e.t.Fatalf("the server holds %d calls; want %d more", e.eng.Held(), holding)
	return nil
}

// within is the answer on ch, or a failure after a minute.
func within(t *testing.T, what string, ch <-chan response) response {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(time.Minute):
		t.Fatalf("%s: no answer in a minute", what)
		return response{}
	}
}

func wireCall() string {
	b, _ := json.Marshal(map[string]string{"tool": "sendWireTransfer", "input": transfer})
	return string(b)
}

// TestHeldCalls: a call of a gated tool, or a resume, sent with Prefer:
// wait is held until people decide and answers what it then would: the
// quorum under the default rule (approved: resume it), the tool's result
// under a rule that executes on approval, the rejection; a wait that
// ends first answers today's 202 without Preference-Applied, and the
// server's cap bounds any wait. A resume asked before the decision
// changes nothing, and answers where the votes stand. Resumes have a
// budget of their own, apart from decisions.
func TestHeldCalls(t *testing.T) {
	t.Parallel()
	stores(t, func(t *testing.T, dbURL string) {
		onApproval, err := engine.CompilePolicy(engine.PolicySpec{Default: engine.DefaultPolicy.Default, Tools: map[string][]engine.RuleSpec{
			"sendWireTransfer": {{Name: "auto", Execute: engine.ExecuteOnApproval}}}})
		if err != nil {
			t.Fatal(err)
		}
		t.Run("default rule", func(t *testing.T) {
			t.Parallel()
			e := newAPI(t, dbURL, envOptions{maxWait: time.Minute, executions: 4})
			want(t, "reserve", e.call("d", "reserveInventory", `{"item":"laptop"}`), 200)
			before := len(strings.Split(e.get("/sagacity/audit/d").body, "\n"))
			held := e.held("/sagacity/sagas/d/calls", wireCall(), "30", 1)
			// A resume before anyone decided: 409 UNDECIDED with the
			// votes, nothing journaled.
			r := e.post("/sagacity/resume/d/3", e.payload(transfer))
			want(t, "an early resume", r, 409)
			m := r.json(t)
			req, _ := m["request"].(map[string]any)
			if m["code"] != "UNDECIDED" || m["outcome"] != "AWAITING_APPROVAL" || req == nil || req["state"] != "undecided" ||
				req["progress"] != "0 of 1 approval; waiting for 1 more from approver" || !strings.HasPrefix(m["error"].(string), "no human approval recorded: ") {
				t.Errorf("an early resume = %s; want UNDECIDED with the request's progress", r.body)
			}
			if after := len(strings.Split(e.get("/sagacity/audit/d").body, "\n")); after != before+1 {
				t.Errorf("the journal has %d lines after the gated call and an early resume; want %d (the request's alone)", after, before+1)
			}
			want(t, "approve", e.post("/sagacity/approve/d/3", `{"approver":"manager@company.com"}`), 200)
			r = within(t, "the held call", held)
			want(t, "the held call once approved", r, 202)
			if m := r.json(t); !strings.HasPrefix(m["message"].(string), "[APPROVED] Tool 'sendWireTransfer' was approved by manager@company.com") ||
				r.header.Get("Preference-Applied") != "wait=30" {
				t.Errorf("the held call once approved = %s (Preference-Applied %q); want it approved, and how to resume", r.body, r.header.Get("Preference-Applied"))
			}
			want(t, "resume", e.post("/sagacity/resume/d/3", e.payload(transfer)), 200)

			// A wait that ends before anyone decides.
			want(t, "reserve", e.call("quiet", "reserveInventory", `{"item":"laptop"}`), 200)
			r = e.do("POST", "/sagacity/sagas/quiet/calls", "application/json", wireCall(), "Prefer", "wait=1")
			if want(t, "a wait that ends", r, 202); r.header.Get("Preference-Applied") != "" || r.json(t)["outcome"] != "AWAITING_APPROVAL" {
				t.Errorf("a wait that ends = %s (Preference-Applied %q); want today's 202, without it", r.body, r.header.Get("Preference-Applied"))
			}
			// A held resume, and then a rejection ends a held call.
			held = e.held("/sagacity/resume/quiet/3", e.payload(transfer), "30", 1)
			want(t, "approve", e.post("/sagacity/approve/quiet/3", `{"approver":"manager@company.com"}`), 200)
			if r := within(t, "the held resume", held); r.code != 200 || r.json(t)["outcome"] != "EXECUTED" || r.header.Get("Preference-Applied") != "wait=30" {
				t.Errorf("the held resume once approved = %d %s; want it executed", r.code, r.body)
			}
			want(t, "reserve", e.call("no", "reserveInventory", `{"item":"laptop"}`), 200)
			held = e.held("/sagacity/sagas/no/calls", wireCall(), "30", 1)
			want(t, "reject", e.post("/sagacity/reject/no/3", `{"approver":"manager@company.com","reason":"wrong payee"}`), 200)
			if r := within(t, "the held call", held); r.code != 409 || !strings.Contains(r.json(t)["error"].(string), "rejected") {
				t.Errorf("the held call once rejected = %d %s; want 409 saying it was rejected", r.code, r.body)
			}
			// Resumes have their own budget (4 a minute here): the fifth
			// is refused, decisions are not.
			want(t, "the fourth resume", e.post("/sagacity/resume/no/3", e.payload(transfer)), 404)
			want(t, "the fifth resume", e.post("/sagacity/resume/no/3", e.payload(transfer)), 429)
			want(t, "a decision", e.post("/sagacity/reject/quiet/9", `{"approver":"manager@company.com"}`), 404)
		})
		t.Run("execute on approval", func(t *testing.T) {
			t.Parallel()
			e := newAPI(t, dbURL, envOptions{maxWait: time.Minute, approvals: onApproval})
			want(t, "reserve", e.call("auto", "reserveInventory", `{"item":"laptop"}`), 200)
			held := e.held("/sagacity/sagas/auto/calls", wireCall(), "30", 1)
			want(t, "approve", e.post("/sagacity/approve/auto/3", `{"approver":"manager@company.com"}`), 200)
			r := within(t, "the held call", held)
			if m := r.json(t); r.code != 200 || m["outcome"] != "EXECUTED" || m["result"] == nil || r.header.Get("Preference-Applied") != "wait=30" {
				t.Errorf("the held call under execute: on-approval = %d %s; want the tool's result", r.code, r.body)
			}
			if n := strings.Count(strings.Join(e.tools.paths(), " ")+" ", "/wire "); n != 1 {
				t.Errorf("the wire was called %d times; want once", n)
			}
		})
		t.Run("server stopping", func(t *testing.T) {
			t.Parallel()
			var held <-chan response
			t.Run("serving", func(t *testing.T) {
				e := newAPI(t, dbURL, envOptions{maxWait: time.Hour})
				want(t, "reserve", e.call("stop", "reserveInventory", `{"item":"laptop"}`), 200)
				held = e.held("/sagacity/sagas/stop/calls", wireCall(), "3600", 1)
			}) // the server stops here, as serve stops on SIGTERM: it must not wait an hour for the held call
			if r := within(t, "a call held while the server stops", held); r.code != 202 || r.header.Get("Preference-Applied") != "" {
				t.Errorf("a call held while the server stops = %d %s; want 202, as a wait that ended", r.code, r.body)
			}
		})
		t.Run("capped", func(t *testing.T) {
			t.Parallel()
			e := newAPI(t, dbURL, envOptions{maxWait: time.Second})
			want(t, "reserve", e.call("c", "reserveInventory", `{"item":"laptop"}`), 200)
			ch := make(chan response, 1)
			go func() {
				ch <- e.do("POST", "/sagacity/sagas/c/calls", "application/json", wireCall(), "Prefer", "wait=3600")
			}()
			if r := within(t, "a wait of an hour, capped at a second", ch); r.code != 202 || r.header.Get("Preference-Applied") != "" {
				t.Errorf("a wait over the cap = %d %s; want 202 once the cap ended it", r.code, r.body)
			}
		})
	})
}

// TestHeldBrowserVote: two replicas of one PostgreSQL database; an agent's
// call held on one is answered the tool's result once a reviewer approves
// it in the console of the other (Chromium), under a rule that executes
// on approval: the vote wakes the held call across servers.
func TestHeldBrowserVote(t *testing.T) {
	t.Parallel()
	onApproval, err := engine.CompilePolicy(engine.PolicySpec{Default: engine.DefaultPolicy.Default, Tools: map[string][]engine.RuleSpec{
		"sendWireTransfer": {{Name: "auto", Execute: engine.ExecuteOnApproval}}}})
	if err != nil {
		t.Fatal(err)
	}
	db := testkit.PostgresURL(t)
	console, agents := newAPI(t, db, envOptions{approvals: onApproval}), newAPI(t, db, envOptions{maxWait: time.Minute, approvals: onApproval})
	want(t, "reserve", agents.call("browser", "reserveInventory", `{"item":"laptop"}`), 200)
	held := agents.held("/sagacity/sagas/browser/calls", wireCall(), "60", 1)

	p := newTab(t, console)
	p.signIn("reviewer@example.com")
	p.open("/request?saga=browser&seq=3")
	p.click(`#actions button.approve`)
	p.waitText("#actions", "Approve sendWireTransfer in saga browser, seq 3?", 10*time.Second)
	p.click(`#actions button.approve[autofocus]`)
	r := within(t, "the held call", held)
	if m := r.json(t); r.code != 200 || m["outcome"] != "EXECUTED" || m["result"] == nil || r.header.Get("Preference-Applied") != "wait=60" {
		t.Errorf("the call held on the other server = %d %s; want the tool's result", r.code, r.body)
	}
	if n := strings.Count(strings.Join(agents.tools.paths(), " ")+" "+strings.Join(console.tools.paths(), " ")+" ", "/wire "); n != 1 {
		t.Errorf("the wire ran %d times; want once", n)
	}
	p.noErrors()
}
