package store

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/sagacity-go/sagacity/internal/testkit"
)

// trips counts round trips to PostgreSQL: a statement sent alone is one,
// a batch (a pipeline) is one however many statements it carries. It also
// keeps each statement it saw, with the arguments of its last use.
type trips struct {
	n       atomic.Int64
	inBatch atomic.Bool
	mu      sync.Mutex
	seen    map[string][]any
}

func (c *trips) see(sql string, args []any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.seen == nil {
		c.seen = map[string][]any{}
	}
	c.seen[sql] = args
}

func (c *trips) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	if !c.inBatch.Load() {
		c.n.Add(1)
	}
	c.see(d.SQL, d.Args)
	return ctx
}
func (c *trips) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
func (c *trips) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	c.n.Add(1)
	c.inBatch.Store(true)
	return ctx
}
func (c *trips) TraceBatchQuery(_ context.Context, _ *pgx.Conn, d pgx.TraceBatchQueryData) {
	c.see(d.SQL, d.Args)
}
func (c *trips) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {
	c.inBatch.Store(false)
}

// TestRoundTrips holds the number of round trips the engine's hot paths
// make to PostgreSQL: an executed call commits twice, a gated call once,
// each in one round trip when the engine wrote the saga last (it promises
// the saga unchanged instead of reading it first), and every statement
// that does not need another's answer travels with it. More would be the
// cost of a change, to be justified (BENCHMARKS.md).
func TestRoundTrips(t *testing.T) {
	var c trips
	db, err := openPostgres(context.Background(), testkit.PostgresURL(t), &c)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	e, _, err := newBenchEngine(db, testkit.Keys(t), "")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	// Starting a saga costs two more: the lock finds none, and the insert
	// travels with the second; the call's second transaction knows the
	// saga.
	for _, tt := range []struct {
		tool        string
		start, next int64
	}{{"reserveInventory", 4, 2}, {"sendWireTransfer", 3, 1}} {
		count := func(saga string) int64 {
			before := c.n.Load()
			if _, err := e.Call(ctx, benchAgent, saga, tt.tool, `{"item":"laptop"}`); err != nil {
				t.Fatal(err)
			}
			return c.n.Load() - before
		}
		count(tt.tool + "-warm") // the connection prepares its statements once
		first, next := count(tt.tool+"-new"), count(tt.tool+"-new")
		t.Logf("%s: %d round trips starting a saga, %d in one already started", tt.tool, first, next)
		if first > tt.start || next > tt.next {
			t.Errorf("a call of %s makes %d round trips starting a saga and %d in one, want at most %d and %d", tt.tool, first, next, tt.start, tt.next)
		}
	}
}
