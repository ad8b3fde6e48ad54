package authtest

import (
	"context"
	"os"
	"strings"
	"sync"
	"testing"

	jsonv2 "github.com/chromedp/cdproto/cdp/jsonv2"
	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// chromium is where Debian's package puts the browser.
const chromium = "/usr/bin/chromium"

// Browser returns a chromedp context driving a fresh headless Chromium with
// its own profile directory; the browser is stopped at t's cleanup. Derive
// timeouts from the returned context; never start it with one, because the
// first action binds the browser's lifetime to its context.
//
// Without /usr/bin/chromium the test is skipped, unless the CI environment
// variable is set: then it fails, so that CI never silently skips a browser
// test. Console errors of the page are collected; see ConsoleErrors.
func Browser(t testing.TB) context.Context {
	t.Helper()
	if _, err := os.Stat(chromium); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("Browser: %v (CI is set, so browser tests must run)", err)
		}
		t.Skipf("Browser: %s not found; skipping browser test", chromium)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium),
		chromedp.NoSandbox, // tests run as root in CI containers
		chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.WindowSize(1280, 900),
		chromedp.UserDataDir(t.TempDir()),
	)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	errs := &consoleErrors{}
	ctx, cancel := chromedp.NewContext(allocCtx, chromedp.WithListener(errs.record))
	ctx = context.WithValue(ctx, consoleKey{}, errs)
	// Registered after t.TempDir's removal, so it runs first: the browser
	// stops before its profile directory goes.
	t.Cleanup(func() {
		cancel()
		cancelAlloc()
	})
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("Browser: starting %s: %v", chromium, err)
	}
	return ctx
}

// ConsoleErrors returns, in order, everything logged at level "error" so far
// by pages in the tab of ctx, which must come from Browser (or be derived
// from it): console.error and console.assert calls, uncaught exceptions, and
// browser log entries such as Content Security Policy violations and failed
// resource loads (a 404 favicon.ico counts). Chromium 156 words a CSP
// violation "Executing inline script violates the following Content Security
// Policy directive ..."; older versions said "Refused to execute ...", so
// match on "violates the following Content Security Policy directive".
// Each entry is the message text, followed by " (URL)" when the browser
// reports where it came from. Tabs opened with a new chromedp.NewContext are
// not covered.
func ConsoleErrors(ctx context.Context) []string {
	errs, ok := ctx.Value(consoleKey{}).(*consoleErrors)
	if !ok {
		// A nil answer would let "no console errors" checks pass vacuously.
		panic("authtest.ConsoleErrors: the context does not come from authtest.Browser")
	}
	errs.mu.Lock()
	defer errs.mu.Unlock()
	return append([]string(nil), errs.msgs...)
}

type consoleKey struct{}

type consoleErrors struct {
	mu   sync.Mutex
	msgs []string
}

// record runs on chromedp's read loop (see chromedp.Listen), before the
// command that follows an event returns; so it must be quick and never call
// back into the browser.
func (c *consoleErrors) record(ev any) {
	var text, where string
	switch e := ev.(type) {
	case *runtime.EventConsoleAPICalled:
		if e.Type != runtime.ConsoleAPICalledTypeError && e.Type != runtime.ConsoleAPICalledTypeAssert {
			return
		}
		text = argsText(e.Args)
		if st := e.StackTrace; st != nil && len(st.CallFrames) > 0 {
			where = st.CallFrames[0].URL
		}
	case *runtime.EventExceptionThrown:
		d := e.ExceptionDetails
		if d == nil {
			return
		}
		text = d.Text
		if d.Exception != nil && d.Exception.Description != "" {
			// The description is the error with its stack; keep the error.
			desc, _, _ := strings.Cut(d.Exception.Description, "\n")
			text += " " + desc
		}
		where = d.URL
	case *log.EventEntryAdded:
		if e.Entry == nil || e.Entry.Level != log.EntryLevelError {
			return
		}
		text, where = e.Entry.Text, e.Entry.URL
	default:
		return
	}
	if where != "" {
		text += " (" + where + ")"
	}
	c.mu.Lock()
	c.msgs = append(c.msgs, text)
	c.mu.Unlock()
}

// argsText renders console arguments roughly as DevTools does.
func argsText(args []*runtime.RemoteObject) string {
	parts := make([]string, 0, len(args))
	for _, a := range args {
		var s string
		switch {
		case a.Type == runtime.RemoteObjectTypeString && jsonv2.Unmarshal(a.Value, &s) == nil:
		case a.Description != "":
			s = a.Description
		case len(a.Value) > 0:
			s = string(a.Value)
		case a.UnserializableValue != "":
			s = string(a.UnserializableValue)
		default:
			s = string(a.Type)
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, " ")
}
