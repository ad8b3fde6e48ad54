package enginetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/sagacity-go/sagacity/internal/engine"
	"github.com/sagacity-go/sagacity/internal/testkit"
	"github.com/sagacity-go/sagacity/wire"
)

// escalating asks two of finance-leads or treasury for a large transfer,
// within 4 hours, telling oncall after 30 minutes short of its quorum
// and pager after 2 hours.
var escalating = engine.PolicySpec{Tools: map[string][]engine.RuleSpec{"sendWireTransfer": {{Name: "large",
	Approvers: []string{"finance-leads", "treasury"}, Quorum: 2, Expires: engine.Duration(4 * time.Hour),
	Escalate: []engine.StepSpec{{After: engine.Duration(30 * time.Minute), Notify: []string{"oncall"}},
		{After: engine.Duration(2 * time.Hour), Notify: []string{"pager"}}}}}}}

// endpoints: chat hears of everything; oncall and pager only of what an
// escalation tells them; the agent's own endpoint of its requests only.
var endpoints = []engine.Endpoint{{Name: "chat"}, {Name: "oncall", OnEscalation: true}, {Name: "pager", OnEscalation: true},
	{Name: "agent", Requesters: []string{agent.ID}, Events: []wire.EventType{wire.EventApproved, wire.EventRejected, wire.EventExecuted}}}

