package client_test

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/sagacity-go/sagacity/client"
	"github.com/sagacity-go/sagacity/internal/testkit"
	"github.com/sagacity-go/sagacity/toolsig"
	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"
	"golang.org/x/mod/sumdb/note"
)

// TestGatedFlow: an irreversible call waits for a person; approved by
// another principal, it runs once when resumed with the approved bytes,
// and the journal that says so verifies.
func TestGatedFlow(t *testing.T) {
	s := newServer(t, sqliteURL(t.TempDir()))
	ctx := t.Context()
	agent, approver, auditor := s.as("agent"), s.as("approver"), s.as("auditor")
	const saga = "order/42 é" // a "/" and a space in the path
	in := `{"amount":"100","to":"alice"}`
	sum := sha256.Sum256([]byte(in))
	hash := hex.EncodeToString(sum[:])

	res, err := agent.Call(ctx, saga, reserve, `{"sku":"desk","qty":1}`)
	if diff := cmp.Diff(client.CallResult{SagaID: saga, JournalSeq: 1, ToolName: reserve, Outcome: client.Executed, Status: client.Running, Result: ptr("reserved")}, res); err != nil || diff != "" {
		t.Fatalf("Call(%q, %s): %v (-want +got):\n%s", saga, reserve, err, diff)
	}
	gated, err := agent.Call(ctx, saga, wire, in)
	if err != nil || gated.Outcome != client.Gated || gated.JournalSeq != 3 || gated.InputHash != hash || !strings.Contains(gated.Message, "requires human approval") {
		t.Fatalf("Call(%q, %s) = %+v, %v; want AWAITING_APPROVAL at seq 3 with the input's hash", saga, wire, gated, err)
	}

	policies, err := approver.Policies(ctx)
	if err != nil {
		t.Fatal(err)
	}
	wantPending := client.ApprovalList{Total: 1, Approvals: []client.Approval{
		{SagaID: saga, JournalSeq: 3, ToolName: wire, Input: in, InputHash: hash, Requester: "token:agent",
			Ruling: client.Ruling{Rule: "small", Policy: policies.InForce, Quorum: 1, ApprovedBy: []string{}}}}}
	for _, of := range []string{"", saga} {
		list, err := approver.Approvals(ctx, of)
		if diff := cmp.Diff(wantPending, list); err != nil || diff != "" {
			t.Errorf("Approvals(%q): %v (-want +got):\n%s", of, err, diff)
		}
	}

	d, err := approver.Approve(ctx, saga, gated.JournalSeq, "invoice 1234 checked")
	if err != nil || !d.Approved || d.ApproverIdentity != "token:approver" || d.JournalSeq != gated.JournalSeq || d.DecidedAt.IsZero() {
		t.Fatalf("Approve(%q, %d) = %+v, %v; want approved by token:approver", saga, gated.JournalSeq, d, err)
	}
	if n := s.tools.ran("/wire"); n != 0 {
		t.Fatalf("the wire ran %d times before the resume", n)
	}
	key := toolsig.HeaderValue(saga) + "/" + strconv.FormatInt(gated.JournalSeq, 10) // the request the resume executes
	r, err := agent.Resume(ctx, saga, gated.JournalSeq, in)
	if err != nil || r.Status != client.Running || r.Outcome != client.Executed || r.Result == nil || *r.Result != "sent "+key {
		t.Fatalf("Resume(%q, %d) = %+v, %v; want RUNNING with the wire's answer", saga, gated.JournalSeq, r, err)
	}
	if again, err := agent.Resume(ctx, saga, gated.JournalSeq, in); err != nil || again.Outcome != client.Executed || again.Result == nil ||
		*again.Result != *r.Result {
		t.Errorf("second Resume(%q, %d) = %+v, %v; want what the first came to, and nothing run again", saga, gated.JournalSeq, again, err)
	}
	if n, once := s.tools.ran("/wire"), s.tools.count("/wire", key); n != 1 || once != 1 {
		t.Errorf("the wire ran %d times, %d under %s; want once", n, once, key)
	}

	ended, err := agent.End(ctx, saga)
	if err != nil || ended.Status != client.Completed || !ended.Ended || ended.Initiator != "token:agent" {
		t.Fatalf("End(%q) = %+v, %v; want COMPLETED, ended", saga, ended, err)
	}
	got, err := auditor.Saga(ctx, saga)
	if diff := cmp.Diff(ended, got); err != nil || diff != "" {
		t.Errorf("Saga(%q): %v (-End's +Saga's):\n%s", saga, err, diff)
	}

	entries, err := auditor.Audit(ctx, saga)
	if err != nil {
		t.Fatal(err)
	}
	var phases []string
	for i, e := range entries {
		phases = append(phases, fmt.Sprintf("%d %s %s", e.Seq, e.ToolName, e.Phase))
		if e.SagaID != saga || len(e.Hash) != 64 || e.Timestamp == "" || e.TreeSize != nil || (i > 0 && e.Timestamp < entries[i-1].Timestamp) {
			t.Errorf("Audit(%q) entry %d = %+v; want the saga's, hashed, in time order, without a proof", saga, i, e)
		}
	}
	wantPhases := []string{"1 reserveInventory INTENT", "2 reserveInventory EXECUTED", "3 sendWireTransfer AWAITING_APPROVAL",
		"4 approval-gate APPROVED", "5 sendWireTransfer INTENT", "6 sendWireTransfer EXECUTED"}
	if diff := cmp.Diff(wantPhases, phases); diff != "" {
		t.Fatalf("Audit(%q) (-want +got):\n%s", saga, diff)
	}
	if p := entries[3].Payload; !strings.HasPrefix(p, "approver=token:approver\nreason=invoice 1234 checked\n") {
		t.Errorf("APPROVED payload = %q; want the approver and the reason", p)
	}
	if e := entries[4]; e.Input != in {
		t.Errorf("resumed INTENT input = %q; want the approved bytes %q", e.Input, in)
	}
	v, err := auditor.Verify(ctx, saga)
	// Verification names the rule, the policy and the voters of the
	// executed request.
	if want := (client.Verification{Valid: true, EntryCount: 6, BreakAtIndex: -1, Message: "all 6 entries verified; seq=3 (rule small of policy " +
		policies.InForce + "): resumed, approved by token:approver"}); err != nil || v != want {
		t.Errorf("Verify(%q) = %+v, %v; want %+v", saga, v, err, want)
	}
}

