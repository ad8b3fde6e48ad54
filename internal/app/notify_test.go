package app_test

import (
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/sagacity-go/sagacity/internal/api/apitest"
	"github.com/sagacity-go/sagacity/internal/config"
	"github.com/sagacity-go/sagacity/internal/engine"
	"github.com/sagacity-go/sagacity/internal/notify"
	"github.com/sagacity-go/sagacity/internal/notify/mailtest"
	"github.com/sagacity-go/sagacity/internal/notify/slacktest"
	"github.com/sagacity-go/sagacity/internal/testkit"
	"github.com/sagacity-go/sagacity/wire"
)

// receiver is an HTTP endpoint started by the test that records what it
// gets: a webhook receiver (which verifies every Standard Webhooks
// signature first) or PagerDuty's Events API.
type receiver struct {
	*httptest.Server
	mu     sync.Mutex
	bodies []string
	ids    []string
}

func newReceiver(t *testing.T, verify func(h http.Header, body []byte) error, status int) *receiver {
	rc := &receiver{}
	rc.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if verify != nil {
			if err := verify(r.Header, b); err != nil {
				t.Errorf("a webhook delivery does not verify: %v", err)
				http.Error(w, err.Error(), http.StatusUnauthorized)
				return
			}
		}
		rc.mu.Lock()
		rc.bodies, rc.ids = append(rc.bodies, string(b)), append(rc.ids, r.Header.Get("webhook-id"))
		rc.mu.Unlock()
		w.WriteHeader(status)
	}))
	t.Cleanup(rc.Close)
	return rc
}

// got is what the receiver got so far.
func (rc *receiver) got() []string {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return slices.Clone(rc.bodies)
}

// events are the webhook events received so far.
func (rc *receiver) events(t *testing.T) []wire.Event {
	var out []wire.Event
	for _, b := range rc.got() {
		var ev wire.Event
		if err := json.Unmarshal([]byte(b), &ev); err != nil {
			t.Fatalf("a webhook body is no event: %s", b)
		}
		out = append(out, ev)
	}
	return out
}

// eventually waits until ok holds; seen says what there is, when it
// does not.
func eventually(t *testing.T, what string, ok func() bool, seen func() string) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if ok() {
			return
		}
	}
	t.Fatalf("waiting for %s: it did not happen; %s", what, seen())
}

