package app_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/sagacity-go/sagacity/internal/auth/authtest"
	"github.com/sagacity-go/sagacity/internal/engine"
	"github.com/sagacity-go/sagacity/internal/testkit"
)

// What auditors and operators do with a saga as a whole, in Chromium: read
// a long journal a page at a time, each call folded into one line and
// each decision's receipt decoded; download what verify-receipt checks;
// abort a saga; record a step whose undo failed as undone by hand.

// longSaga writes saga id: 60 reservations (seq 1 to 120), a wire gated
// at 121 and approved at 122, a shipment that fails (123, 124), the
// approved wire dropped (125), and the 60 reservations compensated,
// newest first (126 to 185).
func longSaga(t *testing.T, e *apiEnv, id string) {
	t.Helper()
	for i := range 60 {
		want(t, "reserve", e.call(id, "reserveInventory", fmt.Sprintf(`{"item":"laptop-%d"}`, i+1)), 200)
	}
	want(t, "wire", e.call(id, "sendWireTransfer", transfer), 202)
	want(t, "approve", e.post("/sagacity/approve/"+id+"/121", `{"approver":"manager@company.com"}`), 200)
	want(t, "ship", e.call(id, "scheduleShipment", "{}"), 422)
	if r := e.get("/sagacity/sagas/" + id); !strings.Contains(r.body, `"headSeq":185`) || !strings.Contains(r.body, `"status":"COMPENSATED"`) {
		t.Fatalf("saga %s = %s; want 185 entries, COMPENSATED", id, r.body)
	}
}

