package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sagacity-go/sagacity/internal/config"
	"github.com/sagacity-go/sagacity/internal/engine"
	"github.com/sagacity-go/sagacity/internal/httptool"
	"github.com/sagacity-go/sagacity/internal/testkit"
	"github.com/sagacity-go/sagacity/toolsig"
)

var secret = []byte("the secret Sagacity and the tool server share, 32+ bytes")

// served starts the example on a test server and returns its ledger and
// its tool as Sagacity calls it: declared by sagacity.yaml beside it,
// signed by internal/httptool, the server's own client.
func served(t *testing.T) (*ledger, *httptool.Tool) {
	t.Helper()
	l := newLedger()
	srv := httptest.NewServer(l.handler(secret))
	t.Cleanup(srv.Close)
	f, err := config.ReadFile("sagacity.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Tools) != 1 || f.Tools[0].Name != tool || f.Tools[0].Compensate == nil {
		t.Fatalf("sagacity.yaml declares %+v, want %s with its two endpoints", f.Tools, tool)
	}
	at := func(e config.Endpoint) httptool.Endpoint {
		u, err := url.Parse(e.URL)
		if err != nil {
			t.Fatal(err)
		}
		return httptool.Endpoint{URL: srv.URL + u.Path}
	}
	undo := at(*f.Tools[0].Compensate)
	return l, &httptool.Tool{Name: tool, Exec: at(f.Tools[0].Execute), Undo: &undo, Secret: secret}
}

func snapshot(l *ledger) map[string]transfer {
	l.mu.Lock()
	defer l.mu.Unlock()
	m := map[string]transfer{}
	for id, t := range l.transfers {
		m[id] = *t
	}
	return m
}

// TestToolServer: calls signed as Sagacity signs them schedule a transfer
// once however often they are sent, and their compensation cancels it
// once; an execution resumed after approval carries the request's key.
func TestToolServer(t *testing.T) {
	l, ht := served(t)
	ctx := context.Background()
	call := engine.Invocation{SagaID: "trip-1", Seq: 3, Tool: tool, Input: `{"amount":"100.50","to":"alice"}`}
	for range 2 { // the second is a retry: same key, same bytes
		got, err := ht.Execute(ctx, call)
		if err != nil || got != `{"status":"scheduled","transferId":"tr-1"}` {
			t.Fatalf("Execute(%+v) = %q, %v; want tr-1 scheduled", call, got, err)
		}
	}
	resumed := engine.Invocation{SagaID: "trip 2/ä", Seq: 9, Request: 7, Tool: tool, Input: `{"amount":"2500","to":"acme"}`}
	second, err := ht.Execute(ctx, resumed)
	if err != nil || second != `{"status":"scheduled","transferId":"tr-2"}` {
		t.Fatalf("Execute(%+v) = %q, %v; want tr-2 scheduled", resumed, second, err)
	}
	for range 2 {
		if err := ht.Compensate(ctx, call, `{"status":"scheduled","transferId":"tr-1"}`); err != nil {
			t.Fatalf("Compensate(%+v) = %v", call, err)
		}
	}
	want := map[string]transfer{
		"tr-1": {ID: "tr-1", Amount: "100.50", To: "alice", Status: "cancelled", Key: "trip-1/3"},
		"tr-2": {ID: "tr-2", Amount: "2500", To: "acme", Status: "scheduled", Key: "trip%202%2F%C3%A4/7"},
	}
	if diff := cmp.Diff(want, snapshot(l)); diff != "" {
		t.Errorf("the ledger (-want +got):\n%s", diff)
	}

	// A compensation may cancel only the transfer its own call made, and
	// one not known here is not said to be cancelled.
	if err := ht.Compensate(ctx, resumed, `{"transferId":"tr-1"}`); err == nil || !strings.Contains(err.Error(), "answered 409: transfer tr-1 was not made by this call") {
		t.Errorf("Compensate of trip 2 naming tr-1 = %v; want 409", err)
	}
	if err := ht.Compensate(ctx, resumed, `{"transferId":"tr-9"}`); err == nil || !strings.Contains(err.Error(), "answered 422: no transfer tr-9 here") {
		t.Errorf("Compensate naming an unknown transfer = %v; want 422", err)
	}
	bad := engine.Invocation{SagaID: "trip-3", Seq: 1, Tool: tool, Input: `{"amount":"1e9","to":"mallory"}`}
	if _, err := ht.Execute(ctx, bad); err == nil || !strings.Contains(err.Error(), "answered 422") {
		t.Errorf("Execute(%+v) = %v; want 422", bad, err)
	}
	if got := snapshot(l)["tr-2"].Status; got != "scheduled" || len(snapshot(l)) != 2 {
		t.Errorf("refused calls changed the ledger: %+v", snapshot(l))
	}
}

