package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/sagacity-go/sagacity/internal/config"
	"github.com/sagacity-go/sagacity/internal/store"
)

// migrate applies the pending migrations of the database serve would
// open (SAGACITY_DATABASE_URL), as the schema's owner, and prints what it
// applied, or that the schema is current. Run at each upgrade before the
// servers, it lets them connect as a role that may not change the schema.
func migrate(ctx context.Context, args []string, environ []string, stdout io.Writer) error {
	if len(args) > 0 {
		return exitError{2, fmt.Errorf("migrate takes no arguments (got %s); it migrates the database SAGACITY_DATABASE_URL names",
			strings.Join(args, " "))}
	}
	if err := config.CheckNames(environ); err != nil {
		return err
	}
	url := lookup(environ)("SAGACITY_DATABASE_URL")
	if url == "" {
		url = config.DefaultDatabaseURL
	}
	db, err := store.Open(ctx, url)
	if err != nil {
		return fmt.Errorf("SAGACITY_DATABASE_URL: %w", err)
	}
	defer db.Close()
	s := db.Schema()
	for _, name := range s.Applied {
		fmt.Fprintln(stdout, "applied", name)
	}
	where := store.Redact(url)
	switch {
	case len(s.Applied) > 0:
		_, err = fmt.Fprintf(stdout, "%s: the schema is at version %d (it was at %d)\n", where, s.Needs, s.Found)
	case s.Found > s.Needs:
		_, err = fmt.Fprintf(stdout, "%s: the schema is at version %d, newer than this binary's %d; nothing to apply\n", where, s.Found, s.Needs)
	default:
		_, err = fmt.Fprintf(stdout, "%s: the schema is current, at version %d; nothing to apply\n", where, s.Found)
	}
	return err
}
