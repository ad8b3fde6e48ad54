package evidence

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// step is one entry of a journal written for a test: its tool, phase,
// input and payload; the seq, time and hash follow from its place.
type step struct {
	tool    string
	phase   Phase
	input   string
	payload string
}

// journal chains steps into saga "s", a second apart from t0, unless at
// gives an entry's time (an index into steps, and the time).
func journal(steps []step, at ...any) []Entry {
	es := make([]Entry, len(steps))
	prev := ZeroHash
	for i, st := range steps {
		es[i] = Entry{SagaID: "s", Seq: int64(i + 1), ToolName: st.tool, Phase: st.phase, Input: st.input,
			Payload: st.payload, Timestamp: t0.Add(time.Duration(i) * time.Second), Leaf: -1}
		for k := 0; k+1 < len(at); k += 2 {
			if at[k].(int) == i {
				es[i].Timestamp = at[k+1].(time.Time)
			}
		}
		es[i].Hash = Hash(prev, es[i])
		prev = es[i].Hash
	}
	return es
}

const wireIn = `{"amount":"100","to":"alice"}`

// The entries of the seed's flow: a reservation, then a gated wire
// (seq 3), each asked for by agent-1.
var (
	reserve  = step{"reserveInventory", PhaseIntent, "{}", "requester=agent-1\nauth=token"}
	reserved = step{"reserveInventory", PhaseExecuted, "{}", "ok"}
	gated    = step{"sendWireTransfer", PhaseAwaitingApproval, wireIn, "requester=agent-1\nauth=token"}
)

func approvedBy(seq, who string) step {
	return step{GateTool, PhaseApproved, "seq=" + seq, "approver=" + who + "\nauth=oidc"}
}

// approvedFor is who's approval for delegator.
func approvedFor(seq, who, delegator string) step {
	return step{GateTool, PhaseApproved, "seq=" + seq, "approver=" + who + "\non-behalf-of=" + delegator + "\nauth=oidc"}
}

func rejectedBy(seq, who string) step {
	return step{GateTool, PhaseRejected, "seq=" + seq, "approver=" + who + "\nauth=oidc"}
}

func withdrawnBy(seq, who string) step {
	return step{GateTool, PhaseRejected, "seq=" + seq, "withdrawn-by=" + who + "\nauth=oidc"}
}

func changesBy(seq, who string) step {
	return step{GateTool, PhaseRejected, "seq=" + seq, "changes-requested-by=" + who + "\nreason=smaller\nauth=oidc"}
}

func expiredAt(seq string) step {
	return step{GateTool, PhaseRejected, "seq=" + seq, "expired=2026-07-21T10:00:00.000000Z\nauth=server"}
}

func resumes(seq string) step {
	return step{"sendWireTransfer", PhaseIntent, wireIn, "requester=agent-1\nauth=token\nresumes=seq=" + seq}
}

