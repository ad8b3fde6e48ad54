package server_test

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
)

// suiteLog collects what every server in this package logs, and secrets
// every credential the tests handle, so TestMain can prove no token,
// cookie value, code or ID token ever reached a log line. The tool signing
// secret is one of them.
var (
	suiteLog = &lockedWriter{w: &bytes.Buffer{}}
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

func TestMain(m *testing.M) {
	credential(string(secret))
	code := m.Run()
	logs := suiteLog.w.(*bytes.Buffer).String()
	if code == 0 && len(secrets) < 3 {
		fmt.Fprintln(os.Stderr, "log check: no credentials were recorded; the check proves nothing")
		code = 1
	}
	for _, s := range secrets {
		if strings.Contains(logs, s) {
			fmt.Fprintf(os.Stderr, "log check: a credential (%.6s…) appears in the server logs\n", s)
			code = 1
		}
	}
	if code == 0 && !strings.Contains(logs, "request") {
		fmt.Fprintln(os.Stderr, "log check: the servers logged nothing; the check proves nothing")
		code = 1
	}
	os.Exit(code)
}
