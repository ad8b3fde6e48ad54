package storetest

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/sagacity-go/sagacity/internal/engine"
	"github.com/sagacity-go/sagacity/wire"
)

// The Store's reads of pending requests: the listings and counts, and
// what the sweeps read.

func testApprovals(t *testing.T, d *drv) {
	a, b := d.id("a"), d.id("b")
	rs := map[string]engine.ApprovalRequest{
		"b/2": mkRequest(b, 2, when(1)),
		"a/5": mkRequest(a, 5, when(2)),
		"b/4": mkRequest(b, 4, when(2)), // created with a/5: the saga breaks the tie
		"a/3": mkRequest(a, 3, when(3)),
	}
	createSagas(t, d.db, mkSaga(a, wire.AwaitingApproval, when(0)), mkSaga(b, wire.AwaitingApproval, when(0)))
	write(t, d.db, func(tx engine.Tx) error {
		return errors.Join(tx.PutApproval(rs["a/3"]), tx.PutApproval(rs["b/4"]), tx.PutApproval(rs["a/5"]), tx.PutApproval(rs["b/2"]))
	})
	tests := []struct {
		name, saga string
		want       []string
	}{
		{"every saga's, oldest first", "", []string{"b/2", "a/5", "b/4", "a/3"}},
		{"one saga's, by seq", a, []string{"a/3", "a/5"}},
		{"another saga's, by seq", b, []string{"b/2", "b/4"}},
		{"unknown saga", d.id("nobody"), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := d.db.Approvals(t.Context(), tt.saga)
			var want []engine.ApprovalRequest
			for _, k := range tt.want {
				want = append(want, rs[k])
			}
			if diff := cmp.Diff(storedRequests(want...), got, exact...); err != nil || diff != "" {
				t.Errorf("Approvals(%q) = %v; (-want +got):\n%s", tt.saga, err, diff)
			}
		})
	}
}

// pendingCase is one listing of pending requests: the filter, the requests
// Pending returns for it (as saga/seq, in order), and what CountPending
// says, After and Limit ignored.
type pendingCase struct {
	name  string
	f     engine.PendingFilter
	want  []string
	count int
}