// TestEvidence: the keys, receipts, checkpoints and proofs the client
// reads verify with note and transparency-dev's verifier alone.
func TestEvidence(t *testing.T) {
	s := newServer(t, sqliteURL(t.TempDir()))
	ctx := t.Context()
	agent, approver, auditor := s.as("agent"), s.as("approver"), s.as("auditor")
	if _, err := auditor.Checkpoint(ctx, client.Latest); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("Checkpoint(Latest) before the first: %v; want ErrNotFound", err)
	}
	if l, err := auditor.Log(ctx); err != nil || l.Size != 0 || l.Checkpoint != nil || l.SignedAt != nil || l.Halted != "" {
		t.Errorf("Log() before the first checkpoint = %+v, %v; want an empty log", l, err)
	}
	gated, err := agent.Call(ctx, "paid", wire, `{"amount":"5","to":"bob"}`)
	if err != nil {
		t.Fatal(err)
	}
	size1 := s.sequence(t)
	if _, err := approver.Approve(ctx, "paid", gated.JournalSeq, ""); err != nil {
		t.Fatal(err)
	}
	size2 := s.sequence(t)

	keys, err := auditor.Keys(ctx)
	if err != nil || len(keys) != 1 {
		t.Fatalf("Keys() = %q, %v; want one key", keys, err)
	}
	v, err := note.NewVerifier(keys[0])
	if err != nil {
		t.Fatal(err)
	}
	receipt, err := auditor.Receipt(ctx, "paid", gated.JournalSeq+1)
	if n, oerr := note.Open([]byte(receipt), note.VerifierList(v)); err != nil || oerr != nil || !strings.Contains(n.Text, "decision: approved\n") {
		t.Errorf("Receipt(paid, %d) = %q, %v; opened with the key: %v; want the approval, signed", gated.JournalSeq+1, receipt, err, oerr)
	}
	if _, err := auditor.Receipt(ctx, "paid", gated.JournalSeq); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("Receipt(paid, %d), no decision: %v; want ErrNotFound", gated.JournalSeq, err)
	}

	l, err := auditor.Log(ctx)
	if err != nil || l.Size != size2 || l.SignedAt == nil || l.Checkpoint == nil || l.Halted != "" {
		t.Fatalf("Log() = %+v, %v; want size %d, signed", l, err, size2)
	}
	latest, err := auditor.Checkpoint(ctx, client.Latest)
	if err != nil || latest != *l.Checkpoint {
		t.Errorf("Checkpoint(Latest) = %q, %v; want Log's %q", latest, err, *l.Checkpoint)
	}
	root2 := checkpointRoot(t, v, latest, size2)
	older, err := auditor.Checkpoint(ctx, size1)
	if err != nil {
		t.Fatal(err)
	}
	root1 := checkpointRoot(t, v, older, size1)
	p, err := auditor.Consistency(ctx, size1, size2)
	if err != nil || p.From != size1 || p.To != size2 {
		t.Fatalf("Consistency(%d, %d) = %+v, %v", size1, size2, p, err)
	}
	if err := proof.VerifyConsistency(rfc6962.DefaultHasher, uint64(size1), uint64(size2), p.Proof, root1, root2); err != nil {
		t.Errorf("Consistency(%d, %d): %v", size1, size2, err)
	}

	for _, at := range []int64{client.Latest, size1} {
		proved, err := auditor.AuditProofs(ctx, "paid", at)
		entries := proved.Entries
		if err != nil || len(entries) != 2 || !strings.HasPrefix(proved.Head, "sagacity saga head v1\nsaga: paid\nseq: 2\n") {
			t.Fatalf("AuditProofs(paid, %d) = %d entries, head %q, %v; want 2 and the head at seq 2", at, len(entries), proved.Head, err)
		}
		size, root := size2, root2
		if at == size1 {
			size, root = size1, root1
		}
		for _, e := range entries {
			// The log's first leaf is the approval policy the server
			// took effect with; paid's entries follow.
			if e.Seq > size1-1 && at == size1 {
				if e.TreeSize != nil {
					t.Errorf("AuditProofs(paid, %d): seq %d, logged later, has a proof against %d", at, e.Seq, *e.TreeSize)
				}
				continue
			}
			if e.TreeSize == nil || *e.TreeSize != size || e.Leaf == nil || e.Proof == nil {
				t.Errorf("AuditProofs(paid, %d): seq %d proved against size %v; want %d", at, e.Seq, e.TreeSize, size)
			} else if err := proof.VerifyInclusion(rfc6962.DefaultHasher, uint64(*e.Leaf), uint64(size), leafHash(e), *e.Proof, root); err != nil {
				t.Errorf("AuditProofs(paid, %d): seq %d at leaf %d is not in the checkpoint: %v", at, e.Seq, *e.Leaf, err)
			}
		}
		// The policy the request pinned comes along, proved against the
		// same checkpoint.
		var pinned string
		for l := range strings.Lines(entries[gated.JournalSeq-1].Payload) {
			if h, ok := strings.CutPrefix(strings.TrimSuffix(l, "\n"), "policy="); ok {
				pinned = h
			}
		}
		if len(proved.Policies) != 1 {
			t.Fatalf("AuditProofs(paid, %d) policies = %+v; want the one seq %d pins (%q)", at, proved.Policies, gated.JournalSeq, pinned)
		}
		pol := proved.Policies[0]
		if pinned == "" || pol.SagaID != "sagacity:policies" || pol.ToolName != "approval-policy" || pol.Phase != "EXECUTED" ||
			!strings.Contains(pol.Payload+"\n", "policy="+pinned+"\n") {
			t.Errorf("AuditProofs(paid, %d) policy = %+v; want the EXECUTED approval-policy entry of sagacity:policies of %q", at, pol, pinned)
		}
		if pol.TreeSize == nil || *pol.TreeSize != size || pol.Leaf == nil || pol.Proof == nil {
			t.Errorf("AuditProofs(paid, %d): the policy proved against size %v; want %d", at, pol.TreeSize, size)
		} else if err := proof.VerifyInclusion(rfc6962.DefaultHasher, uint64(*pol.Leaf), uint64(size), leafHash(pol), *pol.Proof, root); err != nil {
			t.Errorf("AuditProofs(paid, %d): the policy at leaf %d is not in the checkpoint: %v", at, *pol.Leaf, err)
		}
	}
	// Agents are not shown the policies they are held to.
	if proved, err := agent.AuditProofs(ctx, "paid", client.Latest); err != nil || len(proved.Entries) != 2 || proved.Policies != nil {
		t.Errorf("AuditProofs(paid) by its agent = %d entries, policies %+v, %v; want its 2 entries and no policy", len(proved.Entries), proved.Policies, err)
	}
	if _, err := auditor.Consistency(ctx, size2, size1); !errors.Is(err, client.ErrInvalid) {
		t.Errorf("Consistency(%d, %d), backwards: %v; want ErrInvalid", size2, size1, err)
	}
}

