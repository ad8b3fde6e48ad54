package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/sagacity-go/sagacity/internal/engine"
	"github.com/sagacity-go/sagacity/internal/testkit"
	"github.com/sagacity-go/sagacity/wire"
)

// Calls in doubt and the runners that hold them (Store.InDoubt, Register,
// Runners, Beat, Retire).

func testStoreInDoubt(t *testing.T, d *drv) {
	a, b := d.id("a"), d.id("b")
	cs := map[string]engine.Call{
		"a/1": mkCall(a, 1, engine.CallRunning, when(3)),
		"a/2": mkCall(a, 2, engine.CallExecuted, when(1)),
		"a/3": mkCall(a, 3, engine.CallCompensating, when(2)),
		"b/1": mkCall(b, 1, engine.CallRunning, when(2)), // touched with a/3: the saga breaks the tie
		"b/2": mkCall(b, 2, engine.CallFailed, when(0)),
		"b/3": mkCall(b, 3, engine.CallCompensated, when(0)),
		"b/4": mkCall(b, 4, engine.CallCompensationFailed, when(0)),
		"b/5": mkCall(b, 5, engine.CallRunning, when(5)),
	}
	for k, r := range map[string]string{"a/1": "r1", "b/5": "r2", "b/4": "r1"} {
		c := cs[k]
		c.Runner = r
		cs[k] = c
	}
	createSagas(t, d.db, mkSaga(a, wire.Running, when(0)), mkSaga(b, wire.Running, when(0)))
	write(t, d.db, func(tx engine.Tx) error {
		var err error
		for _, c := range cs {
			err = errors.Join(err, tx.PutCall(c))
		}
		return err
	})
	tests := []struct {
		name   string
		saga   string
		before time.Time
		gone   []string
		want   []string
	}{
		{"every unsettled call, oldest first", "", when(100), nil, []string{"a/3", "b/1", "a/1", "b/5"}},
		{"touched strictly before", "", stored(when(3)), nil, []string{"a/3", "b/1"}},
		{"before, given in another zone", "", stored(when(4)).In(time.FixedZone("PDT", -7*60*60)), nil, []string{"a/3", "b/1", "a/1"}},
		{"none that old", "", stored(when(2)), nil, nil},
		{"or of a runner gone, settled calls not", "", stored(when(3)), []string{"r1"}, []string{"a/3", "b/1", "a/1"}},
		{"of either runner gone", "", stored(when(2)), []string{"r2", "r1", "r9"}, []string{"a/1", "b/5"}},
		{"of one saga", b, stored(when(3)), []string{"r1", "r2"}, []string{"b/1", "b/5"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := d.db.InDoubt(t.Context(), tt.saga, tt.before, tt.gone)
			var want []engine.Call
			for _, k := range tt.want {
				want = append(want, cs[k])
			}
			if diff := cmp.Diff(storedCalls(want...), got, exact...); err != nil || diff != "" {
				t.Errorf("InDoubt(%q, %v, %v) = %v; (-want +got):\n%s", tt.saga, tt.before, tt.gone, err, diff)
			}
		})
	}
}

// testRunners: Register records a runner and removes the row of the one
// it retires and of those unseen for a day; Runners reads the runners of
// unsettled calls as their rows have them, none for a runner without
// one; Beat is NotFound once the row is gone.
func testRunners(t *testing.T, d *drv) {
	ctx := t.Context()
	r := func(id string, seen time.Time) engine.Runner {
		return engine.Runner{ID: id, Replica: "host:/cp", StartedAt: stored(when(0)), SeenAt: stored(seen)}
	}
	for _, x := range []engine.Runner{r("old", when(1)), r("stale", when(2)), r("live", when(3))} {
		if err := d.db.Register(ctx, x, ""); err != nil {
			t.Fatalf("Register(%s): %v", x.ID, err)
		}
	}
	a := d.id("a")
	createSagas(t, d.db, mkSaga(a, wire.Running, when(0)))
	write(t, d.db, func(tx engine.Tx) error {
		var err error
		for i, runner := range []string{"old", "live", "gone", "live", "settled"} {
			c := mkCall(a, int64(i+1), engine.CallRunning, when(0))
			if runner == "settled" {
				c.State = engine.CallExecuted
			}
			c.Runner = runner
			err = errors.Join(err, tx.PutCall(c))
		}
		return err
	})
	got, err := d.db.Runners(ctx)
	want := []engine.Runner{{ID: "gone"}, r("live", when(3)), r("old", when(1))}
	if diff := cmp.Diff(want, got); err != nil || diff != "" {
		t.Errorf("Runners = %v; (-want +got):\n%s", err, diff)
	}
	// A process that retires "old" registers a day after "stale" beat.
	next := r("next", when(2).Add(24*time.Hour+time.Second))
	next.StartedAt = next.SeenAt
	if err := d.db.Register(ctx, next, "old"); err != nil {
		t.Fatal(err)
	}
	got, err = d.db.Runners(ctx)
	want = []engine.Runner{{ID: "gone"}, r("live", when(3)), {ID: "old"}}
	if diff := cmp.Diff(want, got); err != nil || diff != "" {
		t.Errorf("Runners after one retired old = %v; (-want +got):\n%s", err, diff)
	}
	testkit.WantKind(t, "Beat of the stale runner", d.db.Beat(ctx, "stale", when(9)), engine.NotFound)
	if err := d.db.Beat(ctx, "live", when(9)); err != nil {
		t.Errorf("Beat(live): %v", err)
	}
	if err := d.db.Retire(ctx, "live"); err != nil {
		t.Errorf("Retire(live): %v", err)
	}
	testkit.WantKind(t, "Beat of a runner removed", d.db.Beat(ctx, "live", when(10)), engine.NotFound)
}
