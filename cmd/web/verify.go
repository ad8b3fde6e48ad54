package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/sagacity-go/sagacity/internal/engine"
)

// verify checks a journal export offline and prints the verify result as
// JSON. Exit status: 0 valid, 1 broken, 2 unreadable.
func verify(args []string, stdout io.Writer) error {
	if len(args) != 1 {
		return exitError{2, fmt.Errorf("verify takes one argument, a file or - for standard input")}
	}
	in := io.Reader(os.Stdin)
	if args[0] != "-" {
		f, err := os.Open(args[0])
		if err != nil {
			return exitError{2, err}
		}
		defer f.Close()
		in = f
	}
	entries, err := engine.ReadNDJSON(in)
	if err != nil {
		return exitError{2, fmt.Errorf("%s: %w", args[0], err)}
	}
	if len(entries) == 0 {
		return exitError{2, fmt.Errorf("%s: holds no journal entries; export a saga with GET /sagacity/audit/{sagaId}", args[0])}
	}
	for _, e := range entries {
		if e.SagaID != entries[0].SagaID {
			return exitError{2, fmt.Errorf("%s: the export holds entries of sagas %q and %q; verify one saga at a time",
				args[0], entries[0].SagaID, e.SagaID)}
		}
	}
	v := engine.Verify(entries)
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if _, err := fmt.Fprintf(stdout, "%s\n", b); err != nil {
		return err
	}
	if !v.Valid {
		return exitError{code: 1}
	}
	return nil
}