// TestNotifications: a request waiting, each vote, its approval and its
// execution reach a signed webhook, a Slack channel (one message, posted
// then updated), an email thread (mailpit) and PagerDuty (one incident,
// resolved), each as the README documents; a request decided in the
// console leaves the Slack message with its outcome and no button; two
// votes racing keep both names.
func TestNotifications(t *testing.T) {
	t.Parallel()
	pub, key, _ := ed25519.GenerateKey(nil)
	secret, err := notify.ParseSecret("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	if err != nil {
		t.Fatal(err)
	}
	hook := newReceiver(t, func(h http.Header, b []byte) error { return notify.Verify(h, b, secret, pub, time.Now()) }, http.StatusNoContent)
	pager := newReceiver(t, nil, http.StatusAccepted)
	slack := slacktest.New(t, "xoxb-test-token", "C0SAGACITY")
	mail := mailtest.Start(t)
	policy := compile(t, engine.PolicySpec{Tools: map[string][]engine.RuleSpec{"sendWireTransfer": {
		{Name: "pair", When: `payload.to == "bob"`, Quorum: 2},
		{Name: "one", Expires: engine.Duration(4 * time.Hour)}}}})
	// A call running is not in doubt for an hour: only what the test
	// does is told.
	e := newAPI(t, testkit.SQLiteURL(t), envOptions{approvals: policy, inDoubtAfter: time.Hour, targets: []notify.Target{
		{Name: "hook", Kind: "webhook", Channel: &notify.Webhook{URL: hook.URL, Secret: secret, Key: key}},
		{Name: "chat", Kind: "slack", Channel: &notify.Slack{API: slack.URL, Token: "xoxb-test-token", Channel: "C0SAGACITY"}},
		{Name: "mail", Kind: "email", Channel: &notify.Email{Addr: mail.SMTP, TLS: "none", From: "sagacity@example.com",
			To: []string{"finance@example.com"}, Hostname: "sagacity.example.com"}},
		{Name: "pager", Kind: "pagerduty", Channel: &notify.PagerDuty{URL: pager.URL, RoutingKey: "0123456789abcdef0123456789abcdef"}},
	}})

	// The request waits: every endpoint hears of it.
	e.seedScenario("note-1")
	link := e.url + "/request?saga=note-1&seq=3"
	seen := func() string {
		var updates []int
		for _, m := range slack.Messages("C0SAGACITY") {
			updates = append(updates, m.Updates())
		}
		return fmt.Sprintf("the webhook got %d, Slack has messages updated %v times, mailpit %d mails, PagerDuty %d; the server logged:\n%s",
			len(hook.got()), updates, len(mail.Messages(t)), len(pager.got()), e.logs.String())
	}
	eventually(t, "the waiting request reaching every endpoint", func() bool {
		return len(hook.got()) == 1 && len(slack.Messages("C0SAGACITY")) == 1 && len(mail.Messages(t)) == 1 && len(pager.got()) == 1
	}, seen)
	waiting := hook.events(t)[0]
	hash := engine.PayloadHash(transfer)
	wantEvent := wire.Event{ID: waiting.ID, Type: wire.EventWaiting, Time: waiting.Time, SagaID: "note-1", JournalSeq: 3, Tool: "sendWireTransfer",
		PayloadSHA256: hash, Fingerprint: hash[0:4] + " " + hash[4:8] + " " + hash[8:12] + " " + hash[12:16], Requester: "anonymous",
		Rule: "one", Quorum: 1, ExpiresAt: waiting.ExpiresAt, Link: link,
		Message: "sendWireTransfer in saga note-1 (seq 3) waits for approval: 0 of 1 approvals under rule one"}
	if diff := cmp.Diff(wantEvent, waiting); diff != "" || !strings.HasPrefix(waiting.ID, "evt_") || waiting.ExpiresAt == "" {
		t.Errorf("the webhook's waiting event differs (-want +got):\n%s", diff)
	}
	if strings.Contains(hook.got()[0], "alice") {
		t.Errorf("the webhook's body carries the payload's values: %s", hook.got()[0])
	}
	msg := slack.Messages("C0SAGACITY")[0]
	if buttons := slackButtons(msg.Version); len(buttons) != 1 || buttons[0].URL != link || buttons[0].ActionID != "open" {
		t.Errorf("the Slack message's buttons = %+v; want one, opening the request", buttons)
	}
	if text := slackText(msg.Version); !strings.Contains(text, waiting.Fingerprint) || !strings.Contains(text, "alice") {
		t.Errorf("the Slack message = %q; want the fingerprint and the payload's fields", text)
	}
	first := mail.Messages(t)[0]
	if first.AutoSubmitted != "auto-generated" || !strings.Contains(first.Text, link) || !strings.Contains(first.Text, "cannot approve anything") {
		t.Errorf("the first mail = %+v; want it auto-generated, with the link and the warning", first)
	}
	var trigger struct {
		Action   string `json:"event_action"`
		DedupKey string `json:"dedup_key"`
	}
	if err := json.Unmarshal([]byte(pager.got()[0]), &trigger); err != nil {
		t.Fatal(err)
	}
	if trigger.Action != "trigger" || trigger.DedupKey != "sagacity/note-1/3" {
		t.Errorf("PagerDuty got %s; want a trigger keyed by the request", pager.got()[0])
	}

	// Decided and executed in the console: the Slack message shows the
	// outcome and no button; the mail thread and the incident follow.
	p := newTab(t, e)
	p.signIn("reviewer@example.com")
	p.open("/request?saga=note-1&seq=3")
	p.click(`#actions button.approve`)
	p.click(`#actions button.approve[autofocus]`)
	p.waitText("#status", "Approved by reviewer@example.com", 10*time.Second)
	p.click(`#actions button.primary`)
	p.click(`#actions button.primary[autofocus]`)
	p.waitText("#status", "Executed with the approved bytes", 10*time.Second)
	eventually(t, "the approval and the execution reaching every endpoint", func() bool {
		return len(hook.got()) == 3 && len(mail.Messages(t)) == 3 && len(pager.got()) == 3 &&
			len(slack.Messages("C0SAGACITY")) == 1 && slack.Messages("C0SAGACITY")[0].Updates() == 2
	}, seen)
	var types []wire.EventType
	for _, ev := range hook.events(t) {
		types = append(types, ev.Type)
	}
	contract, err := apitest.Load()
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range hook.got() {
		if err := contract.Matches("Event", []byte(b)); err != nil {
			t.Errorf("a webhook body is not the documented Event: %v\n%s", err, b)
		}
	}
	if !slices.Equal(types, []wire.EventType{wire.EventWaiting, wire.EventApproved, wire.EventExecuted}) {
		t.Errorf("the webhook got %v; want waiting, approved, executed, in order", types)
	}
	ex := hook.events(t)[2]
	if ex.Receipt != "" || !slices.Equal(ex.ApprovedBy, []string{"reviewer@example.com"}) || len(ex.Votes) != 1 ||
		ex.Votes[0].By != "reviewer@example.com" || ex.Votes[0].JournalSeq != 4 || !strings.HasPrefix(ex.Votes[0].Receipt, e.url+"/audit/receipt?") {
		t.Errorf("the executed event = %+v; want who approved it, with the vote's receipt", ex)
	}
	if ap := hook.events(t)[1]; ap.DecidedBy != "reviewer@example.com" || !strings.HasPrefix(ap.Receipt, e.url+"/audit/receipt?") {
		t.Errorf("the approved event = %+v; want its decider and receipt link", ap)
	}
	final := slack.Messages("C0SAGACITY")[0]
	var finalLinks []string
	for _, r := range final.Runs() {
		if r.Type == "link" {
			finalLinks = append(finalLinks, r.URL)
		}
	}
	if buttons := slackButtons(final.Version); len(buttons) != 0 || !strings.Contains(slackText(final.Version), "reviewer@example.com") ||
		!strings.Contains(strings.ToLower(slackText(final.Version)), "executed") || !slices.Equal(finalLinks, []string{ex.Votes[0].Receipt, link}) {
		t.Errorf("the Slack message once executed = %q with buttons %+v and links %q; want the outcome, who approved, links to "+
			"the vote's receipt and the console, and no button", slackText(final.Version), buttons, finalLinks)
	}
	mails := mail.Messages(t)
	for _, m := range mails[1:] {
		if m.InReplyTo != mails[0].MessageID || !strings.Contains(m.References, mails[0].MessageID) {
			t.Errorf("mail %q is not in the request's thread (In-Reply-To %q, first %q)", m.Subject, m.InReplyTo, mails[0].MessageID)
		}
	}
	if err := json.Unmarshal([]byte(pager.got()[2]), &trigger); err != nil {
		t.Fatal(err)
	}
	if trigger.Action != "resolve" || trigger.DedupKey != "sagacity/note-1/3" {
		t.Errorf("PagerDuty's last = %s; want the incident resolved", pager.got()[2])
	}

	// Two votes racing: every update lands in order, and the last one
	// names both voters.
	want200 := func(r response) { t.Helper(); want(t, "approve", r, 200) }
	want(t, "reserve", e.call("pair", "reserveInventory", `{"item":"laptop"}`), 200)
	want(t, "wire to bob", e.call("pair", "sendWireTransfer", `{"amount":"100","to":"bob"}`), 202)
	var wg sync.WaitGroup
	for _, who := range []string{"carol@example.com", "dave@example.com"} {
		wg.Go(func() { want200(e.post("/sagacity/approve/pair/3", `{"approver":"`+who+`"}`)) })
	}
	wg.Wait()
	eventually(t, "both votes reaching Slack", func() bool {
		ms := slack.Messages("C0SAGACITY")
		return len(ms) == 2 && ms[1].Updates() == 2
	}, seen)
	race := slackText(slack.Messages("C0SAGACITY")[1].Version)
	if !strings.Contains(race, "carol@example.com") || !strings.Contains(race, "dave@example.com") {
		t.Errorf("after two racing votes, the Slack message = %q; want both voters named", race)
	}
	// The console: who was told of the request, and the outbox page.
	p.open("/request?saga=note-1&seq=3")
	if got := p.text("main"); !strings.Contains(got, "Who was told") || !strings.Contains(got, "request.executed") {
		t.Errorf("the request page does not list its notifications: %q", got)
	}
	p.open("/notifications")
	if got := p.text("main"); !strings.Contains(got, "hook") || !strings.Contains(got, "sending") {
		t.Errorf("the notifications page = %q; want each endpoint, sending", got)
	}
	p.noErrors()
	// The metrics count the attempts by endpoint, channel and outcome.
	if m := e.get("/metrics").body; !strings.Contains(m, `sagacity_notification_attempts_total{channel="slack",endpoint="chat",outcome="delivered"} 6`) ||
		!strings.Contains(m, `sagacity_outbox_pending{endpoint="hook"} 0`) {
		t.Errorf("the metrics lack the notifications' attempts or backlog:\n%s", m)
	}
}