// checkpointRoot opens a checkpoint with the verifier and returns its root,
// checking its size.
func checkpointRoot(t *testing.T, v note.Verifier, signed string, size int64) []byte {
	t.Helper()
	n, err := note.Open([]byte(signed), note.VerifierList(v))
	if err != nil {
		t.Fatalf("checkpoint %q: %v", signed, err)
	}
	lines := strings.Split(n.Text, "\n")
	root, err := base64.StdEncoding.DecodeString(lines[2])
	if lines[1] != strconv.FormatInt(size, 10) || err != nil {
		t.Fatalf("checkpoint %q: want size %d and a root", n.Text, size)
	}
	return root
}

// TestErrors: each refusal is an *Error with the server's status and
// message, matched by exactly one kind.
func TestErrors(t *testing.T) {
	s := newServer(t, sqliteURL(t.TempDir()))
	ctx := t.Context()
	agent, other, approver, auditor, lead := s.as("agent"), s.as("other-agent"), s.as("approver"), s.as("auditor"), s.as("lead")
	in := `{"amount":"7","to":"carol"}`
	gated, err := agent.Call(ctx, "mine", wire, in)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := approver.Approve(ctx, "mine", gated.JournalSeq, ""); err != nil {
		t.Fatal(err)
	}
	leads, err := lead.Call(ctx, "leads", wire, in)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := agent.Call(ctx, "done", reserve, "{}"); err != nil {
		t.Fatal(err)
	}
	if _, err := agent.End(ctx, "done"); err != nil {
		t.Fatal(err)
	}
	kinds := []error{client.ErrInvalid, client.ErrUnauthorized, client.ErrForbidden, client.ErrNotFound, client.ErrConflict}
	for _, tc := range []struct {
		name   string
		do     func() error
		status int
		kind   error
		msg    string // in the message
	}{
		{"bad token", func() error {
			_, err := (&client.Client{BaseURL: s.url, Token: "sgc_nobody"}).Sagas(ctx, client.SagaQuery{})
			return err
		},
			401, client.ErrUnauthorized, ""},
		{"no token", func() error { _, err := (&client.Client{BaseURL: s.url}).Saga(ctx, "mine"); return err },
			401, client.ErrUnauthorized, ""},
		{"unknown saga", func() error { _, err := auditor.Saga(ctx, "nobody"); return err },
			404, client.ErrNotFound, "nobody"},
		{"a saga id that reads as the server's own", func() error { _, err := agent.Call(ctx, "sagacity%3Apasskeys", reserve, "{}"); return err },
			400, client.ErrInvalid, "are the server's own"},
		{"nothing pending", func() error { _, err := approver.Approve(ctx, "mine", 99, ""); return err },
			404, client.ErrNotFound, ""},
		{"unknown tool", func() error { _, err := agent.Call(ctx, "mine", "launchRocket", "{}"); return err },
			404, client.ErrNotFound, "launchRocket"},
		{"approved twice", func() error { _, err := approver.Approve(ctx, "mine", gated.JournalSeq, ""); return err },
			409, client.ErrConflict, ""},
		{"call in an ended saga", func() error { _, err := agent.Call(ctx, "done", reserve, "{}"); return err },
			409, client.ErrConflict, "COMPLETED"},
		{"initiator approves", func() error { _, err := lead.Approve(ctx, "leads", leads.JournalSeq, ""); return err },
			403, client.ErrForbidden, "token:lead"},
		{"agent approves", func() error { _, err := agent.Reject(ctx, "leads", leads.JournalSeq, "no"); return err },
			403, client.ErrForbidden, "approver role"},
		{"another agent's saga", func() error { _, err := other.Call(ctx, "mine", reserve, "{}"); return err },
			403, client.ErrForbidden, "token:agent"},
		{"auditor resolves", func() error {
			_, err := auditor.Resolve(ctx, "mine", 1, true, "", "checked")
			return err
		}, 403, client.ErrForbidden, ""},
		{"limit out of bounds", func() error { _, err := auditor.Sagas(ctx, client.SagaQuery{Limit: 501}); return err },
			400, client.ErrInvalid, "limit"},
		{"unknown status", func() error { _, err := auditor.Sagas(ctx, client.SagaQuery{Status: "LOST"}); return err },
			400, client.ErrInvalid, "LOST"},
		{"no tool", func() error { _, err := agent.Call(ctx, "mine", "", "{}"); return err },
			400, client.ErrInvalid, "tool"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.do()
			var e *client.Error
			if !errors.As(err, &e) || e.StatusCode != tc.status || e.Message == "" || !strings.Contains(e.Message, tc.msg) {
				t.Fatalf("got %v; want an *Error %d saying %q", err, tc.status, tc.msg)
			}
			for _, k := range kinds {
				if errors.Is(err, k) != errors.Is(k, tc.kind) {
					t.Errorf("errors.Is(%v, %v) = %t", err, k, !errors.Is(k, tc.kind))
				}
			}
		})
	}
}

