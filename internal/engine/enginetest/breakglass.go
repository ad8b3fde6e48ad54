package enginetest

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sagacity-go/sagacity/evidence"
	"github.com/sagacity-go/sagacity/internal/engine"
	"github.com/sagacity-go/sagacity/internal/passkey"
	"github.com/sagacity-go/sagacity/internal/testkit"
	"github.com/sagacity-go/sagacity/wire"
)

// olga is on call: an approver in the policy's breakGlass group, and in
// no group of the transfer rules.
var olga = engine.Principal{ID: "https://idp.example.com#olga", Auth: engine.AuthOIDC, Roles: []engine.Role{engine.RoleApprover},
	Groups: []string{"oncall"}, Issuer: "https://idp.example.com", Subject: "olga"}

// glassPolicy is votePolicy's large transfers (two of finance-leads or
// treasury, with a reason) with a break-glass for oncall, to be
// ratified within a day; sagas named pk… go by a rule whose votes only
// a passkey signs.
var glassPolicy = engine.PolicySpec{Tools: map[string][]engine.RuleSpec{
	"sendWireTransfer": {
		{Name: "signed", When: `saga.startsWith("pk")`, Approvers: []string{"treasury"}, Passkey: engine.PasskeyRequired},
		{Name: "large", Approvers: []string{"finance-leads", "treasury"}, Quorum: 2, Reason: engine.ReasonRequired},
	},
}, BreakGlass: &engine.BreakGlassSpec{Approvers: []string{"oncall"}, RatifyWithin: engine.Duration(24 * time.Hour)}}

