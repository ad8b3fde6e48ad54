package enginetest

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sagacity-go/sagacity/internal/engine"
	"github.com/sagacity-go/sagacity/internal/testkit"
	"github.com/sagacity-go/sagacity/wire"
)

// fakeClock is a clock a test moves.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(time.Millisecond)
	return c.now
}

func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// testClocks: a request without its quorum by its deadline is rejected
// by the server, with a receipt, and its saga compensated, whoever
// notices first (a late vote, the sweep); an approval not executed within
// its grant is closed; a vote counts only from a sign-in as recent as
// the rule's step-up asks.
func testClocks(t *testing.T, v *env) {
	ctx := context.Background()
	clock := &fakeClock{now: time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)}
	v.usePolicy(engine.PolicySpec{Default: []engine.RuleSpec{{Name: "timed", Quorum: 2, Expires: engine.Duration(time.Hour),
		Grant: engine.Duration(10 * time.Minute), StepUp: engine.Duration(15 * time.Minute)}}}, engine.WithClock(clock.Now))
	fresh := func(p engine.Principal) engine.Principal {
		p.AuthTime = clock.Now().Add(-time.Minute)
		return p
	}

	// Step-up: an old sign-in, and a token, are refused; a fresh one counts.
	seq := v.gate("step")
	old := alice
	old.AuthTime = clock.Now().Add(-time.Hour)
	wantCode(t, "a vote from an hour-old sign-in", second(v.e.Approve(ctx, old, "step", seq, "")), engine.Forbidden, wire.CodeStepUp)
	token := engine.Principal{ID: "token:ops", Auth: engine.AuthToken, Roles: []engine.Role{engine.RoleApprover}}
	wantCode(t, "a vote by a static token", second(v.e.Approve(ctx, token, "step", seq, "")), engine.Forbidden, wire.CodeStepUp)
	if rv := v.review("step", seq); v.e.Allowed(old, rv).StepUp != 15*time.Minute {
		t.Errorf("Allowed(an old sign-in).StepUp = %v; want 15m, to sign in again", v.e.Allowed(old, rv).StepUp)
	}
	if _, err := v.e.Approve(ctx, fresh(alice), "step", seq, ""); err != nil {
		t.Errorf("a vote from a fresh sign-in: %v", err)
	}

	// Expiry: one vote, then the deadline passes. A late vote finds it
	// expired: the server's REJECTED is journaled, the saga compensated.
	seq = v.gate("late")
	v.mustApproveAs("late", seq, fresh(alice))
	clock.Add(61 * time.Minute)
	e := wantCode(t, "a vote after the deadline", second(v.e.Approve(ctx, fresh(bob), "late", seq, "")), engine.Conflict, wire.CodeExpired)
	if !strings.Contains(e.Msg, "expired") || v.status("late") != wire.Compensated || v.fx.count("undo reserveInventory reserved") == 0 {
		t.Errorf("after a vote on an expired request: %q, saga %s; want expired and compensated", e.Msg, v.status("late"))
	}
	es := v.journal("late")
	if last := es[len(es)-2]; last.ToolName != engine.GateTool || last.Phase != engine.PhaseRejected || last.Field(engine.KeyExpired) == "" {
		t.Errorf("the entry after the vote = %+v; want the server's REJECTED, expired", last)
	} else if r, err := engine.OpenReceipt(engine.ReceiptOf(last), testkit.Keys(t).Verifier()); err != nil || r.Decision != engine.DecidedExpired ||
		r.Decider != engine.ServerDecider {
		t.Errorf("the expiry's receipt = %+v, %v; want the server's, expired", r, err)
	}
	if got := v.verify("late"); !got.Valid {
		t.Errorf("Verify(late) = %+v", got)
	}
	// The sweep expires what nobody touches.
	seq = v.gate("quiet")
	clock.Add(30 * time.Minute)
	if n, err := v.e.Lapse(ctx); err != nil || v.pending("quiet") != 1 {
		t.Fatalf("Lapse before the deadline: %d closed, %v; the request must stay", n, err)
	}
	clock.Add(31 * time.Minute)
	if n, err := v.e.Lapse(ctx); err != nil || n < 1 || v.pending("quiet") != 0 || v.status("quiet") != wire.Compensated {
		t.Errorf("Lapse after the deadline: %d closed, %v, saga %s; want it expired and compensated", n, err, v.status("quiet"))
	}
	e = wantCode(t, "resuming an expired request", second(v.e.Resume(ctx, agent, "quiet", seq, transfer)), engine.Conflict, wire.CodeExpired)
	_ = e

	// Grant: the quorum is reached, then the grant ends before anyone
	// executes it: closed, journaled, compensated.
	seq = v.gate("slow")
	v.mustApproveAs("slow", seq, fresh(alice))
	v.mustApproveAs("slow", seq, fresh(bob))
	clock.Add(11 * time.Minute)
	wantCode(t, "Resume after the grant", second(v.e.Resume(ctx, agent, "slow", seq, transfer)), engine.Conflict, wire.CodeExpired)
	if detail, _, _ := v.journal("slow")[5].Refusal(); !strings.HasPrefix(detail, engine.RefusedGrant) || v.status("slow") != wire.Compensated {
		t.Errorf("after a resume past the grant: the closing entry says %q, the saga %s; want %s and compensated", detail, v.status("slow"), engine.RefusedGrant)
	}
	// … and the sweep closes a lapsed grant nobody resumes.
	seq = v.gate("idle")
	v.mustApproveAs("idle", seq, fresh(alice))
	v.mustApproveAs("idle", seq, fresh(bob))
	clock.Add(11 * time.Minute)
	if _, err := v.e.Lapse(ctx); err != nil || v.pending("idle") != 0 || v.status("idle") != wire.Compensated {
		t.Errorf("Lapse after the grant: %v, %d pending, saga %s; want closed and compensated", err, v.pending("idle"), v.status("idle"))
	}
	wantCode(t, "resuming a lapsed grant", second(v.e.Resume(ctx, agent, "idle", seq, transfer)), engine.Conflict, wire.CodeExpired)
	// Within the grant it runs.
	seq = v.gate("quick")
	v.mustApproveAs("quick", seq, fresh(alice))
	v.mustApproveAs("quick", seq, fresh(bob))
	clock.Add(9 * time.Minute)
	if res, err := v.e.Resume(ctx, agent, "quick", seq, transfer); err != nil || res.Refused {
		t.Errorf("Resume within the grant = %+v, %v; want executed", res, err)
	}
	for _, saga := range []string{"step", "late", "quiet", "slow", "idle", "quick"} {
		if got := v.verify(saga); !got.Valid {
			t.Errorf("Verify(%s) = %+v", saga, got)
		}
	}
}