// TestToolFailed: a call whose tool failed is an error (422) and a result
// saying how the saga was compensated, but no kind of refusal: the
// request was fine.
func TestToolFailed(t *testing.T) {
	s := newServer(t, sqliteURL(t.TempDir()))
	ctx := t.Context()
	agent := s.as("agent")
	if _, err := agent.Call(ctx, "parcel", reserve, `{"sku":"box"}`); err != nil {
		t.Fatal(err)
	}
	res, err := agent.Call(ctx, "parcel", ship, `{"to":"home"}`)
	var e *client.Error
	if !errors.As(err, &e) || e.StatusCode != 422 || !strings.Contains(e.Message, "no carrier available") {
		t.Fatalf("Call(parcel, %s): %v; want an *Error 422 with the tool's failure", ship, err)
	}
	for _, k := range []error{client.ErrInvalid, client.ErrUnauthorized, client.ErrForbidden, client.ErrNotFound, client.ErrConflict} {
		if errors.Is(err, k) {
			t.Errorf("errors.Is(%v, %v) = true; want no kind", err, k)
		}
	}
	if res.Outcome != client.Failed || res.Status != client.Compensated || res.JournalSeq != 3 || res.ToolName != ship || res.Error != e.Message {
		t.Errorf("Call(parcel, %s) = %+v; want COMPENSATED at seq 3, with the error", ship, res)
	}
	if n := s.tools.count("/release", "parcel/1/compensate"); n != 1 {
		t.Errorf("the reservation was released %d times; want once", n)
	}
}

