package app_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/sagacity-go/sagacity/internal/mcpproxy/upstreamtest"
	"github.com/sagacity-go/sagacity/internal/testkit"
)

// suiteLog collects what every server in this package logs, and secrets
// every credential the tests handle, so TestMain can prove no token,
// cookie value, code or ID token ever reached a log line. The tool signing
// secret is one of them.
var (
	suiteLog = &testkit.Buffer{}
	secretMu sync.Mutex
	secrets  []string
)

// credential records a credential that must never be logged.
func credential(s string) {
	if len(s) < 8 {
		return
	}
	secretMu.Lock()
	defer secretMu.Unlock()
	secrets = append(secrets, s)
}

// tokenRecorder notes the tokens an OpenID provider hands out to the
// server under test (oauth2 and go-oidc use http.DefaultTransport).
type tokenRecorder struct{ base http.RoundTripper }

func (t tokenRecorder) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(r)
	if err != nil || !strings.HasSuffix(r.URL.Path, "token") {
		return resp, err
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(b))
	var tok map[string]any
	if json.Unmarshal(b, &tok) == nil {
		for _, k := range []string{"id_token", "access_token", "refresh_token"} {
			if s, ok := tok[k].(string); ok {
				credential(s)
			}
		}
	}
	return resp, err
}

func TestMain(m *testing.M) {
	upstreamtest.RunIfAsked() // the test binary is also an MCP server over stdio
	http.DefaultTransport = tokenRecorder{http.DefaultTransport}
	credential(string(secret))
	code := m.Run()
	logs := suiteLog.String()
	// A run of some tests only (-run, as make screenshots does) need not
	// handle credentials; the whole package must.
	whole := flag.Lookup("test.run").Value.String() == ""
	if code == 0 && whole && len(secrets) < 3 {
		fmt.Fprintln(os.Stderr, "log check: no credentials were recorded; the check proves nothing")
		code = 1
	}
	for _, s := range secrets {
		if strings.Contains(logs, s) {
			fmt.Fprintf(os.Stderr, "log check: a credential (%.6s…) appears in the server logs\n", s)
			code = 1
		}
	}
	if code == 0 && whole && !strings.Contains(logs, "request") {
		fmt.Fprintln(os.Stderr, "log check: the servers logged nothing; the check proves nothing")
		code = 1
	}
	os.Exit(code)
}
