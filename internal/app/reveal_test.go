package app_test

import (
	"net/url"
	"strings"
	"testing"

	"github.com/sagacity-go/sagacity/internal/engine"
	"github.com/sagacity-go/sagacity/internal/testkit"
)

// TestConsoleRevealsPayloads: every payload the console shows, in full,
// summarised or compared, holds a bidi control only made visible (the
// view models carry revealed text; templates never reveal it): the
// request page's steps, what a rejection undoes, the saga's other
// requests and the diff against the earlier proposal, a rejection's
// confirmation, and the pending list.
func TestConsoleRevealsPayloads(t *testing.T) {
	t.Parallel()
	e := newAPI(t, testkit.SQLiteURL(t), envOptions{})
	want(t, "reserve", e.call("bidi", "reserveInventory", "{\"item\":\"lap\u202Etop\"}"), 200)
	want(t, "wire", e.call("bidi", "sendWireTransfer", "{\"amount\":\"100\",\"to\":\"alice\u202Eeilla\"}"), 202)
	again := "{\"amount\":\"100\",\"to\":\"bob\u202Ebob\"}"
	want(t, "wire again", e.call("bidi", "sendWireTransfer", again), 202)
	c := e.session(t, "reviewer@example.com")
	get := func(path string) response { return e.do("GET", path, "", "", "Cookie", c.Name+"="+c.Value) }
	confirm := e.do("POST", "/request/decide", "application/x-www-form-urlencoded",
		url.Values{"saga": {"bidi"}, "seq": {"4"}, "hash": {engine.PayloadHash(again)}, "decision": {"reject"}}.Encode(),
		"Cookie", c.Name+"="+c.Value, "Origin", e.url)
	// At least: the page's exact and pretty bytes, the diff's two values,
	// the sibling's summary, the step a rejection undoes and the earlier
	// steps; the confirmation adds its summary and what it undoes and
	// drops; the list, each request's summary.
	for _, p := range []struct {
		name  string
		r     response
		least int
	}{{"the request page", get("/request?saga=bidi&seq=4"), 9}, {"the confirmation", confirm, 12}, {"the pending list", get("/"), 2}} {
		shown := strings.Count(p.r.body, `>U+202E<`)
		if raw := strings.ContainsRune(p.r.body, '\u202E'); p.r.code != 200 || raw || shown < p.least {
			t.Errorf("%s = %d, the control revealed %d times, raw %v; want 200, revealed at least %d times, never raw:\n%s",
				p.name, p.r.code, shown, raw, p.least, p.r.body)
		}
	}
}