// TestRefusedResume: resuming with other bytes than those approved runs
// nothing, compensates, and answers both the conflict and how the saga
// ended.
func TestRefusedResume(t *testing.T) {
	s := newServer(t, sqliteURL(t.TempDir()))
	ctx := t.Context()
	agent, approver := s.as("agent"), s.as("approver")
	in := `{"amount":"100","to":"alice"}`
	gated, err := agent.Call(ctx, "swap", wire, in)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := approver.Approve(ctx, "swap", gated.JournalSeq, ""); err != nil {
		t.Fatal(err)
	}
	r, err := agent.Resume(ctx, "swap", gated.JournalSeq, `{"amount":"100000","to":"mallory"}`)
	var e *client.Error
	if !errors.Is(err, client.ErrConflict) || !errors.As(err, &e) || e.Message != r.Reason {
		t.Fatalf("Resume with other bytes: %v; want ErrConflict with the reason", err)
	}
	if r.SagaID != "swap" || r.Status != client.Compensated || !strings.Contains(r.Reason, "payload changed since approval") {
		t.Errorf("Resume with other bytes = %+v; want the saga COMPENSATED and why", r)
	}
	if _, err := agent.Resume(ctx, "swap", gated.JournalSeq, in); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("Resume with the approved bytes after the refusal: %v; want ErrNotFound, the request dropped", err)
	}
	if n := s.tools.ran("/wire"); n != 0 {
		t.Errorf("the wire ran %d times; want never", n)
	}
}