// TestConsoleTimelinePages: a journal of 185 entries is read a page of 50
// items at a time, a call's INTENT and its answer folded into one line,
// so a page is a few screens long, not 27,000 px; a link to an entry deep
// in it lands on that entry, shown; a filter by phase keeps the items
// with such an entry, across pages; each entry can be shown on its own;
// a decision shows its receipt decoded into the signed note, not base64;
// an undo names the call it undoes.
func TestConsoleTimelinePages(t *testing.T) {
	t.Parallel()
	e := newAPI(t, testkit.SQLiteURL(t), envOptions{})
	longSaga(t, e, "long")
	p := newTab(t, e)
	p.do("resizing", chromedp.EmulateViewport(1280, 900))
	p.signIn("auditor@example.com")
	items := `document.querySelectorAll("main > ol.timeline > li")`

	p.open("/saga?id=long")
	if got := p.text("p.shown"); !strings.HasPrefix(got, "Items 1–50 of 124, from seq 1.") {
		t.Errorf("the first page says %q, want items 1–50 of 124", got)
	}
	if !p.eval(items + `.length === 50 && [...` + items + `].every(li => li.matches("li.call") && !li.querySelector("details").open)`) {
		t.Errorf("the first page does not show 50 folded calls")
	}
	if got := p.text("main > ol.timeline > li.call summary"); !strings.Contains(got, "#1 → #2 reserveInventory INTENT → EXECUTED") {
		t.Errorf("the first call's line = %q, want its INTENT and answer in one", got)
	}
	if h, err := chromedp.Run(p.ctx, chromedp.Evaluate[int](`document.documentElement.scrollHeight`)); err != nil || h > 6000 {
		t.Errorf("the first page is %d px tall (%v), want a few screens", h, err)
	}
	if p.eval(`document.querySelector("nav.pager a[rel=prev]") !== null`) {
		t.Errorf("the first page links to earlier entries")
	}
	p.click(`nav.pager a[rel=next]`)
	p.ready()
	p.accessible("the second page")
	if got := p.text("p.shown"); !strings.HasPrefix(got, "Items 51–100 of 124, from seq 101.") {
		t.Errorf("the second page says %q, want items 51–100", got)
	}
	if got := p.text("main > ol.timeline > li:nth-child(11)"); !strings.Contains(got, "#121") || !strings.Contains(got, "AWAITING_APPROVAL") {
		t.Errorf("item 61 = %q, want the gated wire alone", got)
	}

	// A decision: its lines, then its receipt decoded.
	approved := p.text("#e122")
	if !strings.Contains(approved, "payload, without its receipt") || !strings.Contains(approved, "approver=manager@company.com") ||
		strings.Contains(approved, "receipt=") || !strings.Contains(approved, "✓ signed by this server's key") {
		t.Errorf("the approval = %q, want its lines without the base64 receipt, and the receipt's state", approved)
	}
	p.click(`#e122 details.receipt summary`)
	if got := p.text("#e122 details.receipt pre"); !strings.HasPrefix(got, "sagacity decision receipt v1\nsaga: long\nseq: 121\n") ||
		!strings.Contains(got, "decision: approved\ndecider: manager@company.com\n") || !strings.Contains(got, "— sagacity.test ") {
		t.Errorf("the decoded receipt = %q, want the signed note", got)
	}
	if !p.eval(`document.querySelector('#e122 details.receipt a[download]').getAttribute("href") === "/audit/receipt?id=long&seq=122"`) {
		t.Errorf("the receipt has no download")
	}
	// An undo names the call it undoes: the newest reservation first.
	if got := p.text("#e126"); !strings.Contains(got, "undoes the call at #119") || !strings.Contains(got, "compensated effect seq=120") {
		t.Errorf("the first undo = %q, want it linked to the call at #119", got)
	}

	// A link to an entry deep in the journal lands on it, shown.
	p.open("/saga?id=long&at=120#e120")
	if got := p.text("p.shown"); !strings.HasPrefix(got, "Items 35–84 of 124") {
		t.Errorf("the page holding seq 120 says %q, want items 35–84: the entry's item in the middle", got)
	}
	if !p.eval(`(e => e.classList.contains("target") && e.closest("details").open && e.getBoundingClientRect().height > 0 &&
		e.getBoundingClientRect().top >= 0 && e.getBoundingClientRect().top < window.innerHeight)(document.getElementById("e120"))`) {
		t.Errorf("seq 120 is not marked, opened and scrolled to")
	}

	// By phase: only the items with an entry of it, across pages.
	p.open("/saga?id=long&phase=FAILED")
	if !p.eval(items+`.length === 1`) || !strings.Contains(p.text("main > ol.timeline > li"), "#123 → #124 scheduleShipment INTENT → FAILED") {
		t.Errorf("FAILED items = %q, want the shipment's call alone", p.text("main > ol.timeline"))
	}
	p.open("/saga?id=long&phase=COMPENSATED")
	if got := p.text("p.shown"); !strings.HasPrefix(got, "Items 1–50 of 60, from seq 126.") ||
		!p.eval(`document.querySelector("nav.pager a[rel=next]").getAttribute("href").includes("phase=COMPENSATED")`) {
		t.Errorf("COMPENSATED items say %q, want 60 of them and the next page filtered too", got)
	}
	// Each entry on its own.
	p.open("/saga?id=long&unfold=1")
	if !p.eval(items+`.length === 50 && document.querySelector("main li.call") === null`) || p.text("main > ol.timeline > li:nth-child(2)") == "" ||
		!strings.Contains(p.text("main > ol.timeline > li:nth-child(2)"), "answers the call at #1") {
		t.Errorf("unfolded, the second entry = %q; want 50 entries, the answer on its own, naming its call", p.text("main > ol.timeline > li:nth-child(2)"))
	}
	p.noErrors()
}

