package app_test

import (
	"context"
	_ "embed"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/sagacity-go/sagacity/internal/auth"
	"github.com/sagacity-go/sagacity/internal/auth/authtest"
	"github.com/sagacity-go/sagacity/internal/engine"
	"github.com/sagacity-go/sagacity/internal/httptool"
	"github.com/sagacity-go/sagacity/internal/store"
	"github.com/sagacity-go/sagacity/internal/testkit"
	"github.com/sagacity-go/sagacity/internal/witness"
	"github.com/sagacity-go/sagacity/toolsig"
	"github.com/sagacity-go/sagacity/wire"
)

// The console in a real headless Chromium: what reviewers and auditors do,
// checked where they do it, with an accessibility check (axe-core, vendored
// in testdata with its version in testdata/VERSIONS) on every page opened.

//go:embed testdata/axe.min.js
var axeSource string

var screenshots = flag.String("screenshots", "", "also write PNGs of the console's main pages into this directory (make screenshots)")

// tab is a browser tab on a running server.
type tab struct {
	t    *testing.T
	ctx  context.Context
	base string
}

// newTab starts a browser for the test.
func newTab(t *testing.T, e *apiEnv) *tab {
	b := authtest.Browser(t)
	ctx, cancel := context.WithTimeout(b, 2*time.Minute)
	t.Cleanup(cancel)
	return &tab{t: t, ctx: ctx, base: e.url}
}

// another opens a tab with cookies of its own, as a second person would.
func (p *tab) another() *tab {
	ctx, cancel := chromedp.NewContext(p.ctx, chromedp.WithNewBrowserContext())
	p.t.Cleanup(cancel)
	return &tab{t: p.t, ctx: ctx, base: p.base}
}

func (p *tab) do(what string, actions ...chromedp.Action[chromedp.Void]) {
	p.t.Helper()
	if err := chromedp.Do(p.ctx, actions...); err != nil {
		p.t.Fatalf("%s: %v", what, err)
	}
}

