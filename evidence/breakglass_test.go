package evidence

import (
	"strings"
	"testing"
	"time"
)

// TestBreakGlassPolicy: breakGlass is in the canonical document only when
// set, so a document without it keeps its text and hash; with it, every
// rule of the tools and the default carries it and the policy change's
// none, and a document read back compiles to the same; its bounds are
// refused with what is wrong.
func TestBreakGlassPolicy(t *testing.T) {
	rules := PolicySpec{Default: []RuleSpec{{Name: "d"}}, PolicyChange: []RuleSpec{{Name: "change", Quorum: 2}}}
	plain, err := CompilePolicy(rules)
	if err != nil || strings.Contains(plain.Text, "breakGlass") || plain.BreakGlass() != nil {
		t.Fatalf("CompilePolicy(no breakGlass) = %v, %v; want a document without it", plain, err)
	}
	spec := rules
	spec.BreakGlass = &BreakGlassSpec{Approvers: []string{"oncall"}, RatifyWithin: Duration(24 * time.Hour)}
	a, err := CompilePolicy(spec)
	if err != nil {
		t.Fatal(err)
	}
	if want := `"breakGlass":{"approvers":["oncall"],"ratifyWithin":"24h0m0s"}`; !strings.Contains(a.Text, want) || a.Hash == plain.Hash {
		t.Errorf("the document with breakGlass = %s (hash %s, without %s); want it to say %s", a.Text, a.Hash, plain.Hash, want)
	}
	if d := a.Default()[0]; d.BreakGlass == nil || d.BreakGlass.RatifyWithin != 24*time.Hour {
		t.Errorf("the default rule's break-glass = %+v; want the policy's", d.BreakGlass)
	}
	if c, ok := a.Rule(PolicyTool, "change"); !ok || c.BreakGlass != nil {
		t.Errorf("the policy change's rule = %+v, %v; want no break-glass", c, ok)
	}
	if b, err := ParsePolicy(a.Text); err != nil || b.Hash != a.Hash || b.BreakGlass() == nil {
		t.Errorf("ParsePolicy(its text) = %v, %v; want the same document", b, err)
	}
	for _, tt := range []struct {
		glass BreakGlassSpec
		want  string
	}{
		{BreakGlassSpec{RatifyWithin: Duration(time.Hour)}, "breakGlass: approvers names nobody"},
		{BreakGlassSpec{Approvers: []string{""}, RatifyWithin: Duration(time.Hour)}, "breakGlass: breakGlass approvers is empty"},
		{BreakGlassSpec{Approvers: []string{"oncall"}}, "breakGlass: ratifyWithin must be from 1m0s to 8784h0m0s (got 0s)"},
		{BreakGlassSpec{Approvers: []string{"oncall"}, RatifyWithin: Duration(400 * 24 * time.Hour)}, "breakGlass: ratifyWithin must be from 1m0s to 8784h0m0s"},
	} {
		spec.BreakGlass = &tt.glass
		if _, err := CompilePolicy(spec); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("CompilePolicy(breakGlass %+v) = %v; want %q", tt.glass, err, tt.want)
		}
	}
}

// TestBreakGlassLifecycle: a break-glass decision lets the server's
// execution follow without a vote; nothing else decides the request in
// between; only its executed request is ratified, by distinct people
// neither the requester, the initiator nor whoever broke the glass.
func TestBreakGlassLifecycle(t *testing.T) {
	broken := step{GateTool, PhaseApproved, "seq=3", "break-glass-by=olga\nreason=urgent\nauth=oidc"}
	resumed := step{"sendWireTransfer", PhaseIntent, wireIn, "requester=agent-1\nresumes=seq=3\nexecuted-by=server"}
	ratified := func(who string) step {
		return step{GateTool, PhaseApproved, "seq=3", "ratified-by=" + who + "\nreason=fine\nauth=oidc"}
	}
	head := []step{reserve, reserved, gated, broken, resumed}
	lc, v := ReadLifecycle(journal(append(head, ratified("alice"), ratified("bob"))))
	if l := lc.Requests[3]; !v.Valid || l.Closing != ClosedResumed || l.BrokenAt != 4 || l.BrokenBy != "olga" || len(l.Ratifications) != 2 {
		t.Fatalf("ReadLifecycle(broken, executed, ratified twice) = %+v, %+v; want it executed by break-glass, two ratifications", l, v)
	}
	for _, tt := range []struct {
		name  string
		steps []step
		want  string
	}{
		{"a vote between break-glass and execution", []step{reserve, reserved, gated, broken, approvedBy("3", "alice")},
			"decides the request at seq=3, which olga had executed by break-glass at seq=4"},
		{"its requester's cancellation between break-glass and execution", []step{reserve, reserved, gated, broken,
			{GateTool, PhaseRejected, "seq=3", "cancelled-by=agent-1\nauth=token"}}, "decides the request at seq=3, which olga had executed by break-glass"},
		{"break-glass by the requester", []step{reserve, reserved, gated, {GateTool, PhaseApproved, "seq=3", "break-glass-by=agent-1"}},
			"is a decision by agent-1, who started the saga (four-eyes)"},
		{"a ratification by who broke the glass", append(head, ratified("olga")), "is a ratification by olga, who broke the glass"},
		{"a ratification by the requester", append(head, ratified("agent-1")), "is a ratification by agent-1, who started the saga"},
		{"a second ratification by one person", append(head, ratified("alice"), ratified("alice")), "is alice's second ratification"},
		{"a ratification of a request no break-glass executed", []step{reserve, reserved, gated, ratified("alice")},
			"ratifies the request at seq=3, which no break-glass executed"},
		{"a ratification before the execution", []step{reserve, reserved, gated, broken, ratified("alice")},
			"ratifies the request at seq=3, which no break-glass executed"},
	} {
		if _, v := ReadLifecycle(journal(tt.steps)); v.Valid || !strings.Contains(v.Message, tt.want) {
			t.Errorf("ReadLifecycle(%s) = %+v; want broken, saying %q", tt.name, v, tt.want)
		}
	}
}
