package e2e

import (
	"context"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sagacity-go/sagacity/toolsig"
)

// The tools the binary is configured with, and where they live on the
// tool server.
const (
	toolReserve = "reserveInventory" // COMPENSATABLE: /reserve, undone by /release
	toolWire    = "sendWireTransfer" // IRREVERSIBLE: /wire
	toolShip    = "scheduleShipment" // COMPENSATABLE, always fails: /ship (503), /unship
	gateTool    = "approval-gate"    // the tool name of decisions in the journal
)

// toolServer is a real tool server over HTTP on 127.0.0.1. It refuses
// unsigned calls (toolsig.Handler) and counts every effect by its
// Idempotency-Key, executions and compensations apart. An effect is
// counted when the call arrives; the answer follows a random 0–20ms
// delay, so that a kill can land while a tool runs.
type toolServer struct {
	*httptest.Server
	slow atomic.Int64 // extra delay of /reserve and /wire, in nanoseconds

	mu      sync.Mutex
	execs   map[string]int    // execute calls by Idempotency-Key
	comps   map[string]int    // compensate calls by Idempotency-Key
	inputs  map[string]string // execute key → the body it carried
	arrived map[string]int    // execute calls by path
	open    int               // connections open
}

func newToolServer(t testing.TB, secret []byte) *toolServer {
	ts := &toolServer{execs: map[string]int{}, comps: map[string]int{}, inputs: map[string]string{}, arrived: map[string]int{}}
	mux := http.NewServeMux()
	// Each endpoint checks the signature is for its own tool and phase.
	for _, ep := range []struct {
		path       string
		tool       string
		compensate bool
		status     int
	}{
		{"/reserve", toolReserve, false, http.StatusOK},
		{"/release", toolReserve, true, http.StatusOK},
		{"/wire", toolWire, false, http.StatusOK},
		{"/ship", toolShip, false, http.StatusServiceUnavailable},
		{"/unship", toolShip, true, http.StatusOK},
	} {
		want := toolsig.Expect{Tool: ep.tool, Phase: toolsig.Execute}
		if ep.compensate {
			want.Phase = toolsig.Compensate
		}
		mux.Handle("POST "+ep.path, toolsig.Handler(secret, want, 1<<20, ts.effect(ep.compensate, ep.status)))
	}
	ts.Server = httptest.NewUnstartedServer(mux)
	ts.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		ts.mu.Lock()
		defer ts.mu.Unlock()
		switch st {
		case http.StateNew:
			ts.open++
		case http.StateClosed, http.StateHijacked:
			ts.open--
		}
	}
	ts.Start()
	t.Cleanup(ts.Close)
	return ts
}

func (ts *toolServer) effect(compensate bool, status int) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return
		}
		key := r.Header.Get("Idempotency-Key")
		ts.mu.Lock()
		if compensate {
			ts.comps[key]++
		} else {
			ts.execs[key]++
			ts.inputs[key] = string(body)
			ts.arrived[r.URL.Path]++
		}
		ts.mu.Unlock()
		delay := rand.N(21 * time.Millisecond)
		if !compensate && (r.URL.Path == "/reserve" || r.URL.Path == "/wire") {
			delay += time.Duration(ts.slow.Load())
		}
		select {
		case <-time.After(delay):
		case <-r.Context().Done():
			return
		}
		if status != http.StatusOK {
			http.Error(w, "no carrier available", status)
			return
		}
		_, _ = io.WriteString(w, `{"done":"`+strings.TrimPrefix(r.URL.Path, "/")+`","key":"`+key+`"}`)
	})
}

// effects is what the tool server has seen so far.
type effects struct {
	execs   map[string]int
	comps   map[string]int
	inputs  map[string]string
	arrived map[string]int
}

func (ts *toolServer) snapshot() effects {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	e := effects{execs: map[string]int{}, comps: map[string]int{}, inputs: map[string]string{}, arrived: map[string]int{}}
	for k, v := range ts.execs {
		e.execs[k] = v
	}
	for k, v := range ts.comps {
		e.comps[k] = v
	}
	for k, v := range ts.inputs {
		e.inputs[k] = v
	}
	for k, v := range ts.arrived {
		e.arrived[k] = v
	}
	return e
}

// keysFor returns the execute keys whose call carried input.
func (e effects) keysFor(input string) []string {
	var keys []string
	for k, in := range e.inputs {
		if in == input {
			keys = append(keys, k)
		}
	}
	return keys
}

// quiesce waits until no connection to the tool server is open: after a
// kill, every call the dead process had started has arrived (and been
// counted) or never will.
func (ts *toolServer) quiesce(ctx context.Context, t testing.TB) {
	t.Helper()
	quiet := 0
	ok := eventually(ctx, 10*time.Second, func() bool {
		ts.mu.Lock()
		open := ts.open
		ts.mu.Unlock()
		if open > 0 {
			quiet = 0
			return false
		}
		quiet++
		return quiet >= 2
	})
	if !ok {
		t.Fatalf("tool server: connections still open 10s after the server was killed")
	}
}
