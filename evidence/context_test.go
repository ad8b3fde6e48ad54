package evidence

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// contextPolicy picks a rule by who asks and when: outside business hours
// in Paris two approvers, a payment of the requester's own team another
// team's approver, a contractor's a third; otherwise one.
var contextPolicy = PolicySpec{
	Claims:   []string{"department", "employee_type"},
	TimeZone: "Europe/Paris",
	Tools: map[string][]RuleSpec{"wire": {
		{Name: "night", When: `now.getHours(tz) < 8 || now.getHours(tz) >= 19`, Quorum: 2},
		{Name: "own-team", When: `sameGroup(who, payload.team)`, Approvers: []string{"finance"}},
		{Name: "contractor", When: `"contractor" in who.claims.employee_type`, Approvers: []string{"security"}},
		{Name: "treasury", When: `"treasury" in who.claims.department && "finance" in who.groups`},
		{Name: "day"},
	}},
}

// TestContextMatch: the rule follows who asked (groups, claims) and when
// (the policy's time zone), for the same bytes.
func TestContextMatch(t *testing.T) {
	a, err := CompilePolicy(contextPolicy)
	if err != nil {
		t.Fatal(err)
	}
	if !a.UsesContext() {
		t.Fatal("UsesContext() = false for conditions that read who and now")
	}
	paris, _ := time.LoadLocation("Europe/Paris")
	noon := time.Date(2026, 12, 7, 12, 0, 0, 0, paris)
	alice := Who{ID: "oidc#alice", Name: "alice", Groups: []string{"payments"}}
	for _, tt := range []struct {
		name   string
		who    Who
		claims map[string]any
		at     time.Time
		input  string
		want   string
	}{
		{"day", alice, nil, noon, `{"team":"ops"}`, "day"},
		{"7:59 in Paris is 6:59 UTC", alice, nil, time.Date(2026, 12, 7, 6, 59, 0, 0, time.UTC), `{"team":"ops"}`, "night"},
		{"8:00 in Paris", alice, nil, time.Date(2026, 12, 7, 7, 0, 0, 0, time.UTC), `{"team":"ops"}`, "day"},
		{"her own team", alice, nil, noon, `{"team":"payments"}`, "own-team"},
		{"one of her teams", alice, nil, noon, `{"team":["ops","payments"]}`, "own-team"},
		{"a contractor", Who{ID: "oidc#carol"}, map[string]any{"employee_type": "contractor"}, noon, `{"team":"ops"}`, "contractor"},
		{"treasury", Who{ID: "oidc#bob", Groups: []string{"finance"}}, map[string]any{"department": []any{"treasury"}, "employee_type": "staff"}, noon, `{"team":"ops"}`, "treasury"},
		// A claim the policy does not list is not seen; one it lists that
		// the token lacks is empty.
		{"an unlisted claim", Who{ID: "oidc#dan"}, map[string]any{"title": "contractor"}, noon, `{"team":"ops"}`, "day"},
		// One past the bounds is left out: a condition that reads it
		// cannot be evaluated, and refuses the request.
		{"a claim past its bounds", Who{ID: "oidc#erin"}, map[string]any{"employee_type": strings.Repeat("x", MaxClaimLen+1)}, noon, `{"team":"ops"}`, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := a.See(tt.who, tt.claims, tt.at)
			m := a.Match("wire", "s", tt.who.ID, tt.input, &c)
			if got := map[bool]string{true: m.Rule.Name}[m.OK]; got != tt.want {
				t.Errorf("Match(%s, %+v at %s) = %q (failed %q: %s); want %q", tt.input, tt.who, tt.at, got, m.Failed, m.Why, tt.want)
			}
		})
	}
}