// pendingListing writes the requests that Pending and CountPending are
// tested on, with the journals that approve, re-plan and refuse them, and
// returns them as Pending gives them back, by saga/seq, and the cases to
// run.
func pendingListing(t *testing.T, d *drv) (map[string]engine.Pending, []pendingCase) {
	t.Helper()
	a, b, c := d.id("a"), d.id("b"), d.id("c")
	for _, s := range []struct{ id, initiator string }{{b, "agent-b"}, {c, "agent-a"}, {a, "agent-a"}} {
		saga := mkSaga(s.id, wire.AwaitingApproval, when(0))
		saga.Initiator = s.initiator
		createSagas(t, d.db, saga)
	}
	req := func(saga string, seq int64, tool string, created int) engine.ApprovalRequest {
		r := mkRequest(saga, seq, when(created))
		r.ToolName = tool
		return r
	}
	rs := map[string]engine.ApprovalRequest{
		"a/1":  req(a, 1, "sendWireTransfer", 1),
		"a/2":  req(a, 2, "chargeCard", 2), // created with b/3, b/4 and c/1: the saga, then the seq, breaks the tie
		"b/3":  req(b, 3, "sendWireTransfer", 2),
		"b/4":  req(b, 4, "chargeCard", 2),
		"c/1":  req(c, 1, "sendWireTransfer", 2),
		"a/3":  req(a, 3, "sendWireTransfer", 4),
		"c/12": req(c, 12, "sendWireTransfer", 7),
	}
	// Their rules and votes: a/3 and c/12 are approved; b/3 and b/4
	// wait for a second approval under rule "two" of policy p2, a/1 and
	// c/1 for any vote under rule "large" of policy p1; b/3 is due.
	set := func(k, policy, rule string, quorum int, voters ...string) {
		r := rs[k]
		r.Policy, r.Rule, r.Quorum, r.Voters = policy, rule, quorum, voters
		rs[k] = r
	}
	set("a/3", "", "", 1, "manager@company.com")
	set("c/12", "", "", 1, "cfo@company.com")
	set("b/3", "p2", "two", 2, "manager@company.com")
	set("b/4", "p2", "two", 2, "a_b%c\\d")
	set("a/1", "p1", "large", 1)
	set("c/1", "p1", "large", 1)
	b3 := rs["b/3"]
	b3.Due = when(9)
	rs["b/3"] = b3
	gated := func(r engine.ApprovalRequest) engine.Entry {
		e := mkEntry(r.SagaID, r.JournalSeq, r.CreatedAt)
		e.ToolName, e.Phase, e.Input = r.ToolName, engine.PhaseAwaitingApproval, r.Input
		return e
	}
	entry := func(saga string, seq int64, at int, tool string, ph engine.Phase, input, payload string) engine.Entry {
		e := mkEntry(saga, seq, when(at))
		e.ToolName, e.Phase, e.Input, e.Payload = tool, ph, input, payload
		return e
	}
	okA, okC := "approver=manager@company.com\nreason=invoice checked\nauth=oidc", "approver=cfo@company.com\nreason=ok\nauth=oidc"
	write(t, d.db, func(tx engine.Tx) error {
		err := errors.Join(
			// a/3 re-plans a/1 and is approved; a/2 is rejected, which is
			// no approval, and no refusal of its tool.
			tx.Append(entry(a, 4, 6, engine.GateTool, engine.PhaseApproved, "seq=3", okA)),
			tx.Append(entry(a, 5, 7, engine.GateTool, engine.PhaseRejected, "seq=2", "approver=manager@company.com\nreason=no\nauth=oidc")),
			// b/3 re-plans b/1, whose resume was refused.
			tx.Append(entry(b, 1, 1, "sendWireTransfer", engine.PhaseAwaitingApproval, `{"amount":"1","to":"alice"}`, "requester=agent-1")),
			tx.Append(entry(b, 2, 1, "sendWireTransfer", engine.PhaseRejected, "seq=1", engine.RefusedNoApproval)),
			// c/12 re-plans c/1 and is approved; c/1 is not, though
			// "seq=12" starts with "seq=1".
			tx.Append(entry(c, 13, 8, engine.GateTool, engine.PhaseApproved, "seq=12", okC)),
		)
		for _, r := range rs {
			err = errors.Join(err, tx.PutApproval(r), tx.Append(gated(r)))
		}
		return err
	})
	want := map[string]engine.Pending{}
	for k, r := range rs {
		p := engine.Pending{ApprovalRequest: storedRequests(r)[0], Initiator: "agent-a"}
		if r.SagaID == b {
			p.Initiator = "agent-b"
		}
		want[k] = p
	}
	mark := func(k string, f func(*engine.Pending)) { p := want[k]; f(&p); want[k] = p }
	mark("a/3", func(p *engine.Pending) { p.Replanned = true })
	mark("b/3", func(p *engine.Pending) { p.Replanned, p.Refused = true, true })
	mark("c/12", func(p *engine.Pending) { p.Replanned = true })
	mark("a/1", func(p *engine.Pending) { p.Later = true })
	mark("c/1", func(p *engine.Pending) { p.Later = true })
	voter := func(id string, rules ...engine.RuleRef) *engine.Voter { return &engine.Voter{ID: id, Rules: rules} }
	large, two, legacy := engine.RuleRef{Policy: "p1", Rule: "large"}, engine.RuleRef{Policy: "p2", Rule: "two"}, engine.RuleRef{}

	after := func(n int, saga string, seq int64) *engine.PendingCursor {
		return &engine.PendingCursor{CreatedAt: stored(when(n)), SagaID: d.id(saga), JournalSeq: seq}
	}
	all := []string{"a/1", "a/2", "b/3", "b/4", "c/1", "a/3", "c/12"}
	return want, []pendingCase{
		{"all, oldest first, ties by saga then seq", engine.PendingFilter{Limit: 20}, all, 7},
		{"limit", engine.PendingFilter{Limit: 3}, all[:3], 7},
		{"tool", engine.PendingFilter{Tool: "chargeCard", Limit: 20}, []string{"a/2", "b/4"}, 2},
		{"tool none has", engine.PendingFilter{Tool: "reserveInventory", Limit: 20}, nil, 0},
		{"one saga", engine.PendingFilter{SagaID: c, Limit: 20}, []string{"c/1", "c/12"}, 2},
		{"unknown saga", engine.PendingFilter{SagaID: d.id("nobody"), Limit: 20}, nil, 0},
		{"initiator", engine.PendingFilter{Initiator: "agent-b", Limit: 20}, []string{"b/3", "b/4"}, 2},
		{"initiator, not requester", engine.PendingFilter{Initiator: "agent-1", Limit: 20}, nil, 0},
		{"approved", engine.PendingFilter{Approved: new(true), Limit: 20}, []string{"a/3", "c/12"}, 2},
		{"undecided", engine.PendingFilter{Approved: new(false), Limit: 20}, all[:5], 5},
		{"tool, initiator and undecided", engine.PendingFilter{Tool: "sendWireTransfer", Initiator: "agent-a", Approved: new(false), Limit: 20},
			[]string{"a/1", "c/1"}, 2},
		{"after", engine.PendingFilter{After: after(1, "a", 1), Limit: 20}, all[1:], 7},
		{"after, the next in the saga created with it", engine.PendingFilter{After: after(2, "b", 3), Limit: 20}, all[3:], 7},
		{"after, the next saga created with it", engine.PendingFilter{After: after(2, "b", 4), Limit: 20}, all[4:], 7},
		{"after the last of a tie", engine.PendingFilter{After: after(2, "c", 1), Limit: 20}, all[5:], 7},
		{"after one no longer pending", engine.PendingFilter{After: after(2, "a", 9), Limit: 20}, all[2:], 7},
		{"after the last", engine.PendingFilter{After: after(7, "c", 12), Limit: 20}, nil, 7},
		{"after, given in another zone", engine.PendingFilter{After: &engine.PendingCursor{CreatedAt: stored(when(2)).In(zone),
			SagaID: b, JournalSeq: 4}, Limit: 20}, all[4:], 7},
		{"after, undecided and limit", engine.PendingFilter{Approved: new(false), After: after(2, "b", 3), Limit: 1}, []string{"b/4"}, 5},
		// Backwards: the page just before a request, or the newest, still
		// oldest first.
		{"last", engine.PendingFilter{Last: true, Limit: 3}, all[4:], 7},
		{"last, more than there are", engine.PendingFilter{Last: true, Limit: 20}, all, 7},
		{"last, one saga", engine.PendingFilter{SagaID: c, Last: true, Limit: 1}, []string{"c/12"}, 2},
		{"last, undecided", engine.PendingFilter{Approved: new(false), Last: true, Limit: 2}, []string{"b/4", "c/1"}, 5},
		{"before", engine.PendingFilter{Before: after(4, "a", 3), Limit: 20}, all[:5], 7},
		{"before, the one before in the saga created with it", engine.PendingFilter{Before: after(2, "b", 4), Limit: 1}, []string{"b/3"}, 7},
		{"before, the saga before created with it", engine.PendingFilter{Before: after(2, "b", 3), Limit: 20}, all[:2], 7},
		{"before, a page that ends in a tie", engine.PendingFilter{Before: after(4, "a", 3), Limit: 3}, all[2:5], 7},
		{"before the first of a tie", engine.PendingFilter{Before: after(2, "a", 2), Limit: 20}, all[:1], 7},
		{"before one no longer pending", engine.PendingFilter{Before: after(2, "a", 9), Limit: 20}, all[:2], 7},
		{"before the first", engine.PendingFilter{Before: after(1, "a", 1), Limit: 20}, nil, 7},
		{"before, given in another zone", engine.PendingFilter{Before: &engine.PendingCursor{CreatedAt: stored(when(2)).In(zone),
			SagaID: b, JournalSeq: 4}, Limit: 20}, all[:3], 7},
		{"before, undecided and limit", engine.PendingFilter{Approved: new(false), Before: after(7, "c", 12), Limit: 2}, []string{"b/4", "c/1"}, 5},
		{"waiting for a voter of every rule", engine.PendingFilter{Voter: voter("someone", large, two, legacy), Limit: 20},
			[]string{"a/1", "a/2", "b/3", "b/4", "c/1"}, 5},
		{"waiting for a voter of one rule", engine.PendingFilter{Voter: voter("someone", two), Limit: 20}, []string{"b/3", "b/4"}, 2},
		{"not what they voted on", engine.PendingFilter{Voter: voter("manager@company.com", two, legacy), Limit: 20}, []string{"a/2", "b/4"}, 2},
		{"a voter whose name holds LIKE's wildcards", engine.PendingFilter{Voter: voter("a_b%c\\d", two), Limit: 20}, []string{"b/3"}, 1},
		{"a name that only matches as a pattern", engine.PendingFilter{Voter: voter("axb%c\\d", two), Limit: 20}, []string{"b/3", "b/4"}, 2},
		{"not what they started", engine.PendingFilter{Voter: voter("agent-a", large, two), Limit: 20}, []string{"b/3", "b/4"}, 2},
		{"not what they asked for", engine.PendingFilter{Voter: voter("agent-1", large, two), Limit: 20}, nil, 0},
		{"a voter of no rule", engine.PendingFilter{Voter: voter("someone"), Limit: 20}, nil, 0},
	}
}

