package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/dbos-inc/dbos-transact-golang/dbos"
)

// The comparison's other durable executor: DBOS Transact for Go, with its
// system database in PostgreSQL, running a workflow of one step that does
// nothing, the closest thing it has to an executed call of a no-op tool
// (a durable record that the call was made, then of its result).

// oneStep is the workflow: one step, returning a string.
func oneStep(ctx dbos.Context, input string) (string, error) {
	return dbos.RunAsStep(ctx, func(context.Context) (string, error) { return "ok", nil }, dbos.WithStepName("noop"))
}

// openDBOS launches DBOS over the (fresh) system database at dbURL, with
// its defaults otherwise.
func openDBOS(ctx context.Context, dbURL string) (dbos.Context, error) {
	d, err := dbos.NewContext(ctx, dbos.Config{AppName: "sagacity-bench", DatabaseURL: dbURL,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		return nil, err
	}
	dbos.RegisterWorkflow(d, oneStep)
	if err := dbos.Launch(d); err != nil {
		return nil, errors.Join(err, dbos.Shutdown(d, 10*time.Second))
	}
	return d, nil
}

// workflow is an op that starts the workflow and waits for its result.
func workflow(d dbos.Context) op {
	return func(ctx context.Context, w worker, i int) error {
		h, err := dbos.RunWorkflow(d, oneStep, callInput)
		if err != nil {
			return err
		}
		r, err := h.GetResult()
		if err == nil && r != "ok" {
			err = fmt.Errorf("workflow returned %q", r)
		}
		return err
	}
}