// ready waits until the page has loaded, htmx included: nodes found while
// it settles can go stale.
func (p *tab) ready() {
	p.t.Helper()
	var err error
	for range 20 {
		// A click that loads a page destroys the document being polled;
		// poll the new one.
		if _, err = chromedp.Run(p.ctx, chromedp.Poll[bool](`document.readyState === "complete" && typeof htmx !== "undefined"`)); err == nil ||
			!strings.Contains(err.Error(), "context") {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		p.t.Fatalf("waiting for the page to load: %v", err)
	}
}

// open loads a page and checks it for accessibility.
func (p *tab) open(path string) {
	p.t.Helper()
	p.do("opening "+path, chromedp.Navigate(p.base+path))
	p.ready()
	p.accessible(path)
}

// click clicks and, when the click loads a page, waits for it.
func (p *tab) click(sel string) {
	p.t.Helper()
	p.do("clicking "+sel, chromedp.WaitVisible(chromedp.CSS(sel)), chromedp.Click(chromedp.CSS(sel)))
}

// signIn signs name in on the dev sign-in page.
func (p *tab) signIn(name string) {
	p.t.Helper()
	p.open("/login")
	p.do("signing in as "+name, chromedp.SendKeys(chromedp.ID("name"), name),
		chromedp.Click(chromedp.CSS(`form.signin button[type="submit"]`)), chromedp.WaitVisible(chromedp.ID("who")))
	p.ready()
}

// signInOIDC signs a person in through the test OpenID provider.
func (p *tab) signInOIDC(username, password string) {
	p.t.Helper()
	p.do("signing in as "+username, chromedp.Navigate(p.base+"/"), chromedp.WaitVisible(chromedp.ID("username")),
		chromedp.SendKeys(chromedp.ID("username"), username), chromedp.SendKeys(chromedp.ID("password"), password),
		chromedp.Click(chromedp.CSS(`button[type="submit"]`)), chromedp.WaitVisible(chromedp.ID("who")))
	p.ready()
}

// text is the text of the first element sel finds.
func (p *tab) text(sel string) string {
	p.t.Helper()
	s, err := chromedp.Run(p.ctx, chromedp.Text(chromedp.CSS(sel)))
	if err != nil {
		p.t.Fatalf("reading %s: %v", sel, err)
	}
	return s
}

// eval evaluates a JavaScript expression to a bool.
func (p *tab) eval(expr string) bool {
	p.t.Helper()
	v, err := chromedp.Run(p.ctx, chromedp.Evaluate[bool](expr))
	if err != nil {
		p.t.Fatalf("evaluating %s: %v", expr, err)
	}
	return v
}

// waitText waits until the text of sel holds want.
func (p *tab) waitText(sel, want string, within time.Duration) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, within)
	defer cancel()
	b, _ := json.Marshal(sel)
	w, _ := json.Marshal(want)
	var err error
	for ctx.Err() == nil {
		// Without scripts yet, a form posts and loads a page: poll the new one.
		if _, err = chromedp.Run(ctx, chromedp.Poll[bool](`(document.querySelector(`+string(b)+`)?.textContent || "").includes(`+string(w)+`)`)); err == nil {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	got, _ := chromedp.Run(p.ctx, chromedp.Text(chromedp.CSS(sel)))
	p.t.Fatalf("waiting for %s to say %q: %v; it says %q", sel, want, err, got)
}

// accessible runs axe-core on the page and fails on any serious or
// critical violation.
func (p *tab) accessible(what string) {
	p.t.Helper()
	if _, err := chromedp.Run(p.ctx, chromedp.Evaluate[bool](axeSource+";true")); err != nil {
		p.t.Fatalf("loading axe-core into %s: %v", what, err)
	}
	found, err := chromedp.Run(p.ctx, chromedp.Evaluate[string](`axe.run(document, {resultTypes: ["violations"]}).then(r =>
		JSON.stringify(r.violations.filter(v => v.impact === "serious" || v.impact === "critical")
			.map(v => ({id: v.id, impact: v.impact, help: v.help, nodes: v.nodes.slice(0, 3).map(n => n.target.join(" "))}))))`,
		chromedp.EvalAwaitPromise))
	if err != nil {
		p.t.Fatalf("running axe-core on %s: %v", what, err)
	}
	if found != "[]" {
		p.t.Errorf("accessibility of %s: serious or critical violations: %s", what, found)
	}
	// A list's rows become stacks of cells on a narrow screen, each under
	// its label: a cell without one would stand unexplained.
	unlabelled, err := chromedp.Run(p.ctx, chromedp.Evaluate[string](`JSON.stringify([...document.querySelectorAll(
		"table.list tbody td:not([data-label]), table.list tbody th:not([data-label])")].slice(0, 3).map(c => c.outerHTML.slice(0, 120)))`))
	if err != nil {
		p.t.Fatalf("looking for unlabelled cells in %s: %v", what, err)
	}
	if unlabelled != "[]" {
		p.t.Errorf("%s: cells of a list without a label for narrow screens: %s", what, unlabelled)
	}
}

// noErrors fails when the browser reported an error: a script that ran, a
// CSP violation, a failed load.
func (p *tab) noErrors() {
	p.t.Helper()
	if errs := authtest.ConsoleErrors(p.ctx); len(errs) > 0 {
		p.t.Errorf("the browser reported errors: %q", errs)
	}
}

// TestConsoleApproveExecute: a reviewer approves a pending request in the
// console, confirming what it is about, then executes it; the tool server
// receives the exact approved bytes once.
func TestConsoleApproveExecute(t *testing.T) {
	t.Parallel()
	e := newAPI(t, testkit.SQLiteURL(t), envOptions{})
	e.seedScenario("pay-1")
	p := newTab(t, e)
	p.signIn("reviewer@example.com")
	p.open("/")
	// The list shows a request that arrives while it is open, by itself,
	// and keeps what the reader typed in the filter.
	p.do("typing in the filter", chromedp.SendKeys(chromedp.CSS(`#filters input[name="initiator"]`), "half-typed"))
	e.seedScenario("pay-0")
	p.waitText("#rows", "pay-0", 15*time.Second)
	p.waitText("#total", "2", 5*time.Second)
	if !p.eval(`document.querySelector('#filters input[name="initiator"]').value === "half-typed"`) {
		t.Errorf("the update lost what the reader typed")
	}
	p.click(`table.list a[href="/request?saga=pay-1&seq=3"]`)
	p.ready()
	p.accessible("the request page")
	p.do("typing a reason", chromedp.SendKeys(chromedp.ID("reason"), "matches invoice 7"))
	p.click(`#actions button.approve`)
	p.waitText("#actions", "Approve sendWireTransfer in saga pay-1, seq 3?", 10*time.Second)
	if got := p.text("#actions"); !strings.Contains(got, "amount: 100") || !strings.Contains(got, "to: alice") {
		t.Errorf("confirmation = %q, want it to repeat the payload's key fields", got)
	}
	p.accessible("the confirmation")
	p.click(`#actions button.approve[autofocus]`)
	p.waitText("#status", "Approved by reviewer@example.com, awaiting execution", 10*time.Second)
	if strings.Contains(strings.Join(e.tools.paths(), " "), "/wire") {
		t.Fatalf("approving executed the wire")
	}
	p.click(`#actions button.primary`)
	p.waitText("#actions", "Execute sendWireTransfer in saga pay-1, seq 3?", 10*time.Second)
	p.click(`#actions button.primary[autofocus]`)
	p.waitText("#status", "Executed with the approved bytes", 10*time.Second)
	var wires []toolRequest
	for _, r := range e.tools.requests() {
		if r.Path == "/wire" {
			wires = append(wires, r)
		}
	}
	if len(wires) != 1 || wires[0].Body != transfer {
		t.Errorf("the tool server got %d wire calls %+v, want one with %s", len(wires), wires, transfer)
	}
	p.noErrors()
}

// TestConsoleRejectCompensates: a rejection with a reason compensates the
// saga, and the timeline shows it.
func TestConsoleRejectCompensates(t *testing.T) {
	t.Parallel()
	e := newAPI(t, testkit.SQLiteURL(t), envOptions{})
	e.seedScenario("pay-2")
	p := newTab(t, e)
	p.signIn("reviewer@example.com")
	p.open("/request?saga=pay-2&seq=3")
	p.do("typing a reason", chromedp.SendKeys(chromedp.ID("reason"), "unknown beneficiary"))
	if got := p.text("main"); !strings.Contains(got, "What rejecting it does") || !strings.Contains(got, "reserveInventory seq 1") {
		t.Errorf("request page = %q, want what a rejection compensates", got)
	}
	p.click(`#actions button.reject`)
	p.waitText("#actions", "Reject sendWireTransfer in saga pay-2, seq 3?", 10*time.Second)
	p.click(`#actions button.reject[autofocus]`)
	p.waitText("#status", "Rejected by reviewer@example.com", 10*time.Second)
	p.open("/saga?id=pay-2")
	got := p.text("ol.timeline")
	for _, want := range []string{"REJECTED", "reason=unknown beneficiary", "COMPENSATED", "compensated effect seq=2"} {
		if !strings.Contains(got, want) {
			t.Errorf("timeline = %q, want %q", got, want)
		}
	}
	p.noErrors()
}

// TestConsoleSecondReviewer: two reviewers have the same request open. The
// second one's page shows the first one's decision on its own, and their
// form, now stale, gets the current state instead of deciding again.
func TestConsoleSecondReviewer(t *testing.T) {
	t.Parallel()
	e := newAPI(t, testkit.SQLiteURL(t), envOptions{})
	e.seedScenario("pay-3")
	alice := newTab(t, e)
	bob := alice.another()
	alice.signIn("alice@example.com")
	bob.signIn("bob@example.com")
	alice.open("/request?saga=pay-3&seq=3")
	bob.open("/request?saga=pay-3&seq=3")
	bob.do("typing a reason", chromedp.SendKeys(chromedp.ID("reason"), "half-typed"))

	alice.click(`#actions button.approve`)
	alice.click(`#actions button.approve[autofocus]`)
	alice.waitText("#status", "Approved by alice@example.com", 10*time.Second)

	bob.waitText("#status", "Approved by alice@example.com", 15*time.Second)
	if got := bob.text("#status"); !strings.Contains(got, "This changed while the page was open") {
		t.Errorf("bob's status = %q, want it marked as changed", got)
	}
	if !bob.eval(`document.getElementById("reason").value === "half-typed"`) {
		t.Errorf("the update lost bob's half-typed reason")
	}
	bob.click(`#actions button.approve`)
	bob.waitText("#actions", "Your form was out of date; nothing was done.", 10*time.Second)
	if got := e.get("/sagacity/audit/pay-3").body; strings.Count(got, `"phase":"APPROVED"`) != 1 {
		t.Errorf("journal = %s, want one approval", got)
	}
}

// TestConsoleDemo drives the demo data: the re-planned transfer's diff,
// the refused stale resume, the initiator told why they cannot decide,
// and every main page accessible.
func TestConsoleDemo(t *testing.T) {
	t.Parallel()
	e := newAPI(t, testkit.SQLiteURL(t), envOptions{demo: true})
	p := newTab(t, e)
	p.signIn("reviewer2@example.com")
	for _, path := range []string{"/", "/sagas", "/sagas?status=COMPENSATION_FAILED", "/saga?id=order-1002", "/audit",
		"/audit/saga?id=order-0999", "/in-doubt", "/me"} {
		p.open(path)
	}
	p.open("/request?saga=order-1002&seq=2")
	row := p.text(`section.diff tr.change`)
	if !strings.Contains(row, "amount") || !strings.Contains(row, `"250.00"`) || !strings.Contains(row, `"2500.00"`) || !strings.Contains(row, "changed") {
		t.Errorf("re-planned transfer's diff row = %q, want amount changed from 250.00 to 2500.00", row)
	}
	p.open("/request?saga=order-0999&seq=3")
	if got := p.text("main"); !strings.Contains(got, "Resume refused: stale-approval") || !strings.Contains(got, `"640.00"`) || !strings.Contains(got, `"6400.00"`) {
		t.Errorf("refused request page = %q, want the refusal and the attempted amount", got)
	}

	agent := p.another()
	agent.signIn("demo-agent")
	agent.open("/request?saga=order-1002&seq=2")
	if got := agent.text("#actions"); !strings.Contains(got, "You cannot decide this request: demo-agent started saga order-1002 and cannot decide its requests") {
		t.Errorf("the initiator's actions = %q, want why they cannot decide", got)
	}
	if agent.eval(`document.querySelector("#actions button.approve") !== null`) {
		t.Errorf("the initiator is offered Approve")
	}
	p.noErrors()
}

// TestConsoleFormattingOnly: a resume whose bytes differ from the approved
// ones only in whitespace is refused, and the console says only the
// formatting differs.
func TestConsoleFormattingOnly(t *testing.T) {
	t.Parallel()
	e := newAPI(t, testkit.SQLiteURL(t), envOptions{})
	e.seedScenario("pay-4")
	want(t, "approve", e.post("/sagacity/approve/pay-4/3", `{"approver":"manager@company.com"}`), 200)
	want(t, "resume with spaces", e.post("/sagacity/resume/pay-4/3", e.payload(`{ "amount": "100", "to": "alice" }`)), 409)
	p := newTab(t, e)
	p.signIn("auditor@example.com")
	p.open("/request?saga=pay-4&seq=3")
	if got := p.text("main"); !strings.Contains(got, "Only formatting differs") {
		t.Errorf("refused request page = %q, want it to say only the formatting differs", got)
	}
	p.open("/saga?id=pay-4")
	if got := p.text("ol.timeline"); !strings.Contains(got, "Only formatting differs") {
		t.Errorf("timeline = %q, want the refusal's diff", got)
	}
}

// TestConsoleTampered: a row edited in the database is shown broken at the
// right entry on a saga's verification and in the timeline, and on the
// audit page as its newest verification found it, with when.
func TestConsoleTampered(t *testing.T) {
	t.Parallel()
	dbURL := testkit.SQLiteURL(t)
	e := newAPI(t, dbURL, envOptions{})
	e.seedScenario("pay-5")
	e.seedScenario("fine")
	testkit.Exec(t, dbURL, `UPDATE journal SET payload = '{"reserved":99}' WHERE saga_id = 'pay-5' AND seq = 2`)
	p := newTab(t, e)
	p.signIn("auditor@example.com")
	// The list shows what was verified, not what it verifies itself.
	p.open("/audit")
	if got := p.text("main table.list"); strings.Count(got, "not verified yet") != 3 || strings.Contains(got, "broken") {
		t.Errorf("audit page before any verification = %q, want every saga not verified yet", got)
	}
	p.open("/audit/saga?id=pay-5")
	if got := p.text("main"); !strings.Contains(got, "Broken: hash mismatch at seq=2 (entry 1)") || !strings.Contains(got, "sagacity verify -key 'sagacity.test+") || !strings.Contains(got, "sagacity-pay-5.ndjson") {
		t.Errorf("verification page = %q, want the break in words and the offline command", got)
	}
	p.click(`a[href*="at=2"]`)
	p.ready()
	p.accessible("the broken timeline")
	if !p.eval(`document.getElementById("e2").classList.contains("broken") && document.getElementById("e2").classList.contains("target")`) {
		t.Errorf("timeline entry 2 is not marked broken and pointed at")
	}
	if got := p.text("#e2"); !strings.Contains(got, "Verification stops here: hash mismatch at seq=2 (entry 1)") {
		t.Errorf("entry 2 = %q, want where verification stops", got)
	}
	p.open("/audit/saga?id=no-such-saga")
	if got := p.text("main"); !strings.Contains(got, "no such saga: no-such-saga") {
		t.Errorf("an unknown saga's verification = %q, want no such saga", got)
	}
	// The verification was kept: the list shows it, with when.
	p.open("/audit")
	if got := p.text("main table.list tbody"); !strings.Contains(got, "pay-5") || !strings.Contains(got, "✗ broken hash mismatch at seq=2 (entry 1)") ||
		!strings.Contains(got, "checked just now") || strings.Count(got, "not verified yet") != 2 {
		t.Errorf("audit page after verifying pay-5 = %q, want it broken at seq 2, checked just now, and the others not verified yet", got)
	}
	// Verifying every saga runs in the background and shows its progress;
	// what it finds is kept for the list.
	p.click(`#job button.primary`)
	p.waitText("#job", "1 of 3 sagas do not verify", 15*time.Second) // pay-5, another, and the policies
	p.open("/audit")
	if got := p.text("main > div.table-wrap table.list tbody"); strings.Count(got, "✓ verified") != 2 || strings.Count(got, "✗ broken") != 1 ||
		strings.Contains(got, "not verified yet") {
		t.Errorf("audit page after verifying every saga = %q, want two verified and pay-5 broken", got)
	}
	// One more entry after the verification is told.
	want(t, "a call after the verification", e.call("fine", "reserveInventory", "{}"), 200)
	p.open("/audit")
	if !p.eval(`[...document.querySelectorAll("main > div.table-wrap tbody tr")].some(r => r.textContent.includes("fine") && r.textContent.includes("2 entries since"))`) {
		t.Errorf("audit page after fine took a call = %q, want its row to say 2 entries since", p.text("main > div.table-wrap table.list tbody"))
	}
}

// TestConsoleInert: untrusted payloads are shown, never run: a script, an
// image with an onerror, a javascript: link, htmx attributes, a
// </textarea>, and a right-to-left override are shown as text and
// flagged.
func TestConsoleInert(t *testing.T) {
	t.Parallel()
	e := newAPI(t, testkit.SQLiteURL(t), envOptions{})
	xss := `<script>window.__pwned=1</script><img src=x onerror="window.__pwned=2"></textarea><a href="javascript:window.__pwned=3">x</a>` +
		`<div hx-get="/sagacity/approve/x/1" hx-trigger="load">`
	bidi := "{\"amount\":\"100\",\"to\":\"alice\u202Eeilla\"}"
	for saga, input := range map[string]string{"xss": xss, "bidi": bidi} {
		want(t, "reserve", e.call(saga, "reserveInventory", "{}"), 200)
		want(t, "gate", e.call(saga, "sendWireTransfer", input), 202)
	}
	want(t, "an odd saga id", e.call(url.PathEscape(`"><img src=x onerror=window.__pwned=4>`), "sendWireTransfer", "{}"), 202)
	p := newTab(t, e)
	p.signIn("reviewer@example.com")
	for _, path := range []string{"/", "/request?saga=xss&seq=3", "/saga?id=xss", "/sagas"} {
		p.open(path)
		if !p.eval(`window.__pwned === undefined && document.scripts.length === 2 && document.querySelectorAll("main img, main [hx-trigger=load]").length === 0`) {
			t.Errorf("%s: a payload became markup or ran", path)
		}
	}
	p.open("/request?saga=xss&seq=3")
	if got := p.text("pre.payload.exact"); got != xss {
		t.Errorf("exact bytes shown = %q, want %q", got, xss)
	}
	p.open("/request?saga=bidi&seq=3")
	if got := p.text(".findings"); !strings.Contains(got, "bidi control") || !strings.Contains(got, "U+202E RIGHT-TO-LEFT OVERRIDE") {
		t.Errorf("findings = %q, want the override flagged", got)
	}
	if !p.eval(`[...document.querySelectorAll("pre.payload.exact mark.hidden-char")].some(m => m.textContent === "U+202E")`) {
		t.Errorf("the override is not shown in place")
	}
	if got := p.text("pre.payload.exact"); strings.ContainsRune(got, '\u202E') {
		t.Errorf("the exact bytes view still holds the override itself: %q", got)
	}
	time.Sleep(6 * time.Second) // let the update loops run once
	if p.eval(`window.__pwned !== undefined`) {
		t.Errorf("a payload ran after the page updated")
	}
	p.noErrors()
}

// TestConsoleInDoubt: a call left between its INTENT and its outcome is
// shown with its evidence, and a person records that it did not happen:
// journaled under their name, and the saga compensates.
func TestConsoleInDoubt(t *testing.T) {
	t.Parallel()
	dbURL := testkit.SQLiteURL(t)
	e := newAPI(t, dbURL, envOptions{})
	want(t, "reserve", e.call("lost", "reserveInventory", "{}"), 200)
	strand(t, dbURL, "lost", "createOrder", `{"sku":"SKU-1"}`)
	p := newTab(t, e)
	p.signIn("reviewer@example.com")
	p.open("/in-doubt")
	if got := p.text("main"); !strings.Contains(got, "createOrder in saga lost · seq 3") || !strings.Contains(got, "lost/3") {
		t.Errorf("in-doubt page = %q, want the call and its idempotency key", got)
	}
	p.do("recording that it did not happen",
		chromedp.Click(chromedp.CSS(`input[name="happened"][value="no"]`)),
		chromedp.SendKeys(chromedp.CSS(`input[name="reason"]`), "the order service has no such order"),
		chromedp.Click(chromedp.CSS(`input[name="confirm"]`)),
		chromedp.Click(chromedp.CSS(`form.resolve button.primary`)),
		chromedp.WaitVisible(chromedp.CSS("ol.timeline")),
	)
	p.ready()
	got := e.get("/sagacity/audit/lost").body
	for _, want := range []string{`"toolName":"approval-gate","phase":"FAILED","input":"seq=3","payload":"resolved-by=reviewer@example.com\nreason=the order service has no such order\nauth=dev\nreceipt=`,
		`"toolName":"reserveInventory","phase":"COMPENSATED"`} {
		if !strings.Contains(got, want) {
			t.Errorf("journal = %s\nwant %s", got, want)
		}
	}
}

// TestConsoleCutOff: a call cut off by the death of the process that ran
// it is listed at once when its replica starts again, not after the
// in-doubt window (an hour here): on the in-doubt page, with the saga's
// later calls (one of them the same call again), in the pending page's
// warning, and flagged on the timeline; its saga takes no new call until
// a person records what happened.
func TestConsoleCutOff(t *testing.T) {
	t.Parallel()
	dbURL := testkit.SQLiteURL(t)
	e := newAPI(t, dbURL, envOptions{inDoubtAfter: time.Hour})
	replica := checkpoints(t)
	want(t, "reserve", e.call("cut", "createOrder", `{"sku":"SKU-1"}`), 200)
	stop := hang(t, dbURL, replica, auth.Anonymous, "cut", "reserveInventory", `{"item":"dock"}`)
	defer stop()
	// While it runs on a live process it is in doubt nowhere, and the
	// saga takes calls: here the same call again, which runs.
	want(t, "the same call while it runs", e.call("cut", "reserveInventory", `{"item":"dock"}`), 200)
	p := newTab(t, e)
	p.signIn("reviewer@example.com")
	p.open("/in-doubt")
	if got := p.text("main"); !strings.Contains(got, "No call is in doubt") {
		t.Errorf("in-doubt page while the call runs = %q; want none", got)
	}

	// Its process dies, and its replica starts again.
	beat, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := (&engine.Heartbeat{Engine: e.eng, Replica: replica.Path(), Lineage: replica}).Start(beat); err != nil {
		t.Fatal(err)
	}
	p.open("/in-doubt")
	p.accessible("the in-doubt page")
	got := p.text("main")
	for _, want := range []string{"reserveInventory in saga cut · seq 3", "cut/3", "reserveInventory seq 4",
		"the same call again: its effect may have happened twice", "takes no other call"} {
		if !strings.Contains(got, want) {
			t.Errorf("in-doubt page after the restart = %q; want %q", got, want)
		}
	}
	if r := e.get("/sagacity/in-doubt"); r.code != 200 || !strings.Contains(r.body, `"sagaId":"cut","journalSeq":3`) || !strings.Contains(r.body, `"idempotencyKey":"cut/3"`) {
		t.Errorf("GET /sagacity/in-doubt after the restart = %d %s; want the call, under its key", r.code, r.body)
	}
	if r := e.call("cut", "createOrder", `{"sku":"SKU-2"}`); r.code != 409 || !strings.Contains(r.body, `"code":"IN_DOUBT"`) {
		t.Errorf("a new call while one is in doubt = %d %s; want 409 IN_DOUBT", r.code, r.body)
	}
	p.open("/")
	if got := p.text("main"); !strings.Contains(got, "1 call(s) in doubt block their sagas") {
		t.Errorf("pending page = %q; want the call in doubt told", got)
	}
	p.open("/saga?id=cut")
	if got := p.text("#e3"); !strings.Contains(got, "In doubt: this call started and no entry records its outcome") {
		t.Errorf("timeline entry 3 = %q; want its INTENT flagged in doubt", got)
	}
	if got := p.text("#e4"); strings.Contains(got, "In doubt") {
		t.Errorf("timeline entry 4 = %q; want no flag: it executed", got)
	}
	p.open("/in-doubt")
	p.do("recording that it happened",
		chromedp.Click(chromedp.CSS(`input[name="happened"][value="yes"]`)),
		chromedp.SendKeys(chromedp.CSS(`input[name="reason"]`), "the warehouse shows the dock reserved"),
		chromedp.Click(chromedp.CSS(`input[name="confirm"]`)),
		chromedp.Click(chromedp.CSS(`form.resolve button.primary`)),
		chromedp.WaitVisible(chromedp.CSS("ol.timeline")),
	)
	want(t, "a new call once resolved", e.call("cut", "createOrder", `{"sku":"SKU-2"}`), 200)
	p.noErrors()
}

// TestInDoubtKey: for a saga id with a space, '%' and non-ASCII, the
// idempotency key of a call in doubt is one and the same as the tool
// received it (through httptool, signed), on the console's in-doubt page,
// and in GET /sagacity/in-doubt.
func TestInDoubtKey(t *testing.T) {
	t.Parallel()
	dbURL := testkit.SQLiteURL(t)
	e := newAPI(t, dbURL, envOptions{inDoubtAfter: time.Hour})
	replica, saga := checkpoints(t), "payroll 100% März"
	received := make(chan string, 1)
	started, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	holding := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		once.Do(func() { received <- r.Header.Get(toolsig.HeaderKey); close(started) })
		select {
		case <-release:
		case <-r.Context().Done():
		}
		_, _ = io.WriteString(w, "reserved")
	})
	ts := httptest.NewServer(toolsig.Handler(secret, toolsig.Expect{Tool: "reserveInventory", Phase: toolsig.Execute}, 1<<20, holding))
	defer ts.Close()
	tool := engine.Tool{Name: "reserveInventory", Reversibility: engine.Compensatable, Executor: &httptool.Tool{
		Name: "reserveInventory", Secret: secret, MaxResult: 1 << 20, Exec: httptool.Endpoint{URL: ts.URL, Timeout: time.Minute}}}
	stop := hangWith(t, dbURL, replica, auth.Anonymous, saga, `{"item":"dock"}`, tool, started, release)
	defer stop()
	key := <-received
	if want := "payroll%20100%25%20M%C3%A4rz/1"; key != want {
		t.Errorf("the tool received Idempotency-Key %q; want %q", key, want)
	}
	// The process running it dies and its replica starts again: the call
	// is in doubt at once.
	beat, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := (&engine.Heartbeat{Engine: e.eng, Replica: replica.Path(), Lineage: replica}).Start(beat); err != nil {
		t.Fatal(err)
	}

	r := e.get("/sagacity/in-doubt")
	var doubts []wire.CallInDoubt
	if err := json.Unmarshal([]byte(r.body), &doubts); r.code != 200 || err != nil || len(doubts) != 1 {
		t.Fatalf("GET /sagacity/in-doubt = %d %s (%v); want the one call", r.code, r.body, err)
	}
	if d := doubts[0]; d.SagaID != saga || d.JournalSeq != 1 || d.IdempotencyKey != key {
		t.Errorf("GET /sagacity/in-doubt = %+v; want saga %q seq 1 under the key the tool received, %q", d, saga, key)
	}

	p := newTab(t, e)
	p.signIn("reviewer@example.com")
	p.open("/in-doubt")
	p.accessible("the in-doubt page")
	shown, err := chromedp.Run(p.ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll("main dd code")].map(c => c.textContent)`))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(shown, key) {
		t.Errorf("the in-doubt page shows %q; want the key the tool received, %q", shown, key)
	}
	p.noErrors()
}

// TestConsoleSuperseded: a request the saga re-planned, once its
// replacement is approved, is marked superseded in the list and on its
// page, offers no approval, and is dismissed, the saga going on; the
// replacement's rejection says what it undoes and what stays done, and
// ends the saga.
func TestConsoleSuperseded(t *testing.T) {
	t.Parallel()
	e := newAPI(t, testkit.SQLiteURL(t), envOptions{})
	e.seedScenario("re") // reserveInventory 1-2, the wire at 3
	p := newTab(t, e)
	p.signIn("reviewer@example.com")
	decide := func(seq int64, button, confirm string) {
		t.Helper()
		p.open(fmt.Sprintf("/request?saga=re&seq=%d", seq))
		p.click(`#actions button` + button)
		p.waitText("#actions", confirm, 10*time.Second)
		p.click(`#actions button[autofocus]`)
	}
	// The page names the approval rule the request is decided by.
	p.open("/request?saga=re&seq=3")
	if got := p.text("#rule"); got != "default" {
		t.Errorf("the request's approval rule = %q; want default", got)
	}
	decide(3, ".approve", "Approve sendWireTransfer in saga re, seq 3?")
	p.waitText("#status", "Approved by", 10*time.Second)
	decide(3, ".primary", "Execute sendWireTransfer in saga re, seq 3?")
	p.waitText("#status", "Executed with the approved bytes", 10*time.Second)
	want(t, "a wire", e.call("re", "sendWireTransfer", `{"amount":"100","to":"bob"}`), 202)             // seq 7
	want(t, "the wire re-planned", e.call("re", "sendWireTransfer", `{"amount":"90","to":"bob"}`), 202) // seq 8
	decide(8, ".approve", "Approve sendWireTransfer in saga re, seq 8?")
	p.waitText("#status", "Approved by", 10*time.Second)

	p.open("/")
	if got := p.text(`#rows`); !strings.Contains(got, "superseded by seq 8") {
		t.Errorf("pending list = %q; want seq 7 marked superseded by seq 8", got)
	}
	p.open("/request?saga=re&seq=7")
	p.accessible("a superseded request")
	if got := p.text("#status"); !strings.Contains(got, "Superseded") {
		t.Errorf("status of seq 7 = %q; want superseded", got)
	}
	if p.eval(`document.querySelector('#actions button.approve') !== null`) {
		t.Errorf("a superseded request offers an approval")
	}
	p.click(`#actions button[value="dismiss"]`)
	p.waitText("#actions", "Dismiss sendWireTransfer in saga re, seq 7?", 10*time.Second)
	if got := p.text("#actions"); !strings.Contains(got, "the saga keeps running") || !strings.Contains(got, "seq 8") {
		t.Errorf("dismissal's confirmation = %q; want it to say the saga goes on with seq 8", got)
	}
	p.click(`#actions button[autofocus]`)
	p.waitText("#status", "Dismissed by reviewer@example.com", 10*time.Second)
	if r := e.get("/sagacity/sagas/re"); !strings.Contains(r.body, `"status":"AWAITING_APPROVAL"`) {
		t.Errorf("saga after the dismissal = %s; want it still waiting on seq 8", r.body)
	}

	p.open("/request?saga=re&seq=8")
	p.click(`#actions button.reject`)
	p.waitText("#actions", "Reject sendWireTransfer in saga re, seq 8?", 10*time.Second)
	got := p.text("#actions")
	for _, want := range []string{"The saga ends", "reserveInventory seq 1", "These irreversible effects stay done", "sendWireTransfer seq 5"} {
		if !strings.Contains(got, want) {
			t.Errorf("rejection's confirmation = %q; want %q", got, want)
		}
	}
	p.accessible("a rejection's confirmation")
	p.click(`#actions button.reject[autofocus]`)
	p.waitText("#status", "Rejected by reviewer@example.com", 10*time.Second)
	if r := e.get("/sagacity/sagas/re"); !strings.Contains(r.body, `"status":"COMPENSATED"`) {
		t.Errorf("saga after the rejection = %s; want COMPENSATED", r.body)
	}
	p.noErrors()
}

