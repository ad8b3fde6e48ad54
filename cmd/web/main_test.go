package main

import (
	"os"
	"path/filepath"
	"testing"
)

// TestMain runs the tests, or, when the test binary is started under the
// name docker (a link a test makes), the stand-in for docker compose
// that TestComposeQuickStart runs the README's commands with.
func TestMain(m *testing.M) {
	if filepath.Base(os.Args[0]) == "docker" {
		os.Exit(composeStandIn(os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}
