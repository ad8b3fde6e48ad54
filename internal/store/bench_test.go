package store

import (
	"context"
	"fmt"
	"testing"

	"github.com/sagacity-go/sagacity/internal/engine"
	"github.com/sagacity-go/sagacity/internal/testkit"
	"github.com/sagacity-go/sagacity/internal/tlog"
	"github.com/sagacity-go/sagacity/internal/witness"
)

// benchStores are the stores every benchmark runs on.
var benchStores = []struct {
	name string
	url  func(testing.TB) string
}{{"sqlite", testkit.SQLiteURL}, {"postgres", testkit.PostgresURL}}

// benchAgent calls tools and resumes them; benchApprover, somebody else,
// decides.
var (
	benchAgent    = engine.Principal{ID: "agent", Auth: "token", Roles: []engine.Role{engine.RoleAgent}}
	benchApprover = engine.Principal{ID: "approver", Auth: "oidc", Roles: []engine.Role{engine.RoleApprover}}
)

// benchEngine opens the store at url, closed when the benchmark ends, and
// returns an engine over it (see newBenchEngine) with testkit's key;
// with log, it runs the global log, with checkpoints in a temporary
// directory, and returns it too.
func benchEngine(b *testing.B, url string, log bool) (*engine.Engine, *tlog.Log) {
	db, err := Open(context.Background(), url)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(db.Close)
	checkpoints := ""
	if log {
		checkpoints = b.TempDir()
	}
	e, l, err := newBenchEngine(db, testkit.Keys(b), checkpoints)
	if err != nil {
		b.Fatal(err)
	}
	return e, l
}

// newBenchEngine returns an engine over db signing with keys, with two
// tools that do nothing: reserveInventory (COMPENSATABLE) and
// sendWireTransfer (IRREVERSIBLE). Given a checkpoints directory, it runs
// the global log and signs checkpoints as the server does by default
// (every 1000 leaves or 10s), and returns the log.
func newBenchEngine(db *DB, keys *engine.Keys, checkpoints string) (*engine.Engine, *tlog.Log, error) {
	ok := engine.Funcs{Exec: func(context.Context, engine.Invocation) (string, error) { return "ok", nil }}
	tools := []engine.Tool{{Name: "reserveInventory", Executor: ok},
		{Name: "sendWireTransfer", Reversibility: engine.Irreversible, Executor: ok}}
	opts := []engine.Option{engine.WithKeys(keys)}
	var l *tlog.Log
	if checkpoints != "" {
		w, err := witness.Open(checkpoints)
		if err != nil {
			return nil, nil, err
		}
		l = tlog.New(db, w, keys, tlog.Options{})
		if err := l.Claim(context.Background()); err != nil {
			return nil, nil, err
		}
		opts = append(opts, engine.WithLog(l))
	}
	e, err := engine.New(db, tools, opts...)
	return e, l, err
}

// BenchmarkEngineCall measures one engine call (journal, state and, for an
// executed call, the tool round trip in-process) on each store: an executed
// COMPENSATABLE call commits two transactions, a gated call one.
func BenchmarkEngineCall(b *testing.B) {
	for _, st := range benchStores {
		for _, tool := range []string{"reserveInventory", "sendWireTransfer"} {
			b.Run(st.name+"/"+tool, func(b *testing.B) {
				ctx := context.Background()
				e, _ := benchEngine(b, st.url(b), false)
				b.ResetTimer()
				for i := 0; b.Loop(); i++ {
					// A saga per 50 calls keeps journals realistic in length.
					if _, err := e.Call(ctx, benchAgent, fmt.Sprintf("bench-%d", i/50), tool, `{"item":"laptop"}`); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