// testDevClocks: a policy compiled for dev mode keeps its windows of
// seconds: a request of a rule that expires in 2s is expired by the
// sweep once they pass, an approval with a 2s grant closes, and both
// journals verify, their policy read back from the journal.
func testDevClocks(t *testing.T, v *env) {
	ctx := context.Background()
	clock := &fakeClock{now: time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)}
	spec := engine.PolicySpec{Default: []engine.RuleSpec{{Name: "quick", Quorum: 2, Expires: engine.Duration(2 * time.Second),
		Grant: engine.Duration(2 * time.Second)}}}
	if _, err := engine.CompilePolicy(spec); err == nil {
		t.Fatalf("CompilePolicy(expires 2s) = nil error; want it refused outside dev mode")
	}
	a, err := engine.CompileDevPolicy(spec)
	if err != nil {
		t.Fatalf("CompileDevPolicy(expires 2s): %v", err)
	}
	v.useApprovals(a, engine.WithClock(clock.Now))

	seq := v.gate("two-seconds")
	clock.Add(time.Second)
	if _, err := v.e.Lapse(ctx); err != nil || v.pending("two-seconds") != 1 {
		t.Fatalf("Lapse a second in: %v, %d pending; want the request still waiting", err, v.pending("two-seconds"))
	}
	clock.Add(1500 * time.Millisecond)
	if n, err := v.e.Lapse(ctx); err != nil || n != 1 || v.pending("two-seconds") != 0 || v.status("two-seconds") != wire.Compensated {
		t.Errorf("Lapse 2.5s in: %d closed, %v, saga %s; want it expired and compensated", n, err, v.status("two-seconds"))
	}
	wantCode(t, "resuming a request expired after 2s", second(v.e.Resume(ctx, agent, "two-seconds", seq, transfer)), engine.Conflict, wire.CodeExpired)

	seq = v.gate("granted")
	v.mustApproveAs("granted", seq, alice)
	v.mustApproveAs("granted", seq, bob)
	clock.Add(3 * time.Second)
	wantCode(t, "resuming 3s after a 2s grant", second(v.e.Resume(ctx, agent, "granted", seq, transfer)), engine.Conflict, wire.CodeExpired)
	for _, saga := range []string{"two-seconds", "granted"} {
		if got := v.verify(saga); !got.Valid {
			t.Errorf("Verify(%s) = %+v", saga, got)
		}
	}
}

