package config

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/sagacity-go/sagacity/internal/engine"
	"github.com/sagacity-go/sagacity/internal/testkit"
)

// The README's configuration blocks, each read out of the README and
// loaded as printed, the way the server loads SAGACITY_CONFIG, with only
// what the README says the reader supplies besides.

// readmeConfig loads yaml, README blocks, as the SAGACITY_CONFIG of a
// server with the environment vars.
func readmeConfig(t *testing.T, vars map[string]string, yaml string) Config {
	t.Helper()
	vars["SAGACITY_CONFIG"] = writeConfig(t, yaml)
	c, err := Load(env(vars))
	if err != nil {
		t.Fatalf("Load(the README's\n%s) = %v", yaml, err)
	}
	return c
}

// TestReadmeTools: the README's tools: block declares a compensatable
// tool with its two endpoints and the call's timeout, an IRREVERSIBLE one
// with no undo, and the policy's limits, given the tool signing secret
// the README says a file with tools needs.
func TestReadmeTools(t *testing.T) {
	c := readmeConfig(t, map[string]string{"SAGACITY_TOOL_SIGNING_SECRET": signingSecret}, testkit.ReadmeBlock(t, "tools"))
	want := []Tool{
		{Name: "reserveInventory", Reversibility: engine.Compensatable,
			Execute:    Endpoint{URL: "http://127.0.0.1:9000/reserve", Timeout: 10 * time.Second},
			Compensate: &Endpoint{URL: "http://127.0.0.1:9000/release", Timeout: 10 * time.Second}},
		{Name: "sendWireTransfer", Reversibility: engine.Irreversible,
			Execute: Endpoint{URL: "http://127.0.0.1:9000/wire", Timeout: 10 * time.Second}},
	}
	if diff := cmp.Diff(want, c.File.Tools); diff != "" {
		t.Errorf("the README's tools (-want +got):\n%s", diff)
	}
	if want := (Policy{MaxBodyBytes: 1 << 20, MaxResultBytes: 1 << 20, MaxWait: 5 * time.Minute, ExecutionsPerMinute: 1200}); c.File.Policy != want {
		t.Errorf("the README's policy = %+v, want %+v", c.File.Policy, want)
	}
}

// TestReadmeApproval: the README's approval policy, in one file with its
// tools: block, loads and decides as its comments say: a transfer of 10000 or more, or to an
// ext- account, by rule large and its terms; a smaller one by rule small;
// any other IRREVERSIBLE tool by the one-approver default.
func TestReadmeApproval(t *testing.T) {
	c := readmeConfig(t, map[string]string{"SAGACITY_TOOL_SIGNING_SECRET": signingSecret},
		testkit.ReadmeBlock(t, "tools")+testkit.ReadmeBlock(t, "approval"))
	a := c.File.Approvals
	if a == nil {
		t.Fatal("the README's approval policy loaded as none")
	}
	for _, tc := range []struct{ tool, input, rule string }{
		{"sendWireTransfer", `{"amount":"10000","to":"alice"}`, "large"},
		{"sendWireTransfer", `{"amount":"25000.50","to":"alice"}`, "large"},
		{"sendWireTransfer", `{"amount":"5","to":"ext-4711"}`, "large"},
		{"sendWireTransfer", `{"amount":"9999.99","to":"alice"}`, "small"},
		{"deleteAccount", `{"id":"42"}`, "default"},
	} {
		if m := a.Match(tc.tool, "s1", "token:agent", tc.input, nil); !m.OK || m.Rule.Name != tc.rule {
			t.Errorf("Match(%s, %s) = rule %q (ok %v, failed %q: %s), want rule %s", tc.tool, tc.input, m.Rule.Name, m.OK, m.Failed, m.Why, tc.rule)
		}
	}
	opts := cmpopts.IgnoreFields(engine.Rule{}, "When")
	large := engine.Rule{Name: "large", Approvers: []string{"finance-leads", "treasury"}, Quorum: 2, Expires: 4 * time.Hour,
		Grant: 30 * time.Minute, StepUp: 15 * time.Minute, ReasonRequired: true, PasskeyRequired: true}
	small := engine.Rule{Name: "small", Approvers: []string{"approver"}, Quorum: 1}
	if diff := cmp.Diff([]engine.Rule{large, small}, a.Rules("sendWireTransfer"), opts, cmpopts.IgnoreUnexported(engine.Rule{})); diff != "" {
		t.Errorf("the README's rules for sendWireTransfer (-want +got):\n%s", diff)
	}
	def := []engine.Rule{{Name: "default", Approvers: []string{"approver"}, Quorum: 1}}
	if diff := cmp.Diff(def, a.Default(), opts, cmpopts.IgnoreUnexported(engine.Rule{})); diff != "" {
		t.Errorf("the README's default rules (-want +got):\n%s", diff)
	}
}

