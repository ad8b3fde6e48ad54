package app_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"github.com/sagacity-go/sagacity/internal/testkit"
)

// TestConsolePendingList: 120 pending requests, 50 a page. The list says
// how many wait; Next, Previous, Oldest and Newest land on the right
// rows, oldest first on every page; each row shows its requester's
// reason and is one Tab stop; at 400 px every stacked cell is labelled
// with its column and saga ids stay on one line; axe finds nothing at
// 1920 or 400 px.
func TestConsolePendingList(t *testing.T) {
	t.Parallel()
	e := newAPI(t, testkit.SQLiteURL(t), envOptions{})
	const n = 120
	// A saga id too long for a phone's width, to be cut, not wrapped.
	id := func(i int) string {
		if i == 0 {
			return "settlement-batch-2024-q3-emea-region-wire-transfers-000"
		}
		return fmt.Sprintf("pay-%03d", i)
	}
	for i := range n {
		b, _ := json.Marshal(map[string]string{"tool": "sendWireTransfer", "input": transfer, "reason": fmt.Sprintf("invoice %03d is due", i)})
		want(t, "seeding "+id(i), e.post("/sagacity/sagas/"+id(i)+"/calls", string(b)), 202)
	}
	p := newTab(t, e)
	p.do("resizing", chromedp.EmulateViewport(1920, 1000))
	p.signIn("reviewer@example.com")
	p.open("/")

	// page checks the rows shown are from..to (by seed order) and which
	// of the pager's links are offered.
	page := func(what string, from, to int, links ...string) {
		t.Helper()
		p.ready()
		p.accessible(what)
		got, err := chromedp.Run(p.ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll("#rows tbody tr code.id")].map(c => c.textContent)`))
		if err != nil {
			t.Fatal(err)
		}
		var wantIDs []string
		for i := from; i <= to; i++ {
			wantIDs = append(wantIDs, id(i))
		}
		if strings.Join(got, " ") != strings.Join(wantIDs, " ") {
			t.Errorf("%s shows %d rows %v…, want %s to %s", what, len(got), got[:min(len(got), 3)], id(from), id(to))
		}
		offered, err := chromedp.Run(p.ctx, chromedp.Evaluate[string](`[...document.querySelectorAll("nav.pager a")].map(a => a.textContent).join(", ")`))
		if want := strings.Join(links, ", "); err != nil || offered != want {
			t.Errorf("%s offers %q, want %q", what, offered, want)
		}
	}
	page("the first page", 0, 49, "Next page", "Newest")
	if got := p.text("#waiting"); got != "120 waiting, oldest first" {
		t.Errorf("the count says %q, want 120 waiting, oldest first", got)
	}
	if got := p.text("#rows tbody tr .reason"); got != "“invoice 000 is due”" && got != "invoice 000 is due" {
		t.Errorf("the first row's reason = %q, want the requester's", got)
	}
	p.click("nav.pager a.next")
	page("the second page", 50, 99, "Oldest", "Previous page", "Next page", "Newest")
	p.click("nav.pager a.next")
	page("the third page", 100, 119, "Oldest", "Previous page")
	p.click("nav.pager a.previous")
	page("back to the second page", 50, 99, "Oldest", "Previous page", "Next page", "Newest")
	p.click("nav.pager a.newest")
	page("the newest page", 70, 119, "Oldest", "Previous page")
	p.click("nav.pager a.previous")
	page("the page before the newest", 20, 69, "Oldest", "Previous page", "Next page", "Newest")
	p.click("nav.pager a.previous")
	page("the oldest requests, reached backwards", 0, 19, "Next page", "Newest")
	p.click("nav.pager a.next")
	page("forwards again", 20, 69, "Oldest", "Previous page", "Next page", "Newest")
	p.click("nav.pager a.oldest")
	page("the oldest page", 0, 49, "Next page", "Newest")

	// One Tab stop a row: the request's link, and Tab goes row to row.
	rows := `document.querySelectorAll("#rows tbody tr")`
	focusable := `#rows table :is(a[href], button, input, select, textarea, summary, [tabindex]:not([tabindex="-1"]))`
	if !p.eval(`document.querySelectorAll(` + jsString(focusable) + `).length === ` + rows + `.length`) {
		t.Errorf("the table has more Tab stops than rows")
	}
	p.do("focusing the first row", chromedp.Focus(chromedp.CSS("#rows tbody tr:first-child a")))
	for i := 1; i < 4; i++ {
		p.do("pressing Tab", chromedp.KeyEvent(kb.Tab))
		if !p.eval(rows + `[` + fmt.Sprint(i) + `].contains(document.activeElement)`) {
			t.Errorf("Tab %d does not land on row %d", i, i+1)
		}
	}
	// Words in a cell are apart: no element follows another without
	// space between.
	if !p.eval(`[...document.querySelectorAll("#rows td > *")].every(el => !el.previousSibling || el.previousSibling.nodeType !== 1)`) {
		t.Errorf("a cell glues two elements' text together")
	}
	oneLine := `[...document.querySelectorAll("#rows code.id")].every(c => c.getClientRects().length === 1 &&
		c.getBoundingClientRect().height < 1.5 * parseFloat(getComputedStyle(c).lineHeight))`
	if !p.eval(oneLine) {
		t.Errorf("at 1920 px a saga id wraps")
	}

	p.do("resizing", chromedp.EmulateViewport(400, 900))
	p.open("/")
	if !p.eval(`document.documentElement.scrollWidth <= window.innerWidth + 1`) {
		t.Errorf("the list is wider than a 400 px screen")
	}
	if !p.eval(oneLine) {
		t.Errorf("at 400 px a saga id wraps")
	}
	if !p.eval(`getComputedStyle(document.querySelector("#rows code.id")).textOverflow === "ellipsis"`) {
		t.Errorf("a long saga id is not cut with an ellipsis")
	}
	// Each stacked cell shows its column's heading above it.
	labels, err := chromedp.Run(p.ctx, chromedp.Evaluate[string](`(() => {
		const heads = [...document.querySelectorAll("#rows thead th")].map(th => th.textContent);
		const bad = [];
		document.querySelectorAll("#rows tbody tr").forEach(tr => [...tr.cells].forEach((td, i) => {
			const b = getComputedStyle(td, "::before");
			if (getComputedStyle(td).display !== "block" || b.display === "none" || b.content !== JSON.stringify(heads[i])) bad.push(i + ":" + b.content);
		}));
		return bad.slice(0, 5).join(", ");
	})()`))
	if err != nil || labels != "" {
		t.Errorf("at 400 px stacked cells lack their column's label: %s %v", labels, err)
	}
	p.noErrors()
}

// jsString quotes s as a JavaScript string.
func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
