package app_test

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sagacity-go/sagacity/evidence"
	"github.com/sagacity-go/sagacity/internal/engine"
)

// TestWaitTimer: under a rule with notBefore, an approved request may
// not run until that long after its quorum. Over HTTP a resume before
// then answers 409 NOT_YET, with the request approved, when it may run
// (runsFrom, and in its progress) and that nothing changed, and the
// journal gains nothing; the listing and the console's request page say
// when it may run, and the policy page shows the rule's wait; a call held
// under the default rule answers it approved, saying from when; once the
// wait ends the resume runs. Under a rule that executes on approval, a
// held resume goes on waiting past the last vote, and answers the tool's
// result once the server executed it when the wait ended.
func TestWaitTimer(t *testing.T) {
	t.Parallel()
	stores(t, func(t *testing.T, dbURL string) {
		var mu sync.Mutex
		now := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
		clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
		later := func(d time.Duration) { mu.Lock(); defer mu.Unlock(); now = now.Add(d) }
		policy, err := engine.CompilePolicy(engine.PolicySpec{Default: engine.DefaultPolicy.Default, Tools: map[string][]engine.RuleSpec{
			"sendWireTransfer": {
				{Name: "auto", When: `saga == "auto"`, NotBefore: engine.Duration(time.Hour), Execute: engine.ExecuteOnApproval},
				{Name: "cooling", NotBefore: engine.Duration(time.Hour), Grant: engine.Duration(2 * time.Hour)},
			}}})
		if err != nil {
			t.Fatal(err)
		}
		e := newAPI(t, dbURL, envOptions{maxWait: time.Minute, approvals: policy, clock: clock, now: clock})
		runsFrom := evidence.Moment(now.Add(time.Hour))
		stamp := now.Add(time.Hour).Format(time.RFC3339)

		want(t, "reserve", e.call("cool", "reserveInventory", `{"item":"laptop"}`), 200)
		held := e.held("/sagacity/sagas/cool/calls", wireCall(), "30", 1)
		want(t, "approve", e.post("/sagacity/approve/cool/3", `{"approver":"manager@company.com"}`), 200)
		r := within(t, "the held call", held)
		want(t, "the held call once approved", r, 202)
		if m := r.json(t); !strings.HasPrefix(m["message"].(string), "[APPROVED] Tool 'sendWireTransfer' was approved by manager@company.com: execute it from "+runsFrom) {
			t.Errorf("the held call once approved = %s; want it approved, saying it may run from %s", r.body, runsFrom)
		}
		before := e.get("/sagacity/audit/cool").body
		r = e.post("/sagacity/resume/cool/3", e.payload(transfer))
		want(t, "a resume before the wait ended", r, 409)
		m := r.json(t)
		req, _ := m["request"].(map[string]any)
		if m["code"] != "NOT_YET" || m["outcome"] != "AWAITING_APPROVAL" || req == nil || req["state"] != "approved" || req["runsFrom"] != stamp ||
			!strings.Contains(req["progress"].(string), "approved; may run from "+runsFrom) ||
			!strings.HasPrefix(m["error"].(string), engine.RefusedWait+": ") || !strings.Contains(m["error"].(string), "in 1h0m0s") ||
			!strings.Contains(m["error"].(string), "nothing was run or changed") {
			t.Errorf("a resume before the wait ended = %s; want NOT_YET, approved, runsFrom %s, the time left, nothing changed", r.body, stamp)
		}
		if after := e.get("/sagacity/audit/cool").body; after != before {
			t.Errorf("the journal after a resume before the wait ended:\n%s\nwant it as it was:\n%s", after, before)
		}
		if l := e.get("/sagacity/approvals/cool"); !strings.Contains(l.body, `"runsFrom":"`+stamp+`"`) ||
			!strings.Contains(l.body, `"executeBy":"`+now.Add(2*time.Hour).Format(time.RFC3339)+`"`) {
			t.Errorf("GET /sagacity/approvals/cool = %s; want runsFrom %s and the grant's end", l.body, stamp)
		}
		c := e.session(t, "alice@example.com")
		if page := e.do("GET", "/request?saga=cool&seq=3", "", "", "Cookie", c.String()).body; !strings.Contains(page,
			"Approved by manager@company.com; may run in 1h00m ("+runsFrom+")") {
			t.Errorf("the request page before the wait ended = %s; want it approved, saying from when it may run", page)
		}
		if page := e.do("GET", "/policy", "", "", "Cookie", c.String()).body; !strings.Contains(page,
			"runs no sooner than 1h0m0s after its quorum; executable for 2h0m0s once approved") {
			t.Errorf("the policy page = %s; want rule cooling's wait timer and grant", page)
		}
		later(time.Hour)
		if r := e.post("/sagacity/resume/cool/3", e.payload(transfer)); r.code != 200 || r.json(t)["outcome"] != "EXECUTED" {
			t.Errorf("the resume once the wait ended = %d %s; want it executed", r.code, r.body)
		}

		// Executed on approval: the held resume waits past the vote.
		want(t, "reserve", e.call("auto", "reserveInventory", `{"item":"laptop"}`), 200)
		want(t, "the gated call", e.call("auto", "sendWireTransfer", transfer), 202)
		held = e.held("/sagacity/resume/auto/3", e.payload(transfer), "30", 1)
		want(t, "approve", e.post("/sagacity/approve/auto/3", `{"approver":"manager@company.com"}`), 200)
		if n := e.eng.Held(); n != 1 {
			t.Errorf("after the vote completing the quorum the server holds %d calls; want the resume still held", n)
		}
		later(time.Hour)
		if n, err := e.eng.Lapse(t.Context()); err != nil || n != 1 {
			t.Errorf("Lapse once the wait ended = %d, %v; want it executed", n, err)
		}
		if r := within(t, "the held resume", held); r.code != 200 || r.json(t)["outcome"] != "EXECUTED" || r.header.Get("Preference-Applied") != "wait=30" {
			t.Errorf("the held resume under execute: on-approval = %d %s; want the tool's result", r.code, r.body)
		}
		if n := strings.Count(strings.Join(e.tools.paths(), " ")+" ", "/wire "); n != 2 {
			t.Errorf("the wire was called %d times; want twice (once a saga)", n)
		}
	})
}
