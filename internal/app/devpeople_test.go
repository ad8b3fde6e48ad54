package app_test

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/google/go-cmp/cmp"
	"github.com/sagacity-go/sagacity/internal/demo"
	"github.com/sagacity-go/sagacity/internal/engine"
	"github.com/sagacity-go/sagacity/internal/testkit"
)

// signInAs signs a demo person in with one click on the dev sign-in page.
func (p *tab) signInAs(id string) {
	p.t.Helper()
	p.open("/login")
	p.do("signing in as "+id, chromedp.Click(chromedp.CSS(`#people form:has(input[name="name"][value="`+id+`"]) button`)),
		chromedp.WaitVisible(chromedp.ID("who")))
	p.ready()
}

// list joins the trimmed text of every element sel finds with commas.
func (p *tab) list(sel string) string {
	p.t.Helper()
	s, err := chromedp.Run(p.ctx, chromedp.Evaluate[string](`[...document.querySelectorAll(`+"`"+sel+"`"+`)].map(e => e.textContent.trim()).join(",")`))
	if err != nil {
		p.t.Fatalf("listing %s: %v", sel, err)
	}
	return s
}

// TestConsoleDevPeople: in dev mode with the demo data, the sign-in page
// offers the demo's people (those the README names); each signs in with
// exactly their roles and sees what the engine lets those roles see. The
// approver-only person votes (journaled auth=dev); the auditor-only one
// is offered no decision, and a vote posted anyway is the engine's 403;
// the agent sees only the sagas. A typed name signs in with the roles
// ticked, and none ticked is refused without a session.
func TestConsoleDevPeople(t *testing.T) {
	t.Parallel()
	var readme []engine.Principal
	for l := range strings.SplitSeq(strings.TrimSpace(testkit.ReadmeBlock(t, "demo people")), "\n") {
		f := strings.Fields(l)
		roles, err := engine.ParseRoles(f[1:])
		if err != nil {
			t.Fatalf("README demo person %q: %v", l, err)
		}
		readme = append(readme, engine.Principal{ID: f[0], Roles: roles})
	}
	if diff := cmp.Diff(demo.People, readme); diff != "" {
		t.Errorf("the README's demo people differ from demo.People (-demo +README):\n%s", diff)
	}

	e := newAPI(t, testkit.SQLiteURL(t), envOptions{demo: true})
	p := newTab(t, e)
	p.open("/login")
	var offered []string
	for _, d := range demo.People {
		offered = append(offered, "Sign in as "+d.ID)
	}
	if got := p.list("#people button"); got != strings.Join(offered, ",") {
		t.Errorf("the sign-in page offers %q, want %q", got, strings.Join(offered, ","))
	}

	// The approver alone: the pending list, and a vote.
	p.signInAs("approver@example.com")
	if got := p.list("#who .role"); got != "approver" {
		t.Errorf("approver@example.com signed in with roles %q, want approver alone", got)
	}
	if got := p.list("header nav a"); !strings.Contains(got, "Pending approvals") {
		t.Errorf("approver's header = %q, want Pending approvals", got)
	}
	p.open("/request?saga=" + demo.Seeded + "&seq=3")
	p.do("typing a reason", chromedp.SendKeys(chromedp.ID("reason"), "tried without an identity provider"))
	p.click(`#actions button.approve`)
	p.waitText("#actions", "Approve sendWireTransfer in saga "+demo.Seeded+", seq 3?", 10*time.Second)
	p.click(`#actions button.approve[autofocus]`)
	p.waitText("#status", "Approved by approver@example.com", 10*time.Second)
	if audit := e.get("/sagacity/audit/" + demo.Seeded).body; !strings.Contains(audit,
		`"payload":"approver=approver@example.com\nreason=tried without an identity provider\nauth=dev\nreceipt=`) {
		t.Errorf("journal = %s, want APPROVED by approver@example.com with auth=dev", audit)
	}

	// The auditor alone: reads and verifies, decides nothing.
	a := p.another()
	a.signInAs("auditor@example.com")
	if got := a.list("#who .role"); got != "auditor" {
		t.Errorf("auditor@example.com signed in with roles %q, want auditor alone", got)
	}
	if got := a.list("header nav a"); !strings.Contains(got, "Audit") || !strings.Contains(got, "Sagas") {
		t.Errorf("auditor's header = %q, want Audit and Sagas", got)
	}
	a.open("/audit")
	a.open("/request?saga=order-1002&seq=2")
	if a.eval(`document.querySelector("#actions button") !== null`) {
		t.Errorf("the auditor is offered a decision: %q", a.text("#actions"))
	}
	hash := engine.PayloadHash(`{"amount":"2500.00","to":"bob"}`)
	got, err := chromedp.Run(a.ctx, chromedp.Evaluate[string](`fetch("/request/decide", {method: "POST", body: new URLSearchParams(
		{saga: "order-1002", seq: "2", hash: "`+hash+`", decision: "approve", confirm: "yes"})}).then(async r => r.status + " " + await r.text())`,
		chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(got, "403 ") || !strings.Contains(got, "approving needs the approver role") {
		t.Errorf("the auditor's vote posted anyway = %.300q, want the engine's 403", got)
	}
	if audit := e.get("/sagacity/audit/order-1002").body; strings.Contains(audit, `"phase":"APPROVED"`) {
		t.Errorf("order-1002 after the auditor's vote = %s, want nothing approved", audit)
	}

	// The agent alone: its own sagas, nothing to review or verify.
	g := p.another()
	g.signInAs("demo-agent")
	if got := g.list("header nav a"); got != "Sagas" {
		t.Errorf("demo-agent's header = %q, want Sagas alone", got)
	}

	// A typed name, with the roles ticked.
	d := p.another()
	d.open("/login")
	d.do("signing in as dana, auditor", chromedp.SendKeys(chromedp.ID("name"), "dana@example.com"),
		chromedp.Click(chromedp.CSS(`#roles input[value="agent"]`)), chromedp.Click(chromedp.CSS(`#roles input[value="approver"]`)),
		chromedp.Click(chromedp.CSS(`form.signin button[type="submit"]`)), chromedp.WaitVisible(chromedp.ID("who")))
	d.ready()
	if got := d.list("#who .role"); got != "auditor" {
		t.Errorf("dana signed in with roles %q, want auditor alone", got)
	}
	d.open("/me")

	// No role ticked: refused, and no session.
	n := p.another()
	n.open("/login")
	untick := []chromedp.Action[chromedp.Void]{chromedp.SendKeys(chromedp.ID("name"), "nobody@example.com")}
	for _, r := range engine.Roles {
		untick = append(untick, chromedp.Click(chromedp.CSS(`#roles input[value="`+string(r)+`"]`)))
	}
	n.do("signing in with no role", append(untick, chromedp.Click(chromedp.CSS(`form.signin button[type="submit"]`)))...)
	n.waitText("main", "choose at least one role to sign in", 10*time.Second)
	n.accessible("the refused sign-in")
	n.do("opening /", chromedp.Navigate(n.base+"/"))
	n.ready()
	if !n.eval(`location.pathname === "/login" && document.getElementById("who") === null`) {
		t.Errorf("after a refused sign-in / shows %q, want the sign-in page", n.text("main"))
	}
	p.noErrors()
}

// TestLoginRoles: dev sign-in takes the roles posted with it, at least
// one and each a role, and starts no session otherwise.
func TestLoginRoles(t *testing.T) {
	t.Parallel()
	e := newAPI(t, testkit.SQLiteURL(t), envOptions{})
	for _, tt := range []struct{ name, body, want string }{
		{"no role", form("name", "erin"), "choose at least one role to sign in"},
		{"unknown role", form("name", "erin") + "&role=root", "is not one of agent, approver, auditor"},
		{"one unknown among roles", form("name", "erin") + "&role=approver&role=admin", "is not one of agent, approver, auditor"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := e.do("POST", "/login", formType, tt.body)
			if r.code != 400 || !strings.Contains(r.body, tt.want) || cookie(r, "sagacity") != nil {
				t.Errorf("POST /login %s = %d, cookie %v; want 400 saying %q and no session:\n%s", tt.body, r.code, cookie(r, "sagacity"), tt.want, r.body)
			}
		})
	}
	r := e.do("POST", "/login", formType, form("name", "erin")+"&role=auditor")
	c := cookie(r, "sagacity")
	if r.code != 303 || c == nil {
		t.Fatalf("sign-in as an auditor = %d, want 303 and a session", r.code)
	}
	credential(c.Value)
	page := e.do("GET", "/me", "", "", "Cookie", c.String())
	if !strings.Contains(page.body, `<span class="role">auditor</span>`) || strings.Contains(page.body, `<span class="role">approver</span>`) {
		t.Errorf("/me as erin = %d, roles %q; want the auditor role alone", page.code, regexp.MustCompile(`<span class="role">[^<]*</span>`).FindAllString(page.body, -1))
	}
}