// testBreakGlass: a person of the policy's breakGlass has a pending
// request executed without its quorum, only with a reason, never the
// requester nor someone outside breakGlass, never under a rule whose
// votes only a passkey signs. The use is journaled as a decision with its
// receipt, executed once by the server for the requester, told to every
// endpoint whatever it listens for, and listed as unratified (and
// counted) until the rule's quorum ratifies it: distinct people of the
// rule, with its reason, neither the requester nor who broke the glass.
// Left unratified past its window, verification flags it (the journal
// holds), the backlog counts it overdue, and no ratification is taken.
func testBreakGlass(t *testing.T, v *env) {
	ctx := context.Background()
	clock := &fakeClock{now: time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)}
	endpoints := []engine.Endpoint{{Name: "all"}, {Name: "chat", Events: []wire.EventType{wire.EventWaiting}},
		{Name: "mine", Requesters: []string{"someone-else"}}}
	a := v.usePolicy(glassPolicy, engine.WithClock(clock.Now), engine.WithNotifications(endpoints))
	wires := func() int64 { return v.fx.transfer.Load() }

	seq := v.gateLarge("bg", agent)
	testkit.WantKind(t, "break-glass without a reason", second(v.e.BreakGlass(ctx, olga, "bg", seq, " ")), engine.Invalid)
	testkit.WantKind(t, "break-glass by the agent that made the request", second(v.e.BreakGlass(ctx, agent, "bg", seq, "urgent")), engine.Forbidden)
	testkit.WantKind(t, "break-glass by an approver outside breakGlass", second(v.e.BreakGlass(ctx, carol, "bg", seq, "urgent")), engine.Forbidden)
	if wires() != 0 || v.pending("bg") != 1 {
		t.Fatalf("after refused break-glass: the wire ran %d times, %d pending; want nothing run, the request pending", wires(), v.pending("bg"))
	}
	d, err := v.e.BreakGlass(ctx, olga, "bg", seq, "payroll is due in an hour")
	if err != nil || d.Decided != engine.DecidedBreakGlass || d.Status != wire.Running || wires() != 1 {
		t.Fatalf("BreakGlass by olga = %+v, %v (the wire ran %d times); want it decided and executed once", d, err, wires())
	}
	if err := second(v.e.BreakGlass(ctx, olga, "bg", seq, "again")); err == nil {
		t.Errorf("break-glass again on the executed request = nil error; want it refused")
	}
	journal := v.journal("bg")
	glass, intent := journal[d.Receipt-1], journal[d.Receipt]
	if glass.Field(engine.KeyBrokenBy) != olga.ID || glass.Field(engine.KeyReason) != "payroll is due in an hour" ||
		intent.Field(engine.KeyExecutedBy) != engine.ExecutedByServer || intent.Field(engine.KeyRequester) != agent.ID {
		t.Errorf("the journal after break-glass: %q then %q; want olga's decision with her reason, then the server's execution for %s",
			glass.Payload, intent.Payload, agent.ID)
	}
	r, err := evidence.OpenReceipt(evidence.ReceiptOf(glass), testkit.Keys(t).Verifier())
	if err != nil || r.Decision != engine.DecidedBreakGlass || r.EligibleAs != "oncall" || r.Rule != "large" {
		t.Errorf("the break-glass receipt = %+v, %v; want break-glass by olga as oncall, under rule large", r, err)
	}
	ds, err := v.e.Notifications(ctx, auditor, "bg", seq)
	var told []string
	for _, dl := range ds {
		if dl.Event.Type == wire.EventBreakGlass {
			told = append(told, dl.Endpoint)
		}
	}
	if slices.Sort(told); err != nil || !slices.Equal(told, []string{"all", "chat", "mine"}) {
		t.Errorf("the endpoints told of the break-glass = %v, %v; want every one (all, chat, mine), whatever it listens for", told, err)
	}
	if !slices.ContainsFunc(ds, func(dl engine.Delivery) bool {
		return dl.Event.Type == wire.EventExecuted && strings.Contains(dl.Event.Message, "by break-glass ("+olga.ID+"), without its quorum")
	}) {
		t.Errorf("the notifications after break-glass = %+v; want request.executed saying it ran by break-glass", ds)
	}
	unratified := func(what string, want ...string) []engine.GlassUse {
		t.Helper()
		us, err := v.e.Unratified(ctx, auditor)
		var got []string
		for _, u := range us {
			got = append(got, u.SagaID)
		}
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("Unratified %s = %v, %v; want %v", what, got, err, want)
		}
		return us
	}
	if us := unratified("after break-glass", "bg"); len(us) == 1 && (us[0].By != olga.ID || !us[0].RatifyBy.Equal(us[0].At.Add(24*time.Hour))) {
		t.Errorf("the unratified use = %+v; want olga's, to be ratified within a day", us[0])
	}
	if got := v.verify("bg"); !got.Valid || !strings.Contains(got.Message, "by break-glass ("+olga.ID+")") ||
		!strings.Contains(got.Message, "unratified (its window ends at") || strings.Contains(got.Message, evidence.Flagged) {
		t.Errorf("Verify(bg) within the window = %+v; want valid, naming the break-glass as unratified, not flagged", got)
	}

	// Ratified afterwards by the rule's quorum.
	for _, tt := range []struct {
		name string
		by   engine.Principal
		kind engine.Kind
	}{{"who broke the glass", olga, engine.Forbidden}, {"the requester", agent, engine.Forbidden}, {"someone of no group of the rule", carol, engine.Forbidden}} {
		testkit.WantKind(t, "a ratification by "+tt.name, second(v.e.Ratify(ctx, tt.by, "bg", seq, "fine")), tt.kind)
	}
	testkit.WantKind(t, "a ratification without the reason the rule requires", second(v.e.Ratify(ctx, alice, "bg", seq, "")), engine.Invalid)
	if d, err := v.e.Ratify(ctx, alice, "bg", seq, "checked the payroll"); err != nil || d.Decided != engine.DecidedRatified || d.Votes != 1 || d.Quorum != 2 ||
		d.Status != wire.Running {
		t.Fatalf("alice's ratification = %+v, %v; want vote 1 of 2, the saga running", d, err)
	}
	testkit.WantKind(t, "alice's second ratification", second(v.e.Ratify(ctx, alice, "bg", seq, "again")), engine.Conflict)
	unratified("after one ratification of two", "bg")
	if _, err := v.e.Ratify(ctx, bob, "bg", seq, "agreed"); err != nil {
		t.Fatalf("bob's ratification: %v", err)
	}
	unratified("once ratified")
	testkit.WantKind(t, "a ratification once ratified", second(v.e.Ratify(ctx, erin, "bg", seq, "late")), engine.Conflict)
	if got := v.verify("bg"); !got.Valid || !strings.Contains(got.Message, "ratified by "+alice.ID+", "+bob.ID) {
		t.Errorf("Verify(bg) once ratified = %+v; want valid, naming alice and bob", got)
	}
	ds, _ = v.e.Notifications(ctx, auditor, "bg", seq)
	var ratified []string
	for _, dl := range ds {
		if dl.Event.Type == wire.EventRatified {
			ratified = append(ratified, dl.Endpoint)
		}
	}
	if !slices.Equal(ratified, []string{"all"}) {
		t.Errorf("the endpoints told of the ratification = %v; want all alone (it is routed as any event)", ratified)
	}

	// A request whose rule takes passkeys is not broken.
	pk := v.gateLarge("pk", agent)
	wantCode(t, "break-glass under a rule whose votes a passkey signs", second(v.e.BreakGlass(ctx, olga, "pk", pk, "urgent")), engine.Forbidden, wire.CodePasskey)

	// A process stops between the decision and the execution: the store
	// refuses the execution's INTENT, as a dead database would; the
	// decision stands, refusing any other, and the Recoverer's next pass
	// executes it, once.
	rec, ran := v.gateLarge("rec", agent), wires()
	dying := &failAfter{Store: v.open(), left: 1}
	stopping, err := engine.New(dying, v.fx.tools(), append([]engine.Option{engine.WithKeys(testkit.Keys(t)), engine.WithClock(clk.now),
		engine.WithLog(v.log), engine.WithPasskeys(rp, passkey.Check)}, v.opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	if d, err := stopping.BreakGlass(ctx, olga, "rec", rec, "the bank closes"); err != nil || d.Decided != engine.DecidedBreakGlass || wires() != ran {
		t.Fatalf("BreakGlass in a process that stops = %+v, %v (the wire ran %d more times); want it decided, nothing run", d, err, wires()-ran)
	}
	testkit.WantKind(t, "an approval once the glass is broken", second(v.e.Approve(ctx, alice, "rec", rec, "fine")), engine.Conflict)
	testkit.WantKind(t, "a resume once the glass is broken", second(v.e.Resume(ctx, agent, "rec", rec, large)), engine.Conflict)
	for i, want := range []int{1, 0} {
		if n, err := v.e.ExecuteApproved(ctx); err != nil || n != want || wires() != ran+1 {
			t.Errorf("ExecuteApproved pass %d after a break-glass left unexecuted = %d, %v (the wire ran %d more times); want %d executed, once in all",
				i+1, n, err, wires()-ran, want)
		}
	}
	if got := v.verify("rec"); !got.Valid {
		t.Errorf("Verify(rec) = %+v; want valid", got)
	}

	// Left unratified past its window: flagged, counted, not ratified.
	late := v.gateLarge("late", agent)
	if _, err := v.e.BreakGlass(ctx, olga, "late", late, "the bank closes"); err != nil {
		t.Fatal(err)
	}
	clock.Add(25 * time.Hour)
	testkit.WantKind(t, "a ratification after the window", second(v.e.Ratify(ctx, alice, "late", late, "too late")), engine.Conflict)
	us := unratified("past the window", "rec", "late")
	if len(us) != 2 || !us[0].Overdue(clock.Now()) || !us[1].Overdue(clock.Now()) {
		t.Errorf("the unratified use past its window = %+v; want it overdue", us)
	}
	if b, err := v.e.Backlog(ctx); err != nil || b.Unratified != 2 || b.Overdue != 2 {
		t.Errorf("Backlog past the windows = %+v, %v; want 2 unratified, both overdue", b, err)
	}
	want := evidence.Flagged + "the break-glass execution of seq=" + strconv.FormatInt(late, 10) + " by " + olga.ID + " was not ratified"
	if got := v.verify("late"); !got.Valid || !strings.Contains(got.Message, want) {
		t.Errorf("Verify(late) past the window = %+v; want valid, saying %q", got, want)
	}

	// A ratification journaled after the window (its time moved) breaks
	// the journal.
	journal = v.journal("bg")
	for i := range journal {
		if journal[i].Field(engine.KeyRatifiedBy) == bob.ID {
			journal[i].Timestamp = journal[i].Timestamp.Add(25 * time.Hour)
		}
	}
	lc, _ := evidence.ReadLifecycle(journal)
	got, _ := evidence.VerifyVotes(journal, lc, func(string) (*engine.Approvals, error) { return a, nil }, testkit.Keys(t).Verifier(), engine.Keyring{})
	if got.Valid || !strings.Contains(got.Message, "ratification of the request at seq="+strconv.FormatInt(seq, 10)+" after its window ended") {
		t.Errorf("VerifyVotes with bob's ratification after the window = %+v; want broken, saying so", got)
	}
}
