package enginetest

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/sagacity-go/sagacity/internal/engine"
	"github.com/sagacity-go/sagacity/internal/testkit"
)

func testAuthorization(t *testing.T, v *env) {
	ctx := context.Background()
	seq := v.gate("s")
	both := engine.Principal{ID: "agent-1", Auth: "token", Roles: []engine.Role{engine.RoleAgent, engine.RoleApprover}}
	tests := []struct {
		name string
		err  error
		want engine.Kind
	}{
		{"agent approves", second(v.e.Approve(ctx, agent, "s", seq, "")), engine.Forbidden},
		{"auditor approves", second(v.e.Approve(ctx, auditor, "s", seq, "")), engine.Forbidden},
		{"initiator approves own saga", second(v.e.Approve(ctx, both, "s", seq, "")), engine.Forbidden},
		{"initiator rejects own saga", second(v.e.Reject(ctx, both, "s", seq, "")), engine.Forbidden},
		{"another agent calls in the saga", second(v.e.Call(ctx, otherAgent, "s", "reserveInventory", "{}")), engine.Forbidden},
		{"another agent ends the saga", second(v.e.End(ctx, otherAgent, "s")), engine.Forbidden},
		{"another agent aborts the saga", second(v.e.Abort(ctx, otherAgent, "s", "")), engine.Forbidden},
		{"another agent resumes in the saga", second(v.e.Resume(ctx, otherAgent, "s", seq, transfer)), engine.Forbidden},
		{"approver calls a tool", second(v.e.Call(ctx, approver, "s", "reserveInventory", "{}")), engine.Forbidden},
		{"auditor resumes", second(v.e.Resume(ctx, auditor, "s", seq, transfer)), engine.Forbidden},
		{"agent verifies", second(v.e.Verify(ctx, agent, "s")), engine.Forbidden},
		{"nobody", second(v.e.Approve(ctx, engine.Principal{}, "s", seq, "")), engine.Unauthenticated},
		// Another agent's saga names its payees, approvers and sessions.
		{"another agent looks the saga up", second(v.e.Lookup(ctx, otherAgent, "s")), engine.Forbidden},
		{"another agent reads the journal", second(v.e.Journal(ctx, otherAgent, "s")), engine.Forbidden},
		{"another agent reads the history", second(v.e.History(ctx, otherAgent, "s")), engine.Forbidden},
		{"another agent reads the request", second(v.e.Review(ctx, otherAgent, "s", seq)), engine.Forbidden},
		{"another agent reads the requests", third(v.e.Requests(ctx, otherAgent, "s")), engine.Forbidden},
		{"another agent reads a receipt", second(v.e.Receipt(ctx, otherAgent, "s", 1)), engine.Forbidden},
	}
	for _, tt := range tests {
		testkit.WantKind(t, tt.name, tt.err, tt.want)
	}
	if es, err := v.e.Journal(ctx, agent, "s"); err != nil || len(es) != 3 {
		t.Errorf("the initiator reads its journal: %d entries, %v", len(es), err)
	}
	v.call("theirs", "reserveInventory", "{}")
	if _, err := v.e.Call(ctx, otherAgent, "mine", "reserveInventory", "{}"); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		p    engine.Principal
		f    engine.SagaFilter
		want []string
	}{
		{otherAgent, engine.SagaFilter{}, []string{"mine"}},
		{otherAgent, engine.SagaFilter{Initiator: agent.ID}, nil},
		{agent, engine.SagaFilter{}, []string{"theirs", "s"}},
		{auditor, engine.SagaFilter{}, []string{"mine", "theirs", "s"}},
	} {
		var got []string
		sagas, err := v.e.Sagas(ctx, tt.p, tt.f)
		for _, s := range sagas {
			got = append(got, s.ID)
		}
		n, cerr := v.e.CountSagas(ctx, tt.p, tt.f)
		if err != nil || cerr != nil || !slices.Equal(got, tt.want) || n != len(tt.want) {
			t.Errorf("Sagas(%s, %+v) = %v (count %d), %v, %v; want %v", tt.p.ID, tt.f, got, n, err, cerr, tt.want)
		}
	}
	shared, err := engine.New(v.db, v.fx.tools(), engine.WithKeys(testkit.Keys(t)), engine.WithClock(clk.now),
		engine.WithAccess(engine.Access{ShareSagas: true}))
	if err != nil {
		t.Fatal(err)
	}
	if es, err := shared.Journal(ctx, otherAgent, "s"); err != nil || len(es) != 3 {
		t.Errorf("shareSagas: another agent reads the journal: %d entries, %v; want all 3", len(es), err)
	}
	if sagas, err := shared.Sagas(ctx, otherAgent, engine.SagaFilter{}); err != nil || len(sagas) != 3 {
		t.Errorf("shareSagas: another agent lists %d sagas, %v; want all 3", len(sagas), err)
	}
	if v.pending("s") != 1 || len(v.journal("s")) != 3 || v.fx.transfer.Load() != 0 {
		t.Errorf("refused calls changed state: %d pending, %d entries, wire ran %d times", v.pending("s"), len(v.journal("s")), v.fx.transfer.Load())
	}
}

func second[T any](_ T, err error) error { return err }

func third[T, U any](_ T, _ U, err error) error { return err }

