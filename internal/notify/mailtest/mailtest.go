// Package mailtest runs a real SMTP server for tests: Mailpit, the
// version go.mod pins as a tool, on free loopback ports, keeping nothing
// outside the test's temporary directory; and reads back, through its
// REST API, the mails it took.
package mailtest

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/mail"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// Mailpit is a running Mailpit. It takes any mail, with or without AUTH
// (any username and password, without TLS too), and offers no STARTTLS.
type Mailpit struct {
	// SMTP is its SMTP server, host:port.
	SMTP string
	// API is the base URL of its web UI and REST API.
	API string
}

// Message is a mail Mailpit took.
type Message struct {
	// ID is Mailpit's id of the mail.
	ID string
	// MessageID, InReplyTo and References are those fields, as sent
	// ("<…>"); AutoSubmitted is Auto-Submitted's.
	MessageID, InReplyTo, References, AutoSubmitted string
	// Subject is the subject, decoded.
	Subject string
	// From and To are the header's addresses.
	From string
	To   []string
	// Text is the text body, decoded.
	Text string
	// Header holds every header field as sent, encoded words and all.
	Header mail.Header
}

// binaryEnv names the variable that holds the path of a mailpit binary
// already built from the version go.mod pins (make test builds one), so
// that each test process need not build it again.
const binaryEnv = "SAGACITY_TEST_MAILPIT"

// binary is the path of the mailpit go.mod pins: binaryEnv's, or built
// once a process when it is unset.
var binary = sync.OnceValues(func() (string, error) {
	if bin := os.Getenv(binaryEnv); bin != "" {
		return bin, nil
	}
	out, err := exec.Command("go", "tool", "-n", "mailpit").Output()
	if ee, ok := errors.AsType[*exec.ExitError](err); ok {
		return "", fmt.Errorf("go tool -n mailpit: %w: %s", err, ee.Stderr)
	}
	if err != nil {
		return "", fmt.Errorf("go tool -n mailpit: %w", err)
	}
	return strings.TrimSpace(string(out)), nil
})

// Start starts a Mailpit, and stops it when t ends. A Mailpit that does
// not start fails t.
func Start(t testing.TB) *Mailpit {
	t.Helper()
	bin, err := binary()
	if err != nil {
		t.Fatalf("mailtest: %v", err)
	}
	dir := t.TempDir()
	// The ports are free when picked, and may be taken before Mailpit
	// listens on them: then it exits, and another pair is tried.
	for try := 1; ; try++ {
		m, err := start(t, bin, dir)
		if err == nil {
			return m
		}
		if try == 3 {
			t.Fatalf("mailtest: %v", err)
		}
	}
}

func start(t testing.TB, bin, dir string) (*Mailpit, error) {
	smtp, err := freeAddr()
	if err != nil {
		return nil, err
	}
	web, err := freeAddr()
	if err != nil {
		return nil, err
	}
	m := &Mailpit{SMTP: smtp, API: "http://" + web}
	logPath := filepath.Join(dir, "mailpit.log")
	log, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin,
		"--smtp", smtp, "--listen", web,
		"--database", filepath.Join(dir, "mailpit.db"),
		"--smtp-auth-accept-any", "--smtp-auth-allow-insecure", "--smtp-disable-rdns",
		"--disable-version-check", "--quiet")
	// No MP_* variable of the caller's reaches it, and its home is dir.
	cmd.Env = []string{"HOME=" + dir, "TMPDIR=" + dir}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		log.Close()
		return nil, err
	}
	// exited closes when mailpit has ended, with waited its error.
	exited, waited := make(chan struct{}), error(nil)
	go func() {
		waited = cmd.Wait()
		log.Close()
		close(exited)
	}()
	stop := func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-exited:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	}
	client := &http.Client{Timeout: time.Second}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		select {
		case <-exited:
			out, _ := os.ReadFile(logPath)
			return nil, fmt.Errorf("mailpit exited: %w: %s", waited, out)
		default:
		}
		if resp, err := client.Get(m.API + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				t.Cleanup(stop)
				return m, nil
			}
		}
		if time.Now().After(deadline) {
			stop()
			out, _ := os.ReadFile(logPath)
			return nil, fmt.Errorf("mailpit did not answer on %s in 30s: %s", m.API, out)
		}
	}
}

// freeAddr is a loopback address with a port free now.
func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// Messages returns the mails Mailpit took, oldest first.
func (m *Mailpit) Messages(t testing.TB) []Message {
	t.Helper()
	var list struct {
		Messages []struct{ ID string }
	}
	m.get(t, "/api/v1/messages?limit=1000", &list)
	var out []Message
	for _, l := range slices.Backward(list.Messages) {
		var msg struct {
			From    struct{ Address string }
			To      []struct{ Address string }
			Subject string
			Text    string
		}
		m.get(t, "/api/v1/message/"+l.ID, &msg)
		var h mail.Header
		m.get(t, "/api/v1/message/"+l.ID+"/headers", &h)
		got := Message{
			ID:            l.ID,
			MessageID:     h.Get("Message-ID"),
			InReplyTo:     h.Get("In-Reply-To"),
			References:    h.Get("References"),
			AutoSubmitted: h.Get("Auto-Submitted"),
			Subject:       msg.Subject,
			From:          msg.From.Address,
			Text:          msg.Text,
			Header:        h,
		}
		for _, to := range msg.To {
			got.To = append(got.To, to.Address)
		}
		out = append(out, got)
	}
	return out
}

// get reads the JSON at path of the API into v.
func (m *Mailpit) get(t testing.TB, path string, v any) {
	t.Helper()
	resp, err := http.Get(m.API + path)
	if err != nil {
		t.Fatalf("mailtest: GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("mailtest: GET %s: %s", path, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("mailtest: GET %s: %v", path, err)
	}
}