// TestConsoleRoles: an auditor reads everything and is offered no
// decision, and told why.
func TestConsoleRoles(t *testing.T) {
	t.Parallel()
	pr := authtest.NewProvider(t, people...)
	agentT, agentTok := token("agent", engine.RoleAgent)
	e := oidcAPI(t, testkit.SQLiteURL(t), pr, agentT)
	want(t, "reserve", e.do("POST", "/sagacity/sagas/r/calls", js, callJSON("reserveInventory", "{}"), bearer(agentTok)...), 200)
	want(t, "gate", e.do("POST", "/sagacity/sagas/r/calls", js, callJSON("sendWireTransfer", transfer), bearer(agentTok)...), 202)
	p := newTab(t, e)
	p.signInOIDC("carol", "carol-password-1")
	p.open("/request?saga=r&seq=3")
	if p.eval(`document.querySelector("#actions button") !== null`) {
		t.Errorf("an auditor is offered a decision")
	}
	if got := p.text("#actions"); !strings.Contains(got, "approving needs the approver role") {
		t.Errorf("auditor's actions = %q, want why not", got)
	}
	p.open("/me")
	if got := p.text("main"); !strings.Contains(got, "verify journals") || !strings.Contains(got, "approve requests") {
		t.Errorf("who-am-I = %q, want what carol may and may not do", got)
	}
}