func testStorePending(t *testing.T, d *drv) {
	byKey, tests := pendingListing(t, d)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := d.db.Pending(t.Context(), tt.f)
			var want []engine.Pending
			for _, k := range tt.want {
				want = append(want, byKey[k])
			}
			if diff := cmp.Diff(want, got, exact...); err != nil || diff != "" {
				t.Errorf("Pending(%s) = %v; (-want +got):\n%s", show(tt.f), err, diff)
			}
		})
	}
}

func testCountPending(t *testing.T, d *drv) {
	_, tests := pendingListing(t, d)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got, err := d.db.CountPending(t.Context(), tt.f); err != nil || got != tt.count {
				t.Errorf("CountPending(%s) = %d, %v; want %d", show(tt.f), got, err, tt.count)
			}
		})
	}
}

func testPendingByTool(t *testing.T, d *drv) {
	if got, err := d.db.PendingByTool(t.Context()); err != nil || len(got) != 0 {
		t.Fatalf("PendingByTool of an empty store = %+v, %v; want none", got, err)
	}
	a, b := d.id("a"), d.id("b")
	request := func(saga string, seq int64, tool string, created time.Time) engine.ApprovalRequest {
		r := mkRequest(saga, seq, created)
		r.ToolName = tool
		return r
	}
	createSagas(t, d.db, mkSaga(a, wire.AwaitingApproval, when(0)), mkSaga(b, wire.AwaitingApproval, when(0)))
	write(t, d.db, func(tx engine.Tx) error {
		return errors.Join(
			tx.PutApproval(request(a, 2, "sendWireTransfer", when(5))),
			tx.PutApproval(request(a, 4, "sendWireTransfer", when(3).In(time.FixedZone("PDT", -7*60*60)))), // the oldest, written later
			tx.PutApproval(request(b, 2, "sendWireTransfer", when(9))),
			tx.PutApproval(request(b, 4, "chargeCard", when(7))),
		)
	})
	want := []engine.ToolPending{
		{Tool: "chargeCard", Count: 1, Oldest: stored(when(7))},
		{Tool: "sendWireTransfer", Count: 3, Oldest: stored(when(3))},
	}
	got, err := d.db.PendingByTool(t.Context())
	if diff := cmp.Diff(want, got, exact...); err != nil || diff != "" {
		t.Errorf("PendingByTool = %v; (-want +got):\n%s", err, diff)
	}
	write(t, d.db, func(tx engine.Tx) error { _, err := tx.DeleteApprovals(b, 4); return err })
	got, err = d.db.PendingByTool(t.Context())
	if diff := cmp.Diff(want[1:], got, exact...); err != nil || diff != "" {
		t.Errorf("PendingByTool after chargeCard's request was dropped = %v; (-want +got):\n%s", err, diff)
	}
}

