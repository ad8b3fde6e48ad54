package engine_test

import (
	"testing"

	"github.com/sagacity-go/sagacity/internal/engine/enginetest"
	"github.com/sagacity-go/sagacity/internal/store"
	"github.com/sagacity-go/sagacity/internal/store/storetest"
	"github.com/sagacity-go/sagacity/internal/testkit"
)

// TestSQLite runs the engine's scenarios on SQLite files, the quick loop;
// internal/store runs them on PostgreSQL.
func TestSQLite(t *testing.T) {
	t.Parallel()
	enginetest.Run(t, func(t *testing.T) storetest.Harness {
		return storetest.NewHarness(testkit.SQLiteURL(t), "sqlite", store.Open)
	})
}
