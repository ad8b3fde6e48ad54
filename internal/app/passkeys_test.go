package app_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/webauthn"
	"github.com/chromedp/chromedp"
	"github.com/sagacity-go/sagacity/internal/engine"
	"github.com/sagacity-go/sagacity/internal/testkit"
	"github.com/sagacity-go/sagacity/web/templates"
	"github.com/sagacity-go/sagacity/wire"
)

// Passkey votes in a real headless Chromium, each person's passkey in a
// DevTools virtual authenticator that verifies its user.

// passkeyTab is a browser tab, with cookies of its own, on the origin
// passkeys are bound to (localhost, not 127.0.0.1), and a virtual
// authenticator.
func passkeyTab(t *testing.T, first *tab) (*tab, webauthn.AuthenticatorID) {
	t.Helper()
	p := first.another()
	p.base = strings.Replace(p.base, "127.0.0.1", "localhost", 1)
	if _, err := chromedp.Call(p.ctx, webauthn.Enable, webauthn.EnableParams{}); err != nil {
		t.Fatalf("WebAuthn.enable: %v", err)
	}
	r, err := chromedp.Call(p.ctx, webauthn.AddVirtualAuthenticator, webauthn.AddVirtualAuthenticatorParams{
		Options: &webauthn.VirtualAuthenticatorOptions{Protocol: webauthn.AuthenticatorProtocolCtap2,
			Ctap2version: webauthn.Ctap2versionCtap21, Transport: webauthn.AuthenticatorTransportInternal, HasResidentKey: true,
			HasUserVerification: true, IsUserVerified: true, AutomaticPresenceSimulation: true}})
	if err != nil {
		t.Fatalf("WebAuthn.addVirtualAuthenticator: %v", err)
	}
	return p, r.AuthenticatorID
}

// override makes the tab's authenticator answer with a zeroed signature,
// or without user verification, from now on; neither resets it.
func (p *tab) override(id webauthn.AuthenticatorID, bogusSignature, badUV bool) {
	p.t.Helper()
	if _, err := chromedp.Call(p.ctx, webauthn.SetResponseOverrideBits, webauthn.SetResponseOverrideBitsParams{
		AuthenticatorID: id, IsBogusSignature: &bogusSignature, IsBadUV: &badUV}); err != nil {
		p.t.Fatalf("WebAuthn.setResponseOverrideBits: %v", err)
	}
}

// enrol adds a passkey on /me, and returns its credential id.
func (p *tab) enrol() string {
	p.t.Helper()
	p.open("/me")
	p.click(`[data-passkey-enrol]`)
	p.waitText("#passkeys", "counts", 15*time.Second)
	p.ready()
	p.accessible("/me with a passkey")
	id, err := chromedp.Run(p.ctx, chromedp.Evaluate[string](`document.querySelector("#passkeys tbody code").title`))
	if err != nil {
		p.t.Fatal(err)
	}
	return id
}

// ballot opens a request, types a reason and asks to approve it, up to
// the passkey's ballot, which the page has checked against its bytes.
func (p *tab) ballot(saga string, seq int64, reason string) {
	p.t.Helper()
	p.open(templates.RequestHref(saga, seq))
	p.do("typing a reason", chromedp.SendKeys(chromedp.ID("reason"), reason))
	p.click(`#actions button.approve`)
	p.waitText("#actions", "It is the one the ballot names", 10*time.Second)
}

// capture records the body of the next fetch the page makes, for the
// tab's later pages too; hold keeps it from being sent.
func (p *tab) capture(hold bool) {
	p.t.Helper()
	p.eval(`(() => { sessionStorage.removeItem("posted"); const send = window.fetch;
		window.fetch = (url, o) => { sessionStorage.setItem("posted", o.body); return ` +
		map[bool]string{true: `new Promise(() => {})`, false: `send(url, o)`}[hold] + `; };
		return true; })()`)
}