// TestConsoleDecidedBytes: a saga's verification page offers, beside each
// receipt, the exact bytes it was decided on, which are the PAYLOAD_FILE
// verify-receipt takes; it says where the sagacity binary comes from and
// that the checkpoint must be compared with a copy kept elsewhere.
func TestConsoleDecidedBytes(t *testing.T) {
	t.Parallel()
	e := newAPI(t, testkit.SQLiteURL(t), envOptions{})
	e.seedScenario("pay-9")
	want(t, "approve", e.post("/sagacity/approve/pay-9/3", `{"approver":"manager@company.com"}`), 200)
	e.sequence()
	p := newTab(t, e)
	p.signIn("auditor@example.com")
	p.open("/audit/saga?id=pay-9")
	got := p.text("main")
	for _, want := range []string{"go build -o sagacity ./cmd/web", "Compare the checkpoint with a copy kept elsewhere",
		"a witness's copy or one you downloaded earlier", "may add a line break at the end"} {
		if !strings.Contains(got, want) {
			t.Errorf("verification page = %q, want %q", got, want)
		}
	}
	link := `document.querySelector('a[href="/audit/decided?id=pay-9&seq=4"]')`
	if !p.eval(link + ` !== null && ` + link + `.getAttribute("download") === "decided-pay-9-4.bin"`) {
		t.Fatalf("the approval's row offers no download of the decided bytes")
	}
	fetch := func(path string) string {
		t.Helper()
		body, err := chromedp.Run(p.ctx, chromedp.Evaluate[string](`fetch(`+fmt.Sprintf("%q", path)+`).then(r => r.status + " " +
			r.headers.get("Content-Type") + "\n" + r.headers.get("Content-Disposition") + "\n").then(async h => h + await (await fetch(`+
			fmt.Sprintf("%q", path)+`)).text())`, chromedp.EvalAwaitPromise))
		if err != nil {
			t.Fatal(err)
		}
		return body
	}
	bytes := fetch("/audit/decided?id=pay-9&seq=4")
	if want := "200 application/octet-stream\nattachment; filename=\"decided-pay-9-4.bin\"; filename*=UTF-8''decided-pay-9-4.bin\n" + transfer; bytes != want {
		t.Errorf("the decided bytes = %q, want %q", bytes, want)
	}
	// They are what the receipt was signed about.
	receipt := e.get("/sagacity/receipts/pay-9/4").body
	r, err := engine.OpenReceipt(receipt, testkit.Keys(t).Verifier())
	if err != nil || r.PayloadSHA256 != engine.PayloadHash(transfer) {
		t.Errorf("the receipt = %+v, %v; want it about the bytes downloaded", r, err)
	}
	p.noErrors()
	for path, code := range map[string]string{"/audit/decided?id=pay-9&seq=3": "404", "/audit/decided?id=pay-9&seq=x": "400",
		"/audit/decided?id=nobody&seq=4": "404"} {
		if got := fetch(path); !strings.HasPrefix(got, code+" ") {
			t.Errorf("GET %s = %q, want %s", path, got, code)
		}
	}
}

