package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	sagacity "github.com/sagacity-go/sagacity/client"
	"github.com/sagacity-go/sagacity/internal/testkit"
)

// TestPolicyRestart: a request made while the server ran policy A is
// decided by A after the server restarts with policy B, which asks
// less; B's own requests by B. The database's log holds both documents
// (GET /sagacity/policies), and verification names the policy each
// executed request was decided under.
func TestPolicyRestart(t *testing.T) {
	for _, db := range []struct {
		name string
		url  func(testing.TB) string
	}{{"postgres", testkit.PostgresURL}, {"sqlite", testkit.SQLiteURL}} {
		t.Run(db.name, func(t *testing.T) {
			f := newFixture(t, 60*time.Second)
			ctx := f.ctx
			dbURL := db.url(t)
			config := func(name, rules string) string {
				return f.configWith(t, name, "approval:\n  tools:\n    "+toolWire+":\n"+rules)
			}
			a := config("a", "      - {name: two, quorum: 2}\n")
			b := config("b", "      - {name: one}\n")
			srv := newServer(t, "sagacity", f.env("sagacity", dbURL, map[string]string{"SAGACITY_CONFIG": a}))
			srv.start()
			agent, first, second := f.initiator(0), f.approvers.take(srv), f.approvers2.take(srv)
			agent.call(ctx, srv, "under-a", toolReserve, `{"sku":"desk","qty":1}`)
			_, gated := agent.call(ctx, srv, "under-a", toolWire, wire)
			if ans, d := first.approve(ctx, srv, "under-a", gated.JournalSeq); !ans.is(200) || d.Votes != 1 || d.Quorum != 2 {
				t.Fatalf("the first approval under A: %s %+v; want vote 1 of 2", ans, d)
			}
			srv.kill()

			srv = newServer(t, "sagacity", f.env("sagacity", dbURL, map[string]string{"SAGACITY_CONFIG": b}))
			srv.start()
			if ans, l := f.auditor.approvals(ctx, srv, "under-a"); !ans.is(200) || len(l.Approvals) != 1 || l.Approvals[0].Rule != "two" ||
				l.Approvals[0].Quorum != 2 {
				t.Errorf("A's request listed under B: %s %+v; want still rule two, a quorum of 2", ans, l)
			}
			// One vote is not A's quorum, whatever B says: a second is
			// taken (under B, one approval would be all, and a second
			// refused).
			if ans, d := second.approve(ctx, srv, "under-a", gated.JournalSeq); !ans.is(200) || d.Votes != 2 || d.Quorum != 2 {
				t.Fatalf("the second approval: %s %+v; want vote 2 of 2", ans, d)
			}
			if ans, r := agent.resume(ctx, srv, "under-a", gated.JournalSeq, wire); !ans.is(200) || r.Outcome != sagacity.Executed {
				t.Fatalf("resume of A's request with its quorum: %s %+v", ans, r)
			}
			// B's request: one approval.
			_, gatedB := agent.call(ctx, srv, "under-b", toolWire, wire)
			first.approve(ctx, srv, "under-b", gatedB.JournalSeq)
			if ans, r := agent.resume(ctx, srv, "under-b", gatedB.JournalSeq, wire); !ans.is(200) || r.Outcome != sagacity.Executed {
				t.Fatalf("resume of B's request with one approval: %s %+v", ans, r)
			}

			var policies sagacity.Policies
			if ans := f.auditor.ask(ctx, srv, func(ctx context.Context, api *sagacity.Client) (err error) {
				policies, err = api.Policies(ctx)
				return err
			}); !ans.is(200) || len(policies.Documents) != 2 || policies.Documents[1].SHA256 != policies.InForce ||
				!strings.Contains(policies.Documents[0].Text, `"quorum":2`) {
				t.Fatalf("GET /sagacity/policies: %s %+v; want A then B, B in force", ans, policies)
			}
			polA, polB := policies.Documents[0].SHA256, policies.Documents[1].SHA256
			for saga, pol := range map[string]string{"under-a": polA, "under-b": polB} {
				if ans, v := f.auditor.verify(ctx, srv, saga); !ans.is(200) || !v.Valid || !strings.Contains(v.Message, "of policy "+pol) {
					t.Errorf("verify %s: %s %+v; want it valid, naming policy %s", saga, ans, v, pol)
				}
			}
		})
	}
}

// policySaga is the server's own saga of approval policies.
const policySaga = "sagacity:policies"

