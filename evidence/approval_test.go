package evidence

import (
	"strings"
	"testing"
	"time"
)

// wirePolicy tells large or external transfers from small ones, and
// refuses transfers whose amount it cannot read; tools without rules of
// their own go by the default.
var wirePolicy = PolicySpec{
	Default: []RuleSpec{{Approvers: []string{"approver"}}},
	Tools: map[string][]RuleSpec{
		"sendWireTransfer": {
			{Name: "large", When: `double(payload.amount) >= 10000.0 || payload.to.startsWith("ext-")`},
			{Name: "small", When: `double(payload.amount) < 10000.0`},
		},
	},
}

func TestPolicyMatch(t *testing.T) {
	a, err := CompilePolicy(wirePolicy)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		tool, input string
		want        string // the rule's name; "" for none
		failed      string // the rule whose condition refused it
	}{
		{"sendWireTransfer", `{"amount":"250000","to":"bob"}`, "large", ""},
		{"sendWireTransfer", `{"amount":25000,"to":"bob"}`, "large", ""},
		{"sendWireTransfer", `{"amount":"100","to":"ext-bank"}`, "large", ""},
		{"sendWireTransfer", `{"amount":"100","to":"bob"}`, "small", ""},
		{"sendWireTransfer", `{"amount":"9999.99","to":"bob"}`, "small", ""},
		// No amount, or one that is no number: "large" cannot be
		// evaluated, which refuses the request.
		{"sendWireTransfer", `{"to":"bob"}`, "", "large"},
		{"sendWireTransfer", `{"amount":"lots","to":"bob"}`, "", "large"},
		// Not a JSON object: no condition can be evaluated.
		{"sendWireTransfer", `"250000 to bob"`, "", "large"},
		{"sendWireTransfer", `[1,2]`, "", "large"},
		{"sendWireTransfer", `not json`, "", "large"},
		{"deleteAccount", `not json`, "default#1", ""},
		{"deleteAccount", `{"id":1}`, "default#1", ""},
	} {
		m := a.Match(tt.tool, "s", "agent", tt.input, nil)
		if got := map[bool]string{true: m.Rule.Name}[m.OK]; got != tt.want || m.Failed != tt.failed || (m.Failed != "") != (m.Why != "") {
			t.Errorf("Match(%s, %s) = %q, failed %q (%s); want %q, failed %q", tt.tool, tt.input, got, m.Failed, m.Why, tt.want, tt.failed)
		}
	}
	if m := a.Match("deleteAccount", "s", "agent", `{}`, nil); m.Rule.Approvers[0] != "approver" {
		t.Errorf("default = %+v; want one approver", m.Rule)
	}
}