// TestReadmeUpstreams: the README's upstreams: block starts its program
// over stdio with the environment it names, and runs the tools as its
// comments say: write_file at once, undone by delete_file with the call's
// arguments; the read-only ones at once with nothing to undo; every tool
// it does not name IRREVERSIBLE; each call within 30s, listed under the
// prefix files_.
func TestReadmeUpstreams(t *testing.T) {
	c := readmeConfig(t, map[string]string{}, testkit.ReadmeBlock(t, "upstreams"))
	if len(c.File.Upstreams) != 1 {
		t.Fatalf("the README's upstreams = %+v, want one", c.File.Upstreams)
	}
	u := c.File.Upstreams[0]
	want := Upstream{Name: "files", Command: []string{"npx", "-y", "@modelcontextprotocol/server-filesystem", "/srv/share"},
		Env: map[string]string{"NODE_OPTIONS": "--max-old-space-size=256"}, Timeout: 30 * time.Second, Prefix: "files_",
		Default: engine.Irreversible, Tools: u.Tools}
	if diff := cmp.Diff(want, u); diff != "" {
		t.Errorf("the README's upstream (-want +got):\n%s", diff)
	}
	for _, tc := range []struct {
		tool string
		rev  engine.Reversibility
		undo *UpstreamUndo
	}{
		{"write_file", engine.Compensatable, &UpstreamUndo{Tool: "delete_file", Arguments: "input"}},
		{"read_text_file", engine.Reversible, nil},
		{"list_directory", engine.Reversible, nil},
		{"move_file", engine.Irreversible, nil}, // not named: fail closed
	} {
		rev, ut := u.Resolve(tc.tool)
		if rev != tc.rev || !cmp.Equal(ut.Compensate, tc.undo) {
			t.Errorf("Resolve(%s) = %s, undone by %+v; want %s, undone by %+v", tc.tool, rev, ut.Compensate, tc.rev, tc.undo)
		}
	}
}

// TestReadmeRoles: the README's roles: block of the OIDC set-up reads
// the groups claim and maps each group to its role (cmd/web TestRunOIDC
// signs in with it).
func TestReadmeRoles(t *testing.T) {
	c := readmeConfig(t, map[string]string{}, testkit.ReadmeBlock(t, "roles"))
	want := Roles{Claim: "groups", Map: map[string][]engine.Role{
		"payments-approvers": {engine.RoleApprover}, "auditors": {engine.RoleAuditor}, "agents": {engine.RoleAgent}}}
	if diff := cmp.Diff(want, c.File.Roles); diff != "" {
		t.Errorf("the README's roles (-want +got):\n%s", diff)
	}
}

// TestReadmeContext: the configuration page's policy over who asks and
// when loads as printed and decides as its comments say: two approvers
// outside business hours in Paris (at night, on a Sunday), finance-leads
// for a payment of the requester's own team, the treasury rule for a
// requester whose department claim says treasury, the rest otherwise.
// TestReadmeBreakGlass: the break-glass example of docs/configuration.md
// loads as printed: oncall may break the glass on every rule of the
// tools and the default, to be ratified within a day.
func TestReadmeBreakGlass(t *testing.T) {
	c := readmeConfig(t, map[string]string{}, testkit.ReadmeBlock(t, "break-glass"))
	a := c.File.Approvals
	want := engine.BreakGlass{Approvers: []string{"oncall"}, RatifyWithin: 24 * time.Hour}
	if a == nil || a.BreakGlass() == nil {
		t.Fatal("the page's policy loaded without a break-glass")
	}
	if diff := cmp.Diff(want, *a.BreakGlass()); diff != "" {
		t.Errorf("the page's break-glass (-want +got):\n%s", diff)
	}
	if r, ok := a.Rule("sendWireTransfer", "large"); !ok || r.BreakGlass == nil || r.Quorum != 2 {
		t.Errorf("rule large = %+v, %t; want a quorum of 2 the break-glass applies to", r, ok)
	}
}

func TestReadmeContext(t *testing.T) {
	c := readmeConfig(t, map[string]string{}, testkit.ReadmeBlock(t, "approval-context"))
	a := c.File.Approvals
	if a == nil || !a.UsesContext() {
		t.Fatal("the page's policy loaded as none, or as one that reads no context")
	}
	paris, err := time.LoadLocation("Europe/Paris")
	if err != nil {
		t.Fatal(err)
	}
	tuesday := time.Date(2026, 12, 1, 11, 0, 0, 0, paris)
	payments := engine.Who{ID: "oidc#alice", Groups: []string{"payments"}}
	for _, tc := range []struct {
		name   string
		who    engine.Who
		claims map[string]any
		at     time.Time
		rule   string
	}{
		{"a Tuesday at 11:00", payments, nil, tuesday, "own-team"},
		{"a Tuesday at 19:00", payments, nil, tuesday.Add(8 * time.Hour), "after-hours"},
		{"a Sunday at 11:00", payments, nil, tuesday.AddDate(0, 0, 5), "after-hours"},
		{"a treasurer", engine.Who{ID: "oidc#bob"}, map[string]any{"department": "treasury"}, tuesday, "treasury"},
		{"anyone else", engine.Who{ID: "token:ci"}, nil, tuesday, "rest"},
	} {
		seen := a.See(tc.who, tc.claims, tc.at)
		if m := a.Match("sendWireTransfer", "s1", tc.who.ID, `{"amount":"100","team":"payments"}`, &seen); !m.OK || m.Rule.Name != tc.rule {
			t.Errorf("Match(%s) = rule %q (failed %q: %s), want rule %s", tc.name, m.Rule.Name, m.Failed, m.Why, tc.rule)
		}
	}
	if r, _ := a.Rule("sendWireTransfer", "after-hours"); r.Quorum != 2 {
		t.Errorf("after-hours' quorum = %d, want 2", r.Quorum)
	}
}
