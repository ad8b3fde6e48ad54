package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sagacity-go/sagacity/evidence"
	"github.com/sagacity-go/sagacity/internal/engine"
	"github.com/sagacity-go/sagacity/internal/store"
	"github.com/sagacity-go/sagacity/internal/testkit"
	"github.com/sagacity-go/sagacity/wire"
)

// TestVerifyUndoneByHand: a journal in which a person recorded that they
// undid by hand a step whose undo failed verifies offline, its receipt
// included, as the server verifies it.
func TestVerifyUndoneByHand(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, err := store.Open(ctx, testkit.SQLiteURL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	charge := engine.Funcs{Exec: func(context.Context, engine.Invocation) (string, error) { return "charged", nil },
		Undo: func(context.Context, engine.Invocation, string) error { return errors.New("card processor down") }}
	ship := engine.Funcs{Exec: func(context.Context, engine.Invocation) (string, error) { return "", errors.New("no carrier") }}
	e, err := engine.New(db, []engine.Tool{{Name: "chargeCard", Executor: charge}, {Name: "scheduleShipment", Executor: ship}},
		engine.WithKeys(testkit.Keys(t)))
	if err != nil {
		t.Fatal(err)
	}
	agent := engine.Principal{ID: "agent", Auth: engine.AuthToken, Roles: []engine.Role{engine.RoleAgent}}
	operator := engine.Principal{ID: "ops@example.com", Auth: engine.AuthOIDC, Roles: []engine.Role{engine.RoleApprover}}
	if _, err := e.Call(ctx, agent, "s1", "chargeCard", `{"cents":100}`); err != nil {
		t.Fatal(err)
	}
	if r, err := e.Call(ctx, agent, "s1", "scheduleShipment", "{}"); err != nil || r.Status != wire.CompensationFailed {
		t.Fatalf("the failed call = %+v, %v; want COMPENSATION_FAILED", r, err)
	}
	if s, err := e.Resolve(ctx, operator, "s1", 1, true, "", "refunded in the processor's dashboard"); err != nil || s.Status != wire.Compensated {
		t.Fatalf("Resolve(undone by hand) = %+v, %v; want COMPENSATED", s, err)
	}
	es, err := e.Journal(ctx, operator, "s1")
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := evidence.WriteNDJSON(&b, es, nil); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "s1.ndjson")
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, _ := offlineRun(t, "verify", "-key", testkit.Keys(t).VerifierKey(), path)
	if code != 0 || !strings.HasPrefix(out, `{"valid":true,"entryCount":6,"breakAtIndex":-1,"message":"all 6 entries verified`) {
		t.Errorf("verify -key (undone by hand) = exit %d %s; want 0 and all 6 entries verified", code, out)
	}
	// Its receipt is checked: the record with another reason is refused.
	forged := bytes.Replace(b.Bytes(), []byte(`reason=refunded in the processor's dashboard`), []byte(`reason=refunded by phone`), 1)
	tampered, _, err := evidence.ReadNDJSON(bytes.NewReader(forged))
	if err != nil {
		t.Fatal(err)
	}
	tampered[5].Hash = engine.Hash(tampered[4].Hash, tampered[5])
	b.Reset()
	if err := evidence.WriteNDJSON(&b, tampered, nil); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, _ = offlineRun(t, "verify", "-key", testkit.Keys(t).VerifierKey(), path)
	if code != 1 || !strings.Contains(out, "receipt of seq=6 (entry 5) does not hold: it was signed for another reason") {
		t.Errorf("verify -key (the record's reason rewritten) = exit %d %s; want 1 and its receipt broken", code, out)
	}
}
