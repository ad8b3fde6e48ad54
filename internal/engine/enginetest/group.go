package enginetest

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
// verify, hold every call that was answered, and nothing else. Among
// them, 50 gated calls under idempotency keys, one a saga of their own,
// write more than an entry, a call and a head (the request, the key):
// each must keep all of it.
func testGroupCommit(t *testing.T, v *env) {
	ctx := context.Background()
	other, _ := v.engine(v.open())
	const sagas, calls = 50, 500
	for i := range sagas {
		v.call(fmt.Sprintf("g%02d", i), "reserveInventory", `{"warm":true}`) // the engine knows every head
		v.call(fmt.Sprintf("w%02d", i), "reserveInventory", `{"warm":true}`)
	}
	before, _ := v.db.Grouped()
	type answer struct {
		saga, input string
		res         engine.CallResult
		err         error
	}
	answers := make([]answer, calls)
	gated := make([]answer, sagas)
	var wg sync.WaitGroup
	for i := range sagas {
		wg.Go(func() {
			a := answer{saga: fmt.Sprintf("w%02d", i), input: transfer}
			a.res, a.err = v.e.CallOnce(ctx, agent, a.saga, engine.Ask{Tool: "sendWireTransfer", Input: a.input, Key: "wire"})
			gated[i] = a
		})
	}
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
	for _, a := range gated {
		if a.err != nil || a.res.Outcome != engine.OutcomeAwaitingApproval || a.res.Seq != 3 {
			t.Errorf("CallOnce(%s, sendWireTransfer) = %+v, %v; want awaiting approval at seq 3", a.saga, a.res, a.err)
			continue
		}
		if n := v.pending(a.saga); n != 1 {
			t.Errorf("%s: %d requests pending after a gated call, want 1", a.saga, n)
		}
		again, err := v.e.CallOnce(ctx, agent, a.saga, engine.Ask{Tool: "sendWireTransfer", Input: a.input, Key: "wire"})
		if err != nil || again.Seq != a.res.Seq {
			t.Errorf("%s: the gated call again under its key = %+v, %v; want its seq %d", a.saga, again, err, a.res.Seq)
		}
		if r := v.verify(a.saga); !r.Valid {
			t.Errorf("Verify(%s) = %+v", a.saga, r)
		}
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