// captured is the body the page posted, waiting for it a while.
func (p *tab) captured() string {
	p.t.Helper()
	var s string
	var err error
	for range 100 {
		if s, err = chromedp.Run(p.ctx, chromedp.Evaluate[string](`sessionStorage.getItem("posted") || ""`)); err == nil && s != "" {
			return s
		}
		time.Sleep(50 * time.Millisecond)
	}
	p.t.Fatalf("the page posted nothing: %v", err)
	return ""
}

// post posts body to path from the page, as its scripts would, and
// returns the status and the answer's message.
func (p *tab) post(path, contentType, body string) string {
	p.t.Helper()
	b, _ := json.Marshal(body)
	got, err := chromedp.Run(p.ctx, chromedp.Evaluate[string](`fetch(`+quote(path)+`, {method: "POST", headers: {"Content-Type": `+quote(contentType)+`},
		body: `+string(b)+`}).then(async r => r.status + " " + ((await r.json().catch(() => ({}))).error || ""))`, chromedp.EvalAwaitPromise))
	if err != nil {
		p.t.Fatalf("posting to %s: %v", path, err)
	}
	return got
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// TestConsolePasskeys: under a rule that counts only votes signed with
// the voter's passkey, the API cannot vote; people enrol passkeys on /me
// and vote on a request page, which hashes the bytes it shows before the
// passkey signs; a bogus signature, an assertion without user
// verification, a replayed answer, an answer to another request's
// challenge and a removed key are each refused with a message, and count
// for nothing; the tool runs once the quorum of two signed votes is met,
// and the saga's export carries the two passkeys' enrolments.
func TestConsolePasskeys(t *testing.T) {
	t.Parallel()
	policy := compile(t, engine.PolicySpec{Default: []engine.RuleSpec{{Name: "signed", Quorum: 2, Passkey: engine.PasskeyRequired}}})
	e := newAPI(t, testkit.SQLiteURL(t), envOptions{approvals: policy})
	e.seedScenario("pk")
	e.seedScenario("pk-other")
	wired := func() bool { return strings.Contains(strings.Join(e.tools.paths(), " "), "/wire") }
	// The API cannot vote under this rule, and says where to.
	for _, verb := range []string{"approve", "reject", "request-changes"} {
		r := e.post("/sagacity/"+verb+"/pk/3", `{"approver":"dave@example.com","reason":"ok"}`)
		if r.code != 403 || r.json(t)["code"] != "PASSKEY" || !strings.Contains(r.body, "vote in the console") {
			t.Errorf("POST %s = %d %s; want 403 PASSKEY, vote in the console", verb, r.code, r.body)
		}
	}
	first := newTab(t, e)

	alice, _ := passkeyTab(t, first)
	alice.signIn("alice@example.com")
	alice.open(templates.RequestHref("pk", 3))
	if got := alice.text("#actions"); !strings.Contains(got, "counts a vote only signed with your own passkey, and you have none") {
		t.Errorf("before enrolling, the actions = %q; want to be told to add a passkey", got)
	}
	alice.enrol()
	alice.ballot("pk", 3, "matches invoice 7")
	if got := alice.text("#actions"); !strings.Contains(got, "payload-sha256: "+engine.PayloadHash(transfer)) ||
		!strings.Contains(got, "rule: signed") || !strings.Contains(got, "voter: alice@example.com") {
		t.Errorf("the ballot = %q; want the payload's hash, the rule and the voter", got)
	}
	alice.accessible("the passkey ballot")
	alice.capture(false)
	alice.click(`[data-passkey-sign]`)
	alice.waitText("#status", "1 of 2", 15*time.Second)
	alice.noErrors()

	// Replayed: the same answer again finds its ceremony taken.
	if got := alice.post("/request/passkey", "application/json", alice.captured()); !strings.HasPrefix(got, "404 ") ||
		!strings.Contains(got, "answered already") {
		t.Errorf("the replayed answer = %q; want 404, answered already", got)
	}

	bob, bobKey := passkeyTab(t, first)
	bob.signIn("bob@example.com")
	bob.enrol()
	refused := func(p *tab, what, want string) {
		t.Helper()
		if want != "" {
			p.waitText("#actions [data-passkey-status]", want, 15*time.Second)
			p.accessible(what)
		}
		p.open(templates.RequestHref("pk", 3))
		if got := p.text("#status"); !strings.Contains(got, "1 of 2") {
			t.Errorf("after %s, the status = %q; want it still 1 of 2", what, got)
		}
		if wired() {
			t.Fatalf("after %s, the wire ran", what)
		}
	}
	bob.override(bobKey, true, false)
	bob.ballot("pk", 3, "ok")
	bob.click(`[data-passkey-sign]`)
	refused(bob, "a bogus signature", "does not count: the passkey's assertion does not verify: Error validating the assertion signature")

	bob.override(bobKey, false, true)
	bob.ballot("pk", 3, "ok")
	bob.click(`[data-passkey-sign]`)
	refused(bob, "no user verification", "does not count: the passkey's assertion does not verify: Error validating the authenticator response: User verification required")
	bob.override(bobKey, false, false)

	// Another request's challenge: bob's passkey signs his ballot on
	// pk-other (held back), which is then cast for pk.
	bob.ballot("pk-other", 3, "ok")
	bob.capture(true)
	bob.click(`[data-passkey-sign]`)
	var other struct {
		Ceremony   string          `json:"ceremony"`
		Credential json.RawMessage `json:"credential"`
	}
	if err := json.Unmarshal([]byte(bob.captured()), &other); err != nil {
		t.Fatal(err)
	}
	bob.ballot("pk", 3, "ok")
	ceremony, err := chromedp.Run(bob.ctx, chromedp.Evaluate[string](`document.querySelector("[data-passkey-vote]").dataset.ceremony`))
	if err != nil {
		t.Fatal(err)
	}
	swapped, _ := json.Marshal(map[string]any{"ceremony": ceremony, "credential": other.Credential})
	if got := bob.post("/request/passkey", "application/json", string(swapped)); !strings.HasPrefix(got, "403 ") ||
		!strings.Contains(got, "does not count: the passkey's assertion does not verify: Error validating challenge") {
		t.Errorf("an answer to pk-other's challenge cast for pk = %q; want 403, does not count", got)
	}
	refused(bob, "another request's challenge", "")

	// A removed key: carol's ballot is begun, then her passkey removed.
	carol, _ := passkeyTab(t, first)
	carol.signIn("carol@example.com")
	key := carol.enrol()
	carol.ballot("pk", 3, "ok")
	if got := carol.post("/me/passkeys/remove", "application/x-www-form-urlencoded", "credential="+key); !strings.HasPrefix(got, "200") {
		t.Fatalf("removing carol's passkey = %q", got)
	}
	carol.click(`[data-passkey-sign]`)
	refused(carol, "a removed passkey", "does not count: the passkey is not one of yours, or it was removed")
	carol.open("/me")
	if got := carol.text("#passkeys"); !strings.Contains(got, "removed") {
		t.Errorf("carol's passkeys = %q; want hers shown removed", got)
	}

	// Bob's good vote meets the quorum; the tool runs once executed.
	bob.ballot("pk", 3, "matches PO 12")
	bob.click(`[data-passkey-sign]`)
	bob.waitText("#status", "Approved by alice@example.com, bob@example.com", 15*time.Second)
	bob.click(`#actions button.primary`)
	bob.waitText("#actions", "Execute sendWireTransfer in saga pk, seq 3?", 10*time.Second)
	bob.click(`#actions button.primary[autofocus]`)
	bob.waitText("#status", "Executed with the approved bytes", 10*time.Second)
	var wires int
	for _, r := range e.tools.requests() {
		if r.Path == "/wire" {
			wires++
		}
	}
	if wires != 1 {
		t.Errorf("the wire ran %d times, want once", wires)
	}
	// The server's verification checks each vote's assertion; an export
	// with proofs carries the enrolments of the two passkeys that voted.
	if r := e.get("/sagacity/audit/pk/verify"); r.code != 200 || r.json(t)["valid"] != true {
		t.Errorf("verifying pk = %d %s", r.code, r.body)
	}
	if _, err := e.log.Sequence(t.Context(), true); err != nil {
		t.Fatal(err)
	}
	export := e.get("/sagacity/audit/pk?proofs=latest")
	var enrolled []string
	for l := range strings.Lines(export.body) {
		var line struct{ Passkey *wire.Entry }
		if json.Unmarshal([]byte(l), &line) == nil && line.Passkey != nil {
			enrolled = append(enrolled, line.Passkey.Input)
		}
	}
	if export.code != 200 || len(enrolled) != 2 || !strings.Contains(enrolled[0], `"identity":"alice@example.com"`) ||
		!strings.Contains(enrolled[1], `"identity":"bob@example.com"`) {
		t.Errorf("the export of pk = %d with passkey lines %q; want alice's and bob's enrolments", export.code, enrolled)
	}
}

// TestConsolePasskeyFallbacks: a page on another address than passkeys
// are bound to, a browser without WebAuthn and a prompt that does not
// verify the person (as a cancelled one) each get a message, and nothing
// is added or voted; the person may try the prompt again.
func TestConsolePasskeyFallbacks(t *testing.T) {
	t.Parallel()
	policy := compile(t, engine.PolicySpec{Default: []engine.RuleSpec{{Name: "signed", Quorum: 2, Passkey: engine.PasskeyRequired}}})
	e := newAPI(t, testkit.SQLiteURL(t), envOptions{approvals: policy})
	e.seedScenario("pk")
	origin := strings.Replace(e.url, "127.0.0.1", "localhost", 1)

	elsewhere := newTab(t, e)
	elsewhere.signIn("alice@example.com")
	elsewhere.open("/me")
	elsewhere.click(`[data-passkey-enrol]`)
	elsewhere.waitText("#passkeys [data-passkey-status]", "Passkeys work on "+origin+": open this page there. No passkey was added.", 5*time.Second)

	bare := elsewhere.another()
	bare.base = origin
	if _, err := chromedp.Call(bare.ctx, page.AddScriptToEvaluateOnNewDocument,
		page.AddScriptToEvaluateOnNewDocumentParams{Source: `delete window.PublicKeyCredential`}); err != nil {
		t.Fatal(err)
	}
	bare.signIn("bob@example.com")
	bare.open("/me")
	bare.click(`[data-passkey-enrol]`)
	bare.waitText("#passkeys [data-passkey-status]", "This browser cannot use passkeys (it has no WebAuthn here). No passkey was added.", 5*time.Second)
	bare.accessible("/me without WebAuthn")

	carol, key := passkeyTab(t, elsewhere)
	carol.signIn("carol@example.com")
	carol.enrol()
	carol.ballot("pk", 3, "ok")
	verified := func(yes bool) {
		t.Helper()
		if _, err := chromedp.Call(carol.ctx, webauthn.SetUserVerified, webauthn.SetUserVerifiedParams{AuthenticatorID: key, IsUserVerified: yes}); err != nil {
			t.Fatal(err)
		}
	}
	verified(false)
	carol.click(`[data-passkey-sign]`)
	carol.waitText("#actions [data-passkey-status]", "The passkey prompt was cancelled or timed out: nothing was voted.", 15*time.Second)
	carol.accessible("a cancelled passkey prompt")
	if got := carol.text("#status"); !strings.Contains(got, "Undecided") || strings.Contains(got, "1 of 2") {
		t.Errorf("after a cancelled prompt, the status = %q; want no vote", got)
	}
	verified(true)
	carol.click(`[data-passkey-sign]`)
	carol.waitText("#status", "1 of 2", 15*time.Second)
}
