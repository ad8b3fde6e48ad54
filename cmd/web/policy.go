package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"

	"github.com/sagacity-go/sagacity/internal/config"
	"github.com/sagacity-go/sagacity/internal/engine"
)

// policyArgs is what policy takes.
const policyArgs = "[-canonical] [FILE]"

// policyFlags are policy's flags, declared once for parsing and help.
type policyFlags struct{ canonical bool }

func (f *policyFlags) declare(fs *flag.FlagSet) {
	fs.BoolVar(&f.canonical, "canonical", false, "print the canonical document alone, byte for byte as it is hashed (pipe it to sha256sum)")
}

// policy prints the approval policy a configuration file puts in force,
// as requests record it: that document's SHA-256, so a reviewer of a
// configuration change sees the hash that requests will carry, and the
// document, indented to be read. What is hashed is the canonical
// document, one line of JSON: -canonical prints those bytes alone, so
// that anyone can hash them again.
func policy(args []string, stdout io.Writer) error {
	var f policyFlags
	fs := newFlags("policy", f.declare)
	usage := "usage: sagacity policy " + policyArgs
	if err := fs.Parse(args); err != nil {
		return exitError{2, fmt.Errorf("policy: %w (%s)", err, usage)}
	}
	var a *engine.Approvals
	switch fs.NArg() {
	case 0: // no file: the default
	case 1:
		file, err := config.ReadFile(fs.Arg(0))
		if err != nil {
			return exitError{2, err}
		}
		a = file.Approvals
	default:
		return exitError{2, fmt.Errorf("policy takes one configuration file at most (%s)", usage)}
	}
	if a == nil {
		var err error
		if a, err = engine.CompilePolicy(engine.DefaultPolicy); err != nil {
			return exitError{2, err}
		}
	}
	if f.canonical {
		_, err := io.WriteString(stdout, a.Text)
		return err
	}
	var pretty bytes.Buffer
	if err := json.Indent(&pretty, []byte(a.Text), "", "  "); err != nil {
		return err
	}
	_, err := fmt.Fprintf(stdout, "# approval policy sha256:%s\n"+
		"# the SHA-256 of the canonical document, one line of JSON, not of the indented one below:\n"+
		"# sagacity policy -canonical %s| sha256sum\n%s\n", a.Hash, fileArg(fs), pretty.String())
	return err
}

// fileArg is the file argument fs was given, followed by a space, or "".
func fileArg(fs *flag.FlagSet) string {
	if fs.NArg() == 0 {
		return ""
	}
	return fs.Arg(0) + " "
}
