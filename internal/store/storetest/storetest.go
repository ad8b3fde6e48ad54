// Package storetest is the conformance suite every store must pass: a
// test per store method, calling it directly on each database (river's
// riverdrivertest), a file per interface the method belongs to, so a
// store that drifts is caught at the method. Harness is one fresh
// database of the store under test; enginetest's scenarios, which drive
// the real engine over a store, run on the same Harness.
package storetest

import (
	"context"
	"testing"

	"github.com/sagacity-go/sagacity/internal/auth"
	"github.com/sagacity-go/sagacity/internal/demo"
	"github.com/sagacity-go/sagacity/internal/engine"
	"github.com/sagacity-go/sagacity/internal/testkit"
	"github.com/sagacity-go/sagacity/internal/tlog"
)

// DB is a store handle the suites can close: the engine's store, and the
// tables it keeps for auth and for demo.
type DB interface {
	engine.Store
	tlog.Store
	auth.SessionStore
	demo.Store
	// Grouped counts the transactions that committed the writes of two
	// Updates or more, and those Updates.
	Grouped() (transactions, members int64)
	// Inventory lists the demo inventory by SKU.
	Inventory(ctx context.Context) ([]demo.Item, error)
	Close()
}

// Harness is one fresh, empty database.
type Harness struct {
	// Open opens another handle on the database, as a second process or
	// a restart would. The suites close the handles they open.
	Open func(t *testing.T) DB
	// Exec runs raw SQL on the database ($1-style parameters), for
	// tampering with what the engine wrote.
	Exec func(t *testing.T, sql string, args ...any)
	// Count runs a query returning one integer on the database, for rows
	// no store method reads (the demo ledger and reservations).
	Count func(t *testing.T, sql string, args ...any) int64
	// Dialect is "postgres" or "sqlite", for tampering only one of them
	// allows (SQLite keeps text in an integer column).
	Dialect string
}

// NewHarness is the Harness of the database at url (a testkit url of
// dialect "postgres" or "sqlite"), whose handles open opens.
func NewHarness[S DB](url, dialect string, open func(ctx context.Context, url string) (S, error)) Harness {
	return Harness{
		Dialect: dialect,
		Open: func(t *testing.T) DB {
			db, err := open(context.Background(), url)
			if err != nil {
				t.Fatalf("Open(%s): %v", url, err)
			}
			return db
		},
		Exec:  func(t *testing.T, sql string, args ...any) { testkit.Exec(t, url, sql, args...) },
		Count: func(t *testing.T, sql string, args ...any) int64 { return testkit.Count(t, url, sql, args...) },
	}
}

// Orphanable lets a journal row name a saga that has no row: SQLite
// checks no foreign key on a connection that did not ask it to, and an
// insider who owns the PostgreSQL schema drops the constraint.
func (h Harness) Orphanable(t *testing.T) {
	t.Helper()
	if h.Dialect == "postgres" {
		h.Exec(t, "ALTER TABLE journal DROP CONSTRAINT journal_saga_id_fkey")
	}
}

// The driver tests call each store method directly, a test a method.
// Tests that must see or drop every row of a table (listings, expiry) get
// a fresh database of their own; the others share one, each under keys of
// its own (drv.id), in parallel: a fresh PostgreSQL database costs a
// migration, and the package should stay fast.
var driverTests = []struct {
	name string
	own  bool // needs a database of its own
	fn   func(*testing.T, *drv)
}{
	// reads.go
	{"Store.Saga", false, testSaga},
	{"Store.Sagas", true, testSagas},
	{"Store.CountSagas", true, testCountSagas},
	{"Store.Entries", false, testStoreEntries},
	{"Store.Snapshot", false, testSnapshot},
	{"Store.LastExecuted", false, testLastExecuted},
	// pending.go
	{"Store.Approvals", true, testApprovals},
	{"Store.Pending", true, testStorePending},
	{"Store.CountPending", true, testCountPending},
	{"Store.PendingByTool", true, testPendingByTool},
	{"Store.DueApprovals", true, testDueApprovals},
	{"Store.PendingEntries", true, testPendingEntries},
	// runners.go
	{"Store.InDoubt", true, testStoreInDoubt},
	{"Store.Runners", true, testRunners},
	// verified.go
	{"Store.RecordPerson", false, testPeople},
	{"Store.RecordVerified", false, testRecordVerified},
	{"Store.Verifications", false, testVerifications},
	// glass.go
	{"Store.Unratified", true, testUnratified},
	// tx.go
	{"Store.Update", false, testUpdate},
	{"Tx.LockSaga", false, testLockSaga},
	{"Tx.LockSagaCall", false, testLockSagaCall},
	{"Tx.LockAs", false, testLockAs},
	{"Tx.CreateSaga", false, testCreateSaga},
	{"Tx.PutSaga", false, testPutSaga},
	{"Tx.Append", false, testAppend},
	{"Tx.Entries", false, testTxEntries},
	{"Tx.Call", false, testCall},
	{"Tx.PutCall", false, testPutCall},
	{"Tx.Calls", false, testCalls},
	// tx_approvals.go
	{"Tx.Approval", false, testApproval},
	{"Tx.PutApproval", false, testPutApproval},
	{"Tx.PutVotes", false, testPutVotes},
	{"Tx.DeleteApprovals", false, testDeleteApprovals},
	{"Tx.CountApprovals", false, testCountApprovals},
	// changes.go
	{"Store.Listen", true, testListen},
	{"Store.Listen/lost", true, testListenLost},
	// sessions.go
	{"SessionStore.PutSession", true, testPutSession},
	{"SessionStore.Session", false, testSession},
	{"SessionStore.TouchSession", false, testTouchSession},
	{"SessionStore.DeleteSession", false, testDeleteSession},
	{"SessionStore.PutLogin", true, testPutLogin},
	{"SessionStore.TakeLogin", false, testTakeLogin},
	// demo.go
	{"demo.Store.StockDemo", false, testStockDemo},
	{"demo.Store.Reserve", false, testReserve},
	{"demo.Store.Release", false, testRelease},
	{"demo.Store.Transfer", false, testTransfer},
	{"DB.Inventory", true, testInventory},
	// log.go
	{"tlog.Store.Sequence", true, testLogSequence},
	{"tlog.Store.LogNodes", true, testLogNodes},
	{"tlog.Store.Leaves", true, testLeaves},
	{"tlog.Tx.Leaves", true, testTxLeaves},
}

// Run runs the driver tests, in parallel, under Driver. newHarness must
// return a fresh, empty database each time it is called.
func Run(t *testing.T, newHarness func(t *testing.T) Harness) {
	t.Run("Driver", func(t *testing.T) {
		t.Parallel()
		open := func(t *testing.T) (Harness, DB) {
			h := newHarness(t)
			db := h.Open(t)
			t.Cleanup(db.Close)
			return h, db
		}
		sharedH, sharedDB := open(t) // closed once every test using it is done
		for _, tt := range driverTests {
			t.Run(tt.name, func(t *testing.T) {
				t.Parallel()
				d := &drv{h: sharedH, db: sharedDB, ns: tt.name + "/"}
				if tt.own {
					d.h, d.db = open(t)
				}
				tt.fn(t, d)
			})
		}
	})
}
