package demo_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/sagacity-go/sagacity/internal/demo"
	"github.com/sagacity-go/sagacity/internal/engine"
	"github.com/sagacity-go/sagacity/internal/store"
	"github.com/sagacity-go/sagacity/internal/testkit"
	"github.com/sagacity-go/sagacity/wire"
)

var auditor = engine.Principal{ID: "auditor", Roles: []engine.Role{engine.RoleAuditor, engine.RoleApprover}}

func TestSeed(t *testing.T) {
	ctx := context.Background()
	url := testkit.SQLiteURL(t)
	for run := range 2 { // a restart seeds nothing twice
		db, err := store.Open(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		e, err := engine.New(db, demo.Tools(db, time.Now), engine.WithKeys(testkit.Keys(t)))
		if err != nil {
			t.Fatal(err)
		}
		if err := demo.Seed(ctx, db, e); err != nil {
			t.Fatalf("run %d: Seed: %v", run, err)
		}
		sagas, err := e.Sagas(ctx, auditor, engine.SagaFilter{})
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]engine.Status{}
		for _, s := range sagas {
			got[s.ID] = s.Status
			if v, _ := e.Verify(ctx, auditor, s.ID); !v.Valid {
				t.Errorf("run %d: saga %s does not verify: %+v", run, s.ID, v)
			}
		}
		want := map[string]engine.Status{
			"order-1000": wire.Completed, "order-0999": wire.Compensated, "order-0998": wire.CompensationFailed,
			"order-1001": wire.Running, "order-1002": wire.AwaitingApproval, demo.Seeded: wire.AwaitingApproval,
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("run %d: demo sagas (-want +got):\n%s", run, diff)
		}
		reqs, _ := e.Approvals(ctx, auditor, demo.Seeded)
		if len(reqs) != 1 || reqs[0].JournalSeq != 3 || reqs[0].Input != `{"amount":"100","to":"alice"}` {
			t.Errorf("run %d: %s pending = %+v, want the seed's transfer at seq 3", run, demo.Seeded, reqs)
		}
		inv, err := db.Inventory(ctx)
		if err != nil {
			t.Fatal(err)
		}
		// Laptops: 1 sold (order-1000), 2 held (order-1001), 1 held (transfer-77);
		// the monitor and dock reservations were released by compensation.
		wantAvail := map[string]int64{"LAPTOP-13": 8, "MONITOR-27": 30, "DOCK-USB4": 8}
		for _, it := range inv {
			if it.Available != wantAvail[it.SKU] {
				t.Errorf("run %d: %s available = %d, want %d", run, it.SKU, it.Available, wantAvail[it.SKU])
			}
		}
		db.Close()
	}
}

func TestTools(t *testing.T) {
	ctx := context.Background()
	db, err := store.Open(ctx, testkit.SQLiteURL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.StockDemo(ctx, demo.Stock); err != nil {
		t.Fatal(err)
	}
	e, err := engine.New(db, demo.Tools(db, time.Now), engine.WithKeys(testkit.Keys(t)))
	if err != nil {
		t.Fatal(err)
	}
	p := engine.Principal{ID: "agent", Roles: engine.Roles}
	tests := []struct {
		tool, input string
		outcome     engine.Outcome
		text        string
	}{
		{"reserveInventory", `{"sku":"DOCK-USB4","qty":3}`, engine.OutcomeExecuted, `{"reserved":3,"sku":"DOCK-USB4","available":5}`},
		{"reserveInventory", `{"sku":"DOCK-USB4","qty":6}`, engine.OutcomeFailed, "only 5 of DOCK-USB4 available"},
		{"reserveInventory", `{"sku":"NOPE","qty":1}`, engine.OutcomeFailed, "SKU NOPE not found"},
		{"sendWireTransfer", `{"amount":"0","to":"bob"}`, engine.OutcomeFailed, `input needs a positive decimal "amount" and a "to"`},
	}
	// Inputs their schemas refuse are refused before anything is journaled.
	for _, in := range []struct{ tool, input string }{
		{"reserveInventory", `{"sku":"DOCK-USB4","color":"red"}`},
		{"sendWireTransfer", `{"amount":"-5","to":"bob"}`},
		{"bookCourier", `{"pickup":3}`},
	} {
		if _, err := e.Call(ctx, p, "refused", in.tool, in.input); !engine.IsKind(err, engine.Invalid) {
			t.Errorf("%s(%s) = %v, want invalid input", in.tool, in.input, err)
		}
	}
	for i, tt := range tests {
		saga := "t" + string(rune('a'+i))
		r, err := e.Call(ctx, p, saga, tt.tool, tt.input)
		if tt.tool == "sendWireTransfer" {
			_, _ = e.Approve(ctx, engine.Principal{ID: "boss", Roles: engine.Roles}, saga, r.Seq, "")
			rr, _ := e.Resume(ctx, p, saga, r.Seq, tt.input)
			r = rr.Call
		}
		text := r.Result + r.Error
		if err != nil || r.Outcome != tt.outcome || text != tt.text {
			t.Errorf("%s(%s) = %s %q, %v; want %s %q", tt.tool, tt.input, r.Outcome, text, err, tt.outcome, tt.text)
		}
	}
	// Compensation released the first reservation: all 8 docks are back.
	if _, err := e.Abort(ctx, p, "ta", ""); err != nil {
		t.Fatal(err)
	}
	inv, _ := db.Inventory(ctx)
	for _, it := range inv {
		if it.SKU == "DOCK-USB4" && it.Available != 8 {
			t.Errorf("after abort DOCK-USB4 available = %d, want 8", it.Available)
		}
	}
}

// TestPeople: the demo's people hold valid, distinct identities, and the
// seeded sagas give each something to do as the engine decides it: the
// approver-only and the reviewer may vote on the seeded transfer, the
// auditor-only may verify but not vote, and the agent that started it
// may do neither.
func TestPeople(t *testing.T) {
	ctx := context.Background()
	db, err := store.Open(ctx, testkit.SQLiteURL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	e, err := engine.New(db, demo.Tools(db, time.Now), engine.WithKeys(testkit.Keys(t)))
	if err != nil {
		t.Fatal(err)
	}
	if err := demo.Seed(ctx, db, e); err != nil {
		t.Fatal(err)
	}
	type may struct{ Approve, Verify bool }
	got := map[string]may{}
	for _, p := range demo.People {
		if _, dup := got[p.ID]; dup {
			t.Errorf("%s is in demo.People twice", p.ID)
		}
		names := make([]string, len(p.Roles))
		for i, r := range p.Roles {
			names[i] = string(r)
		}
		if _, err := engine.ParseRoles(names); err != nil {
			t.Errorf("%s's roles %v: %v", p.ID, p.Roles, err)
		}
		r, err := e.Review(ctx, p, demo.Seeded, 3)
		if err != nil && !engine.IsKind(err, engine.Forbidden) {
			t.Fatalf("Review(%s, %s, 3): %v", p.ID, demo.Seeded, err)
		}
		got[p.ID] = may{Approve: err == nil && e.Allowed(p, r).Approve, Verify: e.Can(p, engine.ActVerify, engine.Subject{}) == nil}
	}
	want := map[string]may{
		"reviewer@example.com": {Approve: true, Verify: true},
		"approver@example.com": {Approve: true, Verify: true}, // the engine lets approvers verify
		"auditor@example.com":  {Verify: true},
		"demo-agent":           {},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("what the demo's people may do with %s (-want +got):\n%s", demo.Seeded, diff)
	}
}
