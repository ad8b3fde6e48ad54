package metrics_test

import (
	"bytes"
	"context"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/sagacity-go/sagacity/internal/engine"
	"github.com/sagacity-go/sagacity/internal/metrics"
	"github.com/sagacity-go/sagacity/internal/store"
	"github.com/sagacity-go/sagacity/internal/testkit"
)

// scrape reads the metrics as Prometheus would: the families, and each
// series' value (a histogram's number of observations) by its name and
// labels.
func scrape(t *testing.T, rec *metrics.Recorder) (map[string]*dto.MetricFamily, map[string]float64) {
	t.Helper()
	w := httptest.NewRecorder()
	rec.ServeHTTP(w, httptest.NewRequest("GET", "/metrics", nil))
	if w.Code != 200 {
		t.Fatalf("scrape = %d %s, want 200 with what could be read", w.Code, w.Body)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(w.Body)
	if err != nil {
		t.Fatal(err)
	}
	values := map[string]float64{}
	for name, f := range fams {
		for _, m := range f.GetMetric() {
			key := name
			for _, l := range m.GetLabel() {
				key += " " + l.GetName() + "=" + l.GetValue()
			}
			switch {
			case m.Counter != nil:
				values[key] = m.Counter.GetValue()
			case m.Gauge != nil:
				values[key] = m.Gauge.GetValue()
			case m.Histogram != nil:
				values[key] = float64(m.Histogram.GetSampleCount())
			}
		}
	}
	return fams, values
}

// TestStoreGone: a database that goes away under the engine is counted,
// by the calls it fails and by the store errors, and a scrape still
// serves the counters that say so, without the backlog it cannot read.
func TestStoreGone(t *testing.T) {
	ctx := context.Background()
	db, err := store.Open(ctx, testkit.SQLiteURL(t))
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	rec := metrics.New(slog.New(slog.NewTextHandler(&logs, nil)))
	ok := engine.Funcs{Exec: func(context.Context, engine.Invocation) (string, error) { return "done", nil }}
	// Its effect happens, and the database is gone before it can be
	// journaled: the call is in doubt.
	last := engine.Funcs{Exec: func(context.Context, engine.Invocation) (string, error) { db.Close(); return "done", nil }}
	eng, err := engine.New(db, []engine.Tool{{Name: "ok", Executor: ok}, {Name: "last", Executor: last}},
		engine.WithKeys(testkit.Keys(t)), engine.WithObserver(rec), engine.WithOutcomeRetry(0))
	if err != nil {
		t.Fatal(err)
	}
	agent := engine.Principal{ID: "agent-1", Roles: []engine.Role{engine.RoleAgent}}
	for _, c := range []struct {
		tool string
		want engine.Outcome // "": the call fails Unavailable
	}{
		{"ok", engine.OutcomeExecuted},
		{"last", engine.OutcomeInDoubt},
		{"ok", ""},
	} {
		res, err := eng.Call(ctx, agent, "s", c.tool, "{}")
		if c.want == "" && !engine.IsKind(err, engine.Unavailable) || c.want != "" && (err != nil || res.Outcome != c.want) {
			t.Fatalf("Call(%s) = %+v, %v; want outcome %q (or unavailable)", c.tool, res, err, c.want)
		}
	}

	// Not watching the backlog yet: reading it would count a store error
	// of its own, which a scrape shows or not as its collectors race.
	_, got := scrape(t, rec)
	for key, want := range map[string]float64{
		"sagacity_tool_calls_total outcome=executed tool=ok":     1,
		"sagacity_tool_calls_total outcome=in_doubt tool=last":   1,
		"sagacity_tool_calls_total outcome=error tool=ok":        1,
		"sagacity_tool_duration_seconds phase=execute tool=ok":   1,
		"sagacity_tool_duration_seconds phase=execute tool=last": 1,
		// The outcome that could not be journaled, and the call refused.
		"sagacity_store_errors_total kind=unavailable": 2,
		"sagacity_store_errors_total kind=internal":    0,
	} {
		if got[key] != want {
			t.Errorf("scrape: %s = %v, want %v", key, got[key], want)
		}
	}

	rec.Watch(eng)
	fams, got := scrape(t, rec)
	for _, gauge := range []string{"sagacity_pending_requests", "sagacity_oldest_pending_request_age_seconds", "sagacity_calls_in_doubt"} {
		if fams[gauge] != nil {
			t.Errorf("scrape: %s = %v, want none while the database is gone", gauge, fams[gauge])
		}
	}
	if key := "sagacity_tool_calls_total outcome=executed tool=ok"; got[key] != 1 {
		t.Errorf("scrape without the backlog: %s = %v, want the counters served all the same", key, got[key])
	}
	if fams["sagacity_held_calls"] == nil || got["sagacity_held_calls"] != 0 {
		t.Errorf("scrape without the backlog: sagacity_held_calls = %v; want 0, served all the same (the process's own count)", fams["sagacity_held_calls"])
	}
	if !strings.Contains(logs.String(), "database unavailable") {
		t.Errorf("logs = %q, want the scrape's failure to read the backlog", logs.String())
	}
}
