// Command toolserver is an example of a tool server behind Sagacity, to
// copy: one tool, scheduleTransfer, that schedules a bank transfer and
// cancels it when its saga is compensated. Each endpoint is wrapped in
// toolsig.Handler for its tool and phase, so that it runs only calls
// Sagacity signed for exactly that, and each deduplicates by the
// Idempotency-Key, so that a call Sagacity sends again is done once.
//
// Run it with the secret Sagacity signs with, and declare its tool as
// sagacity.yaml beside this file does:
//
//	SAGACITY_TOOL_SIGNING_SECRET=… go run ./examples/toolserver -addr 127.0.0.1:9000
//
// It keeps its ledger in memory; a real server keeps it in its database
// and records the Idempotency-Key in the transaction that does the work.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sagacity-go/sagacity/toolsig"
)

// tool is the tool this server serves, as Sagacity names it.
const tool = "scheduleTransfer"

// maxBody caps what an endpoint reads; a transfer is a few dozen bytes.
const maxBody = 64 << 10

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Getenv, os.Stdout)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "toolserver:", err)
		os.Exit(1)
	}
}

// run serves until ctx ends.
func run(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	fs := flag.NewFlagSet("toolserver", flag.ContinueOnError)
	addr := fs.String("addr", "127.0.0.1:9000", "where to listen")
	if err := fs.Parse(args); err != nil {
		return err
	}
	secret := getenv("SAGACITY_TOOL_SIGNING_SECRET")
	if len(secret) < 32 {
		return errors.New("SAGACITY_TOOL_SIGNING_SECRET: set it to the secret Sagacity signs tool calls with (32 bytes or more)")
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: newLedger().handler([]byte(secret)),
		ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 30 * time.Second, WriteTimeout: 30 * time.Second}
	fmt.Fprintf(stdout, "toolserver: %s on http://%s\n", tool, ln.Addr())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return srv.Shutdown(shutdown)
}

// handler serves the tool's two endpoints, each for its own phase.
func (l *ledger) handler(secret []byte) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("POST /transfers", toolsig.Handler(secret, toolsig.Expect{Tool: tool, Phase: toolsig.Execute}, maxBody,
		http.HandlerFunc(l.schedule)))
	mux.Handle("POST /transfers/cancel", toolsig.Handler(secret, toolsig.Expect{Tool: tool, Phase: toolsig.Compensate}, maxBody,
		http.HandlerFunc(l.cancel)))
	return mux
}

// transfer is a scheduled transfer.
type transfer struct {
	ID     string `json:"transferId"`
	Amount string `json:"amount"`
	To     string `json:"to"`
	Status string `json:"status"` // scheduled or cancelled
	Key    string `json:"-"`      // the Idempotency-Key of the call that made it
}

// ledger is the server's state: the transfers, and what each
// Idempotency-Key was answered.
type ledger struct {
	mu        sync.Mutex
	transfers map[string]*transfer
	done      map[string]done // by Idempotency-Key
}

// done is a call handled already: its bytes and its answer.
type done struct{ body, answer string }

func newLedger() *ledger {
	return &ledger{transfers: map[string]*transfer{}, done: map[string]done{}}
}

var amount = regexp.MustCompile(`^[0-9]{1,12}(\.[0-9]{1,2})?$`)

// schedule executes a call: its body is the agent's input,
// {"amount","to"}; its answer, the result Sagacity journals.
func (l *ledger) schedule(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body) // toolsig.Handler read and checked it; this is a copy in memory
	key := r.Header.Get(toolsig.HeaderKey)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.replay(w, key, body) {
		return
	}
	var in struct {
		Amount string `json:"amount"`
		To     string `json:"to"`
	}
	dec := json.NewDecoder(strings.NewReader(string(body)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil || !amount.MatchString(in.Amount) || strings.TrimSpace(in.To) == "" {
		http.Error(w, `want {"amount":"<decimal, at most 2 places>","to":"<payee>"}`, http.StatusUnprocessableEntity)
		return
	}
	t := &transfer{ID: fmt.Sprintf("tr-%d", len(l.transfers)+1), Amount: in.Amount, To: in.To, Status: "scheduled", Key: key}
	l.transfers[t.ID] = t
	l.answer(w, key, body, map[string]string{"transferId": t.ID, "status": t.Status})
}

// cancel compensates a call: its body is {"sagaId","seq","toolName",
// "input","result"}, the result being what schedule answered.
func (l *ledger) cancel(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	key := r.Header.Get(toolsig.HeaderKey)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.replay(w, key, body) {
		return
	}
	var c struct {
		Result string `json:"result"`
	}
	var made struct {
		ID string `json:"transferId"`
	}
	if json.Unmarshal(body, &c) != nil || json.Unmarshal([]byte(c.Result), &made) != nil || made.ID == "" {
		http.Error(w, "the compensation's result names no transfer", http.StatusUnprocessableEntity)
		return
	}
	t := l.transfers[made.ID]
	switch {
	case t == nil:
		// Not known here: nothing says it is not going out. A failed
		// compensation makes Sagacity ask a person to look.
		http.Error(w, "no transfer "+made.ID+" here; it cannot be said to be cancelled", http.StatusUnprocessableEntity)
		return
	case t.Key+"/compensate" != key:
		http.Error(w, "transfer "+made.ID+" was not made by this call", http.StatusConflict)
		return
	}
	t.Status = "cancelled"
	l.answer(w, key, body, map[string]string{"transferId": t.ID, "status": t.Status})
}

// replay answers a call handled already as it was answered the first
// time, and reports whether it did. A key sent again with other bytes is
// refused: it is not the same call.
func (l *ledger) replay(w http.ResponseWriter, key string, body []byte) bool {
	d, ok := l.done[key]
	switch {
	case !ok:
		return false
	case d.body != string(body):
		http.Error(w, "this Idempotency-Key was sent with other bytes", http.StatusConflict)
	default:
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, d.answer)
	}
	return true
}

// answer records a call's answer under its key and sends it.
func (l *ledger) answer(w http.ResponseWriter, key string, body []byte, v any) {
	b, _ := json.Marshal(v) // a map of strings always encodes
	l.done[key] = done{body: string(body), answer: string(b)}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(b)
}