// A condition that cannot be evaluated does not let the requester pick
// a laxer rule: a payload padded past the condition's cost (the issue's:
// 19,999 small items and one of 50000, whose one that counts is never
// reached within the bound), or a string where the condition compares a
// number, is refused at the gate, naming the rule and why; the same rule
// with onError: skip tries the next.
func TestPolicyFailsClosed(t *testing.T) {
	rules := func(onError string) *Approvals {
		a, err := CompilePolicy(PolicySpec{Tools: map[string][]RuleSpec{"wire": {
			{Name: "large", When: `payload.items.exists(i, i.amount >= 10000 || i.tags.exists(t, t == "large"))`, Quorum: 2, OnError: onError},
			{Name: "small"},
		}}})
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	strict, lax := rules(""), rules(OnErrorSkip)
	tagged := `{"amount":1,"tags":[` + strings.Repeat(`"a",`, 99) + `"b"]},`
	for _, tt := range []struct {
		name, input string
		refuse      string // the rule and the start of why; "" when a rule applies
		skip        string // the rule that applies under onError: skip; "" not to evaluate it again
	}{
		{"the issue's padding", `{"items":[` + strings.Repeat(`{"amount":1,"tags":[]},`, 19999) + `{"amount":50000,"tags":[]}]}`,
			"large: operation cancelled: actual cost limit exceeded", ""},
		{"padded with tags", `{"items":[` + strings.Repeat(tagged, 200) + `{"amount":50000,"tags":[]}]}`,
			"large: operation cancelled: actual cost limit exceeded", "small"},
		{"a string where a number is compared", `{"items":[{"amount":"50000","tags":[]}]}`, "large: no such overload", "small"},
		{"no items", `{"to":"bob"}`, "large: no such key: items", "small"},
		{"not a JSON object", `[{"amount":50000}]`, "large: the input is not a JSON object", "small"},
		{"one large item", `{"items":[{"amount":1,"tags":[]},{"amount":50000,"tags":[]}]}`, "", "large"},
		{"small items", `{"items":[{"amount":1,"tags":["b"]},{"amount":2,"tags":[]}]}`, "", "small"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m := strict.Match("wire", "s", "agent", tt.input, nil)
			switch got := m.Failed + ": " + m.Why; {
			case tt.refuse == "" && (!m.OK || m.Rule.Name != tt.skip):
				t.Errorf("Match = %+v; want rule %s", m, tt.skip)
			case tt.refuse != "" && (m.OK || !strings.HasPrefix(got, tt.refuse)):
				t.Errorf("Match = rule %q (ok %v), refused by %q; want refused by %q", m.Rule.Name, m.OK, got, tt.refuse)
			case tt.refuse != "" && m.Refusal().String() != RefusedCondition+"\nrule=large\nerror="+m.Why:
				t.Errorf("the gate's refusal = %q; want the detail, the rule and the error", m.Refusal().String())
			}
			if tt.skip == "" {
				return
			}
			if m := lax.Match("wire", "s", "agent", tt.input, nil); !m.OK || m.Rule.Name != tt.skip {
				t.Errorf("Match under onError: skip = %+v; want rule %s", m, tt.skip)
			}
		})
	}
}