// TestSagas: pages of sagas, newest first, by status, and abort.
func TestSagas(t *testing.T) {
	s := newServer(t, sqliteURL(t.TempDir()))
	ctx := t.Context()
	agent, auditor := s.as("agent"), s.as("auditor")
	for _, id := range []string{"page-1", "page-2", "page-3"} {
		if _, err := agent.Call(ctx, id, reserve, "{}"); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Millisecond) // distinct creation times
	}
	aborted, err := agent.Abort(ctx, "page-2", "changed my mind")
	if err != nil || aborted.Status != client.Compensated || aborted.Reason != "aborted by token:agent: changed my mind" {
		t.Fatalf("Abort(page-2) = %+v, %v; want COMPENSATED with the reason", aborted, err)
	}
	if n := s.tools.count("/release", "page-2/1/compensate"); n != 1 {
		t.Errorf("page-2's reservation was released %d times; want once", n)
	}
	ids := func(p client.SagaPage) (out []string) {
		for _, s := range p.Sagas {
			out = append(out, s.SagaID)
		}
		return out
	}
	first, err := auditor.Sagas(ctx, client.SagaQuery{Limit: 2})
	if diff := cmp.Diff([]string{"page-3", "page-2"}, ids(first)); err != nil || diff != "" || first.NextCursor == "" {
		t.Fatalf("Sagas(limit 2) = %+v, %v; want the newest two and a cursor: (-want +got)\n%s", first, err, diff)
	}
	next, err := auditor.Sagas(ctx, client.SagaQuery{Limit: 2, Cursor: first.NextCursor})
	// The oldest is the server's own: the approval policy it took effect
	// with.
	if diff := cmp.Diff([]string{"page-1", "sagacity:policies"}, ids(next)); err != nil || diff != "" || next.NextCursor == "" {
		t.Errorf("Sagas(limit 2, the cursor) = %+v, %v; want the oldest, no cursor: (-want +got)\n%s", next, err, diff)
	}
	byStatus, err := auditor.Sagas(ctx, client.SagaQuery{Status: client.Compensated})
	if diff := cmp.Diff([]string{"page-2"}, ids(byStatus)); err != nil || diff != "" {
		t.Errorf("Sagas(COMPENSATED): %v (-want +got)\n%s", err, diff)
	}
	one, err := auditor.Saga(ctx, "page-2")
	if diff := cmp.Diff(aborted, one); err != nil || diff != "" {
		t.Errorf("Saga(page-2): %v (-Abort's +Saga's)\n%s", err, diff)
	}
}

