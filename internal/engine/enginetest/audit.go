package enginetest

import (
	"context"
	"testing"
	"time"

	"github.com/sagacity-go/sagacity/internal/engine"
	"github.com/sagacity-go/sagacity/internal/testkit"
)

// testVerifyAll: the engine's verification of every saga runs in the
// background, one run at a time, counts what it did and names the sagas
// that do not verify.
func testVerifyAll(t *testing.T, v *env) {
	for _, saga := range []string{"a", "b", "c"} {
		v.call(saga, "reserveInventory", `{"item":"laptop"}`)
	}
	v.h.Exec(t, "UPDATE journal SET input = $1 WHERE saga_id = $2 AND seq = 1", `{"item":"yacht"}`, "b")
	testkit.WantKind(t, "VerifyAll by an agent", v.e.VerifyAll(agent), engine.Forbidden)
	if err := v.e.VerifyAll(auditor); err != nil {
		t.Fatal(err)
	}
	var run engine.AuditRun
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		var err error
		if run, err = v.e.AuditRun(auditor); err != nil {
			t.Fatal(err)
		}
		if !run.Running || time.Now().After(deadline) {
			break
		}
	}
	if run.Running || run.Total != 3 || run.Done != 3 || run.Err != "" || run.Started.IsZero() || run.Finished.Before(run.Started) ||
		len(run.Broken) != 1 || run.Broken[0].Saga.ID != "b" || run.Broken[0].Verification.BreakAtIndex != 0 {
		t.Errorf("AuditRun = %+v; want 3 sagas verified, b broken at its first entry", run)
	}
	_, err := v.e.AuditRun(agent)
	testkit.WantKind(t, "AuditRun by an agent", err, engine.Forbidden)

	// What the run found of each saga is kept, with when, for the audit
	// page to list without verifying again.
	kept, err := v.e.Verifications(context.Background(), auditor, []string{"a", "b", "c", "nobody"})
	if err != nil {
		t.Fatal(err)
	}
	if len(kept) != 3 || !kept["a"].Verification.Valid || kept["b"].Verification.Valid || kept["b"].Verification.BreakAtIndex != 0 ||
		!kept["c"].Verification.Valid || kept["a"].HeadSeq != 2 || kept["a"].At.Before(run.Started) || kept["a"].At.After(run.Finished) {
		t.Errorf("Verifications after the run = %+v; want a and c verified and b broken at its first entry, at seq 2, during the run", kept)
	}
	_, err = v.e.Verifications(context.Background(), agent, []string{"a"})
	testkit.WantKind(t, "Verifications by an agent", err, engine.Forbidden)

	// A single verification is kept too: one made after the saga moved
	// on, and one from the verification page.
	v.call("a", "reserveInventory", `{"item":"dock"}`)
	v.verify("a")
	v.call("c", "reserveInventory", `{"item":"dock"}`)
	if _, err := v.e.Audit(context.Background(), auditor, "c"); err != nil {
		t.Fatal(err)
	}
	_, err = v.e.Audit(context.Background(), agent, "c")
	testkit.WantKind(t, "Audit by an agent", err, engine.Forbidden)
	if _, err := v.e.Audit(context.Background(), auditor, "nobody"); !engine.IsKind(err, engine.NotFound) {
		t.Errorf("Audit of no saga = %v, want NotFound", err)
	}
	if kept, err = v.e.Verifications(context.Background(), auditor, []string{"a", "c", "nobody"}); err != nil {
		t.Fatal(err)
	}
	if len(kept) != 2 || kept["a"].HeadSeq != 4 || kept["c"].HeadSeq != 4 || kept["a"].Verification.EntryCount != 4 {
		t.Errorf("Verifications after verifying a and c again = %+v; want both at seq 4, and nothing of a saga that is none", kept)
	}
}