// TestContextSee: only the listed claims within bounds are kept; now is
// written in the policy's zone; the line reads back as written.
func TestContextSee(t *testing.T) {
	a, err := CompilePolicy(contextPolicy)
	if err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("x", MaxClaimLen+1)
	many := make([]any, MaxClaimValues+1)
	for i := range many {
		many[i] = "g"
	}
	c := a.See(Who{ID: "oidc#alice"}, map[string]any{"department": []any{"treasury", "audit"}, "employee_type": long, "title": "cfo"},
		time.Date(2026, 12, 7, 6, 59, 0, 0, time.UTC))
	want := `{"who":{"id":"oidc#alice","name":"","roles":[],"groups":[],"claims":{"department":["treasury","audit"]}},"now":"2026-12-07T07:59:00+01:00"}`
	if got := c.String(); got != want {
		t.Errorf("See(...).String() = %s; want %s", got, want)
	}
	back, err := ReadContext(want)
	if err != nil || back.String() != want {
		t.Errorf("ReadContext(%s) = %v, %v; want it read back", want, back, err)
	}
	if c := a.See(Who{ID: "x"}, map[string]any{"department": many}, time.Now()); c.Who.Claims["department"] != nil || c.Who.Claims["employee_type"] == nil {
		t.Errorf("See(a claim of %d values) = %v; want it left out, the other empty", len(many), c.Who.Claims)
	}
	for _, bad := range []string{
		`{"who":{"id":"x","name":"","roles":[],"groups":[],"claims":{}},"now":"2026-12-07T07:59:00+01:00","extra":1}`,
		`{"who":{"id":"x","name":"","roles":[],"groups":[],"claims":{}}, "now":"2026-12-07T07:59:00+01:00"}`,
		`{"who":{"id":"x","name":"","roles":null,"groups":[],"claims":{}},"now":"2026-12-07T07:59:00+01:00"}`,
		`{"who":{"id":"x","name":"","roles":[],"groups":[],"claims":{"d":7}},"now":"2026-12-07T07:59:00+01:00"}`,
		`{"who":{"id":"x","name":"","roles":[],"groups":[],"claims":{"d":null}},"now":"2026-12-07T07:59:00+01:00"}`,
		`{"who":{"id":"x","name":"","roles":[],"groups":[],"claims":{}},"now":"tomorrow"}`,
	} {
		if _, err := ReadContext(bad); err == nil {
			t.Errorf("ReadContext(%s) = nil; want it refused", bad)
		}
	}
}

// TestContextRecorded: a request's rule is re-evaluated from the context
// it journaled; an edited context, none, or one of another requester
// decides nothing.
func TestContextRecorded(t *testing.T) {
	a, err := CompilePolicy(contextPolicy)
	if err != nil {
		t.Fatal(err)
	}
	night := a.See(Who{ID: "agent"}, nil, time.Date(2026, 12, 7, 2, 0, 0, 0, time.UTC))
	gated := func(rule string, c string) Entry {
		ls := Lines{{KeyRequester, "agent"}, {KeyRule, rule}, {KeyPolicy, a.Hash}}.With(KeyContext, c)
		return Entry{Seq: 1, SagaID: "s", ToolName: "wire", Phase: PhaseAwaitingApproval, Input: `{"team":"ops"}`, Payload: ls.String()}
	}
	if r, err := a.Recorded(gated("night", night.String())); err != nil || r.Name != "night" {
		t.Errorf("Recorded(night, at 2:00 UTC) = %v, %v; want rule night", r.Name, err)
	}
	noon := strings.Replace(night.String(), "T03:00:00", "T12:00:00", 1)
	other := strings.Replace(night.String(), `"id":"agent"`, `"id":"mallory"`, 1)
	unlisted := strings.Replace(night.String(), `"employee_type":[]}`, `"employee_type":[],"title":["cfo"]}`, 1)
	for _, tt := range []struct{ name, rule, context, want string }{
		{"now edited to pass for day", "night", noon, `records approval rule "night", but its policy gives its bytes rule "day"`},
		{"the day rule claimed with the noon context", "day", noon, ""},
		{"no context", "night", "", "carries no context, which its policy's conditions read"},
		{"another requester's", "night", other, "carries the context of mallory, not of its requester"},
		{"an unlisted claim", "night", unlisted, `carries claim "title", which its policy does not list`},
		{"not canonical", "night", " " + night.String(), "not written as the server writes it"},
	} {
		_, err := a.Recorded(gated(tt.rule, tt.context))
		if (tt.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tt.want)) {
			t.Errorf("Recorded(%s) = %v; want %q", tt.name, err, tt.want)
		}
	}
}