// TestPolicyChangeWalkthrough replays the README's "Changing the
// policy", on both stores, with the real binary: started with its
// policy, then with a laxer approval: section, the server keeps deciding
// by the one in force and proposes the new one; one approval of the
// proposal changes nothing, the second puts it in force, and the policy
// saga verifies with both approvals.
func TestPolicyChangeWalkthrough(t *testing.T) {
	readme := testkit.ReadmeBlock(t, "policy change")
	for _, db := range []struct {
		name string
		url  func(testing.TB) string
	}{{"postgres", testkit.PostgresURL}, {"sqlite", testkit.SQLiteURL}} {
		t.Run(db.name, func(t *testing.T) {
			f := newFixture(t, 60*time.Second)
			ctx := f.ctx
			dbURL := db.url(t)
			gatedConfig := f.configWith(t, "gated", readme)
			laxConfig := f.configWith(t, "lax", "approval:\n  default: [{name: default}]\n  tools:\n    "+toolWire+": [{name: one}]\n")
			srv := newServer(t, "sagacity", f.env("sagacity", dbURL, map[string]string{"SAGACITY_CONFIG": gatedConfig}))
			srv.start()
			agent, first, second := f.initiator(0), f.approvers.take(srv), f.approvers2.take(srv)
			policies := func() sagacity.Policies {
				t.Helper()
				var p sagacity.Policies
				if ans := f.auditor.ask(ctx, srv, func(ctx context.Context, api *sagacity.Client) (err error) {
					p, err = api.Policies(ctx)
					return err
				}); !ans.is(200) {
					t.Fatalf("GET /sagacity/policies: %s", ans)
				}
				return p
			}
			rule := func(saga string) (string, int) {
				t.Helper()
				agent.call(ctx, srv, saga, toolReserve, `{"sku":"desk","qty":1}`)
				agent.call(ctx, srv, saga, toolWire, wire)
				ans, l := f.auditor.approvals(ctx, srv, saga)
				if !ans.is(200) || len(l.Approvals) != 1 {
					t.Fatalf("the request of %s: %s %+v", saga, ans, l)
				}
				return l.Approvals[0].Rule, l.Approvals[0].Quorum
			}
			gated := policies().InForce
			srv.kill()

			// 1. Restarted with a laxer section: proposed, not in force.
			srv = newServer(t, "sagacity", f.env("sagacity", dbURL, map[string]string{"SAGACITY_CONFIG": laxConfig}))
			srv.start()
			if out := srv.log.String(); !strings.Contains(out, "waits for approval under the policy in force") {
				t.Errorf("the server's log says nothing of the change waiting:\n%s", out)
			}
			p := policies()
			if p.InForce != gated || len(p.Proposals) != 1 || !strings.Contains(p.Proposals[0].Text, `"name":"one"`) {
				t.Fatalf("GET /sagacity/policies after the restart = %+v; want the gated policy in force, the lax one proposed", p)
			}
			proposal := p.Proposals[0].Request
			// 2. A transfer meanwhile still takes two.
			if r, q := rule("meanwhile"); r != "two" || q != 2 {
				t.Errorf("a transfer while the change waits: rule %s, quorum %d; want two, 2", r, q)
			}
			// 3. Two approvals of the proposal put it in force.
			if ans, d := first.approve(ctx, srv, policySaga, proposal); !ans.is(200) || d.Votes != 1 || d.Quorum != 2 {
				t.Fatalf("the first approval of the change: %s %+v; want vote 1 of 2", ans, d)
			}
			if p := policies(); p.InForce != gated {
				t.Errorf("in force after one approval of two: %s; want the gated policy", p.InForce)
			}
			if ans, d := second.approve(ctx, srv, policySaga, proposal); !ans.is(200) || d.Votes != 2 {
				t.Fatalf("the second approval of the change: %s %+v", ans, d)
			}
			if p := policies(); p.InForce == gated || len(p.Proposals) != 0 || p.Documents[len(p.Documents)-1].SHA256 != p.InForce {
				t.Fatalf("GET /sagacity/policies after two approvals = %+v; want the lax policy in force, nothing proposed", p)
			}
			if r, q := rule("after"); r != "one" || q != 1 {
				t.Errorf("a transfer after the change: rule %s, quorum %d; want one, 1", r, q)
			}
			if ans, v := f.auditor.verify(ctx, srv, policySaga); !ans.is(200) || !v.Valid || !strings.Contains(v.Message, "rule change") {
				t.Errorf("verify %s: %s %+v; want it valid, naming the change's rule", policySaga, ans, v)
			}
		})
	}
}

// configWith writes the fixture's configuration file with more after
// it, as name.yaml, and returns its path.
func (f *fixture) configWith(t *testing.T, name, more string) string {
	t.Helper()
	base, err := os.ReadFile(f.config)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), name+".yaml")
	if err := os.WriteFile(p, append(base, more...), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}
