package engine

import (
	"errors"
	"testing"
	"time"
)

// chain builds a valid journal of n entries of saga s1.
func chain(n int) []Entry {
	t0 := time.Date(2026, 7, 21, 10, 0, 0, 0, time.UTC)
	var es []Entry
	prev := ZeroHash
	for i := 1; i <= n; i++ {
		e := Entry{SagaID: "s1", Seq: int64(i), ToolName: "t", Phase: PhaseIntent, Input: "{}", Timestamp: t0.Add(time.Duration(i) * time.Second)}
		e.Hash = Hash(prev, e)
		prev = e.Hash
		es = append(es, e)
	}
	return es
}

func TestVerifySaga(t *testing.T) {
	es := chain(4)
	head := Saga{ID: "s1", HeadSeq: 4, HeadHash: es[3].Hash}
	// A gated entry to hang a request on: entry 2 (seq 3) turned into
	// AWAITING_APPROVAL and the chain rehashed from there.
	gated := chain(4)
	gated[2].Phase, gated[2].ToolName, gated[2].Input = PhaseAwaitingApproval, "sendWireTransfer", `{"amount":"100","to":"alice"}`
	for i := 2; i < 4; i++ {
		gated[i].Hash = Hash(gated[i-1].Hash, gated[i])
	}
	gatedHead := Saga{ID: "s1", HeadSeq: 4, HeadHash: gated[3].Hash}
	req := ApprovalRequest{SagaID: "s1", JournalSeq: 3, ToolName: "sendWireTransfer", Input: gated[2].Input, InputHash: PayloadHash(gated[2].Input)}
	with := func(f func(*ApprovalRequest)) []ApprovalRequest { r := req; f(&r); return []ApprovalRequest{r} }
	tests := []struct {
		name    string
		entries []Entry
		saga    Saga
		reqs    []ApprovalRequest
		want    Verification
	}{
		{"intact", es, head, nil, Verification{Valid: true, EntryCount: 4, BreakAtIndex: -1, Message: "all 4 entries verified"}},
		{"intact with its request", gated, gatedHead, []ApprovalRequest{req}, Verification{Valid: true, EntryCount: 4, BreakAtIndex: -1, Message: "all 4 entries verified"}},
		{"tail deleted", es[:3], head, nil, Verification{Valid: false, EntryCount: 3, BreakAtIndex: 3, Message: "journal truncated: it ends at seq=3 but the saga's head is seq=4"}},
		{"all deleted", nil, Saga{ID: "s1", HeadSeq: 2, HeadHash: es[1].Hash}, nil,
			Verification{Valid: false, EntryCount: 0, BreakAtIndex: 0, Message: "journal truncated: it ends at seq=0 but the saga's head is seq=2"}},
		{"head hash differs", es, Saga{ID: "s1", HeadSeq: 4, HeadHash: es[2].Hash}, nil,
			Verification{Valid: false, EntryCount: 4, BreakAtIndex: 3, Message: "head mismatch at seq=4 (entry 3): the saga records head seq=4 hash=" + es[2].Hash}},
		{"row behind the head", es, Saga{ID: "s1", HeadSeq: 3, HeadHash: es[2].Hash}, nil,
			Verification{Valid: false, EntryCount: 4, BreakAtIndex: 3, Message: "head mismatch at seq=4 (entry 3): the saga records head seq=3 hash=" + es[2].Hash}},
		{"saga row unreadable", es, Saga{ID: "s1", HeadSeq: 4, HeadHash: es[3].Hash, Unreadable: "column head_seq does not hold a value of its type"}, nil,
			Verification{Valid: false, EntryCount: 4, BreakAtIndex: 4, Message: "saga record unreadable: column head_seq does not hold a value of its type"}},
		{"entry unreadable", func() []Entry {
			c := chain(4)
			c[1].Unreadable = "column timestamp does not hold a value of its type"
			return c
		}(), head, nil,
			Verification{Valid: false, EntryCount: 4, BreakAtIndex: 1, Message: "unreadable entry at seq=2 (entry 1): column timestamp does not hold a value of its type"}},
		{"request input rewritten", gated, gatedHead, with(func(r *ApprovalRequest) { r.Input = `{"amount":"100","to":"mallory"}` }),
			Verification{Valid: false, EntryCount: 4, BreakAtIndex: 2, Message: "approval request at seq=3 does not match the journal (entry 2)"}},
		{"request input and hash rewritten", gated, gatedHead, with(func(r *ApprovalRequest) {
			r.Input = `{"amount":"100","to":"mallory"}`
			r.InputHash = PayloadHash(r.Input)
		}), Verification{Valid: false, EntryCount: 4, BreakAtIndex: 2, Message: "approval request at seq=3 does not match the journal (entry 2)"}},
		{"request hash emptied", gated, gatedHead, with(func(r *ApprovalRequest) { r.InputHash = "" }),
			Verification{Valid: false, EntryCount: 4, BreakAtIndex: 2, Message: "approval request at seq=3 does not match the journal (entry 2)"}},
		{"request tool renamed", gated, gatedHead, with(func(r *ApprovalRequest) { r.ToolName = "reserveInventory" }),
			Verification{Valid: false, EntryCount: 4, BreakAtIndex: 2, Message: "approval request at seq=3 does not match the journal (entry 2)"}},
		{"request on an entry that is not gated", gated, gatedHead, with(func(r *ApprovalRequest) { r.JournalSeq = 2 }),
			Verification{Valid: false, EntryCount: 4, BreakAtIndex: 1, Message: "approval request at seq=2 does not match the journal (entry 1)"}},
		{"request beyond the journal", gated, gatedHead, with(func(r *ApprovalRequest) { r.JournalSeq = 9 }),
			Verification{Valid: false, EntryCount: 4, BreakAtIndex: 4, Message: "approval request at seq=9 has no journal entry"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := VerifySaga(tt.entries, tt.saga, tt.reqs); got != tt.want {
				t.Errorf("VerifySaga() = %+v, want %+v", got, tt.want)
			}
		})
	}
}

// TestCheckShowsNoCause: a verification that a policy could not be read
// for says what the engine says of it, never its cause (a store's error),
// as before the checks were evidence's.
func TestCheckShowsNoCause(t *testing.T) {
	hash := PayloadHash("a policy")
	es := chain(1)
	es[0].Phase, es[0].Payload = PhaseAwaitingApproval, Lines{{Key: KeyRequester, Value: "agent"}, {Key: KeyRule, Value: "large"}, {Key: KeyPolicy, Value: hash}}.String()
	es[0].Hash = Hash(ZeroHash, es[0])
	e := &Engine{keys: testKeys(t)}
	down := &Error{Kind: Unavailable, Msg: "the database is unavailable", Err: errors.New("dial tcp 10.0.0.5:5432: connection refused")}
	v, _ := e.check(es, Saga{ID: "s1", HeadSeq: 1, HeadHash: es[0].Hash}, nil, func(string) (*Approvals, error) { return nil, down },
		func(string) ([]Entry, error) { return nil, down })
	if want := "seq=1 (entry 0) is a request under approval policy " + hash + ": the database is unavailable"; v.Valid || v.Message != want {
		t.Errorf("check(a policy the store cannot read) = %+v; want %q", v, want)
	}
}
