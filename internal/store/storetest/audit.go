package storetest

import (
	"testing"
	"time"

	"github.com/sagacity-go/sagacity/internal/engine"
)

// testVerifyAll: the engine's verification of every saga runs in the
// background, one run at a time, counts what it did and names the sagas
// that do not verify.
func testVerifyAll(t *testing.T, v *env) {
	for _, saga := range []string{"a", "b", "c"} {
		v.call(saga, "reserveInventory", `{"item":"laptop"}`)
	}
	v.h.Exec(t, "UPDATE journal SET input = $1 WHERE saga_id = $2 AND seq = 1", `{"item":"yacht"}`, "b")
	wantKind(t, "VerifyAll by an agent", v.e.VerifyAll(agent), engine.Forbidden)
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
	wantKind(t, "AuditRun by an agent", err, engine.Forbidden)
}
