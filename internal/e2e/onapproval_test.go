package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	sagacity "github.com/sagacity-go/sagacity/client"
	"github.com/sagacity-go/sagacity/internal/testkit"
)

// onApprovalConfig is the fixture's configuration with a rule that has
// the server execute a transfer once two people approve it.
func (f *fixture) onApprovalConfig() string {
	f.t.Helper()
	base, err := os.ReadFile(f.config)
	if err != nil {
		f.t.Fatal(err)
	}
	p := filepath.Join(f.t.TempDir(), "on-approval.yaml")
	rules := "approval:\n  tools:\n    " + toolWire + ":\n      - {name: auto, quorum: 2, execute: on-approval}\n"
	if err := os.WriteFile(p, append(base, rules...), 0o600); err != nil {
		f.t.Fatal(err)
	}
	return p
}

// requestState is what the saga's requests say of the one at seq.
func requestState(ctx context.Context, c *client, s *server, saga string, seq int64) string {
	var state string
	c.ask(ctx, s, func(ctx context.Context, api *sagacity.Client) error {
		r, err := api.Requests(ctx, saga)
		for _, q := range r.Requests {
			if q.JournalSeq == seq {
				state = q.State
			}
		}
		return err
	})
	return state
}

// TestOnApproval: under execute: on-approval, two replicas on one
// PostgreSQL database, the last votes racing on both execute each
// request once; and a server killed (SIGKILL) at any moment after the
// last vote was sent executes nothing twice: after the restart each
// request is executed once, in doubt, or (the vote lost with the kill)
// still waiting for it, and one approved but not executed when the
// process died is executed by the restarted server.
func TestOnApproval(t *testing.T) {
	f := newFixture(t, 80*time.Second)
	ctx := f.ctx
	dbURL := testkit.PostgresURL(t)
	config := map[string]string{"SAGACITY_CONFIG": f.onApprovalConfig()}
	reps := []*server{newServer(t, "replica-1", f.env("replica-1", dbURL, config)), newServer(t, "replica-2", f.env("replica-2", dbURL, config))}
	for _, r := range reps {
		r.start()
	}
	gate := func(rep *server, i int, prefix string) (saga, input string, seq int64) {
		saga, input = fmt.Sprintf("%s-%d", prefix, i), fmt.Sprintf(`{"amount":"%d","to":"%s-%d"}`, i+1, prefix, i)
		a, r := f.initiator(i).call(ctx, rep, saga, toolWire, input)
		if !a.is(202) {
			t.Fatalf("gated call of %s: %s; want 202", saga, a)
		}
		if a, _ := f.approvers.take(rep).approve(ctx, rep, saga, r.JournalSeq); !a.is(200) {
			t.Fatalf("first vote on %s: %s", saga, a)
		}
		return saga, input, r.JournalSeq
	}

	// Racing last votes, one on each replica.
	const races = 30
	inputs := make([]string, races)
	parallel(6, races, func(i int) {
		saga, input, seq := gate(reps[i%2], i, "race")
		inputs[i] = input
		var wg sync.WaitGroup
		for k, pool := range []*pool{f.approvers, f.approvers2} {
			rep := reps[(i+k)%2]
			c := pool.take(rep)
			wg.Go(func() {
				if a, _ := c.approve(ctx, rep, saga, seq); !a.is(200) && !a.is(409) && !a.is(404) {
					t.Errorf("racing last vote on %s: %s; want 200, or 409/404 for the one that came second", saga, a)
				}
			})
		}
		wg.Wait()
		if a, r := f.initiator(i).resume(ctx, reps[(i+1)%2], saga, seq, input); !a.is(200) || r.Outcome != sagacity.Executed {
			t.Errorf("the agent's resume of %s after its execution on approval: %s; want what it came to, 200 EXECUTED", saga, a)
		}
	})
	eff := f.tools.snapshot()
	for _, in := range inputs {
		if keys := eff.keysFor(in); len(keys) != 1 || eff.execs[keys[0]] != 1 {
			t.Errorf("%s: the wire ran under keys %v (%v); want one key, once", in, keys, counts(eff, keys))
		}
	}

	// Killed after the last vote was sent, at a random moment.
	reps[1].kill()
	srv := reps[0]
	const kills = 12
	type killed struct {
		saga, input string
		seq         int64
	}
	var ks []killed
	for i := range kills {
		saga, input, seq := gate(srv, i, "kill")
		ks = append(ks, killed{saga, input, seq})
		c := f.approvers2.take(srv)
		go c.approve(ctx, srv, saga, seq)
		time.Sleep(rand.N(40 * time.Millisecond))
		srv.kill()
		f.tools.quiesce(ctx, t)
		srv.start()
	}
	// Once the restarted server's first passes are over, nothing runs
	// twice, and what was approved ran or is in doubt.
	ok := eventually(ctx, 30*time.Second, func() bool {
		for _, k := range ks {
			switch requestState(ctx, f.auditor, srv, k.saga, k.seq) {
			case "approved", "":
				return false
			}
		}
		return true
	})
	eff = f.tools.snapshot()
	seen := map[string]int{}
	for _, k := range ks {
		state := requestState(ctx, f.auditor, srv, k.saga, k.seq)
		seen[state]++
		runs := 0
		for _, key := range eff.keysFor(k.input) {
			runs += eff.execs[key]
		}
		switch {
		case runs > 1:
			t.Errorf("%s: the wire ran %d times; want at most once", k.saga, runs)
		case state == "executed" && runs != 1, state == "undecided" && runs != 0:
			t.Errorf("%s is %s and the wire ran %d times", k.saga, state, runs)
		case state != "executed" && state != "undecided" && state != "executing":
			t.Errorf("%s is %q after the restart; want executed, executing (in doubt) or undecided (the vote lost)", k.saga, state)
		}
	}
	if !ok {
		t.Errorf("a request approved before a kill was not executed by the restarted server within 30s")
	}
	t.Logf("after %d kills: %v", kills, seen)
}