// slackButtons are a Slack message's buttons.
func slackButtons(v slacktest.Version) []slacktest.Element {
	var out []slacktest.Element
	for _, b := range v.Blocks {
		for _, el := range b.Elements {
			if el.Type == "button" {
				out = append(out, el)
			}
		}
	}
	return out
}

// slackText is all the text of a Slack message: its notification's, then
// what the channel shows.
func slackText(v slacktest.Version) string { return v.Text + "\n" + v.Shown() }

// TestEscalation: the README's notifications example, loaded as printed,
// escalates a large transfer that waits: after 30 minutes short of its
// quorum the Slack message says step 1 told finance-slack, and after 2
// hours finance-oncall, which heard nothing before, is paged; both steps
// are journaled in sagacity:escalations.
func TestEscalation(t *testing.T) {
	t.Parallel()
	yaml, secrets := testkit.ReadmeNotifications(t)
	dir := t.TempDir()
	path := dir + "/sagacity.yaml"
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{"SAGACITY_CONFIG": path, "SAGACITY_PUBLIC_URL": "https://sagacity.example.com"}
	maps.Copy(vars, secrets)
	cfg, err := config.Load(func(k string) string { return vars[k] })
	if err != nil {
		t.Fatalf("loading the README's notifications example: %v", err)
	}
	// Each endpoint as the example declares it, sent to a stand-in.
	slack := slacktest.New(t, secrets["SLACK_BOT_TOKEN"], "C0123ABCD")
	pager := newReceiver(t, nil, http.StatusAccepted)
	hook := newReceiver(t, nil, http.StatusNoContent)
	var targets []notify.Target
	for _, tg := range cfg.Targets {
		switch ch := tg.Channel.(type) {
		case *notify.Slack:
			ch.API = slack.URL
		case *notify.PagerDuty:
			ch.URL = pager.URL
		case *notify.Webhook:
			ch.URL = hook.URL
		case *notify.Email:
			tg.Kind, tg.Channel = "webhook", &notify.Webhook{URL: hook.URL, Secret: []byte("finance-mail-stand-in")}
		}
		targets = append(targets, tg)
	}
	var mu sync.Mutex
	now := time.Now()
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	wait := func(d time.Duration) { mu.Lock(); defer mu.Unlock(); now = now.Add(d) }
	e := newAPI(t, testkit.SQLiteURL(t), envOptions{approvals: cfg.File.Approvals, targets: targets, endpoints: cfg.Endpoints, clock: clock})

	want(t, "a large transfer", e.call("big", "sendWireTransfer", `{"amount":"25000","to":"DE89 3704"}`), 202)
	seen := func() string {
		var texts []string
		for _, m := range slack.Messages("C0123ABCD") {
			texts = append(texts, slackText(m.Version))
		}
		return fmt.Sprintf("Slack has %q, PagerDuty got %q; the server logged:\n%s", texts, pager.got(), e.logs.String())
	}
	eventually(t, "the waiting request reaching finance-slack", func() bool { return len(slack.Messages("C0123ABCD")) == 1 }, seen)
	if len(pager.got()) != 0 {
		t.Errorf("finance-oncall (onEscalation) was told before any step: %q", pager.got())
	}
	wait(31 * time.Minute)
	eventually(t, "step 1 updating the Slack message", func() bool {
		ms := slack.Messages("C0123ABCD")
		return len(ms) == 1 && strings.Contains(slackText(ms[0].Version), "escalation step 1")
	}, seen)
	if len(pager.got()) != 0 {
		t.Errorf("finance-oncall was told at step 1, which names finance-slack alone: %q", pager.got())
	}
	wait(90 * time.Minute)
	eventually(t, "step 2 paging finance-oncall", func() bool { return len(pager.got()) == 1 }, seen)
	var page struct {
		Action   string `json:"event_action"`
		DedupKey string `json:"dedup_key"`
		Payload  struct {
			Class string `json:"class"`
		} `json:"payload"`
	}
	if err := json.Unmarshal([]byte(pager.got()[0]), &page); err != nil || page.Action != "trigger" || page.DedupKey != "sagacity/big/1" ||
		page.Payload.Class != string(wire.EventEscalated) {
		t.Errorf("finance-oncall got %s; want step 2 triggering the request's incident", pager.got()[0])
	}
	steps := e.get("/sagacity/audit/" + url.PathEscape(engine.EscalationSaga)).body
	for _, s := range []string{`\"step\":1`, `\"notify\":[\"finance-slack\"]`, `\"step\":2`, `\"notify\":[\"finance-oncall\"]`} {
		if !strings.Contains(steps, s) {
			t.Errorf("%s's journal lacks %s:\n%s", engine.EscalationSaga, s, steps)
		}
	}
}