// TestConsoleAbort: an approver aborts a saga from its page, told first
// what compensating it undoes, what stays done and which requests it
// drops; the saga is compensated. A form that went stale does nothing,
// and someone the engine does not let abort is told why instead.
func TestConsoleAbort(t *testing.T) {
	t.Parallel()
	e := newAPI(t, testkit.SQLiteURL(t), envOptions{})
	e.seedScenario("abort-me")
	e.seedScenario("stale")
	p := newTab(t, e)
	p.signIn("operator@example.com")
	p.open("/saga?id=abort-me")
	p.do("typing a reason", chromedp.SendKeys(chromedp.ID("abort-reason"), "wrong vendor"))
	p.click(`#saga-actions button.reject`)
	p.waitText("#saga-actions", "Abort saga abort-me?", 10*time.Second)
	p.ready()
	p.accessible("the abort's confirmation")
	got := p.text("#saga-actions")
	for _, want := range []string{"Reason: wrong vendor", "The saga fails", "reserveInventory seq 1", "sendWireTransfer seq 3"} {
		if !strings.Contains(got, want) {
			t.Errorf("confirmation = %q, want %q", got, want)
		}
	}
	if !p.eval(`document.activeElement.matches("#saga-actions button.reject[autofocus]")`) {
		t.Errorf("focus is not on Yes, abort")
	}
	if strings.Contains(strings.Join(e.tools.paths(), " "), "/release") {
		t.Fatalf("asking for confirmation compensated")
	}
	p.click(`#saga-actions button.reject[autofocus]`)
	p.waitText("main dl.facts", "COMPENSATED", 10*time.Second)
	p.ready()
	if p.eval(`document.getElementById("saga-actions") !== null`) {
		t.Errorf("a compensated saga still offers actions: %q", p.text("#saga-actions"))
	}
	journal := e.get("/sagacity/audit/abort-me").body
	for _, want := range []string{`"phase":"REJECTED","input":"seq=3","payload":"dropped=aborted by operator@example.com: wrong vendor"`,
		`"toolName":"reserveInventory","phase":"COMPENSATED"`} {
		if !strings.Contains(journal, want) {
			t.Errorf("journal = %s\nwant %s", journal, want)
		}
	}

	p.noErrors()

	// A form that went stale (the saga was aborted meanwhile) is
	// answered 409 with the saga as it is.
	p.open("/saga?id=stale")
	p.click(`#saga-actions button.reject`)
	p.waitText("#saga-actions", "Abort saga stale?", 10*time.Second)
	want(t, "abort through the API", e.post("/sagacity/sagas/stale/abort", `{"reason":"by the agent"}`), 200)
	p.click(`#saga-actions button.reject[autofocus]`)
	p.waitText("#saga-actions", "Your form was out of date; nothing was done.", 10*time.Second)
	if got := e.get("/sagacity/audit/stale").body; strings.Count(got, `"phase":"COMPENSATED"`) != 1 {
		t.Errorf("journal = %s, want the reservation compensated once", got)
	}
}

// TestConsoleAbortRoles: who the engine lets abort a saga is offered it,
// and who it does not is told why: an approver, not an auditor.
func TestConsoleAbortRoles(t *testing.T) {
	t.Parallel()
	pr := authtest.NewProvider(t, people...)
	agentT, agentTok := token("agent", engine.RoleAgent)
	e := oidcAPI(t, testkit.SQLiteURL(t), pr, agentT)
	want(t, "reserve", e.do("POST", "/sagacity/sagas/s/calls", js, callJSON("reserveInventory", "{}"), bearer(agentTok)...), 200)
	carol := newTab(t, e)
	carol.signInOIDC("carol", "carol-password-1")
	carol.open("/saga?id=s")
	if got := carol.text("#saga-actions"); !strings.Contains(got, "You cannot abort this saga: aborting a saga needs the agent or approver role.") ||
		carol.eval(`document.querySelector("#saga-actions form") !== null`) {
		t.Errorf("the auditor's actions = %q, want why she cannot abort, and no form", got)
	}
	// A form she was never offered, posted anyway, is the engine's refusal.
	status, err := chromedp.Run(carol.ctx, chromedp.Evaluate[int](`fetch("/saga/abort", {method: "POST",
		headers: {"Content-Type": "application/x-www-form-urlencoded"}, body: "id=s&confirm=yes"}).then(r => r.status)`, chromedp.EvalAwaitPromise))
	if err != nil || status != 403 {
		t.Errorf("the auditor's abort, posted = %d, %v; want 403", status, err)
	}
	if r := e.do("GET", "/sagacity/sagas/s", "", "", bearer(agentTok)...); !strings.Contains(r.body, `"status":"RUNNING"`) {
		t.Errorf("saga s = %s, want it still running", r.body)
	}
	alice := carol.another()
	alice.signInOIDC("alice", "alice-password-1")
	alice.open("/saga?id=s")
	if !alice.eval(`document.querySelector("#saga-actions form.abort button.reject") !== null`) {
		t.Errorf("the approver is not offered Abort: %q", alice.text("main"))
	}
	// Their pages say where: the approver may, from a saga's page.
	alice.open("/me")
	if got := alice.text("main"); !strings.Contains(got, "abort sagas, from a saga's page") {
		t.Errorf("the approver's page = %q, want where to abort a saga", got)
	}
	carol.open("/me")
	if got := carol.text("main"); !strings.Contains(got, "abort sagas, from a saga's page (an agent, only the sagas it started): aborting a saga needs the agent or approver role") {
		t.Errorf("the auditor's page = %q, want why she may not abort", got)
	}
}

