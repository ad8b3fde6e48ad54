package client_test

import (
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sagacity-go/sagacity/client"
)

// pending waits until the saga has a pending request, and returns its
// seq.
func pending(t *testing.T, s *sagacity, saga string) int64 {
	t.Helper()
	for range 1000 {
		l, err := s.as("approver").Approvals(t.Context(), saga)
		if err != nil {
			t.Fatal(err)
		}
		if len(l.Approvals) > 0 {
			return l.Approvals[0].JournalSeq
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("no request of %s is pending", saga)
	return 0
}

// TestWait: with Wait, a gated call and a resume are held until the
// request is decided (an HTTP client's shorter Timeout lengthened to
// cover it), and a wait that ends answers Gated; a held call whose answer
// was lost is sent again under its key, however long it was held, and
// holds the same request, never a second.
func TestWait(t *testing.T) {
	s := newServer(t, sqliteURL(t.TempDir()))
	ctx := t.Context()
	in := `{"amount":"5","to":"bob"}`
	type answer struct {
		r   client.CallResult
		err error
	}
	approveHeld := func(agent *client.Client, saga string) answer {
		t.Helper()
		ch := make(chan answer, 1)
		go func() {
			r, err := agent.Call(ctx, saga, wire, in)
			ch <- answer{r, err}
		}()
		seq := pending(t, s, saga)
		select {
		case a := <-ch:
			t.Fatalf("Call with Wait answered %+v, %v before the request was decided", a.r, a.err)
		case <-time.After(500 * time.Millisecond):
		}
		if _, err := s.as("approver").Approve(ctx, saga, seq, ""); err != nil {
			t.Fatal(err)
		}
		select {
		case a := <-ch:
			return a
		case <-time.After(time.Minute):
			t.Fatal("the held call did not answer in a minute once approved")
			return answer{}
		}
	}

	agent := s.as("agent")
	agent.Wait, agent.HTTPClient = 30*time.Second, &http.Client{Timeout: 100 * time.Millisecond}
	a := approveHeld(agent, "held")
	if a.err != nil || a.r.Outcome != client.Gated || !strings.HasPrefix(a.r.Message, "[APPROVED] Tool 'sendWireTransfer' was approved by token:approver") {
		t.Fatalf("the held call once approved = %+v, %v; want it gated and approved", a.r, a.err)
	}
	if r, err := agent.Resume(ctx, "held", a.r.JournalSeq, in); err != nil || r.Outcome != client.Executed {
		t.Errorf("Resume of the approved request = %+v, %v; want it executed", r, err)
	}

	agent.Wait = time.Second
	start := time.Now()
	r, err := agent.Call(ctx, "quiet", wire, in)
	if err != nil || r.Outcome != client.Gated || !strings.HasPrefix(r.Message, "[AWAITING_APPROVAL]") || time.Since(start) < time.Second {
		t.Errorf("Call with a wait of a second, nobody deciding = %+v, %v after %v; want it gated after the second", r, err, time.Since(start))
	}
	held := make(chan client.ResumeResult, 1)
	agent.Wait = 30 * time.Second
	go func() {
		r, err := agent.Resume(ctx, "quiet", r.JournalSeq, in)
		if err != nil {
			t.Error(err)
		}
		held <- r
	}()
	select {
	case r := <-held:
		t.Fatalf("Resume with Wait answered %+v before the request was decided", r)
	case <-time.After(500 * time.Millisecond):
	}
	if _, err := s.as("approver").Approve(ctx, "quiet", r.JournalSeq, ""); err != nil {
		t.Fatal(err)
	}
	if r := <-held; r.Outcome != client.Executed {
		t.Errorf("the held Resume once approved = %+v; want it executed", r)
	}

	// The held call's answer is lost on the way back: sent again under
	// its key, it answers the same request, approved. It was held longer
	// than RetryFor, which counts only the time spent retrying.
	f := &flaky{lose: true}
	lossy := &client.Client{BaseURL: f.front(t, s.url), Token: tokens["agent"], Wait: 30 * time.Second, RetryFor: 200 * time.Millisecond}
	a = approveHeld(lossy, "lost")
	if a.err != nil || a.r.Outcome != client.Gated || !strings.HasPrefix(a.r.Message, "[APPROVED]") {
		t.Fatalf("the held call whose answer was lost = %+v, %v; want it gated and approved", a.r, a.err)
	}
	f.mu.Lock()
	keys := slices.Clone(f.keys)
	f.mu.Unlock()
	if len(keys) != 2 || keys[0] != keys[1] {
		t.Errorf("Idempotency-Keys sent = %q; want the held call and its repeat under one key", keys)
	}
	entries, err := s.as("auditor").Audit(ctx, "lost")
	if err != nil {
		t.Fatal(err)
	}
	requests := 0
	for _, e := range entries {
		if e.Phase == "AWAITING_APPROVAL" {
			requests++
		}
	}
	if requests != 1 {
		t.Errorf("the saga's journal holds %d requests; want the one the held call made", requests)
	}
}
