package storetest

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/sagacity-go/sagacity/internal/demo"
	"github.com/sagacity-go/sagacity/internal/engine"
)

// demo.Store and DB.Inventory: the demo's inventory and ledger.

// stock is this test's dock and laptop, with the given quantities
// available.
func (d *drv) stock(dock, laptop int64) []demo.Item {
	return []demo.Item{
		{SKU: d.id("DOCK-USB4"), Name: "USB4 dock", OnHand: 8, Available: dock},
		{SKU: d.id("LAPTOP-13"), Name: "13-inch laptop", OnHand: 12, Available: laptop},
	}
}

func stockDemo(t *testing.T, db DB, items []demo.Item) {
	t.Helper()
	if err := db.StockDemo(t.Context(), items); err != nil {
		t.Fatalf("StockDemo(%+v): %v", items, err)
	}
}

// wantInventory fails unless this test's lines of Inventory are want.
func wantInventory(t *testing.T, d *drv, what string, want []demo.Item) {
	t.Helper()
	got, err := d.db.Inventory(t.Context())
	got = slices.DeleteFunc(got, func(it demo.Item) bool { return !strings.HasPrefix(it.SKU, d.ns) })
	if diff := cmp.Diff(want, got, exact...); err != nil || diff != "" {
		t.Errorf("Inventory() %s = %v; (-want +got):\n%s", what, err, diff)
	}
}

func testStockDemo(t *testing.T, d *drv) {
	monitor := demo.Item{SKU: d.id("MONITOR-27"), Name: "27-inch monitor", OnHand: 30}
	renamed := d.stock(0, 0)[0]
	renamed.Name, renamed.OnHand = "renamed", 99
	// In order: each step sees what the ones before stocked.
	steps := []struct {
		name  string
		items []demo.Item
		want  []demo.Item
	}{
		{"nothing", nil, nil},
		{"adds", []demo.Item{d.stock(0, 0)[1], d.stock(0, 0)[0]}, d.stock(8, 12)},
		{"keeps the items it has", []demo.Item{renamed, monitor},
			append(d.stock(8, 12), demo.Item{SKU: monitor.SKU, Name: monitor.Name, OnHand: 30, Available: 30})},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			stockDemo(t, d.db, st.items)
			wantInventory(t, d, fmt.Sprintf("after StockDemo(%+v)", st.items), st.want)
		})
	}
}

func testInventory(t *testing.T, d *drv) {
	ctx := t.Context()
	// The whole listing: this test has a database of its own.
	wantAll := func(t *testing.T, what string, want []demo.Item) {
		t.Helper()
		got, err := d.db.Inventory(ctx)
		if diff := cmp.Diff(want, got, exact...); err != nil || diff != "" {
			t.Errorf("Inventory() %s = %v; (-want +got):\n%s", what, err, diff)
		}
	}
	t.Run("empty", func(t *testing.T) { wantAll(t, "of an empty store", nil) })
	t.Run("by SKU, less what is held", func(t *testing.T) {
		// Stocked in reverse, and named in another order.
		monitor := demo.Item{SKU: d.id("MONITOR-27"), Name: "27-inch monitor", OnHand: 30}
		stockDemo(t, d.db, []demo.Item{monitor, d.stock(0, 0)[1], d.stock(0, 0)[0]})
		laptop, dock := d.id("LAPTOP-13"), d.id("DOCK-USB4")
		for _, r := range []struct {
			key, sku string
			qty      int64
		}{{"k1", laptop, 2}, {"k2", laptop, 3}, {"k3", dock, 1}} {
			if _, err := d.db.Reserve(ctx, d.id(r.key), r.sku, r.qty, when(1)); err != nil {
				t.Fatalf("Reserve(%s, %s, %d): %v", d.id(r.key), r.sku, r.qty, err)
			}
		}
		if err := d.db.Release(ctx, d.id("k1")); err != nil {
			t.Fatalf("Release(%s): %v", d.id("k1"), err)
		}
		monitor.Available = 30
		wantAll(t, "with 3 laptops and 1 dock held", append(d.stock(7, 9), monitor))
	})
}

