package client_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/sagacity-go/sagacity/client"
)

// TestVotes: a request under a rule of two approvers is executed once
// both approved; one of them may withdraw; a reviewer may send a request
// back, and its agent reads what to change from the saga's requests and
// from the refused resume; approvers read the policies that took effect.
func TestVotes(t *testing.T) {
	s := newServer(t, sqliteURL(t.TempDir()))
	ctx := t.Context()
	agent, approver, lead, auditor := s.as("agent"), s.as("approver"), s.as("lead"), s.as("auditor")
	large := `{"amount":"25000","to":"bob"}`

	gated, err := agent.Ask(ctx, "big", client.Ask{Tool: wire, Input: large, Reason: "quarterly payout, PO 4411"})
	if err != nil || gated.Outcome != client.Gated {
		t.Fatalf("Ask(large) = %+v, %v; want it gated", gated, err)
	}
	list, err := approver.Approvals(ctx, "big")
	if err != nil || len(list.Approvals) != 1 || list.Approvals[0].Reason != "quarterly payout, PO 4411" || list.Approvals[0].Rule != "large" ||
		list.Approvals[0].Quorum != 2 || len(list.Approvals[0].ApprovedBy) != 0 || len(list.Approvals[0].Policy) != 64 {
		t.Fatalf("Approvals(big) = %+v, %v; want the request with its reason, rule large and a quorum of 2", list, err)
	}
	if _, err := approver.Approve(ctx, "big", gated.JournalSeq, ""); !errors.Is(err, client.ErrInvalid) {
		t.Errorf("Approve without the reason the rule requires: %v; want ErrInvalid", err)
	}
	d, err := approver.Approve(ctx, "big", gated.JournalSeq, "PO matches")
	if err != nil || d.Decision != "approved" || d.Votes != 1 || d.Quorum != 2 {
		t.Fatalf("the first approval = %+v, %v; want vote 1 of 2", d, err)
	}
	if _, err := approver.Approve(ctx, "big", gated.JournalSeq, "again"); !errors.Is(err, client.ErrConflict) {
		t.Errorf("the same approver again: %v; want ErrConflict", err)
	}
	if d, err := approver.Withdraw(ctx, "big", gated.JournalSeq, "the PO was amended"); err != nil || d.Decision != "withdrawn" || d.Votes != 0 {
		t.Errorf("Withdraw = %+v, %v; want no vote standing", d, err)
	}
	for _, c := range []*client.Client{approver, lead} {
		if _, err := c.Approve(ctx, "big", gated.JournalSeq, "checked"); err != nil {
			t.Fatalf("Approve: %v", err)
		}
	}
	st, err := agent.Requests(ctx, "big")
	if err != nil || len(st.Requests) != 1 || st.Requests[0].State != "approved" ||
		!slices.Equal(st.Requests[0].ApprovedBy, []string{"token:approver", "token:lead"}) {
		t.Fatalf("Requests(big) = %+v, %v; want approved by both", st, err)
	}
	if r, err := agent.Resume(ctx, "big", gated.JournalSeq, large); err != nil || r.Outcome != client.Executed {
		t.Errorf("Resume = %+v, %v; want executed", r, err)
	}

	// Sent back: the saga goes on, and the agent is told what to change.
	back, err := agent.Call(ctx, "back", wire, large)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := approver.RequestChanges(ctx, "back", back.JournalSeq, ""); !errors.Is(err, client.ErrInvalid) {
		t.Errorf("RequestChanges without saying what: %v; want ErrInvalid", err)
	}
	if d, err := approver.RequestChanges(ctx, "back", back.JournalSeq, "split it in two"); err != nil || d.Decision != "changes-requested" ||
		d.Status != client.Running {
		t.Fatalf("RequestChanges = %+v, %v; want the saga running", d, err)
	}
	const told = "[CHANGES_REQUESTED] Tool 'sendWireTransfer': split it in two"
	if st, err := agent.Requests(ctx, "back"); err != nil || st.Requests[0].State != "changes-requested" || st.Requests[0].Message != told {
		t.Errorf("Requests(back) = %+v, %v; want the message %q", st, err, told)
	}
	_, err = agent.Resume(ctx, "back", back.JournalSeq, large)
	var e *client.Error
	if !errors.As(err, &e) || e.Code != client.CodeChangesRequested || e.Message != told {
		t.Errorf("Resume of a request sent back: %v; want code %s and %q", err, client.CodeChangesRequested, told)
	}
	if r, err := agent.Call(ctx, "back", wire, `{"amount":"9000","to":"bob"}`); err != nil || r.Outcome != client.Gated {
		t.Errorf("the call again, changed: %+v, %v; want it gated in the same saga", r, err)
	}

	p, err := auditor.Policies(ctx)
	if err != nil || len(p.Documents) != 1 || p.Documents[0].SHA256 != p.InForce || p.InForce != list.Approvals[0].Policy ||
		!strings.Contains(p.Documents[0].Text, `"name":"large"`) {
		t.Errorf("Policies = %+v, %v; want the one in force, the request's", p, err)
	}
	if _, err := agent.Policies(ctx); !errors.Is(err, client.ErrForbidden) {
		t.Errorf("Policies as an agent: %v; want ErrForbidden", err)
	}
}
