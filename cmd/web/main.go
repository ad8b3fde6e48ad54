// Command sagacity serves Sagacity: the approval console, the JSON API,
// the agent gateway and MCP. "sagacity verify FILE" checks a journal
// export offline; "sagacity help" lists the rest.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	// The zone database in the binary: an approval policy's timeZone:
	// reads the same on the server and in an offline verify, on any host.
	_ "time/tzdata"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Environ(), os.Stdout)
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
