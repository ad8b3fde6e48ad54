// Command sagacity serves Sagacity: the approval console, the JSON API and
// the agent gateway. "sagacity verify FILE" checks a journal export offline.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Getenv, os.Stdout)
	stop()
	if err != nil {
		code := 1
		ee, ok := errors.AsType[exitError](err)
		if ok {
			code = ee.code
		}
		if !ok || ee.err != nil {
			fmt.Fprintln(os.Stderr, "sagacity:", err)
		}
		os.Exit(code)
	}
}