// TestContextLegacy: a document written before conditions read the
// context keeps its text and hash, reads requester as the string it was,
// and its requests, which journal no context, are decided as they were;
// one that carries a context is refused.
func TestContextLegacy(t *testing.T) {
	const text = `{"tools":{"wire":[{"name":"bot","when":"requester == \"token:bot\" || requester.startsWith(\"token:ci-\")","onError":"refuse","approvers":["approver"],"quorum":2},{"name":"rest","approvers":["approver"],"quorum":1}]}}`
	const hash = "fa64b5e7ee58cd383610cbaede2f862be8c13dd5db4cf9e5a59846797abfb47e"
	a, err := ParsePolicy(text)
	if err != nil {
		t.Fatal(err)
	}
	if a.Text != text || a.Hash != hash || a.UsesContext() {
		t.Errorf("ParsePolicy(an old document) = %s (context %v); want its text, reading no context", a.Text, a.UsesContext())
	}
	b, err := CompilePolicy(PolicySpec{Tools: map[string][]RuleSpec{"wire": {
		{Name: "bot", When: `requester == "token:bot" || requester.startsWith("token:ci-")`, Quorum: 2}, {Name: "rest"}}}})
	if err != nil || b.Text != text || b.Hash != a.Hash {
		t.Errorf("CompilePolicy(the same rules) = %v; want the old text and hash", err)
	}
	for requester, want := range map[string]string{"token:bot": "bot", "token:ci-7": "bot", "oidc#alice": "rest"} {
		e := Entry{Seq: 1, SagaID: "s", ToolName: "wire", Phase: PhaseAwaitingApproval, Input: `{}`,
			Payload: Lines{{KeyRequester, requester}, {KeyRule, want}, {KeyPolicy, a.Hash}}.String()}
		if r, err := a.Recorded(e); err != nil || r.Name != want {
			t.Errorf("Recorded(a request by %s) = %q, %v; want %q", requester, r.Name, err, want)
		}
		e.Payload += "\n" + string(KeyContext) + "=" + a.See(Who{ID: requester}, nil, time.Now()).String()
		if _, err := a.Recorded(e); err == nil || !strings.Contains(err.Error(), "which its policy's conditions do not read") {
			t.Errorf("Recorded(a request by %s with a context) = %v; want it refused", requester, err)
		}
	}
}

// TestContextRefused: bad claims, a time zone that is none, a who field
// that is none are refused at compile time, naming what.
func TestContextRefused(t *testing.T) {
	many := make([]string, MaxClaims+1)
	for i := range many {
		many[i] = string(rune('a' + i))
	}
	for _, tt := range []struct {
		spec PolicySpec
		want string
	}{
		{PolicySpec{Claims: many}, "claims lists 11 claims; at most 10"},
		{PolicySpec{Claims: []string{"a", "a"}}, `claims, claim 2: "a" is listed already`},
		{PolicySpec{Claims: []string{"two words"}}, "claims, claim 1: a claim's name must be printable"},
		{PolicySpec{TimeZone: "Mars/Olympus"}, `timeZone: "Mars/Olympus" is not a time zone`},
		{PolicySpec{TimeZone: "Local"}, `timeZone: "Local" is not a time zone`},
		{PolicySpec{Default: []RuleSpec{{When: `who.team == "x"`}}}, "condition, column"},
		{PolicySpec{Default: []RuleSpec{{When: `sameGroup(requester, "x")`}}}, "found no matching overload for 'sameGroup'"},
		{PolicySpec{Default: []RuleSpec{{When: `now > 5`}}}, "found no matching overload"},
	} {
		if _, err := CompilePolicy(tt.spec); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("CompilePolicy(%+v) = %v; want an error containing %q", tt.spec, err, tt.want)
		}
	}
	if diff := cmp.Diff([]string{"department", "employee_type"}, mustCompile(t, contextPolicy).Claims()); diff != "" {
		t.Errorf("Claims() (-want +got):\n%s", diff)
	}
}

func mustCompile(t *testing.T, spec PolicySpec) *Approvals {
	t.Helper()
	a, err := CompilePolicy(spec)
	if err != nil {
		t.Fatal(err)
	}
	return a
}
