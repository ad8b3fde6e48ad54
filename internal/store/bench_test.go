package store

import (
	"context"
	"fmt"
	"testing"

	"github.com/sagacity-go/sagacity/internal/engine"
	"github.com/sagacity-go/sagacity/internal/store/storetest"
)

// BenchmarkEngineCall measures one engine call (journal, state and, for an
// executed call, the tool round trip in-process) on each store: an executed
// COMPENSATABLE call commits two transactions, a gated call one.
func BenchmarkEngineCall(b *testing.B) {
	for _, st := range []struct {
		name string
		url  func(testing.TB) string
	}{{"sqlite", storetest.SQLiteURL}, {"postgres", storetest.PostgresURL}} {
		for _, tool := range []string{"reserveInventory", "sendWireTransfer"} {
			b.Run(st.name+"/"+tool, func(b *testing.B) {
				ctx := context.Background()
				db, err := Open(ctx, st.url(b))
				if err != nil {
					b.Fatal(err)
				}
				defer db.Close()
				ok := engine.Funcs{Exec: func(context.Context, engine.Invocation) (string, error) { return "ok", nil }}
				e, err := engine.New(db, []engine.Tool{{Name: "reserveInventory", Executor: ok},
					{Name: "sendWireTransfer", Reversibility: engine.Irreversible, Executor: ok}}, engine.WithKeys(storetest.Keys(b)))
				if err != nil {
					b.Fatal(err)
				}
				p := engine.Principal{ID: "agent", Roles: engine.Roles}
				b.ResetTimer()
				for i := 0; b.Loop(); i++ {
					// A saga per 50 calls keeps journals realistic in length.
					if _, err := e.Call(ctx, p, fmt.Sprintf("bench-%d", i/50), tool, `{"item":"laptop"}`); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