// TestToolServerRefuses: the endpoints answer 401, doing nothing, to a
// request that is unsigned, signed with another secret, for another
// tool, or for the other phase; and 409 to a key sent again with other
// bytes.
func TestToolServerRefuses(t *testing.T) {
	l, ht := served(t)
	ctx := context.Background()
	call := engine.Invocation{SagaID: "trip-1", Seq: 3, Tool: tool, Input: `{"amount":"100","to":"alice"}`}
	swapped := *ht
	swapped.Exec, swapped.Undo = *ht.Undo, &ht.Exec // each phase sent to the other's endpoint
	other := *ht
	other.Secret = []byte("another secret, not the one the tool server holds")
	renamed := *ht
	renamed.Name = "readBalance"
	for name, tt := range map[string]*httptool.Tool{"other phase": &swapped, "other secret": &other, "other tool": &renamed} {
		if _, err := tt.Execute(ctx, call); err == nil || !strings.Contains(err.Error(), "answered 401") {
			t.Errorf("%s: Execute = %v; want 401", name, err)
		}
		if err := tt.Compensate(ctx, call, `{"transferId":"tr-1"}`); err == nil || !strings.Contains(err.Error(), "answered 401") {
			t.Errorf("%s: Compensate = %v; want 401", name, err)
		}
	}
	resp, err := http.Post(ht.Exec.URL, "application/json", strings.NewReader(call.Input))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("an unsigned POST = %d, want 401", resp.StatusCode)
	}
	if got := snapshot(l); len(got) != 0 {
		t.Errorf("refused requests scheduled %+v", got)
	}

	if _, err := ht.Execute(ctx, call); err != nil {
		t.Fatal(err)
	}
	changed := call
	changed.Input = `{"amount":"100000","to":"alice"}`
	if _, err := ht.Execute(ctx, changed); err == nil || !strings.Contains(err.Error(), "answered 409: this Idempotency-Key was sent with other bytes") {
		t.Errorf("Execute with the same key and other bytes = %v; want 409", err)
	}
	if got := snapshot(l); len(got) != 1 || got["tr-1"].Amount != "100" {
		t.Errorf("the ledger after a key sent with other bytes: %+v", got)
	}
}

// TestRun: the command serves the tool on the address it is given, and
// refuses to start without a secret Sagacity could share.
func TestRun(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	out := &testkit.Buffer{}
	done := make(chan error, 1)
	getenv := func(k string) string { return map[string]string{"SAGACITY_TOOL_SIGNING_SECRET": string(secret)}[k] }
	go func() { done <- run(ctx, []string{"-addr", "127.0.0.1:0"}, getenv, out) }()
	re := regexp.MustCompile(`^toolserver: scheduleTransfer on (http://127\.0\.0\.1:\d+)\n$`)
	var base string
	for deadline := time.Now().Add(10 * time.Second); base == "" && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if m := re.FindStringSubmatch(out.String()); m != nil {
			base = m[1]
		}
	}
	if base == "" {
		t.Fatalf("run printed %q, want the address it serves", out.String())
	}
	body := []byte(`{"amount":"1","to":"bob"}`)
	req, _ := http.NewRequest(http.MethodPost, base+"/transfers", bytes.NewReader(body))
	for k, v := range map[string]string{toolsig.HeaderSaga: "s", toolsig.HeaderSeq: "1", toolsig.HeaderTool: tool,
		toolsig.HeaderPhase: string(toolsig.Execute), toolsig.HeaderKey: "s/1"} {
		req.Header.Set(k, v)
	}
	req.Header.Set(toolsig.Header, toolsig.Sign(secret, time.Now(), toolsig.RequestOf(req), body))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	answer, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(answer) != `{"status":"scheduled","transferId":"tr-1"}` {
		t.Errorf("POST /transfers = %d %s", resp.StatusCode, answer)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("run after cancel = %v, want nil", err)
	}
	short := func(string) string { return "too short" }
	if err := run(context.Background(), nil, short, io.Discard); err == nil || !strings.HasPrefix(err.Error(), "SAGACITY_TOOL_SIGNING_SECRET: ") {
		t.Errorf("run with a short secret = %v; want it refused, naming the variable", err)
	}
}
