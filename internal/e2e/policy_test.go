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
				base, err := os.ReadFile(f.config)
				if err != nil {
					t.Fatal(err)
				}
				p := filepath.Join(t.TempDir(), name+".yaml")
				if err := os.WriteFile(p, append(base, []byte("approval:\n  tools:\n    "+toolWire+":\n"+rules)...), 0o600); err != nil {
					t.Fatal(err)
				}
				return p
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