func TestReadLifecycle(t *testing.T) {
	executed := step{"sendWireTransfer", PhaseExecuted, wireIn, "transfer-ok"}
	tests := []struct {
		name  string
		steps []step
		at    []any
		want  string // the break; "" for a journal that holds
	}{
		{"resumed once", []step{reserve, reserved, gated, approvedBy("3", "bob"), resumes("3"), executed}, nil, ""},
		{"resumed twice", []step{reserve, reserved, gated, approvedBy("3", "bob"), resumes("3"), executed, resumes("3")}, nil,
			"seq=7 (entry 6) executes the request at seq=3 again: it was resumed at seq=5"},
		{"resumed unapproved", []step{reserve, reserved, gated, resumes("3")}, nil,
			"seq=4 (entry 3) executes the request at seq=3, which nobody approved"},
		{"resumed with other bytes", []step{reserve, reserved, gated, approvedBy("3", "bob"),
			{"sendWireTransfer", PhaseIntent, `{"amount":"999","to":"mallory"}`, "requester=agent-1\nresumes=seq=3"}}, nil,
			"seq=5 (entry 4) resumes seq=3, which is no request of these bytes of sendWireTransfer"},
		{"resumes no request", []step{reserve, reserved, resumes("2")}, nil,
			"seq=3 (entry 2) resumes seq=2, which is no request"},
		{"approved by two people", []step{reserve, reserved, gated, approvedBy("3", "bob"), approvedBy("3", "carol"), resumes("3")}, nil, ""},
		{"approved twice by one person", []step{reserve, reserved, gated, approvedBy("3", "bob"), approvedBy("3", "bob")}, nil,
			"seq=5 (entry 4) is bob's second approval of the request at seq=3 (the first at seq=4 stands)"},
		{"approved by a delegate for its delegator, and another", []step{reserve, reserved, gated, approvedFor("3", "carol", "bob"),
			approvedBy("3", "dave"), resumes("3")}, nil, ""},
		{"approved by a delegator and their delegate", []step{reserve, reserved, gated, approvedBy("3", "bob"), approvedFor("3", "carol", "bob")},
			nil, "seq=5 (entry 4) is carol for bob's approval of the request at seq=3, which shares a person with bob's at seq=4 (one person counts once)"},
		{"approved by a delegate for two delegators", []step{reserve, reserved, gated, approvedFor("3", "carol", "bob"),
			approvedFor("3", "carol", "dave")}, nil,
			"seq=5 (entry 4) is carol for dave's approval of the request at seq=3, which shares a person with carol for bob's at seq=4 (one person counts once)"},
		{"approved by a delegate, then for them", []step{reserve, reserved, gated, approvedBy("3", "carol"), approvedFor("3", "dave", "carol")},
			nil, "seq=5 (entry 4) is dave for carol's approval of the request at seq=3, which shares a person with carol's at seq=4 (one person counts once)"},
		{"approved for the requester", []step{reserve, reserved, gated, approvedFor("3", "carol", "agent-1")}, nil,
			"seq=4 (entry 3) is a decision on behalf of agent-1, who started the saga or made the request at seq=3 (four-eyes)"},
		{"withdrawn, then approved again", []step{reserve, reserved, gated, approvedBy("3", "bob"), withdrawnBy("3", "bob"),
			approvedBy("3", "bob"), resumes("3")}, nil, ""},
		{"withdrawn, then resumed", []step{reserve, reserved, gated, approvedBy("3", "bob"), withdrawnBy("3", "bob"), resumes("3")}, nil,
			"seq=6 (entry 5) executes the request at seq=3, which nobody approved"},
		{"withdrawn by another", []step{reserve, reserved, gated, approvedBy("3", "bob"), withdrawnBy("3", "carol")}, nil,
			"seq=5 (entry 4) withdraws carol's vote on the request at seq=3, which has none standing"},
		{"sent back, then the saga goes on", []step{reserve, reserved, gated, changesBy("3", "bob"),
			{"sendWireTransfer", PhaseAwaitingApproval, `{"amount":"90","to":"alice"}`, "requester=agent-1"}}, nil, ""},
		{"sent back, then resumed", []step{reserve, reserved, gated, approvedBy("3", "carol"), changesBy("3", "bob"), resumes("3")}, nil,
			"seq=6 (entry 5) executes the request at seq=3 again: it was changes-requested at seq=5"},
		{"changes requested by the requester", []step{reserve, reserved, gated, changesBy("3", "agent-1")}, nil,
			"seq=4 (entry 3) is a decision by agent-1, who started the saga (four-eyes)"},
		{"expired, then a call", []step{reserve, reserved, gated, expiredAt("3"), reserve}, nil,
			"seq=5 (entry 4) opens a call after the saga failed at seq=4"},
		{"expired twice", []step{reserve, reserved, gated, expiredAt("3"), expiredAt("3")}, nil,
			"seq=5 (entry 4) decides the request at seq=3, expired at seq=4"},
		{"decided after its rejection", []step{reserve, reserved, gated, rejectedBy("3", "bob"), approvedBy("3", "carol")}, nil,
			"seq=5 (entry 4) decides the request at seq=3, rejected at seq=4"},
		{"executed after its rejection", []step{reserve, reserved, gated, approvedBy("3", "bob"), rejectedBy("3", "carol"), resumes("3")}, nil,
			"seq=6 (entry 5) opens a call after the saga failed at seq=5"},
		{"a call after a failure", []step{reserve, {"reserveInventory", PhaseFailed, "{}", "out of stock"}, reserve}, nil,
			"seq=3 (entry 2) opens a call after the saga failed at seq=2"},
		{"decides no request", []step{reserve, reserved, approvedBy("2", "bob")}, nil,
			"seq=3 (entry 2) decides seq=2, which is no request of this saga"},
		{"approved by its initiator", []step{reserve, reserved, gated, approvedBy("3", "agent-1")}, nil,
			"seq=4 (entry 3) is a decision by agent-1, who started the saga (four-eyes)"},
		{"approved by its requester", []step{reserve, reserved,
			{"sendWireTransfer", PhaseAwaitingApproval, wireIn, "requester=agent-2\nauth=token"}, approvedBy("3", "agent-2")}, nil,
			"seq=4 (entry 3) is a decision by agent-2, who made the request at seq=3 (four-eyes)"},
		{"resolved by whoever asked", []step{reserve,
			{GateTool, PhaseExecuted, "seq=1", "resolved-by=agent-1\nauth=oidc\nresult=ok"}}, nil,
			"seq=2 (entry 1) is a resolution by agent-1, who started the saga (four-eyes)"},
		{"time runs backwards", []step{reserve, reserved, gated, approvedBy("3", "bob")}, []any{3, t0.Add(time.Second)},
			"seq=4 (entry 3) is dated before seq=3"},
		{"the same time", []step{reserve, reserved, gated, approvedBy("3", "bob")}, []any{3, t0.Add(2 * time.Second)}, ""},
		{"refused, then resumed", []step{reserve, reserved, gated, approvedBy("3", "bob"),
			{"sendWireTransfer", PhaseRejected, "seq=3", refusedStale}, resumes("3")}, nil,
			"seq=6 (entry 5) opens a call after the saga failed at seq=5"},
		{"dropped twice", []step{reserve, reserved, gated, rejectedBy("3", "bob"),
			{"sendWireTransfer", PhaseRejected, "seq=3", "dropped=rejected"}}, nil,
			"seq=5 (entry 4) refuses the request at seq=3, rejected at seq=4"},
		{"superseded, then approved", []step{reserve, reserved, gated,
			{"sendWireTransfer", PhaseAwaitingApproval, `{"amount":"90","to":"alice"}`, "requester=agent-1"},
			approvedBy("4", "bob"), approvedBy("3", "carol")}, nil,
			"seq=6 (entry 5) approves the request at seq=3, superseded by the request at seq=4"},
		{"approved, superseded, then executed", []step{reserve, reserved, gated, approvedBy("3", "bob"),
			{"sendWireTransfer", PhaseAwaitingApproval, `{"amount":"90","to":"alice"}`, "requester=agent-1"},
			approvedBy("5", "carol"), resumes("3")}, nil,
			"seq=7 (entry 6) executes the request at seq=3, superseded by the request at seq=5"},
		{"a later request of another tool supersedes nothing", []step{reserve, reserved, gated, approvedBy("3", "bob"),
			{"deleteAccount", PhaseAwaitingApproval, `{"id":"1"}`, "requester=agent-1"}, approvedBy("5", "carol"), resumes("3")}, nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			es := journal(tt.steps, tt.at...)
			v := VerifyJournal(es)
			switch {
			case tt.want == "" && !v.Valid:
				t.Errorf("VerifyJournal = %+v, want valid", v)
			case tt.want != "" && (v.Valid || !strings.HasPrefix(v.Message, tt.want)):
				t.Errorf("VerifyJournal = %+v, want broken: %q", v, tt.want)
			case tt.want != "" && v.BreakAtIndex != len(es)-1 && tt.at == nil:
				t.Errorf("VerifyJournal broke at index %d, want the last entry, %d", v.BreakAtIndex, len(es)-1)
			}
		})
	}
}