// TestConsoleUndoneByHand: a saga whose compensation failed is counted on
// the in-doubt page and listed; its page says which step's undo failed
// and what it answered; a person other than its initiator records that
// they undid it by hand, journaled under their name with a receipt, and
// the saga is COMPENSATED; its initiator is told why they cannot.
func TestConsoleUndoneByHand(t *testing.T) {
	t.Parallel()
	e := newAPI(t, testkit.SQLiteURL(t), envOptions{demo: true})
	p := newTab(t, e)
	p.signIn("ops@example.com")
	p.open("/in-doubt")
	if got := p.text("p.compensation-failed"); !strings.Contains(got, "1 saga(s) whose compensation failed wait for a person too") {
		t.Errorf("in-doubt page = %q, want the saga whose compensation failed counted", got)
	}
	p.click(`p.compensation-failed a`)
	p.ready()
	p.accessible("the sagas whose compensation failed")
	p.click(`table.list a[href="/saga?id=order-0998"]`)
	p.ready()
	p.accessible("the saga whose compensation failed")
	got := p.text("#saga-actions")
	for _, want := range []string{"Steps whose undo failed", "bookCourier seq 3", "courier already collected the parcel; cancel by phone"} {
		if !strings.Contains(got, want) {
			t.Errorf("the saga's actions = %q, want %q", got, want)
		}
	}

	initiator := p.another()
	initiator.signIn("demo-agent")
	initiator.open("/saga?id=order-0998")
	if got := initiator.text("#saga-actions"); !strings.Contains(got, "You cannot record it: demo-agent started saga order-0998") ||
		initiator.eval(`document.querySelector("#saga-actions form.undone") !== null`) {
		t.Errorf("the initiator's actions = %q, want why they cannot record it, and no form", got)
	}

	p.do("recording the pickup cancelled by phone",
		chromedp.SendKeys(chromedp.ID("undone-why-3"), "cancelled by phone with the courier, ref C-3"),
		chromedp.Click(chromedp.CSS(`form.undone input[name="confirm"]`)),
		chromedp.Click(chromedp.CSS(`form.undone button.primary`)))
	p.waitText("main dl.facts", "COMPENSATED", 10*time.Second)
	p.ready()
	p.accessible("the saga undone by hand")
	if !p.eval(`document.getElementById("e3").classList.contains("target")`) {
		t.Errorf("recording did not land on the call it records")
	}
	last := p.text("main > ol.timeline > li:last-child")
	for _, want := range []string{"COMPENSATED", "approval-gate", "by ops@example.com", "undoes the call at #3",
		"reason=cancelled by phone with the courier, ref C-3", "✓ signed by this server's key"} {
		if !strings.Contains(last, want) {
			t.Errorf("the last entry = %q, want %q", last, want)
		}
	}
	p.open("/audit/saga?id=order-0998")
	if got := p.text("main"); !strings.Contains(got, "Intact") || !strings.Contains(got, "undone\tops@example.com\t✓ signed") {
		t.Errorf("verification = %q, want it intact and the record's receipt signed", got)
	}
	p.open("/in-doubt")
	if p.eval(`document.querySelector("p.compensation-failed") !== null`) {
		t.Errorf("the in-doubt page still counts a saga whose compensation failed")
	}
	if r := e.get("/sagacity/audit/order-0998/verify"); !strings.Contains(r.body, `"valid":true`) {
		t.Errorf("GET verify = %s, want valid", r.body)
	}
	p.noErrors()
}
