package main

import (
	"net/http"
	"strings"
	"testing"

	"github.com/sagacity-go/sagacity/internal/testkit"
)

// TestServeMetrics: the server that run starts counts what its engine and its
// routes do, and in dev mode serves /metrics to the anonymous caller.
func TestServeMetrics(t *testing.T) {
	t.Parallel()
	base, _ := start(t, map[string]string{"SAGACITY_DATABASE_URL": testkit.SQLiteURL(t)})
	get(t, base+"/healthz")
	resp, err := http.Post(base+"/sagacity/sagas/s/calls", "application/json", strings.NewReader(`{"tool":"noSuchTool","input":"{}"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 404 {
		t.Fatalf("calling an unknown tool = %d, want 404", resp.StatusCode)
	}
	code, body := get(t, base+"/metrics")
	if code != 200 {
		t.Fatalf("GET /metrics in dev mode = %d %s, want 200", code, body)
	}
	for _, line := range []string{
		`sagacity_tool_calls_total{outcome="refused",tool=""} 1`,
		`sagacity_calls_in_doubt 0`,
		`sagacity_http_requests_total{code="200",method="get",route="/healthz"} 1`,
		`sagacity_http_requests_total{code="404",method="post",route="/sagacity/sagas/{sagaId}/calls"} 1`,
	} {
		if !strings.Contains(body, "\n"+line+"\n") {
			t.Errorf("GET /metrics has no line %s:\n%s", line, body)
		}
	}
}
