package app_test

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
	"github.com/sagacity-go/sagacity/internal/testkit"
)

// The request page once it is decided: its header, what it offers and
// says, and where the focus goes, with and without scripts.

// rejectEffects is the heading of what rejecting a request does, which
// only a request waiting for a decision shows.
const rejectEffects = "What rejecting it does"

// spacedTime is a name followed by a time, with the space between.
var spacedTime = regexp.MustCompile(`reviewer@example\.com (just now|\d+s ago)`)

// focused waits until the focus is on the element sel matches, and fails
// saying where it is otherwise.
func (p *tab) focused(sel string, within time.Duration) {
	p.t.Helper()
	for end := time.Now().Add(within); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		if p.eval(`document.activeElement?.matches(` + strconv.Quote(sel) + `) === true`) {
			return
		}
	}
	got, _ := chromedp.Run(p.ctx, chromedp.Evaluate[string](`document.activeElement ? document.activeElement.tagName + "#" + document.activeElement.id : "none"`))
	p.t.Errorf("focus is on %s, want it on %s", got, sel)
}

// confirm clicks a decision's confirming button once htmx has made the
// form its own (it then moves the focus to the button): a click before
// would post the form without htmx.
func (p *tab) confirm(sel string) {
	p.t.Helper()
	p.do("waiting for "+sel, chromedp.WaitVisible(chromedp.CSS(sel)))
	p.focused(sel, 5*time.Second)
	p.click(sel)
}

// enterInReason types a reason and presses Enter in it, then checks that
// nothing was asked or decided: the page is the request, without a
// confirmation, and the saga's journal has no new entry.
func (p *tab) enterInReason(e *apiEnv, saga, page string) {
	p.t.Helper()
	before := e.get("/sagacity/audit/" + saga).body
	p.do("pressing Enter in the reason", chromedp.SendKeys(chromedp.ID("reason"), "changed my mind\r"), chromedp.Sleep(1500*time.Millisecond))
	loc, err := chromedp.Run(p.ctx, chromedp.Location())
	if err != nil {
		p.t.Fatalf("reading the location: %v", err)
	}
	if loc, _, _ = strings.Cut(loc, "#"); !strings.HasSuffix(loc, page) || p.eval(`document.querySelector('#actions input[name="confirm"]') !== null`) {
		p.t.Errorf("Enter in the reason went on to %s with actions %q; want nothing asked", loc, p.text("#actions"))
	}
	if after := e.get("/sagacity/audit/" + saga).body; after != before {
		p.t.Errorf("Enter in the reason changed the journal of %s:\n%s\nwant it as it was:\n%s", saga, after, before)
	}
}

// TestConsoleAfterDecision: with scripts, approving and executing a
// request keeps the page's header in step (and another reviewer's, by
// itself), drops what rejecting it does, says who executes it next and
// then who executed it, with the space before the time, and puts the
// focus on the new status; Enter in the reason of an approved request
// decides nothing.
func TestConsoleAfterDecision(t *testing.T) {
	t.Parallel()
	e := newAPI(t, testkit.SQLiteURL(t), envOptions{})
	e.seedScenario("ad-1")
	const page = "/request?saga=ad-1&seq=3"
	p := newTab(t, e)
	p.signIn("reviewer@example.com")
	other := p.another()
	other.signIn("bob@example.com")
	p.open(page)
	other.open(page)
	if got := p.text("#head-status"); !strings.Contains(got, "request awaiting approval") || !strings.Contains(got, "saga AWAITING_APPROVAL") {
		t.Errorf("header before a decision = %q, want the request awaiting approval", got)
	}
	if got := p.text("main"); !strings.Contains(got, rejectEffects) {
		t.Errorf("undecided request page = %q, want %q", got, rejectEffects)
	}

	p.click(`#actions button.approve`)
	p.confirm(`#actions button.approve[autofocus]`)
	p.waitText("#status", "Approved by reviewer@example.com, awaiting execution", 10*time.Second)
	p.focused("#status-h", 2*time.Second)
	if got := p.text("#head-status"); !strings.Contains(got, "request approved, awaiting execution") {
		t.Errorf("header after approving = %q, want the request approved", got)
	}
	status := p.text("#status")
	if !strings.Contains(status, "Who executes it next: the agent that started the saga (anonymous), when it resumes the request") ||
		!strings.Contains(status, "a person with the approver role, with Execute on this page") {
		t.Errorf("approved status = %q, want who executes it next", status)
	}
	if !spacedTime.MatchString(status) {
		t.Errorf("approved status = %q, want the approver and the time apart", status)
	}
	if got := p.text("main"); strings.Contains(got, rejectEffects) {
		t.Errorf("approved request page = %q, want no %q", got, rejectEffects)
	}
	other.waitText("#head-status", "request approved, awaiting execution", 15*time.Second)
	if got := other.text("main"); strings.Contains(got, rejectEffects) {
		t.Errorf("the other reviewer's page once approved = %q, want no %q", got, rejectEffects)
	}
	p.accessible("the approved request")

	// Approved, the form's first button would reject or send it back.
	p.enterInReason(e, "ad-1", page)

	p.click(`#actions button.primary`)
	p.confirm(`#actions button.primary[autofocus]`)
	p.waitText("#status", "Executed with the approved bytes", 10*time.Second)
	p.focused("#status-h", 2*time.Second)
	head := p.text("#head-status")
	if !strings.Contains(head, "request executed") || strings.Contains(head, "AWAITING_APPROVAL") {
		t.Errorf("header after executing = %q, want the request executed and the saga moved on", head)
	}
	status = p.text("#status")
	if by := regexp.MustCompile(`Executed by reviewer@example\.com (just now|\d+s ago)`); !by.MatchString(status) {
		t.Errorf("executed status = %q, want who executed it and when", status)
	}
	if strings.Contains(status, "Who executes it next") {
		t.Errorf("executed status = %q, want no word on who executes it next", status)
	}
	p.accessible("the executed request")
	p.open(page)
	if got := p.text("main"); strings.Contains(got, rejectEffects) || !strings.Contains(p.text("#head-status"), "request executed") {
		t.Errorf("executed request page = %q, want it executed and no %q", got, rejectEffects)
	}
	p.noErrors()
}