// testDueApprovals: the requests due at or before a time, soonest first;
// none that has no due time.
func testDueApprovals(t *testing.T, d *drv) {
	id := d.id("s")
	createSagas(t, d.db, mkSaga(id, wire.AwaitingApproval, when(0)))
	rs := []engine.ApprovalRequest{mkRequest(id, 1, when(1)), mkRequest(id, 2, when(1)), mkRequest(id, 3, when(1)), mkRequest(id, 4, when(1))}
	rs[0].Due, rs[1].Due, rs[3].Due = when(30), when(10), when(20)
	write(t, d.db, func(tx engine.Tx) error {
		return errors.Join(tx.PutApproval(rs[0]), tx.PutApproval(rs[1]), tx.PutApproval(rs[2]), tx.PutApproval(rs[3]))
	})
	mine := func(got []engine.ApprovalRequest) []int64 {
		var seqs []int64
		for _, r := range got {
			if r.SagaID == id {
				seqs = append(seqs, r.JournalSeq)
			}
		}
		return seqs
	}
	for _, tt := range []struct {
		name  string
		at    time.Time
		limit int
		want  []int64
	}{
		{"every one due", when(100), 10, []int64{2, 4, 1}},
		{"due at that very time", stored(when(20)), 10, []int64{2, 4}},
		{"given in another zone", stored(when(20)).In(time.FixedZone("PDT", -7*60*60)), 10, []int64{2, 4}},
		{"none yet", when(5), 10, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := d.db.DueApprovals(t.Context(), tt.at, tt.limit)
			if err != nil || !slices.Equal(mine(got), tt.want) {
				t.Errorf("DueApprovals(%v, %d) = %v, %v; want seqs %v", tt.at, tt.limit, mine(got), err, tt.want)
			}
		})
	}
}

