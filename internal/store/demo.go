package store

import (
	"context"
	"time"

	"github.com/sagacity-go/sagacity/internal/demo"
	"github.com/sagacity-go/sagacity/internal/engine"
)

// The demo inventory, reservations and ledger belong to demo: the store
// keeps them for it, in its types. Every effect is keyed by the call's
// idempotency key, so a repeated call changes nothing twice.

// StockDemo adds the items that are not in the inventory yet.
func (s *sqlStore) StockDemo(ctx context.Context, items []demo.Item) error {
	return s.small(ctx, func(c conn) error {
		for _, it := range items {
			if _, err := c.exec(ctx, "INSERT INTO demo_inventory (sku, name, on_hand) VALUES ($1, $2, $3)"+
				" ON CONFLICT (sku) DO NOTHING", it.SKU, it.Name, it.OnHand); err != nil {
				return err
			}
		}
		return nil
	})
}

// Inventory lists the demo inventory by SKU.
func (s *sqlStore) Inventory(ctx context.Context) ([]demo.Item, error) {
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	return collect(ctx, s.db, func(r rows) (it demo.Item, err error) {
		return it, r.Scan(&it.SKU, &it.Name, &it.OnHand, &it.Available)
	}, "SELECT i.sku, i.name, i.on_hand, i.on_hand - COALESCE(SUM(r.qty), 0) FROM demo_inventory i"+
		" LEFT JOIN demo_reservations r ON r.sku = i.sku AND NOT r.released"+
		" GROUP BY i.sku, i.name, i.on_hand ORDER BY i.sku")
}

// Reserve holds qty of sku under key and returns what is left available.
// NotFound for an unknown SKU; Conflict when not enough is available.
func (s *sqlStore) Reserve(ctx context.Context, key, sku string, qty int64, at time.Time) (int64, error) {
	var left int64
	err := s.small(ctx, func(c conn) error {
		item, err := one(ctx, c, func(r rows) (n int64, err error) { return n, r.Scan(&n) },
			"SKU "+sku, "SELECT on_hand FROM demo_inventory WHERE sku = $1"+s.lock, sku)
		if err != nil {
			return err
		}
		held, err := one(ctx, c, func(r rows) (n int64, err error) { return n, r.Scan(&n) }, "sum",
			"SELECT COALESCE(SUM(qty), 0) FROM demo_reservations WHERE sku = $1 AND NOT released AND idempotency_key <> $2", sku, key)
		if err != nil {
			return err
		}
		if left = item - held - qty; left < 0 {
			return engine.Errorf(engine.Conflict, "only %d of %s available", item-held, sku)
		}
		_, err = c.exec(ctx, "INSERT INTO demo_reservations (idempotency_key, sku, qty, created_at) VALUES ($1, $2, $3, $4)"+
			" ON CONFLICT (idempotency_key) DO NOTHING", key, sku, qty, at)
		return err
	})
	return left, err
}

// Release returns a reservation to the inventory; releasing twice, or
// something never reserved, changes nothing.
func (s *sqlStore) Release(ctx context.Context, key string) error {
	return s.small(ctx, func(c conn) error {
		_, err := c.exec(ctx, "UPDATE demo_reservations SET released = true WHERE idempotency_key = $1", key)
		return err
	})
}

// Transfer books a payment to beneficiary in the demo ledger.
func (s *sqlStore) Transfer(ctx context.Context, key, beneficiary, amount string, at time.Time) error {
	return s.small(ctx, func(c conn) error {
		_, err := c.exec(ctx, "INSERT INTO demo_ledger (idempotency_key, beneficiary, amount, created_at) VALUES ($1, $2, $3, $4)"+
			" ON CONFLICT (idempotency_key) DO NOTHING", key, beneficiary, amount, at)
		return err
	})
}