// testLapses: a request whose time ran out — its deadline passed short
// of its quorum, or its grant ended before it was executed — is closed
// the same way, and whoever acts on it is answered the same (Conflict,
// code EXPIRED, the same words), whether the sweep noticed first or the
// late vote, withdrawal, request for changes, resume or execution did.
func testLapses(t *testing.T, v *env) {
	ctx := context.Background()
	clock := &fakeClock{now: time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)}
	v.usePolicy(engine.PolicySpec{Default: []engine.RuleSpec{{Name: "timed", Quorum: 2, Expires: engine.Duration(time.Hour),
		Grant: engine.Duration(10 * time.Minute)}}}, engine.WithClock(clock.Now))
	actions := []struct {
		name string
		act  func(saga string, seq int64) error
	}{
		{"approve", func(saga string, seq int64) error { return second(v.e.Approve(ctx, carol, saga, seq, "")) }},
		{"reject", func(saga string, seq int64) error { return second(v.e.Reject(ctx, carol, saga, seq, "")) }},
		{"withdraw", func(saga string, seq int64) error { return second(v.e.Withdraw(ctx, alice, saga, seq, "")) }},
		{"request changes", func(saga string, seq int64) error { return second(v.e.RequestChanges(ctx, carol, saga, seq, "less")) }},
		{"resume", func(saga string, seq int64) error { return second(v.e.Resume(ctx, agent, saga, seq, transfer)) }},
		{"execute", func(saga string, seq int64) error { return second(v.e.Execute(ctx, alice, saga, seq)) }},
	}
	times := regexp.MustCompile(`\d{4}-\d\d-\d\dT[\d:.]+Z`)
	for _, cause := range []struct {
		name  string
		votes []engine.Principal
		wait  time.Duration
	}{
		{"expired", []engine.Principal{alice}, 61 * time.Minute},
		{"grant ended", []engine.Principal{alice, bob}, 11 * time.Minute},
	} {
		for i, a := range actions {
			first, swept := fmt.Sprintf("lapse-%s-%d-first", cause.name[:5], i), fmt.Sprintf("lapse-%s-%d-swept", cause.name[:5], i)
			for _, saga := range []string{first, swept} {
				seq := v.gate(saga)
				for _, p := range cause.votes {
					v.mustApproveAs(saga, seq, p)
				}
			}
			clock.Add(cause.wait)
			answer := func(saga string) string {
				e := wantCode(t, fmt.Sprintf("%s after its time ran out (%s), %s", a.name, cause.name, saga), a.act(saga, 3), engine.Conflict,
					wire.CodeExpired)
				return times.ReplaceAllString(e.Msg, "<time>")
			}
			got := answer(first) // the action notices first
			if n, err := v.e.Lapse(ctx); err != nil || n != 1 {
				t.Errorf("Lapse = %d, %v; want the other request closed", n, err)
			}
			if again := answer(swept); again != got {
				t.Errorf("%s after its time ran out (%s): %q when the sweep noticed first, %q when it did; want one answer", a.name, cause.name, again, got)
			}
			if pa, pb := v.phases(first), v.phases(swept); !slices.Equal(pa, pb) {
				t.Errorf("%s (%s): the journals differ by who noticed first:\n%v\n%v", a.name, cause.name, pa, pb)
			}
			for _, saga := range []string{first, swept} {
				if v.status(saga) != wire.Compensated || v.pending(saga) != 0 || !v.verify(saga).Valid {
					t.Errorf("%s: saga %s, %d pending, %+v; want it closed, compensated and verifying", saga, v.status(saga), v.pending(saga), v.verify(saga))
				}
			}
		}
	}
	if v.fx.transfer.Load() != 0 {
		t.Errorf("the wire ran %d times; want never", v.fx.transfer.Load())
	}
}
