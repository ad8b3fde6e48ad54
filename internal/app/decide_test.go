package app_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/sagacity-go/sagacity/internal/engine"
)

// TestDecideReviews: with every decision the console takes, the engine
// returns the request as it stands afterwards (Engine.Decide), which the
// console shows without reading and verifying the journal again: what
// Review reads once the decision is made, with the verification the
// decision made of the journal before its own entries; an action that decides nothing is Invalid, and a refused
// decision returns no request.
func TestDecideReviews(t *testing.T) {
	t.Parallel()
	stores(t, func(t *testing.T, dbURL string) {
		e := newAPI(t, dbURL, envOptions{})
		ctx := t.Context()
		reviewer := engine.Principal{ID: "reviewer@example.com", Auth: engine.AuthDev, Roles: []engine.Role{engine.RoleApprover}}
		for _, saga := range []string{"pay", "back", "no"} {
			e.seedScenario(saga)
		}
		for _, step := range []struct {
			saga   string
			action engine.Action
			reason string
			state  engine.RequestState
		}{
			{"pay", engine.ActApprove, "fine", engine.StateApproved},
			{"pay", engine.ActWithdraw, "not yet", engine.StateUndecided},
			{"pay", engine.ActApprove, "", engine.StateApproved},
			{"pay", engine.ActResume, "", engine.StateExecuted},
			{"back", engine.ActRequestChanges, "pay bob instead", engine.StateChangesRequested},
			{"no", engine.ActReject, "", engine.StateRejected},
		} {
			before, err := e.eng.Review(ctx, reviewer, step.saga, 3)
			if err != nil {
				t.Fatalf("Review(%s) before %s: %v", step.saga, step.action, err)
			}
			got, err := e.eng.Decide(ctx, reviewer, step.action, step.saga, 3, step.reason)
			if err != nil {
				t.Fatalf("Decide(%s, %s): %v", step.saga, step.action, err)
			}
			want, err := e.eng.Review(ctx, reviewer, step.saga, 3)
			if err != nil {
				t.Fatalf("Review(%s) after %s: %v", step.saga, step.action, err)
			}
			// The decision's verification is of the journal it acted on,
			// before its own entries: not verified again after them.
			if got.State != step.state || !got.Verification.Valid || got.Verification.EntryCount != len(before.Journal) {
				t.Errorf("Decide(%s, %s) = %s, verified %+v; want %s, verified as the decision found the %d entries before it",
					step.saga, step.action, got.State, got.Verification, step.state, len(before.Journal))
			}
			if diff := cmp.Diff(want, got, cmpopts.IgnoreFields(engine.Review{}, "Verification", "Rule"), cmpopts.IgnoreUnexported(engine.Rule{}),
				cmpopts.EquateEmpty()); diff != "" || got.Rule == nil || got.Rule.Name != want.Rule.Name {
				t.Errorf("Decide(%s, %s) returned another request than Review reads after it (-Review +Decide):\n%s", step.saga, step.action, diff)
			}
		}
		if got, err := e.eng.Decide(ctx, reviewer, engine.ActRead, "pay", 3, ""); !engine.IsKind(err, engine.Invalid) || got.Gated.Seq != 0 {
			t.Errorf("Decide(read) = %+v, %v; want Invalid", got.State, err)
		}
		if got, err := e.eng.Decide(ctx, reviewer, engine.ActApprove, "pay", 3, ""); !engine.IsKind(err, engine.NotFound) || got.Gated.Seq != 0 {
			t.Errorf("Decide(approve) of an executed request = %s, %v; want NotFound and no request", got.State, err)
		}
	})
}