// TestInDoubt, on PostgreSQL behind a proxy that is cut while a tool
// runs: the call is answered in doubt (202), listed, and resolved by a
// person; the server is not ready while the database is gone.
func TestInDoubt(t *testing.T) {
	u, err := url.Parse(testkit.PostgresURL(t))
	if err != nil {
		t.Fatal(err)
	}
	px := testkit.NewCutter(t, u.Host)
	u.Host = px.Addr()
	s := newServer(t, u.String())
	ctx := t.Context()
	agent, approver, auditor := s.as("agent"), s.as("approver"), s.as("auditor")
	if err := auditor.Ready(ctx); err != nil {
		t.Fatalf("Ready(): %v", err)
	}
	if _, err := agent.Call(ctx, "courier", reserve, "{}"); err != nil {
		t.Fatal(err)
	}
	release := s.tools.holdBooking()
	defer release()
	answered := make(chan struct{})
	var res client.CallResult
	var callErr error
	go func() {
		defer close(answered)
		res, callErr = agent.Call(ctx, "courier", book, `{"pickup":"9:00"}`)
	}()
	for deadline := time.Now().Add(10 * time.Second); s.tools.count("/book", "courier/3") == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the booking did not reach the tool server within 10s")
		}
	}
	px.Cut()
	release()
	<-answered
	if callErr != nil || res.Outcome != client.InDoubt || res.JournalSeq != 3 || !strings.Contains(res.Error, "do not retry") || res.Status != client.Running {
		t.Fatalf("Call(courier, %s) with the database cut as the tool answered = %+v, %v; want IN_DOUBT, the saga RUNNING", book, res, callErr)
	}
	var e *client.Error
	if err := auditor.Ready(ctx); !errors.As(err, &e) || e.StatusCode != 503 || e.Message != "database unavailable" {
		t.Errorf("Ready() while the database is cut: %v; want an *Error 503 saying so", err)
	}
	px.Restore()
	for deadline := time.Now().Add(10 * time.Second); auditor.Ready(ctx) != nil; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("Ready() 10s after the database came back: %v", auditor.Ready(ctx))
		}
	}

	calls, err := auditor.CallsInDoubt(ctx, 0)
	want := []client.CallInDoubt{{SagaID: "courier", JournalSeq: 3, ToolName: book, Input: `{"pickup":"9:00"}`, Requester: "token:agent", State: "RUNNING",
		IdempotencyKey: "courier/3"}}
	if diff := cmp.Diff(want, calls, cmpopts.IgnoreFields(client.CallInDoubt{}, "StartedAt", "UpdatedAt")); err != nil || diff != "" {
		t.Fatalf("CallsInDoubt(0): %v (-want +got)\n%s", err, diff)
	}
	// However young, it is in doubt: the process that started it knows
	// nothing runs it any more.
	if calls, err := auditor.CallsInDoubt(ctx, time.Hour); err != nil || len(calls) != 1 || calls[0].JournalSeq != 3 {
		t.Errorf("CallsInDoubt(1h) = %+v, %v; want the call at seq 3, which its own process no longer runs", calls, err)
	}
	if _, err := agent.Resolve(ctx, "courier", 3, true, "", "checked"); !errors.Is(err, client.ErrForbidden) {
		t.Errorf("Resolve by the saga's initiator: %v; want ErrForbidden", err)
	}
	sg, err := approver.Resolve(ctx, "courier", 3, true, "booked by phone", "the courier confirmed")
	if err != nil || sg.Status != client.Running {
		t.Fatalf("Resolve(courier, 3) = %+v, %v; want the saga RUNNING", sg, err)
	}
	if _, err := approver.Resolve(ctx, "courier", 3, true, "booked by phone", "the courier confirmed"); !errors.Is(err, client.ErrConflict) {
		t.Errorf("Resolve twice: %v; want ErrConflict", err)
	}
	if calls, err := auditor.CallsInDoubt(ctx, 0); err != nil || len(calls) != 0 {
		t.Errorf("CallsInDoubt(0) after the resolution = %+v, %v; want none", calls, err)
	}
	entries, err := auditor.Audit(ctx, "courier")
	if err != nil || len(entries) != 4 {
		t.Fatalf("Audit(courier) = %d entries, %v; want 4", len(entries), err)
	}
	if e := entries[3]; e.Phase != "EXECUTED" || e.ToolName != "approval-gate" || e.Input != "seq=3" ||
		!strings.HasPrefix(e.Payload, "resolved-by=token:approver\nreason=the courier confirmed\n") || !strings.HasSuffix(e.Payload, "\nresult=booked by phone") {
		t.Errorf("the resolution's entry = %+v; want EXECUTED by the approval gate, naming the approver", e)
	}
	if v, err := auditor.Verify(ctx, "courier"); err != nil || !v.Valid {
		t.Errorf("Verify(courier) = %+v, %v; want valid", v, err)
	}
}