// testPendingEntries: the AWAITING_APPROVAL entries of the pending
// requests, by saga and seq, without their input, a page at a time after
// a key; whatever the rows' own columns say, and none for an entry no row
// stands for.
func testPendingEntries(t *testing.T, d *drv) {
	a, b := d.id("a"), d.id("b")
	createSagas(t, d.db, mkSaga(a, wire.AwaitingApproval, when(0)), mkSaga(b, wire.AwaitingApproval, when(0)))
	gated := func(saga string, seq int64) engine.Entry {
		en := mkEntry(saga, seq, when(int(seq)))
		en.ToolName, en.Phase, en.Payload = "sendWireTransfer", engine.PhaseAwaitingApproval, "requester=agent-1\nrule=large\npolicy="+engine.ZeroHash
		return en
	}
	es := []engine.Entry{mkEntry(a, 1, when(1)), gated(a, 2), gated(a, 3), gated(a, 4), gated(b, 1)}
	rs := []engine.ApprovalRequest{mkRequest(a, 2, when(2)), mkRequest(a, 4, when(4)), mkRequest(b, 1, when(1))}
	rs[1].Due, rs[1].Quorum, rs[1].Rule = when(9999), 7, "small" // what the journal says decides, not these
	write(t, d.db, func(tx engine.Tx) error {
		var errs []error
		for _, en := range es {
			errs = append(errs, tx.Append(en))
		}
		for _, r := range rs {
			errs = append(errs, tx.PutApproval(r))
		}
		return errors.Join(errs...)
	})
	want := storedEntries(es[1], es[3], es[4]) // a/3 has no row
	for i := range want {
		want[i].Input = ""
	}
	for _, tt := range []struct {
		name  string
		after engine.RequestKey
		limit int
		want  []engine.Entry
	}{
		{"all", engine.RequestKey{}, 10, want},
		{"a page", engine.RequestKey{}, 2, want[:2]},
		{"the next page", engine.RequestKey{SagaID: a, JournalSeq: 4}, 2, want[2:]},
		{"after a seq of the saga", engine.RequestKey{SagaID: a, JournalSeq: 2}, 10, want[1:]},
		{"after the last", engine.RequestKey{SagaID: b, JournalSeq: 1}, 10, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := d.db.PendingEntries(t.Context(), tt.after, tt.limit)
			if diff := cmp.Diff(tt.want, got, exact...); err != nil || diff != "" {
				t.Errorf("PendingEntries(%+v, %d): %v (-want +got)\n%s", tt.after, tt.limit, err, diff)
			}
		})
	}
}
