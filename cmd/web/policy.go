package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"

	"github.com/sagacity-go/sagacity/internal/config"
	"github.com/sagacity-go/sagacity/internal/engine"
)

// policy prints the approval policy a configuration file puts in force,
// as requests record it: its canonical document and that document's
// SHA-256, so a reviewer of a configuration change sees the hash that
// requests will carry.
func policy(args []string, stdout io.Writer) error {
	var a *engine.Approvals
	switch len(args) {
	case 0: // no file: the default
	case 1:
		f, err := config.ReadFile(args[0])
		if err != nil {
			return exitError{2, err}
		}
		a = f.Approvals
	default:
		return exitError{2, fmt.Errorf("policy takes one configuration file at most (usage: sagacity policy [FILE])")}
	}
	if a == nil {
		var err error
		if a, err = engine.CompilePolicy(engine.DefaultPolicy); err != nil {
			return exitError{2, err}
		}
	}
	var pretty bytes.Buffer
	if err := json.Indent(&pretty, []byte(a.Text), "", "  "); err != nil {
		return err
	}
	_, err := fmt.Fprintf(stdout, "# approval policy sha256:%s\n%s\n", a.Hash, pretty.String())
	return err
}