// TestConsoleResend: on /notifications an auditor reads each endpoint and
// the failing deliveries, is offered neither Retry now nor Enable and is
// told why, and a form posted anyway is the engine's 403, changing and
// journaling nothing; an approver is offered both, and each retry and
// enable is journaled in sagacity:notifications under their name.
func TestConsoleResend(t *testing.T) {
	t.Parallel()
	gone := newReceiver(t, nil, http.StatusGone)
	refused := newReceiver(t, nil, http.StatusBadRequest)
	e := newAPI(t, testkit.SQLiteURL(t), envOptions{targets: []notify.Target{
		{Name: "gone", Kind: "webhook", Channel: &notify.Webhook{URL: gone.URL, Secret: []byte("gone-secret-0123456789abcdef")}},
		{Name: "refused", Kind: "webhook", Channel: &notify.Webhook{URL: refused.URL, Secret: []byte("refused-secret-0123456789abc")}},
	}})
	e.seedScenario("resend")
	approver := engine.Principal{ID: "approver", Auth: engine.AuthDev, Roles: []engine.Role{engine.RoleApprover}}
	var failed int64
	eventually(t, "gone disabled and refused's delivery given up on", func() bool {
		stats, ds, err := e.eng.Outbox(t.Context(), approver)
		if err != nil || len(ds) != 2 || len(stats) != 2 || stats[0].Disabled.IsZero() {
			return false
		}
		for _, d := range ds {
			if d.State == engine.DeliveryFailed {
				failed = d.ID
			}
		}
		return failed != 0
	}, func() string { return e.logs.String() })
	signIn := func(name, role string) *http.Cookie {
		r := e.do("POST", "/login", formType, form("name", name, "return_to", "/", "role", role))
		if c := cookie(r, "sagacity"); r.code == 303 && c != nil {
			credential(c.Value)
			return c
		}
		t.Fatalf("signing %s in as %s = %d %s", name, role, r.code, r.body)
		return nil
	}
	post := func(c *http.Cookie, path, body string) response {
		return e.do("POST", path, formType, body, "Cookie", c.String(), "Sec-Fetch-Site", "same-origin")
	}
	retry, enable := form("id", fmt.Sprint(failed)), form("name", "gone")
	journal := func() string { return e.get("/sagacity/audit/" + url.PathEscape(engine.NotificationSaga)).body }

	audrey := signIn("audrey@example.com", "auditor")
	page := e.do("GET", "/notifications", "", "", "Cookie", audrey.String())
	if page.code != 200 || !strings.Contains(page.body, "<code>gone</code>") || !strings.Contains(page.body, "Failing and given up") ||
		strings.Contains(page.body, `action="/notifications/retry"`) || strings.Contains(page.body, `action="/notifications/enable"`) ||
		!strings.Contains(page.body, "You cannot retry a delivery or enable an endpoint: sending notifications again needs the approver role.") {
		t.Errorf("the auditor's notifications page = %d; want the endpoints and failures, no Retry now or Enable, and why:\n%s", page.code, page.body)
	}
	want(t, "the auditor's retry", post(audrey, "/notifications/retry", retry), 403)
	want(t, "the auditor's enable", post(audrey, "/notifications/enable", enable), 403)
	if j := journal(); strings.Contains(j, "audrey") || strings.Contains(j, engine.DeliveryRetried) {
		t.Errorf("the auditor's refused forms were journaled: %s", j)
	}
	if stats, _, _ := e.eng.Outbox(t.Context(), approver); stats[0].Disabled.IsZero() {
		t.Errorf("the auditor's refused form enabled gone")
	}

	alice := signIn("alice@example.com", "approver")
	page = e.do("GET", "/notifications", "", "", "Cookie", alice.String())
	if !strings.Contains(page.body, `action="/notifications/retry"`) || !strings.Contains(page.body, `action="/notifications/enable"`) ||
		strings.Contains(page.body, "You cannot retry") {
		t.Errorf("the approver's notifications page offers no Retry now and Enable:\n%s", page.body)
	}
	want(t, "the approver's enable", post(alice, "/notifications/enable", enable), 303)
	want(t, "the approver's retry", post(alice, "/notifications/retry", retry), 303)
	j := journal()
	for _, s := range []string{engine.EndpointEnabled, `\"endpoint\":\"gone\",\"by\":\"alice@example.com\",\"auth\":\"dev\"`,
		engine.DeliveryRetried, fmt.Sprintf(`\"delivery\":%d,`, failed), `\"endpoint\":\"refused\",\"by\":\"alice@example.com\"`} {
		if !strings.Contains(j, s) {
			t.Errorf("%s's journal lacks %s:\n%s", engine.NotificationSaga, s, j)
		}
	}
}

