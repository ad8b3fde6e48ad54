package authtest

import (
	"errors"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
)

// maxHops bounds the redirects and form posts of one sign-in, so that a
// redirect loop fails instead of hanging.
const maxHops = 20

// LoginHTTP signs a user in through the provider's login form using plain
// net/http. It GETs startURL with client, which must have a cookie jar,
// follows redirects into the provider, fills and POSTs the username/password
// form (the example OP's form at /login/username with hidden field "id"), and
// follows redirects until the next redirect target starts with stopPrefix,
// typically the relying party's callback URL. It returns that target without
// requesting it, so the caller can tamper with it or request it.
//
// It fails the test if the flow breaks, including when the provider rejects
// the password. Redirects of client are not followed by client itself: its
// CheckRedirect is ignored. Against a Rogue, which has no login form, the
// flow goes straight to the callback.
func LoginHTTP(t testing.TB, client *http.Client, startURL, stopPrefix, username, password string) string {
	t.Helper()
	target, err := login(client, startURL, stopPrefix, username, password)
	if err != nil {
		t.Fatalf("LoginHTTP(%s, user %q): %v", startURL, username, err)
	}
	return target
}

func login(client *http.Client, startURL, stopPrefix, username, password string) (string, error) {
	if client.Jar == nil {
		return "", errors.New("the client has no cookie jar; the provider keeps its login state in cookies")
	}
	c := *client
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

	req, err := http.NewRequest(http.MethodGet, startURL, nil)
	if err != nil {
		return "", err
	}
	posted := false
	for range maxHops {
		resp, err := c.Do(req)
		if err != nil {
			return "", err
		}
		body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		resp.Body.Close()
		if err != nil {
			return "", fmt.Errorf("%s %s: reading the answer: %w", req.Method, req.URL, err)
		}
		switch {
		case isRedirect(resp.StatusCode):
			loc, err := resp.Location()
			if err != nil {
				return "", fmt.Errorf("%s %s: %s without a usable Location: %w", req.Method, req.URL, resp.Status, err)
			}
			if strings.HasPrefix(loc.String(), stopPrefix) {
				return loc.String(), nil
			}
			if req, err = http.NewRequest(http.MethodGet, loc.String(), nil); err != nil {
				return "", err
			}
		case resp.StatusCode == http.StatusOK && loginForm.Match(body):
			if posted {
				// The example OP answers a failed sign-in with the form again.
				return "", fmt.Errorf("the provider rejected the sign-in: %q", formError(body))
			}
			if req, err = loginRequest(resp.Request.URL, body, username, password); err != nil {
				return "", err
			}
			posted = true
		default:
			return "", fmt.Errorf("%s %s: got %s, want a redirect or the login form; body: %.300q", req.Method, req.URL, resp.Status, body)
		}
	}
	return "", fmt.Errorf("no redirect to %s after %d hops", stopPrefix, maxHops)
}

func isRedirect(code int) bool {
	switch code {
	case http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther,
		http.StatusTemporaryRedirect, http.StatusPermanentRedirect:
		return true
	}
	return false
}

// The example OP's login page is fixed HTML rendered by html/template, so
// regular expressions are enough; attributes are always double-quoted.
var (
	loginForm = regexp.MustCompile(`(?is)<form\b[^>]*>.*\bname="password"`)
	formTag   = regexp.MustCompile(`(?is)<form\b([^>]*)>`)
	inputTag  = regexp.MustCompile(`(?is)<input\b([^>]*)>`)
	attr      = regexp.MustCompile(`(?is)\b([a-z-]+)="([^"]*)"`)
	errorPara = regexp.MustCompile(`(?is)<p style="color:\s*red[^"]*">(.*?)</p>`)
)

// loginRequest builds the POST of the login form on page, which was served
// from pageURL: every hidden input as given, plus username and password.
func loginRequest(pageURL *url.URL, page []byte, username, password string) (*http.Request, error) {
	m := formTag.FindSubmatch(page)
	if m == nil {
		return nil, errors.New("no <form> on the login page")
	}
	action := attrs(m[1])["action"]
	target, err := pageURL.Parse(action)
	if err != nil {
		return nil, fmt.Errorf("login form action %q: %w", action, err)
	}
	form := url.Values{}
	for _, in := range inputTag.FindAllSubmatch(page, -1) {
		a := attrs(in[1])
		if strings.EqualFold(a["type"], "hidden") && a["name"] != "" {
			form.Set(a["name"], a["value"])
		}
	}
	if form.Get("id") == "" {
		return nil, errors.New(`the login form has no hidden "id" (the auth request id)`)
	}
	form.Set("username", username)
	form.Set("password", password)
	req, err := http.NewRequest(http.MethodPost, target.String(), strings.NewReader(form.Encode()))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	return req, nil
}

func attrs(tag []byte) map[string]string {
	out := map[string]string{}
	for _, a := range attr.FindAllSubmatch(tag, -1) {
		out[strings.ToLower(string(a[1]))] = html.UnescapeString(string(a[2]))
	}
	return out
}

func formError(page []byte) string {
	m := errorPara.FindSubmatch(page)
	if m == nil {
		return "(no error message on the page)"
	}
	return html.UnescapeString(strings.TrimSpace(string(m[1])))
}
