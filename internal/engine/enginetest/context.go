package enginetest

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/sagacity-go/sagacity/internal/engine"
)

// contextPolicy picks a transfer's rule by who asks and when, in Paris:
// two approvers outside business hours; finance's approver for a payment
// of the requester's own team; any approver for a treasury requester's;
// otherwise two.
var contextPolicy = engine.PolicySpec{Claims: []string{"department"}, TimeZone: "Europe/Paris",
	Tools: map[string][]engine.RuleSpec{"sendWireTransfer": {
		{Name: "night", When: `now.getHours(tz) < 8 || now.getHours(tz) >= 19`, Quorum: 2},
		{Name: "own-team", When: `sameGroup(who, payload.team)`, Approvers: []string{"finance"}},
		{Name: "treasury", When: `"treasury" in who.claims.department`},
		{Name: "rest", Quorum: 2},
	}}}

// testContext: the same bytes pick different rules for requesters of
// different groups and claims, and at different times; each request
// journals what its conditions saw, is decided by the rule it recorded,
// and verifies; a policy whose conditions read no context journals none.
func testContext(t *testing.T, v *env) {
	ctx := context.Background()
	clock := &fakeClock{now: time.Date(2026, 12, 1, 11, 0, 0, 0, time.UTC)} // noon in Paris
	a := v.usePolicy(contextPolicy, engine.WithClock(clock.Now))
	const payment = `{"amount":"100","to":"alice","team":"payments"}`
	payments := engine.Principal{ID: "agent-payments", Auth: engine.AuthToken, Roles: []engine.Role{engine.RoleAgent}, Groups: []string{"payments"}}
	treasurer := engine.Principal{ID: "oidc#treasury-bot", Auth: engine.AuthOIDC, Roles: []engine.Role{engine.RoleAgent},
		Groups: []string{"ops"}, Claims: map[string]any{"department": []any{"treasury"}, "title": "ignored"}}
	ask := func(saga string, p engine.Principal) engine.Review {
		t.Helper()
		r, err := v.e.Call(ctx, p, saga, "sendWireTransfer", payment)
		if err != nil || r.Outcome != engine.OutcomeAwaitingApproval {
			t.Fatalf("%s's call in %s = %+v, %v; want it gated", p.ID, saga, r, err)
		}
		return v.review(saga, r.Seq)
	}
	seqs := map[string]int64{}
	for _, tt := range []struct {
		saga    string
		p       engine.Principal
		advance time.Duration
		rule    string
		who     string // the context's who, as journaled
		at      string // its now, in Paris (the clock moves 1ms a reading)
	}{
		{"own-team", payments, 0, "own-team",
			`{"id":"agent-payments","name":"","roles":["agent"],"groups":["payments"],"claims":{"department":[]}}`, "12:00"},
		{"treasury", treasurer, 0, "treasury",
			`{"id":"oidc#treasury-bot","name":"","roles":["agent"],"groups":["ops"],"claims":{"department":["treasury"]}}`, "12:00"},
		{"other", agent, 0, "rest",
			`{"id":"agent-1","name":"","roles":["agent"],"groups":[],"claims":{"department":[]}}`, "12:00"},
		// 19:30 in Paris: the same requesters, the same bytes, the night
		// rule.
		{"own-team-late", payments, 7*time.Hour + 30*time.Minute, "night",
			`{"id":"agent-payments","name":"","roles":["agent"],"groups":["payments"],"claims":{"department":[]}}`, "19:30"},
		{"treasury-late", treasurer, 0, "night",
			`{"id":"oidc#treasury-bot","name":"","roles":["agent"],"groups":["ops"],"claims":{"department":["treasury"]}}`, "19:30"},
	} {
		clock.Add(tt.advance)
		rv := ask(tt.saga, tt.p)
		seqs[tt.saga] = rv.Gated.Seq
		if rv.Rule == nil || rv.Rule.Name != tt.rule {
			t.Errorf("%s's request in %s is under %v (%s); want rule %s", tt.p.ID, tt.saga, rv.Rule, rv.RuleProblem, tt.rule)
		}
		if got := rv.Gated.Field(engine.KeyContext); !strings.HasPrefix(got, `{"who":`+tt.who+`,"now":"2026-12-01T`+tt.at+":00.") ||
			!strings.HasSuffix(got, `+01:00"}`) {
			t.Errorf("%s's request journals context\n %s\nwant who\n %s\nat %s in Paris", tt.saga, got, tt.who, tt.at)
		}
		if got := v.verify(tt.saga); !got.Valid {
			t.Errorf("Verify(%s) = %+v; want valid", tt.saga, got)
		}
	}
	// Decided by the rule it recorded, whatever the clock says now: the
	// own-team request still wants finance's approver, at night too.
	seq := seqs["own-team"]
	if _, err := v.e.Approve(ctx, approver, "own-team", seq, ""); !engine.IsKind(err, engine.Forbidden) {
		t.Errorf("an approver outside finance on the own-team request: %v; want Forbidden", err)
	}
	finance := engine.Principal{ID: "fin@company.com", Auth: engine.AuthOIDC, Roles: []engine.Role{engine.RoleApprover}, Groups: []string{"finance"}}
	if d, err := v.e.Approve(ctx, finance, "own-team", seq, ""); err != nil || d.Votes != 1 || d.Quorum != 1 {
		t.Errorf("finance's approval of the own-team request = %+v, %v; want the quorum of 1 met", d, err)
	}
	if r, err := v.e.Resume(ctx, payments, "own-team", seq, payment); err != nil || r.Refused || r.Result != "transfer-ok" {
		t.Errorf("the own-team request's resume = %+v, %v; want it executed", r, err)
	}
	if got := v.verify("own-team"); !got.Valid {
		t.Errorf("Verify(own-team) after its execution = %+v; want valid", got)
	}
	if !a.UsesContext() {
		t.Error("the policy reads no context")
	}

	// A policy whose conditions read none journals none.
	v.usePolicy(engine.PolicySpec{Default: []engine.RuleSpec{{Name: "by-requester", When: `requester.startsWith("agent-")`}}})
	if got := ask("plain", agent).Gated; got.Field(engine.KeyContext) != "" || got.Field(engine.KeyRule) != "by-requester" {
		t.Errorf("a request under a policy without context: %q; want rule by-requester, no context", got.Payload)
	}
}