// testOutbox: an event is written with the journal entry that causes it,
// or not at all; the deliveries of a thread go to each endpoint in
// order; two processes never hold one delivery at once, and a lease
// whose process is gone is taken over; a 410 disables an endpoint until
// an approver enables it (an auditor may not), and a failed delivery is
// retried by an approver, each journaled in NotificationSaga under their
// name; an escalation step is journaled and tells more endpoints, never
// lets more people vote; an executed request's event names each vote it
// ran on, with its reason.
func testOutbox(t *testing.T, v *env) {
	ctx := context.Background()
	clock := &fakeClock{now: time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)}
	v.usePolicy(escalating, engine.WithClock(clock.Now), engine.WithNotifications(endpoints))
	beat(t, v.e, "replica-a")
	seq := v.gateLarge("out", agent)
	thread := engine.Thread("out", seq)
	deliveries := func() []engine.Delivery {
		t.Helper()
		ds, err := v.e.Notifications(ctx, auditor, "out", seq)
		if err != nil {
			t.Fatal(err)
		}
		return ds
	}
	sent := func(ds []engine.Delivery) (out []string) {
		for _, d := range ds {
			out = append(out, d.Endpoint+" "+string(d.Event.Type))
		}
		slices.Sort(out)
		return out
	}
	if got := sent(deliveries()); !slices.Equal(got, []string{"chat request.waiting"}) {
		t.Fatalf("after the request, the deliveries = %q; want the waiting event to chat alone", got)
	}
	ev := deliveries()[0].Event
	if ev.Rule != "large" || ev.Quorum != 2 || ev.Requester != agent.ID || ev.PayloadSHA256 != engine.PayloadHash(large) ||
		ev.Fingerprint != engine.Fingerprint(ev.PayloadSHA256) || ev.ExpiresAt != "2026-12-01T13:00:00Z" || ev.ID == "" {
		t.Errorf("the waiting event = %+v; want rule, quorum, requester, hash, fingerprint and expiry", ev.Event)
	}

	// An event exists iff its entry committed: one written in a
	// transaction rolled back is not there.
	rolled := engine.OutboxEvent{Key: "rolled", Thread: thread, At: clock.Now(), Event: wire.Event{ID: "evt_rolled", Type: wire.EventVoted}}
	boom := errors.New("boom")
	if err := v.db.Update(ctx, func(tx engine.Tx) error {
		if err := tx.Notify(rolled, []engine.Recipient{{Endpoint: "chat"}}); err != nil {
			return err
		}
		return boom
	}); !errors.Is(err, boom) && !strings.Contains(fmt.Sprint(err), "boom") {
		t.Fatalf("the rolled back update: %v", err)
	}
	if n := len(deliveries()); n != 1 {
		t.Errorf("a transaction rolled back left %d deliveries; want the one before", n)
	}

	// A thread's deliveries go in order: the vote's waits behind the
	// request's, however due.
	if _, err := v.e.Approve(ctx, alice, "out", seq, "ok"); err != nil {
		t.Fatal(err)
	}
	claimed := claim(t, v.e)
	if len(claimed) != 1 || claimed[0].Event.Type != wire.EventWaiting || !claimed[0].First || claimed[0].Attempts != 1 {
		t.Fatalf("the first claim = %+v; want the waiting event alone, the thread's first, attempt 1", claimed)
	}
	if again := claim(t, v.e); len(again) != 0 {
		t.Errorf("a claim while the lease holds got %d deliveries", len(again))
	}
	// A failure waits for its retry; a lost lease records nothing.
	w := claimed[0]
	stale := w
	stale.Lease = stale.Lease.Add(-time.Second)
	if err := v.e.FinishDelivery(ctx, stale, engine.Attempt{At: clock.Now(), State: engine.DeliveryDelivered}); !engine.IsKind(err, engine.Conflict) {
		t.Errorf("finishing with a lease not held: %v; want Conflict", err)
	}
	finish(t, v.e, w, engine.Attempt{Status: 503, Error: "busy", State: engine.DeliveryPending, Next: clock.Now().Add(5 * time.Second)})
	if n := len(claim(t, v.e)); n != 0 {
		t.Errorf("a delivery not due yet was claimed (%d)", n)
	}
	clock.Add(6 * time.Second)
	w = claim(t, v.e)[0]
	if w.Attempts != 2 || w.LastStatus != 503 || w.LastError != "busy" {
		t.Errorf("the retried delivery = %+v; want attempt 2 after a 503", w)
	}
	finish(t, v.e, w, engine.Attempt{State: engine.DeliveryDelivered, Thread: "C1/1733.1"})
	voted := claim(t, v.e)
	if len(voted) != 1 || voted[0].Event.Type != wire.EventVoted || voted[0].First || voted[0].Thread != "C1/1733.1" ||
		voted[0].Event.DecidedBy != alice.ID || !slices.Equal(voted[0].Event.ApprovedBy, []string{alice.ID}) {
		t.Fatalf("after the first was delivered, the claim = %+v; want the vote, with the thread's handle", voted)
	}
	finish(t, v.e, voted[0], engine.Attempt{State: engine.DeliveryDelivered})

	// Escalation: 30 minutes short of its quorum, oncall is told, and
	// hears of the request from then on; the step is journaled. It
	// lets nobody else vote.
	clock.Add(31 * time.Minute)
	if n, err := v.e.Escalate(ctx); err != nil || n != 1 {
		t.Fatalf("Escalate = %d, %v; want one step", n, err)
	}
	if n, err := v.e.Escalate(ctx); err != nil || n != 0 {
		t.Errorf("Escalate again = %d, %v; want nothing more due", n, err)
	}
	steps := v.journal(engine.EscalationSaga)
	if len(steps) != 1 || !strings.Contains(steps[0].Input, `"saga":"out"`) || !strings.Contains(steps[0].Input, `"notify":["oncall"]`) {
		t.Errorf("%s = %+v; want step 1 of out telling oncall", engine.EscalationSaga, steps)
	}
	if got := sent(deliveries()); !slices.Equal(got, []string{"chat request.escalated", "chat request.voted", "chat request.waiting",
		"oncall request.escalated"}) {
		t.Errorf("after step 1, the deliveries = %q", got)
	}
	onCall := engine.Principal{ID: "oncall@company.com", Auth: engine.AuthOIDC, Roles: []engine.Role{engine.RoleApprover}, Groups: []string{"oncall"}}
	if _, err := v.e.Approve(ctx, onCall, "out", seq, "paged"); !engine.IsKind(err, engine.Forbidden) {
		t.Errorf("the escalation's target approving without the rule's group: %v; want Forbidden", err)
	}
	if _, err := v.e.Approve(ctx, bob, "out", seq, "matches"); err != nil {
		t.Fatal(err)
	}
	if got := sent(deliveries()); !slices.Contains(got, "oncall request.approved") || !slices.Contains(got, "agent request.approved") ||
		slices.Contains(got, "pager request.approved") {
		t.Errorf("after the quorum, the deliveries = %q; want the approval told to chat, oncall and the agent, not pager", got)
	}
	// 410: the endpoint is disabled, its deliveries held, until an
	// operator enables it again.
	var oncall engine.Delivery
	for range 10 {
		for _, d := range claim(t, v.e) {
			if d.Endpoint == "oncall" && oncall.ID == 0 {
				oncall = d
				finish(t, v.e, d, engine.Attempt{Status: 410, Error: "gone", State: engine.DeliveryPending, Gone: true})
				continue
			}
			finish(t, v.e, d, engine.Attempt{State: engine.DeliveryDelivered})
		}
	}
	stats, _, err := v.e.Outbox(ctx, auditor)
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(stats, func(s engine.EndpointStats) bool { return s.Name == "oncall" })
	if oncall.ID == 0 || i < 0 || stats[i].Disabled.IsZero() || stats[i].Pending != 2 {
		t.Fatalf("after a 410, oncall's stats = %+v; want it disabled with its 2 deliveries held", stats)
	}
	if n := len(claim(t, v.e)); n != 0 {
		t.Errorf("a disabled endpoint's deliveries were claimed (%d)", n)
	}
	// Sending again is an approver's, journaled under their name; an
	// auditor only reads.
	if err := v.e.EnableEndpoint(ctx, auditor, "oncall"); !engine.IsKind(err, engine.Forbidden) {
		t.Errorf("an auditor enabling an endpoint: %v; want Forbidden", err)
	}
	if err := v.e.EnableEndpoint(ctx, approver, "oncall"); err != nil {
		t.Fatal(err)
	}
	if err := v.e.EnableEndpoint(ctx, approver, "oncall"); !engine.IsKind(err, engine.Conflict) {
		t.Errorf("enabling an endpoint that is not disabled: %v; want Conflict", err)
	}
	back := claim(t, v.e)
	if len(back) != 1 || back[0].ID != oncall.ID || back[0].Attempts != 2 {
		t.Errorf("after enabling oncall, the claim = %+v; want the delivery that met the 410, again", back)
	}
	// Given up on, then retried by an operator.
	finish(t, v.e, back[0], engine.Attempt{Status: 400, Error: "bad", State: engine.DeliveryFailed})
	for _, p := range []engine.Principal{auditor, agent} {
		if err := v.e.RetryDelivery(ctx, p, back[0].ID); !engine.IsKind(err, engine.Forbidden) {
			t.Errorf("%s retrying a delivery: %v; want Forbidden", p.ID, err)
		}
	}
	if err := v.e.RetryDelivery(ctx, approver, back[0].ID); err != nil {
		t.Fatal(err)
	}
	if again := claim(t, v.e); len(again) != 1 || again[0].ID != back[0].ID {
		t.Errorf("after a retry, the claim = %+v; want the failed delivery", again)
	}
	if err := v.e.RetryDelivery(ctx, approver, 1<<40); !engine.IsKind(err, engine.NotFound) {
		t.Errorf("retrying no delivery: %v; want NotFound", err)
	}
	resent := v.journal(engine.NotificationSaga)
	if len(resent) != 2 || resent[0].ToolName != engine.EndpointEnabled || resent[1].ToolName != engine.DeliveryRetried ||
		resent[0].Input != `{"endpoint":"oncall","by":"manager@company.com","auth":"oidc"}` ||
		resent[1].Input != fmt.Sprintf(`{"delivery":%d,"event":"%s","type":"%s","endpoint":"oncall","by":"manager@company.com","auth":"oidc"}`,
			back[0].ID, back[0].Event.ID, back[0].Event.Type) {
		t.Errorf("%s = %+v; want the endpoint enabled, then the delivery retried, each by the approver", engine.NotificationSaga, resent)
	}
	if got := v.verify(engine.NotificationSaga); !got.Valid {
		t.Errorf("Verify(%s) = %+v", engine.NotificationSaga, got)
	}

	// A request nobody votes on: the second step tells pager too.
	lone := v.gateLarge("out-lone", agent)
	clock.Add(31 * time.Minute)
	if n, err := v.e.Escalate(ctx); err != nil || n != 1 {
		t.Fatalf("Escalate (out-lone, 31m) = %d, %v; want step 1 of out-lone", n, err)
	}
	clock.Add(90 * time.Minute)
	if n, err := v.e.Escalate(ctx); err != nil || n != 1 {
		t.Fatalf("Escalate (out-lone, 2h1m) = %d, %v; want step 2", n, err)
	}
	lones, err := v.e.Notifications(ctx, auditor, "out-lone", lone)
	if err != nil {
		t.Fatal(err)
	}
	if got := sent(lones); !slices.Equal(got, []string{"chat request.escalated", "chat request.escalated", "chat request.waiting",
		"oncall request.escalated", "oncall request.escalated", "pager request.escalated"}) {
		t.Errorf("after two steps, out-lone's deliveries = %q; want step 2 told to pager, and oncall kept told", got)
	}
	if n, err := v.e.Escalate(ctx); err != nil || n != 0 {
		t.Errorf("Escalate after the last step = %d, %v; want none, and none after the quorum of out", n, err)
	}
	if _, err := v.e.Approve(ctx, onCall, "out-lone", lone, "paged twice"); !engine.IsKind(err, engine.Forbidden) {
		t.Errorf("the escalation's target approving after step 2: %v; want Forbidden", err)
	}

	// Executed, the request's event names each vote it ran on: who, why,
	// and the entry whose receipt the relay links.
	if _, err := v.e.Resume(ctx, agent, "out", seq, large); err != nil {
		t.Fatal(err)
	}
	var votes []wire.EventVote
	for _, en := range v.journal("out") {
		if en.Phase == engine.PhaseApproved {
			votes = append(votes, wire.EventVote{By: en.Field(engine.KeyApprover), Reason: en.Field(engine.KeyReason), JournalSeq: en.Seq})
		}
	}
	i = slices.IndexFunc(deliveries(), func(d engine.Delivery) bool { return d.Event.Type == wire.EventExecuted && d.Endpoint == "chat" })
	if i < 0 {
		t.Fatalf("after the resume, the deliveries = %q; want the execution told to chat", sent(deliveries()))
	}
	if diff := cmp.Diff(deliveries()[i].Event.Votes, votes); diff != "" || len(votes) != 2 || votes[0].Reason != "ok" {
		t.Errorf("the executed event's votes (-got +want):\n%s", diff)
	}

	// A call in doubt is told once, however often it is noticed.
	v.inDoubt("doubt")
	noticer, err := engine.New(v.db, v.fx.tools(), engine.WithKeys(testkit.Keys(t)), engine.WithClock(clock.Now),
		engine.WithInDoubtAfter(0), engine.WithNotifications(endpoints))
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := noticer.Notice(ctx); err != nil {
			t.Fatal(err)
		}
	}
	other, _ := v.process(v.db)
	if err := other.Notice(ctx); err != nil {
		t.Fatal(err)
	}
	doubts, err := v.e.Notifications(ctx, auditor, "doubt", 1)
	if err != nil {
		t.Fatal(err)
	}
	if got := sent(doubts); !slices.Equal(got, []string{"chat call.in_doubt"}) {
		t.Errorf("a call in doubt, noticed three times by two processes, was told as %q; want once, to chat", got)
	}

	// Every event names an entry of its saga that committed.
	for _, d := range slices.Concat(deliveries(), lones, doubts) {
		var at int64
		_, _ = fmt.Sscanf(strings.TrimPrefix(d.Event.Key, d.Event.SagaID+"/"), "%d", &at)
		if es := v.journal(d.Event.SagaID); at < 1 || at > int64(len(es)) {
			t.Errorf("event %s (%s) names seq %d, which the journal does not hold", d.Event.ID, d.Event.Key, at)
		}
	}
}
