// Package demo is what a new user sees first (SAGACITY_DEMO=true): built-in
// tools that keep an inventory and a bank ledger in the database, and a few
// sagas seeded through the real engine in every state.
package demo

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"time"

	"github.com/sagacity-go/sagacity/internal/engine"
)

// Item is a line of the demo inventory.
type Item struct {
	SKU       string
	Name      string
	OnHand    int64
	Available int64 // on hand minus unreleased reservations
}

// Store is the demo tools' state: an inventory and a bank ledger. Every
// effect is keyed by the call's idempotency key, so a repeated call changes
// nothing twice. Implementations map their errors to engine kinds.
type Store interface {
	// StockDemo adds the items that are not in the inventory yet.
	StockDemo(ctx context.Context, items []Item) error
	// Reserve holds qty of sku under key and returns what is left
	// available. NotFound for an unknown SKU; Conflict when not enough is
	// available.
	Reserve(ctx context.Context, key, sku string, qty int64, at time.Time) (int64, error)
	// Release returns a reservation to the inventory; releasing twice, or
	// something never reserved, changes nothing.
	Release(ctx context.Context, key string) error
	// Transfer books a payment to beneficiary in the ledger.
	Transfer(ctx context.Context, key, beneficiary, amount string, at time.Time) error
}

// Stock is the inventory the demo starts with.
var Stock = []Item{
	{SKU: "LAPTOP-13", Name: "13-inch laptop", OnHand: 12},
	{SKU: "MONITOR-27", Name: "27-inch monitor", OnHand: 30},
	{SKU: "DOCK-USB4", Name: "USB4 dock", OnHand: 8},
}

// Tools returns the built-in tools:
//   - reserveInventory {"sku","qty"} (COMPENSATABLE): holds stock; undone by releasing it.
//   - bookCourier {"pickup"} (COMPENSATABLE): books a pickup; cancelling one with
//     pickup "now" fails, because the courier has already collected the parcel.
//   - sendWireTransfer {"amount","to"} (IRREVERSIBLE): books a payment in the ledger.
func Tools(s Store, now func() time.Time) []engine.Tool {
	// The ledger keeps each effect under the call's idempotency key, as
	// a tool behind HTTP would.
	key := func(inv engine.Invocation) string { return inv.Key(engine.ToolExecute) }
	return []engine.Tool{
		{Name: "reserveInventory", Reversibility: engine.Compensatable,
			Description: "Reserves qty units (default 1) of the item sku from the demo inventory; undone by releasing them.",
			InputSchema: []byte(`{"type":"object","properties":{"sku":{"type":"string","minLength":1},` +
				`"qty":{"type":"integer","minimum":0}},"required":["sku"],"additionalProperties":false}`),
			Executor: engine.Funcs{
				Exec: func(ctx context.Context, inv engine.Invocation) (string, error) {
					var in struct {
						SKU string `json:"sku"`
						Qty int64  `json:"qty"`
					}
					if err := strict(inv.Input, &in); err != nil {
						return "", err
					}
					if in.Qty == 0 {
						in.Qty = 1
					}
					if in.SKU == "" || in.Qty < 0 {
						return "", errors.New(`input needs "sku" and a positive "qty"`)
					}
					left, err := s.Reserve(ctx, key(inv), in.SKU, in.Qty, now())
					if err != nil {
						return "", toolError(err)
					}
					return fmt.Sprintf(`{"reserved":%d,"sku":%q,"available":%d}`, in.Qty, in.SKU, left), nil
				},
				Undo: func(ctx context.Context, inv engine.Invocation, _ string) error {
					return toolError(s.Release(ctx, key(inv)))
				},
			}},
		{Name: "bookCourier", Reversibility: engine.Compensatable,
			Description: "Books a courier to collect the parcel at pickup (\"now\" or a time); undone by cancelling, which fails once collected.",
			InputSchema: []byte(`{"type":"object","properties":{"pickup":{"type":"string"}},"additionalProperties":false}`),
			Executor: engine.Funcs{
				Exec: func(ctx context.Context, inv engine.Invocation) (string, error) {
					var in struct {
						Pickup string `json:"pickup"`
					}
					if err := strict(inv.Input, &in); err != nil {
						return "", err
					}
					return fmt.Sprintf(`{"booking":"C-%d","pickup":%q}`, inv.Seq, in.Pickup), nil
				},
				Undo: func(ctx context.Context, inv engine.Invocation, _ string) error {
					var in struct {
						Pickup string `json:"pickup"`
					}
					if strict(inv.Input, &in) == nil && in.Pickup == "now" {
						return errors.New("courier already collected the parcel; cancel by phone")
					}
					return nil
				},
			}},
		{Name: "sendWireTransfer", Reversibility: engine.Irreversible,
			Description: "Wires amount (a positive decimal, as a string) to the account to. It cannot be undone, so a person approves each transfer.",
			InputSchema: []byte(`{"type":"object","properties":{"amount":{"type":"string","pattern":"^[0-9]+(\\.[0-9]+)?$"},` +
				`"to":{"type":"string","minLength":1}},"required":["amount","to"],"additionalProperties":false}`),
			Executor: engine.Funcs{
				Exec: func(ctx context.Context, inv engine.Invocation) (string, error) {
					var in struct {
						Amount string `json:"amount"`
						To     string `json:"to"`
					}
					if err := strict(inv.Input, &in); err != nil {
						return "", err
					}
					if r, ok := new(big.Rat).SetString(in.Amount); !ok || r.Sign() <= 0 || in.To == "" {
						return "", errors.New(`input needs a positive decimal "amount" and a "to"`)
					}
					if err := s.Transfer(ctx, key(inv), in.To, in.Amount, now()); err != nil {
						return "", toolError(err)
					}
					return "transfer-ok", nil
				},
			}},
	}
}

