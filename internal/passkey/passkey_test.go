package passkey

import (
	"strings"
	"testing"
)

// TestNew: passkeys are bound to the console's public URL: its host is
// the RP ID, a loopback address is served as localhost (an IP address is
// no RP ID), and plain http is refused beyond localhost (browsers refuse
// WebAuthn on an insecure origin).
func TestNew(t *testing.T) {
	for _, tt := range []struct {
		url, id, origin, err string
	}{
		{"https://sagacity.example.com", "sagacity.example.com", "https://sagacity.example.com", ""},
		{"https://sagacity.example.com:8443/console", "sagacity.example.com", "https://sagacity.example.com:8443", ""},
		{"http://127.0.0.1:8080", "localhost", "http://localhost:8080", ""},
		{"http://[::1]:8080", "localhost", "http://localhost:8080", ""},
		{"http://localhost", "localhost", "http://localhost", ""},
		{"http://sagacity.example.com", "", "", "passkeys need the console's public URL to be https"},
		{"", "", "", "passkeys need the console's public URL"},
		{"ftp://sagacity.example.com", "", "", "passkeys need the console's public URL"},
	} {
		rp, err := New(tt.url)
		switch {
		case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
			t.Errorf("New(%q) = %v; want an error saying %q", tt.url, err, tt.err)
		case tt.err == "" && err != nil:
			t.Errorf("New(%q) = %v", tt.url, err)
		case tt.err == "" && (rp.ID != tt.id || rp.Origin() != tt.origin):
			t.Errorf("New(%q) = RP ID %q, origin %q; want %q, %q", tt.url, rp.ID, rp.Origin(), tt.id, tt.origin)
		}
	}
}