// TestConsoleHalted: once the database does not match the newest
// checkpoint (a saga was deleted by hand), everyone signed in, whatever
// their role, sees why executions are halted on every page, reads go on,
// and the audit page says what the check found.
func TestConsoleHalted(t *testing.T) {
	t.Parallel()
	pr := authtest.NewProvider(t, people...)
	agentT, agentTok := token("agent", engine.RoleAgent)
	dbURL := testkit.SQLiteURL(t)
	e := oidcAPI(t, dbURL, pr, agentT)
	for _, saga := range []string{"kept", "gone"} {
		want(t, "reserve", e.do("POST", "/sagacity/sagas/"+saga+"/calls", js, callJSON("reserveInventory", "{}"), bearer(agentTok)...), 200)
		want(t, "gate", e.do("POST", "/sagacity/sagas/"+saga+"/calls", js, callJSON("sendWireTransfer", transfer), bearer(agentTok)...), 202)
	}
	e.sequence()
	if problem, err := e.log.Check(context.Background(), true); problem != "" || err != nil {
		t.Fatalf("CheckLog = %q, %v; want the database to match", problem, err)
	}
	p := newTab(t, e)
	p.signInOIDC("carol", "carol-password-1")
	p.open("/audit")
	if got := p.text("#log-h + p"); !strings.Contains(got, "✓ The database matches the newest checkpoint") || p.eval(`document.querySelector(".halted") !== null`) {
		t.Errorf("audit page before = %q, want the database to match and no banner", got)
	}
	for _, table := range []string{"journal", "calls", "approval_requests", "sagas"} {
		col := "saga_id"
		if table == "sagas" {
			col = "id"
		}
		testkit.Exec(t, dbURL, "DELETE FROM "+table+" WHERE "+col+" = 'gone'")
	}
	if problem, err := e.log.Check(context.Background(), true); problem == "" || err != nil {
		t.Fatalf("CheckLog = %q, %v; want the deleted saga found", problem, err)
	}
	for i, who := range []struct{ user, password, page string }{
		{"carol", "carol-password-1", "/audit"}, {"alice", "alice-password-1", "/"}, {"bob", "bob-password-1", "/sagas"},
	} {
		q := p
		if i > 0 {
			q = p.another()
			q.signInOIDC(who.user, who.password)
		}
		q.open(who.page)
		if got := q.text(".halted"); !strings.Contains(got, "Executions are halted.") || !strings.Contains(got, "is missing (rows deleted, a saga removed)") {
			t.Errorf("%s on %s: banner = %q, want why executions are halted", who.user, who.page, got)
		}
	}
	p.open("/audit")
	if got := p.text("#log-h + p"); !strings.Contains(got, "✗ The database does not match the newest checkpoint") {
		t.Errorf("audit page after = %q, want the mismatch", got)
	}
	p.open("/saga?id=kept")
}