// TestConsoleAfterDecisionReject: rejecting with scripts updates the
// header, drops what rejecting does, and focuses the new status.
func TestConsoleAfterDecisionReject(t *testing.T) {
	t.Parallel()
	e := newAPI(t, testkit.SQLiteURL(t), envOptions{})
	e.seedScenario("ad-2")
	p := newTab(t, e)
	p.signIn("reviewer@example.com")
	p.open("/request?saga=ad-2&seq=3")
	p.do("typing a reason", chromedp.SendKeys(chromedp.ID("reason"), "unknown beneficiary"))
	p.click(`#actions button.reject`)
	p.confirm(`#actions button.reject[autofocus]`)
	p.waitText("#status", "Rejected by reviewer@example.com", 10*time.Second)
	p.focused("#status-h", 2*time.Second)
	head := p.text("#head-status")
	if !strings.Contains(head, "request rejected") || strings.Contains(head, "AWAITING_APPROVAL") {
		t.Errorf("header after rejecting = %q, want the request rejected and the saga moved on", head)
	}
	if got := p.text("main"); strings.Contains(got, rejectEffects) {
		t.Errorf("rejected request page = %q, want no %q", got, rejectEffects)
	}
	if got := p.text("#status"); !spacedTime.MatchString(got) {
		t.Errorf("rejected status = %q, want the reviewer and the time apart", got)
	}
	p.accessible("the rejected request")
	p.noErrors()
}

// TestConsoleAfterDecisionNoScript: without scripts, the forms post and
// the page that comes back says the same, with the focus on its status
// (the redirect names it); Enter in the reason decides nothing.
func TestConsoleAfterDecisionNoScript(t *testing.T) {
	t.Parallel()
	e := newAPI(t, testkit.SQLiteURL(t), envOptions{})
	e.seedScenario("ad-3")
	const page = "/request?saga=ad-3&seq=3"
	p := newTab(t, e)
	p.signIn("reviewer@example.com")
	if _, err := chromedp.Call(p.ctx, emulation.SetScriptExecutionDisabled, emulation.SetScriptExecutionDisabledParams{Value: true}); err != nil {
		t.Fatalf("turning scripts off: %v", err)
	}
	p.do("opening "+page, chromedp.Navigate(p.base+page))
	if p.eval(`typeof htmx !== "undefined"`) {
		t.Fatalf("htmx ran with scripts off")
	}
	p.enterInReason(e, "ad-3", page)

	p.click(`#actions button.approve`)
	p.waitText("#actions", "Approve sendWireTransfer in saga ad-3, seq 3?", 10*time.Second)
	p.click(`#actions button.approve[autofocus]`)
	p.waitText("#status", "Approved by reviewer@example.com, awaiting execution", 10*time.Second)
	p.focused("#status-h", 2*time.Second)
	if got := p.text("#head-status"); !strings.Contains(got, "request approved, awaiting execution") {
		t.Errorf("header after approving = %q, want the request approved", got)
	}
	if got := p.text("main"); strings.Contains(got, rejectEffects) {
		t.Errorf("approved request page = %q, want no %q", got, rejectEffects)
	}
	p.enterInReason(e, "ad-3", page)

	p.click(`#actions button.primary`)
	p.waitText("#actions", "Execute sendWireTransfer in saga ad-3, seq 3?", 10*time.Second)
	p.click(`#actions button.primary[autofocus]`)
	p.waitText("#status", "Executed with the approved bytes", 10*time.Second)
	p.focused("#status-h", 2*time.Second)
	if got := p.text("#head-status"); !strings.Contains(got, "request executed") {
		t.Errorf("header after executing = %q, want the request executed", got)
	}
	if got := p.text("#status"); !strings.Contains(got, "Executed by reviewer@example.com") {
		t.Errorf("executed status = %q, want who executed it", got)
	}
	// axe needs scripts: back on, they run only axe on the page as it is.
	if _, err := chromedp.Call(p.ctx, emulation.SetScriptExecutionDisabled, emulation.SetScriptExecutionDisabledParams{Value: false}); err != nil {
		t.Fatalf("turning scripts on: %v", err)
	}
	p.accessible("the executed request without scripts")
}