// TestLifecycleStates reads what became of each request.
func TestLifecycleStates(t *testing.T) {
	replan := step{"sendWireTransfer", PhaseAwaitingApproval, `{"amount":"90","to":"alice"}`, "requester=agent-1"}
	es := journal([]step{reserve, reserved, gated, replan, approvedBy("4", "bob"), resumes("4"),
		{"sendWireTransfer", PhaseExecuted, `{"amount":"90","to":"alice"}`, "ok"},
		{"sendWireTransfer", PhaseAwaitingApproval, `{"amount":"1","to":"bob"}`, "requester=agent-1"},
		rejectedBy("8", "carol"),
		{"sendWireTransfer", PhaseRejected, "seq=3", "dropped=rejected by carol"},
	})
	// The resume's INTENT carries the re-planned bytes.
	es[5].Input = `{"amount":"90","to":"alice"}`
	prev := es[4].Hash
	for i := 5; i < len(es); i++ {
		es[i].Hash = Hash(prev, es[i])
		prev = es[i].Hash
	}
	lc, v := ReadLifecycle(es)
	if !v.Valid {
		t.Fatalf("ReadLifecycle = %+v", v)
	}
	type state struct {
		closed       int64
		closing      Closing
		supersededBy int64
		approvals    int
	}
	want := map[int64]state{3: {10, ClosedDropped, 4, 0}, 4: {6, ClosedResumed, 0, 1}, 8: {9, ClosedRejected, 0, 0}}
	for seq, w := range want {
		l := lc.Requests[seq]
		if got := (state{l.Closed, l.Closing, l.SupersededBy, len(l.Standing())}); got != w {
			t.Errorf("request at seq=%d: %+v, want %+v", seq, got, w)
		}
	}
	if len(lc.Order) != 3 || lc.FailedAt != 9 || lc.Initiator != "agent-1" || len(lc.Open()) != 0 {
		t.Errorf("lifecycle: order %v, failed at %d, initiator %q, %d open; want 3 requests, failed at 9, agent-1, none open",
			lc.Order, lc.FailedAt, lc.Initiator, len(lc.Open()))
	}
}