// leafHash is an entry's leaf in the log, as the README documents it:
// RFC 6962's leaf hash of its saga, seq and hash, each written as its
// byte length in decimal, a colon and its bytes.
func leafHash(e client.Entry) []byte {
	seq := strconv.FormatInt(e.Seq, 10)
	return rfc6962.DefaultHasher.HashLeaf([]byte(fmt.Sprintf("%d:%s%d:%s%d:%s", len(e.SagaID), e.SagaID, len(seq), seq, len(e.Hash), e.Hash)))
}

// flaky stands in front of the server as a load balancer that is having
// a bad minute: it answers the first fail requests 503 without passing
// them on, then passes on the next one and drops its answer (502), then
// passes requests on; it notes each request's Idempotency-Key.
type flaky struct {
	mu   sync.Mutex
	fail int
	lose bool
	keys []string
}

func (f *flaky) front(t *testing.T, backend string) string {
	u, _ := url.Parse(backend)
	proxy := httputil.NewSingleHostReverseProxy(u)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.keys = append(f.keys, r.Header.Get("Idempotency-Key"))
		fail, lose := f.fail > 0, f.fail == 0 && f.lose
		if fail {
			f.fail--
		} else if lose {
			f.lose = false
		}
		f.mu.Unlock()
		switch {
		case fail:
			http.Error(w, "upstream restarting", http.StatusServiceUnavailable)
		case lose:
			proxy.ServeHTTP(httptest.NewRecorder(), r)
			http.Error(w, "upstream answer lost", http.StatusBadGateway)
		default:
			proxy.ServeHTTP(w, r)
		}
	}))
	t.Cleanup(ts.Close)
	return ts.URL
}

// TestCallRetries: Call sends a call again under one key while its answer
// is lost, and the server runs it once; RetryFor bounds it.
func TestCallRetries(t *testing.T) {
	s := newServer(t, sqliteURL(t.TempDir()))
	ctx := t.Context()
	f := &flaky{fail: 2, lose: true}
	agent := &client.Client{BaseURL: f.front(t, s.url), Token: tokens["agent"], RetryFor: 30 * time.Second}
	r, err := agent.Call(ctx, "retried", wire, `{"amount":"5","to":"bob"}`)
	if err != nil || r.Outcome != client.Gated || r.JournalSeq != 1 {
		t.Fatalf("Call through a flaky front = %+v, %v; want the gated call at seq 1", r, err)
	}
	r, err = agent.Call(ctx, "retried", reserve, `{"sku":"A"}`)
	if err != nil || r.Outcome != client.Executed || r.JournalSeq != 2 || s.tools.ran("/reserve") != 1 {
		t.Fatalf("Call = %+v, %v (%d reservations); want one execution at seq 2", r, err, s.tools.ran("/reserve"))
	}
	f.mu.Lock()
	keys := slices.Clone(f.keys)
	f.mu.Unlock()
	if len(keys) != 5 || keys[0] != keys[3] || keys[4] == keys[0] || !strings.HasPrefix(keys[0], `"`) {
		t.Errorf("Idempotency-Keys sent = %q; want the first call's 4 attempts under one quoted key, the second call under another", keys)
	}
	// Answered for the gated call, the lost answer's repeat is the same
	// request, pending once.
	if l, err := s.as("approver").Approvals(ctx, "retried"); err != nil || len(l.Approvals) != 1 {
		t.Errorf("pending after the retries = %+v, %v; want 1", l, err)
	}

	once := &flaky{fail: 1}
	agent = &client.Client{BaseURL: once.front(t, s.url), Token: tokens["agent"], RetryFor: -1}
	if _, err := agent.Call(ctx, "retried", reserve, `{"sku":"B"}`); !errorStatus(err, 503) {
		t.Errorf("Call sent once into a 503 = %v; want the 503", err)
	}
	if _, err := agent.CallWithKey(ctx, "retried", reserve, `{"sku":"B"}`, "café"); err == nil || len(once.keys) != 1 {
		t.Errorf("CallWithKey with a key that cannot be one = %v (%d requests); want an error, nothing sent", err, len(once.keys))
	}
}

func errorStatus(err error, code int) bool {
	e, ok := errors.AsType[*client.Error](err)
	return ok && e.StatusCode == code
}

func ptr[T any](v T) *T { return &v }
