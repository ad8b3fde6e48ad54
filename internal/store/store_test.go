package store

import (
	"testing"

	"github.com/sagacity-go/sagacity/internal/engine/enginetest"
	"github.com/sagacity-go/sagacity/internal/store/storetest"
	"github.com/sagacity-go/sagacity/internal/testkit"
)

// TestPostgres runs the driver suite and the engine's scenarios on
// PostgreSQL; internal/engine runs the scenarios on SQLite.
func TestPostgres(t *testing.T) {
	t.Parallel()
	newHarness := func(t *testing.T) storetest.Harness {
		return storetest.NewHarness(testkit.PostgresURL(t), "postgres", Open)
	}
	storetest.Run(t, newHarness)
	enginetest.Run(t, newHarness)
}

// TestSQLite runs the driver suite on SQLite.
func TestSQLite(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T) storetest.Harness {
		return storetest.NewHarness(testkit.SQLiteURL(t), "sqlite", Open)
	})
}