// TestForgedNotification: an event and its delivery written into the
// outbox by another hand, with a genuine event's seals copied, never
// reach the webhook receiver, which gets the genuine event, verified; the
// forged delivery is refused, logged, counted
// (sagacity_verify_failures_total{check="notification"}) and shown so on
// the notifications page.
func TestForgedNotification(t *testing.T) {
	t.Parallel()
	secret, err := notify.ParseSecret("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	if err != nil {
		t.Fatal(err)
	}
	hook := newReceiver(t, func(h http.Header, b []byte) error { return notify.Verify(h, b, secret, nil, time.Now()) }, http.StatusNoContent)
	e := newAPI(t, testkit.SQLiteURL(t), envOptions{targets: []notify.Target{
		{Name: "hook", Kind: "webhook", Channel: &notify.Webhook{URL: hook.URL, Secret: secret}}}})
	e.seedScenario("forged")
	seen := func() string {
		return fmt.Sprintf("the webhook got %q; the server logged:\n%s", hook.got(), e.logs.String())
	}
	eventually(t, "the genuine event reaching the webhook", func() bool { return len(hook.got()) == 1 }, seen)
	genuine := hook.events(t)[0]
	testkit.Exec(t, e.dbURL, "INSERT INTO outbox_events (id, key, type, saga_id, seq, thread, receipt_seq, body, created_at, seal)"+
		" SELECT 'evt_forged', 'forged', 'request.approved', saga_id, seq, thread, receipt_seq,"+
		" replace(body, '\"type\":\"request.waiting\"', '\"type\":\"request.approved\",\"decidedBy\":\"cfo@example.com\"'), created_at, seal"+
		" FROM outbox_events WHERE id = $1", genuine.ID)
	testkit.Exec(t, e.dbURL, "INSERT INTO outbox_deliveries (event_id, endpoint, thread, state, next_at, created_at, seal)"+
		" SELECT 'evt_forged', endpoint, thread, 'pending', next_at, created_at, seal FROM outbox_deliveries WHERE event_id = $1", genuine.ID)
	eventually(t, "the forged delivery refused", func() bool { return strings.Contains(e.logs.String(), "it is refused, not sent") }, seen)
	if got := hook.got(); len(got) != 1 || strings.Contains(got[0], "cfo@example.com") {
		t.Errorf("the webhook got %q; want the genuine event alone", got)
	}
	if m := e.get("/metrics").body; !strings.Contains(m, `sagacity_verify_failures_total{check="notification"} 1`) {
		t.Errorf("the metrics do not count the forged delivery:\n%s", m)
	}
	c := e.session(t, "alice@example.com")
	page := e.do("GET", "/notifications", "", "", "Cookie", c.String()).body
	if !strings.Contains(page, ">refused<") || !strings.Contains(page, "its event is not one this server wrote") ||
		strings.Contains(page, `action="/notifications/retry"`) {
		t.Errorf("the notifications page does not show the forged delivery refused, without Retry now:\n%s", page)
	}
}