// TestScreenshots renders the console's main pages from the demo data at
// a desktop and a phone width: each page is accessible and, at 400 px, no
// wider than the screen. With -screenshots DIR it also writes them as PNGs
// (make screenshots, for docs/console.md).
func TestScreenshots(t *testing.T) {
	t.Parallel()
	e := newAPI(t, testkit.SQLiteURL(t), envOptions{demo: true})
	e.sequence() // as the server's loops do: the demo is logged, signed and checked
	if _, err := e.log.Check(context.Background(), true); err != nil {
		t.Fatal(err)
	}
	p := newTab(t, e)
	p.signIn("reviewer@example.com")
	pages := []struct{ name, path string }{
		{"approvals", "/"},
		{"request", "/request?saga=order-1002&seq=2"},
		{"sagas", "/sagas"},
		{"timeline", "/saga?id=order-0999"},
		{"audit", "/audit"},
		{"verify", "/audit/saga?id=order-1000"},
	}
	for _, width := range []int64{1280, 400} {
		p.do("resizing", chromedp.EmulateViewport(width, 900))
		for _, pg := range pages {
			p.open(pg.path)
			if width == 400 && !p.eval(`document.documentElement.scrollWidth <= window.innerWidth + 1`) {
				t.Errorf("%s is wider than a 400 px screen", pg.path)
			}
			if *screenshots == "" || width != 1280 {
				continue
			}
			png, err := chromedp.Run(p.ctx, chromedp.FullScreenshot(100))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(*screenshots, "console-"+pg.name+".png"), png, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// strand leaves a call of tool in saga in doubt, as a crash between its
// INTENT and its outcome would: another process's engine starts it and
// loses its database before the tool returns.
func strand(t *testing.T, dbURL, saga, tool, input string) {
	t.Helper()
	strandAs(t, dbURL, auth.Anonymous, saga, tool, input)
}

// strandAs is strand with the call asked for by p.
func strandAs(t *testing.T, dbURL string, p engine.Principal, saga, tool, input string) {
	t.Helper()
	hang(t, dbURL, nil, p, saga, tool, input)()
}

// checkpoints is a replica's checkpoint directory, which names the
// process a starting one retires.
func checkpoints(t *testing.T) *witness.Dir {
	t.Helper()
	d, err := witness.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// hang starts a call of tool in saga, asked for by p, on another
// process's engine (a runner started with the checkpoint directory
// replica, when one is given) whose tool does not return: the process is
// as good as killed mid-call. stop lets the tool return once that process
// has lost its database, so nothing of its is journaled.
func hang(t *testing.T, dbURL string, replica *witness.Dir, p engine.Principal, saga, tool, input string) (stop func()) {
	t.Helper()
	started, release := make(chan struct{}), make(chan struct{})
	exec := engine.Funcs{Exec: func(context.Context, engine.Invocation) (string, error) {
		close(started)
		<-release
		return "too late", nil
	}}
	return hangWith(t, dbURL, replica, p, saga, input, engine.Tool{Name: tool, Executor: exec}, started, release)
}

// hangWith is hang with a tool of the test's that closes started once it
// runs and returns once release is closed.
func hangWith(t *testing.T, dbURL string, replica *witness.Dir, p engine.Principal, saga, input string, tool engine.Tool,
	started <-chan struct{}, release chan struct{}) (stop func()) {
	t.Helper()
	ctx := context.Background()
	db, err := store.Open(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	e, err := engine.New(db, []engine.Tool{tool}, engine.WithKeys(testkit.Keys(t)), engine.WithOutcomeRetry(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	if replica != nil {
		if err := (&engine.Heartbeat{Engine: e, Replica: replica.Path(), Lineage: replica, Every: time.Hour}).Start(ctx); err != nil {
			t.Fatal(err)
		}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = e.Call(ctx, p, saga, tool.Name, input)
	}()
	<-started
	return func() {
		db.Close()
		close(release)
		<-done
	}
}