// TestPairs: each answer, resolution and undo is paired with its call's
// INTENT from the journal alone: calls of one saga that interleave, the
// same call twice, a call in doubt a person resolved, and entries of no
// call.
func TestPairs(t *testing.T) {
	const ask = "requester=agent-1"
	gate := func(ph Phase, call int64, payload string) step { return step{GateTool, ph, Ref(call), payload} }
	tests := []struct {
		name  string
		steps []step
		want  map[int64]int64
	}{
		{"calls that interleave, a failure and its compensation", []step{
			{"reserve", PhaseIntent, `{"a":1}`, ask},                             // 1
			{"charge", PhaseIntent, `{"b":1}`, ask},                              // 2
			{"charge", PhaseExecuted, `{"b":1}`, "charged"},                      // 3
			{"reserve", PhaseExecuted, `{"a":1}`, "reserved"},                    // 4
			{"ship", PhaseIntent, "{}", ask},                                     // 5
			{"ship", PhaseFailed, "{}", "no carrier"},                            // 6
			{"charge", PhaseCompensationFailed, `{"b":1}`, "processor down"},     // 7
			{"reserve", PhaseCompensated, `{"a":1}`, "compensated effect seq=4"}, // 8
			gate(PhaseCompensated, 2, "resolved-by=ops"),                         // 9: undone by hand
		}, map[int64]int64{3: 2, 4: 1, 6: 5, 7: 2, 8: 1, 9: 2}},
		{"the same call twice: answers oldest first, undos newest first", []step{
			{"charge", PhaseIntent, `{"b":1}`, ask},                          // 1
			{"charge", PhaseExecuted, `{"b":1}`, "charged"},                  // 2
			{"charge", PhaseIntent, `{"b":1}`, ask},                          // 3
			{"charge", PhaseExecuted, `{"b":1}`, "charged"},                  // 4
			{"ship", PhaseIntent, "{}", ask},                                 // 5
			{"ship", PhaseFailed, "{}", "no carrier"},                        // 6
			{"charge", PhaseCompensationFailed, `{"b":1}`, "processor down"}, // 7
			{"charge", PhaseCompensationFailed, `{"b":1}`, "processor down"}, // 8
		}, map[int64]int64{2: 1, 4: 3, 6: 5, 7: 3, 8: 1}},
		{"a call in doubt a person resolved, then undone", []step{
			{"hang", PhaseIntent, `{"n":1}`, ask},                             // 1
			gate(PhaseExecuted, 1, "resolved-by=ops\nresult=done"),            // 2
			{"hang", PhaseCompensated, `{"n":1}`, "compensated effect seq=2"}, // 3
		}, map[int64]int64{2: 1, 3: 1}},
		{"entries of no call", []step{
			{"sagacity:policy", PhaseExecuted, "rules: []", ""},            // 1: no INTENT
			{"wire", PhaseAwaitingApproval, wireIn, ask},                   // 2
			gate(PhaseApproved, 2, "approver=bob"),                         // 3
			gate(PhaseExecuted, 2, "resolved-by=ops"),                      // 4: names no INTENT
			{"wire", PhaseCompensated, wireIn, "compensated effect seq=9"}, // 5: names no EXECUTED
		}, map[int64]int64{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, Pairs(journal(tt.steps))); diff != "" {
				t.Errorf("Pairs (-want +got):\n%s", diff)
			}
		})
	}
}
