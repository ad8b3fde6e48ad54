package notify

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode"
)

// What the HTTP channels (webhooks, Slack, PagerDuty) share: a client
// that follows no redirect and gives up in time, and bounded excerpts of
// the answers they report.

// clock is now's time, or time.Now's when now is nil.
func clock(now func() time.Time) time.Time {
	if now == nil {
		return time.Now()
	}
	return now()
}

// defaultClient sends for channels given no client.
var defaultClient = &http.Client{Timeout: 10 * time.Second}

// postJSON posts body, JSON, to u with c (nil means defaultClient) and
// h's headers, following no redirect. A 2xx is nil; any other answer a
// *Failure, a 3xx Permanent; no answer a plain error.
func postJSON(ctx context.Context, c *http.Client, u string, body []byte, h http.Header, now time.Time) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(body))
	if err != nil {
		return &Failure{Permanent: true, Err: err}
	}
	for k, v := range h {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "Sagacity")
	if c == nil {
		c = defaultClient
	}
	nc := *c
	nc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := nc.Do(req)
	if err != nil {
		// Without the URL, which may hold a token.
		if ue, ok := errors.AsType[*url.Error](err); ok {
			return fmt.Errorf("%s: %w", ue.Op, ue.Err)
		}
		return err
	}
	defer resp.Body.Close()
	// Read whatever the status, so that a short answer's connection is
	// kept.
	text := excerpt(resp.Body)
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return nil
	}
	f := HTTPFailure(resp.StatusCode, resp.Header.Get("Retry-After"), text, now)
	if resp.StatusCode >= 300 && resp.StatusCode < 400 {
		f.Permanent = true
	}
	return f
}

// excerptBytes is the most of an answer's body a Failure shows.
const excerptBytes = 512

// excerpt is the start of an answer's body, for the operator: at most
// excerptBytes of it (what came before a read error), as valid UTF-8,
// on one line.
func excerpt(r io.Reader) string {
	b, _ := io.ReadAll(io.LimitReader(r, excerptBytes))
	s := strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, strings.ToValidUTF8(string(b), "\uFFFD"))
	return strings.Join(strings.Fields(s), " ")
}