// Every rule with a condition says onError in the canonical document; a
// document from before rules did still parses, and its conditions skip
// as they did when requests were pinned to it, so those requests are
// decided, and verify, as they were made.
func TestPolicyOnError(t *testing.T) {
	a, err := CompilePolicy(PolicySpec{Default: []RuleSpec{{Name: "big", When: "payload.amount > 5"}, {Name: "skips", When: "payload.n > 1", OnError: OnErrorSkip}, {Name: "rest"}}})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"default":[{"name":"big","when":"payload.amount > 5","onError":"refuse","approvers":["approver"],"quorum":1},` +
		`{"name":"skips","when":"payload.n > 1","onError":"skip","approvers":["approver"],"quorum":1},{"name":"rest","approvers":["approver"],"quorum":1}]}`
	if a.Text != want {
		t.Errorf("canonical document = %s\nwant %s", a.Text, want)
	}
	if b, err := ParsePolicy(a.Text); err != nil || b.Hash != a.Hash || b.Match("x", "s", "agent", `{}`, nil).Failed != "big" {
		t.Errorf("ParsePolicy(its own document) = %v; want the same policy, refusing what big cannot evaluate", err)
	}
	old := `{"default":[{"name":"big","when":"payload.amount > 5","approvers":["approver"],"quorum":1},{"name":"rest","approvers":["approver"],"quorum":1}]}`
	b, err := ParsePolicy(old)
	if err != nil {
		t.Fatalf("ParsePolicy(a document from before onError) = %v", err)
	}
	if b.Text != old {
		t.Errorf("the old document's text = %s; want it kept", b.Text)
	}
	if m := b.Match("x", "s", "agent", `{}`, nil); !m.OK || m.Rule.Name != "rest" {
		t.Errorf("Match under the old document = %+v; want rest, as it was then", m)
	}
	for _, tt := range []struct {
		spec PolicySpec
		want string
	}{
		{PolicySpec{Default: []RuleSpec{{OnError: OnErrorSkip}}}, "default, rule 1 (default#1): onError applies to a rule with a condition"},
		{PolicySpec{Default: []RuleSpec{{When: "true", OnError: "ignore"}}}, `onError must be "refuse" or "skip" (got "ignore")`},
	} {
		if _, err := CompilePolicy(tt.spec); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("CompilePolicy(%+v) = %v; want an error containing %q", tt.spec, err, tt.want)
		}
	}
}

// The condition sees the tool, the saga and the requester too.
func TestPolicyVariables(t *testing.T) {
	a, err := CompilePolicy(PolicySpec{Default: []RuleSpec{
		{Name: "prod", When: `saga.startsWith("prod-") && requester != "token:ci" && tool == "drop"`},
		{Name: "rest"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	for saga, want := range map[string]string{"prod-1": "prod", "test-1": "rest"} {
		if m := a.Match("drop", saga, "oidc#alice", `{}`, nil); !m.OK || m.Rule.Name != want {
			t.Errorf("saga %s: rule %q; want %q", saga, m.Rule.Name, want)
		}
	}
	if m := a.Match("drop", "prod-1", "token:ci", `{}`, nil); m.Rule.Name != "rest" {
		t.Errorf("requester token:ci: rule %q; want rest", m.Rule.Name)
	}
}

// A policy that does not compile is refused, naming the tool, the rule
// and the column.
func TestPolicyRefused(t *testing.T) {
	for _, tt := range []struct {
		spec PolicySpec
		want string
	}{
		{PolicySpec{Tools: map[string][]RuleSpec{"wire": {{When: `payload.amount >`}}}}, "tool wire, rule 1 (wire#1): condition, column"},
		{PolicySpec{Tools: map[string][]RuleSpec{"wire": {{}, {Name: "x", When: `amount > 5`}}}}, "tool wire, rule 2 (x): condition, column 1: undeclared reference to 'amount'"},
		{PolicySpec{Default: []RuleSpec{{When: `payload.amount`}}}, "default, rule 1 (default#1): condition is a dyn, not a boolean"},
		{PolicySpec{Default: []RuleSpec{{When: `"yes"`}}}, "condition is a string, not a boolean"},
		{PolicySpec{Default: []RuleSpec{{Quorum: -1}}}, "quorum must be from 1 to 50"},
		{PolicySpec{Default: []RuleSpec{{Quorum: 51}}}, "quorum must be from 1 to 50"},
		{PolicySpec{Default: []RuleSpec{{Expires: Duration(30 * time.Second)}}}, "expires must be from 1m0s to 8784h0m0s (got 30s)"},
		{PolicySpec{Default: []RuleSpec{{Grant: Duration(-time.Hour)}}}, "grant must be from 1m0s"},
		{PolicySpec{Default: []RuleSpec{{StepUp: Duration(13 * time.Hour)}}}, "stepUp must be from 1m0s to 12h0m0s (got 13h0m0s)"},
		{PolicySpec{Default: []RuleSpec{{NotBefore: Duration(30 * time.Second)}}}, "notBefore must be from 1m0s to 8784h0m0s (got 30s)"},
		{PolicySpec{Default: []RuleSpec{{NotBefore: Duration(time.Hour), Grant: Duration(time.Hour)}}},
			"default, rule 1 (default#1): notBefore (1h0m0s) must be shorter than grant (1h0m0s): the request could never be executed"},
		{PolicySpec{Default: []RuleSpec{{Reason: "optional"}}}, `reason must be "required" or absent (got "optional")`},
		{PolicySpec{Default: []RuleSpec{{Approvers: []string{"finance\nleads"}}}}, "approvers contains control characters"},
		{PolicySpec{Default: []RuleSpec{{Name: "a"}, {Name: "a"}}}, "another rule of default has that name"},
		{PolicySpec{Default: []RuleSpec{{Name: "two words"}}}, "a rule's name must be printable, without spaces"},
	} {
		_, err := CompilePolicy(tt.spec)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("CompilePolicy(%+v) = %v; want an error containing %q", tt.spec, err, tt.want)
		}
	}
}

// Windows of seconds compile for dev mode alone (down to MinDevWindow),
// to the text and hash the same rules always had; a document holding
// them is read back (ParsePolicy, as offline verification reads it), and
// RequireMinWindow names the window a server outside dev mode refuses.
func TestPolicyDevWindows(t *testing.T) {
	spec := PolicySpec{Tools: map[string][]RuleSpec{"wire": {{Name: "quick", Expires: Duration(2 * time.Second), Grant: Duration(time.Second),
		Escalate: []StepSpec{{After: Duration(time.Second), Notify: []string{"ops"}}}}}}}
	if _, err := CompilePolicy(spec); err == nil || !strings.Contains(err.Error(), "tool wire, rule 1 (quick): expires must be from 1m0s to 8784h0m0s (got 2s)") {
		t.Errorf("CompilePolicy(expires 2s) = %v; want it refused, naming the bound", err)
	}
	a, err := CompileDevPolicy(spec)
	if err != nil {
		t.Fatalf("CompileDevPolicy(expires 2s) = %v", err)
	}
	if r := a.Rules("wire")[0]; r.Expires != 2*time.Second || r.Grant != time.Second || r.Escalate[0].After != time.Second {
		t.Errorf("CompileDevPolicy's rule = %+v; want its windows of seconds", r)
	}
	if b, err := ParsePolicy(a.Text); err != nil || b.Hash != a.Hash {
		t.Errorf("ParsePolicy(a dev-mode document) = %v; want it read back", err)
	}
	if err := RequireMinWindow(a); err == nil || !strings.Contains(err.Error(), "tool wire, rule 1 (quick): expires must be from 1m0s") {
		t.Errorf("RequireMinWindow(expires 2s) = %v; want it refused, naming the rule", err)
	}
	long, err := CompileDevPolicy(DefaultPolicy)
	if want, _ := CompilePolicy(DefaultPolicy); err != nil || long.Text != want.Text || RequireMinWindow(long) != nil {
		t.Errorf("CompileDevPolicy(DefaultPolicy) = %v, %v; want CompilePolicy's document, with no window to refuse", long, err)
	}
	for _, tt := range []struct {
		spec PolicySpec
		want string
	}{
		{PolicySpec{Default: []RuleSpec{{Expires: Duration(500 * time.Millisecond)}}}, "expires must be from 1s to 8784h0m0s (got 500ms)"},
		{PolicySpec{Default: []RuleSpec{{StepUp: Duration(time.Millisecond)}}}, "stepUp must be from 1s"},
		{PolicySpec{Default: []RuleSpec{{Escalate: []StepSpec{{After: Duration(999 * time.Millisecond), Notify: []string{"ops"}}}}}},
			"escalate step 1: after must be from 1s"},
	} {
		if _, err := CompileDevPolicy(tt.spec); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("CompileDevPolicy(%+v) = %v; want an error containing %q", tt.spec, err, tt.want)
		}
	}
}

// The hash is of the canonical document: the same rules give the same
// hash however they are written, any change another.
func TestPolicyHash(t *testing.T) {
	a, _ := CompilePolicy(PolicySpec{Default: []RuleSpec{{}}})
	b, _ := CompilePolicy(PolicySpec{Default: []RuleSpec{{Name: "default#1", Approvers: []string{"approver"}, Quorum: 1}}})
	c, _ := CompilePolicy(PolicySpec{Default: []RuleSpec{{When: "true"}}})
	if a.Hash != b.Hash || a.Text != b.Text {
		t.Errorf("the same rules hash %s and %s (%s, %s)", a.Hash, b.Hash, a.Text, b.Text)
	}
	if a.Hash == c.Hash {
		t.Errorf("a rule with a condition and one without hash the same")
	}
	if d, _ := CompilePolicy(DefaultPolicy); d.Text != `{"default":[{"name":"default","approvers":["approver"],"quorum":1}]}` {
		t.Errorf("the default policy's text = %s", d.Text)
	}
}

// A rule's approvers are roles or groups; holding either is enough.
func TestRuleEligible(t *testing.T) {
	r := Rule{Name: "large", Approvers: []string{"finance-leads", "auditor"}}
	for _, tt := range []struct {
		roles  []Role
		groups []string
		want   bool
	}{
		{[]Role{RoleApprover}, []string{"finance-leads"}, true},
		{[]Role{RoleApprover, RoleAuditor}, nil, true},
		{[]Role{RoleApprover}, []string{"finance"}, false},
		{[]Role{RoleApprover}, []string{"Finance-Leads"}, false},
	} {
		if got := r.Eligible(tt.roles, tt.groups); got != tt.want {
			t.Errorf("Eligible(%v, %v) = %v; want %v", tt.roles, tt.groups, got, tt.want)
		}
	}
}

// A wait timer: the request may run from its quorum plus notBefore, and
// not before; the progress says from when; under a rule that executes
// on approval the server is due then, otherwise at the grant's end.
func TestTallyWait(t *testing.T) {
	asked := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	gated := Entry{Seq: 1, Timestamp: asked}
	second := asked.Add(10 * time.Minute)
	votes := &Life{Votes: []Vote{{Seq: 2, Voter: "alice", At: asked.Add(time.Minute)}, {Seq: 3, Voter: "bob", At: second}}}
	wait := Rule{Name: "large", Quorum: 2, NotBefore: time.Hour, Grant: 2 * time.Hour}
	for _, tt := range []struct {
		name         string
		rule         Rule
		life         *Life
		runsFrom     time.Time
		due          time.Time
		earlyAt      time.Time // Early there
		progressHas  string
		progressNone bool // the progress names no wait
	}{
		{"short of the quorum", wait, &Life{Votes: votes.Votes[:1]}, time.Time{}, time.Time{}, time.Time{}, "", true},
		{"approved", wait, votes, second.Add(time.Hour), second.Add(2 * time.Hour), second.Add(time.Hour - time.Second),
			"2 of 2 approvals (alice, bob); approved; may run from 2026-12-01 10:10:00 UTC", false},
		{"approved, on approval", Rule{Name: "auto", Quorum: 2, NotBefore: time.Hour, Grant: 2 * time.Hour, OnApproval: true}, votes,
			second.Add(time.Hour), second.Add(time.Hour), second, "may run from 2026-12-01 10:10:00 UTC", false},
		{"no wait", Rule{Name: "plain", Quorum: 2}, votes, time.Time{}, time.Time{}, time.Time{}, "", true},
	} {
		got := Count(gated, tt.life, tt.rule)
		if !got.RunsFrom.Equal(tt.runsFrom) || !got.Due().Equal(tt.due) {
			t.Errorf("Count(%s).RunsFrom, Due() = %v, %v; want %v, %v", tt.name, got.RunsFrom, got.Due(), tt.runsFrom, tt.due)
		}
		if !tt.earlyAt.IsZero() && (!got.Early(tt.earlyAt) || got.Early(tt.runsFrom)) {
			t.Errorf("Count(%s).Early(%v), Early(%v) = %v, %v; want true, false", tt.name, tt.earlyAt, tt.runsFrom, got.Early(tt.earlyAt), got.Early(tt.runsFrom))
		}
		if tt.earlyAt.IsZero() && got.Early(asked) {
			t.Errorf("Count(%s).Early(%v) = true; want false", tt.name, asked)
		}
		if p := got.Progress(); (tt.progressNone && strings.Contains(p, "may run")) || !strings.Contains(p, tt.progressHas) {
			t.Errorf("Count(%s).Progress() = %q; want it to say %q", tt.name, p, tt.progressHas)
		}
	}
}
