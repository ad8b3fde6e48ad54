package main

import (
	"os"
	"path/filepath"
	"testing"
)

// TestMain runs the tests or, when the test binary is started under
// another name (a link a test makes), that program: sagacity, this
// checkout's binary; docker, the stand-in for docker that
// TestComposeQuickStart and TestReadmeDocker run the README's commands
// with.
func TestMain(m *testing.M) {
	switch filepath.Base(os.Args[0]) {
	case "docker":
		os.Exit(dockerStandIn(os.Args[1:], os.Stdout, os.Stderr))
	case "sagacity":
		main() // exits unless it succeeds
		os.Exit(0)
	}
	os.Exit(m.Run())
}
