package enginetest

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/sagacity-go/sagacity/internal/engine"
	"github.com/sagacity-go/sagacity/wire"
)

// The people of the team health scenario: two in finance, and an agent
// who approves in ops.
var (
	finAlice = engine.Principal{ID: "https://idp.example.com#fin-alice", Auth: engine.AuthOIDC, Roles: []engine.Role{engine.RoleApprover},
		Groups: []string{"finance"}}
	finBob = engine.Principal{ID: "https://idp.example.com#fin-bob", Auth: engine.AuthOIDC, Roles: []engine.Role{engine.RoleApprover},
		Groups: []string{"finance"}}
	opsDave = engine.Principal{ID: "token:ops-dave", Auth: engine.AuthToken, Roles: []engine.Role{engine.RoleAgent, engine.RoleApprover},
		Groups: []string{"ops"}}
)

// testTeamHealth: the people known are who signed in (their newest
// sign-in's groups) and the configured ones; a rule they cannot meet
// between them, or only with the agent whose requests it decides, is
// said so per rule, counted in the backlog the metrics read, told once
// however often it is noticed and by how many processes, and a pending
// request under it says so on its review, its requester left out; once
// enough people signed in, all of it clears.
func testTeamHealth(t *testing.T, v *env) {
	ctx := context.Background()
	spec := engine.PolicySpec{Default: []engine.RuleSpec{
		{Name: "two-finance", When: `double(payload.amount) >= 1000.0`, Approvers: []string{"finance"}, Quorum: 2},
		{Name: "ops", Approvers: []string{"ops"}},
	}}
	endpoints := []engine.Endpoint{{Name: "chat"}}
	v.usePolicy(spec, engine.WithNotifications(endpoints), engine.WithPeople([]engine.Person{
		{ID: opsDave.ID, Auth: engine.AuthToken, Roles: opsDave.Roles, Groups: opsDave.Groups}}))
	says := func(what string, want ...string) {
		t.Helper()
		hs, err := v.e.Health(ctx, auditor)
		if err != nil {
			t.Fatalf("Health %s: %v", what, err)
		}
		var got []string
		for _, h := range hs {
			got = append(got, h.Rule.Name+": "+h.Says)
			if h.Unmeetable != strings.Contains(h.Says, "cannot") {
				t.Errorf("Health %s: rule %s is unmeetable=%t, saying %q", what, h.Rule.Name, h.Unmeetable, h.Says)
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("Health %s =\n%s\nwant\n%s", what, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	}
	unmeetable := func(what string, want int) {
		t.Helper()
		b, err := v.e.Backlog(ctx)
		if err != nil || b.Unmeetable != want {
			t.Errorf("Backlog %s: %d unmeetable rules, %v; want %d", what, b.Unmeetable, err, want)
		}
	}
	told := func() (out []string) {
		t.Helper()
		ds, err := v.db.Deliveries(ctx, engine.DeliveryFilter{Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range ds {
			if d.Event.Type == wire.EventUnmeetable {
				out = append(out, d.Endpoint+" "+d.Event.Rule+": "+d.Event.Message)
			}
		}
		slices.Sort(out)
		return out
	}
	notice := func() {
		t.Helper()
		for range 2 {
			if err := v.e.Notice(ctx); err != nil {
				t.Fatal(err)
			}
		}
		other, _ := v.process(v.db)
		if err := other.Notice(ctx); err != nil {
			t.Fatal(err)
		}
	}

	// Nobody signed in: finance has nobody; ops only dave, an agent,
	// whose own requests nobody else may approve.
	opsSays := "ops: cannot be met for a request of " + opsDave.ID + ": it takes 1 of ops, and without " + opsDave.ID +
		" only nobody known may vote under it"
	says("before any sign-in", "two-finance: cannot be met: it takes 2 of finance, and nobody known may vote under it", opsSays)
	unmeetable("before any sign-in", 2)

	// alice of finance signs in: still one short.
	if err := v.e.SignedIn(ctx, finAlice); err != nil {
		t.Fatal(err)
	}
	aliceSays := "two-finance: cannot be met: it takes 2 of finance, and only " + finAlice.ID + " may vote under it"
	says("after alice signed in", aliceSays, opsSays)
	unmeetable("after alice signed in", 2)
	notice()
	want := []string{"chat ops: approval rule ops (default) " + strings.TrimPrefix(opsSays, "ops: "),
		"chat two-finance: approval rule two-finance (default) " + strings.TrimPrefix(aliceSays, "two-finance: ")}
	if got := told(); !slices.Equal(got, want) {
		t.Errorf("noticed three times by two processes, policy.unmeetable was told as\n%s\nwant once each\n%s",
			strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	// A request under it says so at once, its requester left out.
	seq := v.gateLarge("health", agent)
	if rv := v.review("health", seq); !strings.Contains(rv.Unmeetable, "cannot meet this request's rule two-finance") ||
		!strings.Contains(rv.Unmeetable, "only "+finAlice.ID+" may vote") {
		t.Errorf("the review of a request alice alone could vote on says Unmeetable=%q", rv.Unmeetable)
	}

	// bob of finance signs in: the rule can be met, the request too, and
	// nothing more is told of it.
	if err := v.e.SignedIn(ctx, finBob); err != nil {
		t.Fatal(err)
	}
	says("after bob signed in", "two-finance: can be met by 2 known people", opsSays)
	unmeetable("after bob signed in", 1)
	if rv := v.review("health", seq); rv.Unmeetable != "" {
		t.Errorf("the review once bob signed in says Unmeetable=%q; want nothing", rv.Unmeetable)
	}
	// alice approves: bob alone is still enough for the rest.
	if _, err := v.e.Approve(ctx, finAlice, "health", seq, ""); err != nil {
		t.Fatal(err)
	}
	if rv := v.review("health", seq); rv.Unmeetable != "" {
		t.Errorf("the review after alice's vote says Unmeetable=%q; want nothing, bob may vote", rv.Unmeetable)
	}
	notice()
	if got := told(); !slices.Equal(got, want) {
		t.Errorf("once bob signed in, policy.unmeetable was told as\n%s\nwant no more than\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	// bob's newest sign-in has him out of finance: one short again, and
	// told again, as it says another thing.
	moved := finBob
	moved.Groups = []string{"treasury"}
	if err := v.e.SignedIn(ctx, moved); err != nil {
		t.Fatal(err)
	}
	says("after bob left finance", "two-finance: cannot be met: it takes 2 of finance, and only "+finAlice.ID+" may vote under it", opsSays)
	if rv := v.review("health", seq); !strings.Contains(rv.Unmeetable, "nobody known may vote under it") {
		t.Errorf("the review, alice having voted and bob out of finance, says Unmeetable=%q; want nobody left", rv.Unmeetable)
	}
	notice()
	if got := told(); len(got) != 2 {
		t.Errorf("back to what it said before, policy.unmeetable was told again: %q", got)
	}
}
