package main

import (
	"flag"
	"fmt"
	"io"

	"github.com/sagacity-go/sagacity/internal/engine"
)

// keygen prints a new Ed25519 signing key in the signed-note format, for
// SAGACITY_SIGNING_KEY, and the public key that verifies what it signs.
func keygen(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("keygen", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	name := fs.String("name", "sagacity", "the key's name: the origin of the log it signs, such as sagacity.example.com")
	if err := fs.Parse(args); err != nil {
		return exitError{2, fmt.Errorf("keygen: %w (usage: sagacity keygen [-name NAME])", err)}
	}
	if fs.NArg() > 0 {
		return exitError{2, fmt.Errorf("keygen: unexpected argument %q", fs.Arg(0))}
	}
	skey, vkey, err := engine.GenerateKeys(*name)
	if err != nil {
		return exitError{2, fmt.Errorf("keygen: %w", err)}
	}
	_, err = fmt.Fprintf(stdout, "%s\n\n# The line above is the signing key: put it in SAGACITY_SIGNING_KEY (or a file named by\n"+
		"# SAGACITY_SIGNING_KEY_FILE), keep it out of the database and its backups. The public key,\n"+
		"# for auditors and `sagacity verify-receipt` / `sagacity verify -key`:\n%s\n", skey, vkey)
	return err
}
