package main

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/sagacity-go/sagacity/internal/engine"
)

// token prints a new random API token and the lines that declare it in
// SAGACITY_CONFIG. Only the token's SHA-256 goes into the configuration.
func token(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("token", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	name := fs.String("name", "automation", "the token's name: what decisions are journaled under (token:<name>)")
	roles := fs.String("roles", "agent", "comma-separated roles: agent, approver, auditor")
	if err := fs.Parse(args); err != nil {
		return exitError{2, fmt.Errorf("token: %w (usage: sagacity token [-name NAME] [-roles agent,approver,auditor])", err)}
	}
	if fs.NArg() > 0 {
		return exitError{2, fmt.Errorf("token: unexpected argument %q", fs.Arg(0))}
	}
	var list []string
	for _, r := range strings.Split(*roles, ",") {
		r = strings.TrimSpace(r)
		if !slices.Contains(engine.Roles, engine.Role(r)) {
			return exitError{2, fmt.Errorf("token: unknown role %q (roles are agent, approver, auditor)", r)}
		}
		list = append(list, r)
	}
	tok := "sgc_" + rand.Text() + rand.Text()
	sum := sha256.Sum256([]byte(tok))
	_, err := fmt.Fprintf(stdout, "%s\n\n# Give the token above to its user; it is not stored anywhere. Add this to SAGACITY_CONFIG:\ntokens:\n  - name: %s\n    sha256: %s\n    roles: [%s]\n",
		tok, *name, hex.EncodeToString(sum[:]), strings.Join(list, ", "))
	return err
}
