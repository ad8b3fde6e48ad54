package evidence

import (
	"slices"
	"strings"
	"testing"
)

// TestThresholdsCompile: thresholds compile into a rule whose approvers
// are its groups, canonically; a rule with a plain quorum keeps the
// document it always had; and what cannot be met or read is refused,
// naming the alternative and the requirement.
func TestThresholdsCompile(t *testing.T) {
	both := []Requirement{{From: "finance", Count: 1}, {From: "security", Count: 1}}
	a, err := CompilePolicy(PolicySpec{Default: []RuleSpec{{Name: "both", Thresholds: [][]Requirement{both}},
		{Name: "either", Thresholds: [][]Requirement{{{Count: 2}}, {{From: "treasury", Count: 1}}}}}})
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"default":[{"name":"both","approvers":["finance","security"],"thresholds":[[{"from":"finance","count":1},` +
		`{"from":"security","count":1}]]},{"name":"either","approvers":["approver","treasury"],"thresholds":[[{"count":2}],` +
		`[{"from":"treasury","count":1}]]}]}`
	if a.Text != want {
		t.Errorf("canonical document:\n%s\nwant\n%s", a.Text, want)
	}
	if r := a.Rules("x"); r[0].Quorum != 2 || r[1].Quorum != 1 {
		t.Errorf("quorums = %d, %d; want the fewest approvals that meet each: 2, 1", r[0].Quorum, r[1].Quorum)
	}
	if p, err := ParsePolicy(a.Text); err != nil || p.Hash != a.Hash {
		t.Errorf("ParsePolicy(canonical) = %v; want the same policy", err)
	}
	plain, err := CompilePolicy(PolicySpec{Default: []RuleSpec{{Name: "two", Quorum: 2}}})
	if err != nil || plain.Text != `{"default":[{"name":"two","approvers":["approver"],"quorum":2}]}` {
		t.Errorf("a plain quorum's document = %s, %v; want it as it always was", plain.Text, err)
	}
	for _, tt := range []struct {
		rule RuleSpec
		want string
	}{
		{RuleSpec{Quorum: 2, Thresholds: [][]Requirement{both}}, "a quorum or thresholds, not both"},
		{RuleSpec{Thresholds: [][]Requirement{{}}}, "quorum: an alternative has from 1 to 10 requirements (got 0)"},
		{RuleSpec{Thresholds: [][]Requirement{both, {{From: "x", Count: 0}}}}, "quorum, alternative 2, requirement 1: count must be from 1 to 50"},
		{RuleSpec{Thresholds: [][]Requirement{{{From: "x", Count: 1}, {From: "x", Count: 2}}}}, `requirement 2: another requirement of the alternative is from "x" already`},
		{RuleSpec{Thresholds: [][]Requirement{{{From: "x", Count: 30}, {From: "y", Count: 21}}}}, "quorum: asks for 51 approvals; at most 50"},
		{RuleSpec{Approvers: []string{"finance"}, Thresholds: [][]Requirement{both}}, "requirement 2: security is none of the rule's approvers (finance)"},
		{RuleSpec{Thresholds: make([][]Requirement, 11)}, "quorum has 11 alternatives; at most 10"},
	} {
		_, err := CompilePolicy(PolicySpec{Default: []RuleSpec{tt.rule}})
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("CompilePolicy(%+v) = %v; want %q", tt.rule, err, tt.want)
		}
	}
}

// TestThresholdsTally: one person meets one requirement of an
// alternative, placed in the first still short they may meet; the rule
// is met when every requirement of one alternative is.
func TestThresholdsTally(t *testing.T) {
	a, err := CompilePolicy(PolicySpec{Default: []RuleSpec{{Name: "r", Thresholds: [][]Requirement{
		{{From: "finance", Count: 1}, {From: "security", Count: 1}}, {{From: "treasury", Count: 1}}}}}})
	if err != nil {
		t.Fatal(err)
	}
	r := a.Rules("x")[0]
	both, fin, tre := []string{"finance", "security"}, []string{"finance"}, []string{"treasury"}
	var tl Tally
	vote := func(who string, groups []string) bool {
		tl = Tally{Rule: r, Votes: tl.Votes}
		m, ok := tl.Place(nil, groups)
		if ok {
			tl.Votes = append(tl.Votes, Vote{Voter: who, Meets: m})
		}
		return ok
	}
	if !vote("alice", both) || tl.Met() || MeetsText(tl.Votes[0].Meets) != "1 -" {
		t.Fatalf("alice, in finance and security: %+v; want her in finance alone, not met", tl.Votes)
	}
	if vote("erin", fin) {
		t.Errorf("erin, in finance, met already: placed %v; want refused", tl.Votes[1].Meets)
	}
	if q := tl.Quorum(); q != 2 {
		t.Errorf("Quorum() = %d after one; want 2 (the second alternative asks as many)", q)
	}
	if got := tl.StillShort(); !slices.Equal(got, []string{"security", "treasury"}) {
		t.Errorf("StillShort() after alice = %q; want security and treasury, finance being met", got)
	}
	if !vote("carol", tre) || !tl.Met() || MeetsText(tl.Votes[1].Meets) != "- 1" {
		t.Errorf("carol, in treasury: %+v, met %v; want the second alternative met", tl.Votes, tl.Met())
	}
	if got := tl.Progress(); got != "2 approvals (alice, carol): finance 1 of 1 (alice), security 0 of 1; or treasury 1 of 1 (carol)" {
		t.Errorf("Progress() = %q", got)
	}
	// Who could meet it between them: alice alone cannot (one
	// requirement each); with erin she can, erin taking finance and
	// alice security, whatever order they are given in.
	el := func(groups ...[]string) []Eligibility {
		var out []Eligibility
		for _, g := range groups {
			out = append(out, Eligibility{Groups: g})
		}
		return out
	}
	for _, tt := range []struct {
		people []Eligibility
		want   bool
	}{{el(both), false}, {el(both, fin), true}, {el(fin, both), true}, {el(fin, fin), false}, {el(tre), true}, {nil, false}} {
		if got := r.Meetable(tt.people); got != tt.want {
			t.Errorf("Meetable(%v) = %v; want %v", tt.people, got, tt.want)
		}
	}
	for _, s := range []string{"", "x", "0", "11", "01", "1  2", "- -1"} {
		if m, err := ParseMeets(s); (s == "") != (err == nil) || (s == "" && m != nil) {
			t.Errorf("ParseMeets(%q) = %v, %v", s, m, err)
		}
	}
}