func testBadInput(t *testing.T, v *env) {
	ctx := context.Background()
	long := strings.Repeat("x", engine.MaxIDLen+1)
	tests := []struct {
		name string
		err  error
		want engine.Kind
	}{
		{"empty saga id", second(v.e.Call(ctx, agent, "", "reserveInventory", "{}")), engine.Invalid},
		{"long saga id", second(v.e.Call(ctx, agent, long, "reserveInventory", "{}")), engine.Invalid},
		{"control character in saga id", second(v.e.Call(ctx, agent, "a\nb", "reserveInventory", "{}")), engine.Invalid},
		{"input not UTF-8", second(v.e.Call(ctx, agent, "s", "reserveInventory", "\xff\xfe")), engine.Invalid},
		{"input with NUL", second(v.e.Call(ctx, agent, "s", "reserveInventory", "{\"a\":\"\x00\"}")), engine.Invalid},
		{"gated input with NUL", second(v.e.Call(ctx, agent, "s", "sendWireTransfer", "\x00")), engine.Invalid},
		{"input too large", second(v.e.Call(ctx, agent, "s", "reserveInventory", strings.Repeat("x", 1<<20+1))), engine.Invalid},
		{"unknown tool", second(v.e.Call(ctx, agent, "s", "launchMissiles", "{}")), engine.NotFound},
		{"reason with a newline", second(v.e.Abort(ctx, agent, "s", "ok\nauth=oidc")), engine.Invalid},
		{"unknown saga ends", second(v.e.End(ctx, agent, "nope")), engine.NotFound},
		{"unknown saga approved", second(v.e.Approve(ctx, approver, "nope", 1, "")), engine.NotFound},
		{"unknown seq resumed", second(v.e.Resume(ctx, approver, "nope", 99, transfer)), engine.NotFound},
		{"unknown status listed", second(v.e.Sagas(ctx, auditor, engine.SagaFilter{Status: "DONE"})), engine.Invalid},
		{"input not JSON where a schema is", second(v.e.Call(ctx, agent, "s", "payTyped", "cents=5")), engine.Invalid},
		{"input off its schema", second(v.e.Call(ctx, agent, "s", "payTyped", `{"cents":0,"to":"alice"}`)), engine.Invalid},
		{"input with a key its schema refuses", second(v.e.Call(ctx, agent, "s", "payTyped", `{"cents":5,"to":"alice","memo":"x"}`)), engine.Invalid},
		// What parsers read differently, a reviewer could not see as the
		// tool would read it: refused at the gate.
		{"gated input with a name twice", second(v.e.Call(ctx, agent, "s", "sendWireTransfer",
			`{"amount":"1.00","to":"alice"`+strings.Repeat("\n", 60)+`,"amount":"250000"}`)), engine.Invalid},
		{"gated input with a name escaped", second(v.e.Call(ctx, agent, "s", "sendWireTransfer", `{"amount":"1","\u0061mount":"2"}`)), engine.Invalid},
		{"gated input with a name in another case", second(v.e.Call(ctx, agent, "s", "sendWireTransfer", `{"amount":"1","Amount":"2"}`)), engine.Invalid},
		{"gated input with a lone surrogate", second(v.e.Call(ctx, agent, "s", "sendWireTransfer", `{"to":"\ud800"}`)), engine.Invalid},
		{"gated input with a NUL escaped", second(v.e.Call(ctx, agent, "s", "sendWireTransfer", `{"to":"alice\u0000"}`)), engine.Invalid},
		{"input with a name twice", second(v.e.Call(ctx, agent, "s", "reserveInventory", `{"qty":1,"qty":40}`)), engine.Invalid},
		// Saga ids that read as the server's own: refused before anything
		// is stored, whatever the store keeps of them.
		{"a server saga's id", second(v.e.Call(ctx, agent, engine.PasskeySaga, "reserveInventory", "{}")), engine.Invalid},
		{"a server saga's id in another case", second(v.e.Call(ctx, agent, "Sagacity:passkeys", "reserveInventory", "{}")), engine.Invalid},
		{"a server saga's id with a fullwidth colon", second(v.e.Call(ctx, agent, "sagacity：passkeys", "reserveInventory", "{}")), engine.Invalid},
		{"a server saga's id with a ratio sign", second(v.e.Call(ctx, agent, "sagacity∶policies", "reserveInventory", "{}")), engine.Invalid},
		{"a server saga's id percent-encoded", second(v.e.Call(ctx, agent, "sagacity%3Apasskeys", "sendWireTransfer", transfer)), engine.Invalid},
	}
	for _, tt := range tests {
		testkit.WantKind(t, tt.name, tt.err, tt.want)
	}
	sagas, err := v.e.Sagas(ctx, auditor, engine.SagaFilter{})
	if err != nil || len(sagas) != 0 || len(v.fx.Log()) != 0 {
		t.Errorf("after bad input: sagas %v (%v), effects %v; want nothing written or run", sagas, err, v.fx.Log())
	}
	if r := v.call("typed", "payTyped", `{"to":"alice","cents":500}`); r.Outcome != engine.OutcomeAwaitingApproval {
		t.Errorf("Call of payTyped with an input its schema takes = %+v, want it gated", r)
	}
}
