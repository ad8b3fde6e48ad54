package store

import (
	"context"
	"testing"

	"github.com/sagacity-go/sagacity/internal/store/storetest"
	"github.com/sagacity-go/sagacity/internal/testkit"
)

func TestPostgres(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T) storetest.Harness { return harness(testkit.PostgresURL(t), "postgres") })
}

func TestSQLite(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T) storetest.Harness { return harness(testkit.SQLiteURL(t), "sqlite") })
}

func harness(url, dialect string) storetest.Harness {
	return storetest.Harness{
		Dialect: dialect,
		Open: func(t *testing.T) storetest.DB {
			db, err := Open(context.Background(), url)
			if err != nil {
				t.Fatalf("Open(%s): %v", url, err)
			}
			return db
		},
		Exec:  func(t *testing.T, sql string, args ...any) { testkit.Exec(t, url, sql, args...) },
		Count: func(t *testing.T, sql string, args ...any) int64 { return testkit.Count(t, url, sql, args...) },
	}
}