func testReserve(t *testing.T, d *drv) {
	stockDemo(t, d.db, d.stock(0, 0))
	dock, laptop := d.id("DOCK-USB4"), d.id("LAPTOP-13")
	// In order: each step sees what the ones before held.
	steps := []struct {
		name, key, sku string
		qty            int64
		left           int64
		kind           *engine.Kind
		dock, laptop   int64 // available afterwards
	}{
		{"holds", "k1", dock, 3, 5, nil, 5, 12},
		{"same key again changes nothing", "k1", dock, 3, 5, nil, 5, 12},
		{"more than available", "k2", dock, 6, 0, new(engine.Conflict), 5, 12},
		{"all that is available", "k2", dock, 5, 0, nil, 0, 12},
		{"none available", "k3", dock, 1, 0, new(engine.Conflict), 0, 12},
		{"unknown SKU", "k4", d.id("NOPE"), 1, 0, new(engine.NotFound), 0, 12},
		{"another SKU", "k5", laptop, 12, 0, nil, 0, 0},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			left, err := d.db.Reserve(t.Context(), d.id(st.key), st.sku, st.qty, when(1))
			what := fmt.Sprintf("Reserve(%s, %s, %d)", d.id(st.key), st.sku, st.qty)
			wantErr(t, what, err, st.kind)
			if err == nil && left != st.left {
				t.Errorf("%s = %d, want %d left", what, left, st.left)
			}
			wantInventory(t, d, "after "+what, d.stock(st.dock, st.laptop))
		})
	}
	t.Run("one reservation a key", func(t *testing.T) {
		q := "SELECT count(*) FROM demo_reservations WHERE idempotency_key = $1 AND sku = $2 AND qty = $3 AND created_at = $4"
		if n := d.h.Count(t, q, d.id("k1"), dock, 3, stored(when(1))); n != 1 {
			t.Errorf("reservations of 3 %s under %s after reserving them twice = %d, want 1", dock, d.id("k1"), n)
		}
		if n := d.h.Count(t, "SELECT count(*) FROM demo_reservations WHERE idempotency_key LIKE $1", d.ns+"%"); n != 3 {
			t.Errorf("reservations = %d, want 3 (k1, k2, k5)", n)
		}
	})
}

func testRelease(t *testing.T, d *drv) {
	ctx := t.Context()
	stockDemo(t, d.db, d.stock(0, 0))
	for _, r := range []struct {
		key string
		qty int64
	}{{"k1", 3}, {"k2", 2}} {
		if _, err := d.db.Reserve(ctx, d.id(r.key), d.id("DOCK-USB4"), r.qty, when(1)); err != nil {
			t.Fatalf("Reserve(%s, %s, %d): %v", d.id(r.key), d.id("DOCK-USB4"), r.qty, err)
		}
	}
	// In order: each step sees what the ones before released.
	steps := []struct {
		name, key string
		dock      int64 // available afterwards
	}{
		{"returns the reservation", "k1", 6},
		{"twice changes nothing", "k1", 6},
		{"never reserved changes nothing", "nope", 6},
		{"another", "k2", 8},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			if err := d.db.Release(ctx, d.id(st.key)); err != nil {
				t.Errorf("Release(%s) = %v, want nil", d.id(st.key), err)
			}
			wantInventory(t, d, "after Release("+d.id(st.key)+")", d.stock(st.dock, 12))
		})
	}
}

func testTransfer(t *testing.T, d *drv) {
	ctx := t.Context()
	// In order: each step sees what the ones before booked.
	steps := []struct {
		name, key, beneficiary, amount string
		at                             time.Time
		rows                           int64 // this test's rows in the ledger afterwards
	}{
		{"books", "k1", "alice", "100.00", when(0), 1},
		{"same key again books nothing", "k1", "mallory", "999999", when(1), 1},
		{"another key books again", "k2", "alice", "100.00", when(2), 2},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			what := fmt.Sprintf("Transfer(%s, %s, %s)", d.id(st.key), st.beneficiary, st.amount)
			if err := d.db.Transfer(ctx, d.id(st.key), st.beneficiary, st.amount, st.at); err != nil {
				t.Errorf("%s = %v, want nil", what, err)
			}
			if n := d.h.Count(t, "SELECT count(*) FROM demo_ledger WHERE idempotency_key LIKE $1", d.ns+"%"); n != st.rows {
				t.Errorf("ledger rows after %s = %d, want %d", what, n, st.rows)
			}
		})
	}
	t.Run("the first booking a key is kept", func(t *testing.T) {
		for _, st := range steps[:1] {
			q := "SELECT count(*) FROM demo_ledger WHERE idempotency_key = $1 AND beneficiary = $2 AND amount = $3 AND created_at = $4"
			if n := d.h.Count(t, q, d.id(st.key), st.beneficiary, st.amount, stored(st.at)); n != 1 {
				t.Errorf("ledger rows for %s as first booked (%s, %s at %v) = %d, want 1", d.id(st.key), st.beneficiary, st.amount, stored(st.at), n)
			}
		}
	})
}