// strict decodes a tool input: one JSON object with known fields only.
func strict(input string, v any) error {
	dec := json.NewDecoder(bytes.NewReader([]byte(input)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("input is not the expected JSON object: %w", err)
	}
	if dec.More() {
		return errors.New("input is not the expected JSON object: more than one JSON value")
	}
	return nil
}

// toolError keeps a tool's failure text free of database detail.
func toolError(err error) error {
	if e, ok := errors.AsType[*engine.Error](err); ok && e.Kind != engine.Internal && e.Kind != engine.Unavailable {
		return errors.New(e.Msg)
	}
	return err
}

// Principals the seeded sagas are written by.
var (
	agent    = engine.Principal{ID: "demo-agent", Auth: engine.AuthToken, Roles: []engine.Role{engine.RoleAgent}}
	reviewer = engine.Principal{ID: "reviewer@example.com", Auth: engine.AuthDev, Roles: []engine.Role{engine.RoleApprover, engine.RoleAuditor}}
)

// People are whom dev mode's sign-in page offers with one click, a view
// of the console each: the reviewer who decided the seeded requests, an
// approver and an auditor with one role alone, and the agent that started
// every demo saga (which sees only its own sagas and decides none of their
// requests). Neither the approver nor the auditor started or asked for
// anything, so four-eyes lets the approver vote on transfer-77.
var People = []engine.Principal{
	{ID: reviewer.ID, Roles: reviewer.Roles},
	{ID: "approver@example.com", Roles: []engine.Role{engine.RoleApprover}},
	{ID: "auditor@example.com", Roles: []engine.Role{engine.RoleAuditor}},
	{ID: agent.ID, Roles: agent.Roles},
}

// Seeded is the saga the README's walkthrough approves: the seed's
// transfer-77, awaiting approval of {"amount":"100","to":"alice"} at seq 3.
const Seeded = "transfer-77"

// Seed stocks the inventory and writes the demo sagas through the engine,
// unless they are there already: one completed, one compensated after a
// refused stale resume, one whose compensation failed, one still running,
// one awaiting a re-planned transfer, and transfer-77 awaiting approval.
func Seed(ctx context.Context, s Store, e *engine.Engine) error {
	if err := s.StockDemo(ctx, Stock); err != nil {
		return err
	}
	if _, err := e.Lookup(ctx, reviewer, Seeded); err == nil {
		return nil
	} else if !engine.IsKind(err, engine.NotFound) {
		return err
	}
	type step struct {
		do   func() error
		what string
	}
	call := func(saga, tool, input string) step {
		return step{func() error { _, err := e.Call(ctx, agent, saga, tool, input); return err }, saga + " " + tool}
	}
	approve := func(saga string, seq int64, reason string) step {
		return step{func() error { _, err := e.Approve(ctx, reviewer, saga, seq, reason); return err }, saga + " approve"}
	}
	end := func(saga string) step {
		return step{func() error { _, err := e.End(ctx, agent, saga); return err }, saga + " end"}
	}
	resume := func(saga string, seq int64, payload string) step {
		return step{func() error { _, err := e.Resume(ctx, agent, saga, seq, payload); return err }, saga + " resume"}
	}
	steps := []step{
		call("order-1000", "reserveInventory", `{"sku":"LAPTOP-13","qty":1}`),
		call("order-1000", "sendWireTransfer", `{"amount":"1299.00","to":"ACME Supplies GmbH"}`),
		approve("order-1000", 3, "matches purchase order PO-1000"),
		end("order-1000"),
		resume("order-1000", 3, `{"amount":"1299.00","to":"ACME Supplies GmbH"}`),

		call("order-0999", "reserveInventory", `{"sku":"MONITOR-27","qty":2}`),
		call("order-0999", "sendWireTransfer", `{"amount":"640.00","to":"Display Partners"}`),
		approve("order-0999", 3, ""),
		end("order-0999"),
		resume("order-0999", 3, `{"amount":"6400.00","to":"Display Partners"}`), // the model re-planned: refused

		call("order-0998", "reserveInventory", `{"sku":"DOCK-USB4","qty":1}`),
		call("order-0998", "bookCourier", `{"pickup":"now"}`),
		call("order-0998", "sendWireTransfer", `{"amount":"89.90","to":"Quick Docks Ltd"}`),
		{func() error {
			_, err := e.Reject(ctx, reviewer, "order-0998", 5, "vendor is not on the approved list")
			return err
		}, "order-0998 reject"},

		call("order-1001", "reserveInventory", `{"sku":"LAPTOP-13","qty":2}`),

		call("order-1002", "sendWireTransfer", `{"amount":"250.00","to":"bob"}`),
		call("order-1002", "sendWireTransfer", `{"amount":"2500.00","to":"bob"}`),
		end("order-1002"),

		call(Seeded, "reserveInventory", `{"sku":"LAPTOP-13","qty":1}`),
		call(Seeded, "sendWireTransfer", `{"amount":"100","to":"alice"}`),
		end(Seeded),
	}
	for _, st := range steps {
		if err := st.do(); err != nil {
			return fmt.Errorf("seeding demo (%s): %w", st.what, err)
		}
	}
	return nil
}
