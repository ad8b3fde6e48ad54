package storetest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/sagacity-go/sagacity/internal/engine"
)

// testGroupCommit makes 500 calls at once over 50 sagas, a fifth of them
// through a second engine on another handle (another server), whose
// writes break the first engine's promises of those sagas' heads: the
// store commits what waits together, and a member whose head moved must
// be tried again alone without failing the others. Every journal must
// verify, hold every call that was answered, and nothing else.
func testGroupCommit(t *testing.T, v *env) {
	ctx := context.Background()
	other, _ := v.engine(v.open())
	const sagas, calls = 50, 500
	for i := range sagas {
		v.call(fmt.Sprintf("g%02d", i), "reserveInventory", `{"warm":true}`) // the engine knows every head
	}
	before, _ := v.db.Grouped()
	type answer struct {
		saga, input string
		res         engine.CallResult
		err         error
	}
	answers := make([]answer, calls)
	var wg sync.WaitGroup
	for i := range calls {
		wg.Go(func() {
			e := v.e
			if rand.IntN(5) == 0 {
				e = other
			}
			a := answer{saga: fmt.Sprintf("g%02d", rand.IntN(sagas)), input: fmt.Sprintf(`{"call":%d}`, i)}
			a.res, a.err = e.Call(ctx, agent, a.saga, "reserveInventory", a.input)
			answers[i] = a
		})
	}
	wg.Wait()
	after, members := v.db.Grouped()
	t.Logf("%d transactions grouped %d calls", after-before, members)
	if after == before {
		t.Errorf("no transaction committed two calls or more (%d members grouped): nothing was grouped", members)
	}
	answered := map[string]map[string]int64{} // saga → input → seq of its INTENT
	for _, a := range answers {
		if a.err != nil {
			t.Errorf("Call(%s, %s): %v", a.saga, a.input, a.err)
			continue
		}
		if a.res.Outcome != engine.OutcomeExecuted {
			t.Errorf("Call(%s, %s) = %+v, want executed", a.saga, a.input, a.res)
		}
		if answered[a.saga] == nil {
			answered[a.saga] = map[string]int64{}
		}
		answered[a.saga][a.input] = a.res.Seq
	}
	for i := range sagas {
		id := fmt.Sprintf("g%02d", i)
		if r := v.verify(id); !r.Valid {
			t.Errorf("Verify(%s) = %+v", id, r)
		}
		journaled := map[string]int64{}
		executed := map[string]bool{} // an EXECUTED entry repeats its call's input
		for _, e := range v.journal(id) {
			switch {
			case e.Phase == engine.PhaseIntent && e.Input != `{"warm":true}`:
				if _, twice := journaled[e.Input]; twice {
					t.Errorf("%s: the call %s is journaled twice", id, e.Input)
				}
				journaled[e.Input] = e.Seq
			case e.Phase == engine.PhaseExecuted:
				executed[e.Input] = true
			}
		}
		for in, seq := range answered[id] {
			if journaled[in] != seq {
				t.Errorf("%s: the call %s was answered with seq %d; the journal has it at %d", id, in, seq, journaled[in])
			}
		}
		for in, seq := range journaled {
			if _, ok := answered[id][in]; !ok {
				t.Errorf("%s: the call %s at seq %d is journaled but was never answered", id, in, seq)
			}
			if !executed[in] {
				t.Errorf("%s: the call %s at seq %d has no EXECUTED entry after it", id, in, seq)
			}
		}
	}
}
