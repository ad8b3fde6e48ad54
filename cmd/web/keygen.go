package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/sagacity-go/sagacity/internal/engine"
)

// keygenArgs is what keygen takes.
const keygenArgs = "[-name NAME] [-out FILE]"

// keygenFlags are keygen's flags, declared once for parsing and help.
type keygenFlags struct{ name, out string }

func (f *keygenFlags) declare(fs *flag.FlagSet) {
	fs.StringVar(&f.name, "name", "sagacity", "the key's name: the origin of the log it signs, such as sagacity.example.com")
	fs.StringVar(&f.out, "out", "", "a new file to write the signing key to, alone (mode 0600)")
}

// keygen makes a new Ed25519 signing key in the signed-note format, for
// SAGACITY_SIGNING_KEY, and the public key that verifies what it signs.
// Without -out it prints both; with -out FILE it writes the signing key
// alone to a new file only its owner may read, as
// SAGACITY_SIGNING_KEY_FILE takes it, and prints the public key.
func keygen(args []string, stdout io.Writer) error {
	var f keygenFlags
	fs := newFlags("keygen", f.declare)
	if err := fs.Parse(args); err != nil {
		return exitError{2, fmt.Errorf("keygen: %w (usage: sagacity keygen %s)", err, keygenArgs)}
	}
	if fs.NArg() > 0 {
		return exitError{2, fmt.Errorf("keygen: unexpected argument %q", fs.Arg(0))}
	}
	skey, vkey, err := engine.GenerateKeys(f.name)
	if err != nil {
		return exitError{2, fmt.Errorf("keygen: %w", err)}
	}
	if f.out == "" {
		_, err = fmt.Fprintf(stdout, "%s\n\n# The line above is the signing key: put it in SAGACITY_SIGNING_KEY, keep it out of the database\n"+
			"# and its backups (sagacity keygen -out FILE writes it alone to a file, for SAGACITY_SIGNING_KEY_FILE).\n"+
			"# The public key, for auditors and `sagacity verify-receipt` / `sagacity verify -key`:\n%s\n", skey, vkey)
		return err
	}
	if err := writeNew(f.out, skey+"\n"); err != nil {
		return exitError{2, fmt.Errorf("keygen: %w", err)}
	}
	_, err = fmt.Fprintf(stdout, "%s\n\n# The line above is the public key, for auditors and `sagacity verify-receipt` / `sagacity verify -key`.\n"+
		"# The signing key is in %s (mode 0600) and nowhere else: name the file in SAGACITY_SIGNING_KEY_FILE,\n"+
		"# keep it out of the database and its backups.\n", vkey, f.out)
	return err
}

// writeNew writes text to a new file that only its owner may read; it
// refuses to replace a file that exists, and leaves no partial file.
func writeNew(path, text string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, os.ErrExist) {
		return fmt.Errorf("%s exists already; a key is never overwritten: choose another file, or remove it first", path)
	}
	if err != nil {
		return err
	}
	if _, err = f.WriteString(text); err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path)
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}
