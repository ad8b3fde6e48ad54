package app_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/sagacity-go/sagacity/internal/auth"
	"github.com/sagacity-go/sagacity/internal/engine"
	"github.com/sagacity-go/sagacity/internal/testkit"
)

// scrape reads /metrics with a token and parses it as Prometheus does.
func (e *apiEnv) scrape(tok string) map[string]*dto.MetricFamily {
	e.t.Helper()
	r := e.do("GET", "/metrics", "", "", bearer(tok)...)
	if r.code != 200 || !strings.HasPrefix(r.header.Get("Content-Type"), "text/plain") {
		e.t.Fatalf("GET /metrics = %d %s %.200s, want 200 in the text format", r.code, r.header.Get("Content-Type"), r.body)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(r.body))
	if err != nil {
		e.t.Fatalf("GET /metrics is not the Prometheus text format: %v\n%s", err, r.body)
	}
	return fams
}

// sample is one series of a scrape: its value, or for a histogram its
// number of observations.
type sample struct {
	name   string
	labels map[string]string
}

func (s sample) String() string {
	keys := slices.Sorted(maps.Keys(s.labels))
	var ls []string
	for _, k := range keys {
		ls = append(ls, fmt.Sprintf("%s=%q", k, s.labels[k]))
	}
	return s.name + "{" + strings.Join(ls, ",") + "}"
}

// value finds the series with exactly s's labels; ok is false when the
// scrape has none.
func (s sample) value(fams map[string]*dto.MetricFamily) (v float64, ok bool) {
	for _, m := range fams[s.name].GetMetric() {
		got := map[string]string{}
		for _, l := range m.GetLabel() {
			got[l.GetName()] = l.GetValue()
		}
		if !maps.Equal(got, s.labels) {
			continue
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue(), true
		case m.Gauge != nil:
			return m.Gauge.GetValue(), true
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount()), true
		}
	}
	return 0, false
}

func s(name string, labels ...string) sample {
	m := map[string]string{}
	for i := 0; i+1 < len(labels); i += 2 {
		m[labels[i]] = labels[i+1]
	}
	return sample{name, m}
}

// TestMetrics runs a scripted day through the real server, then reads
// /metrics as Prometheus would and checks every number the script made:
// calls by tool and outcome, decisions, tool latencies, compensations,
// failed verifications, the backlog, and requests by route pattern,
// never by path. Only auditors and approvers may read them.
func TestMetrics(t *testing.T) {
	t.Parallel()
	stores(t, func(t *testing.T, dbURL string) {
		agentT, agentTok := token("agent", engine.RoleAgent)
		apprT, apprTok := token("approver", engine.RoleApprover)
		audT, audTok := token("auditor", engine.RoleAuditor)
		e := newAPI(t, dbURL, envOptions{tokens: []auth.Token{agentT, apprT, audT}})
		as := func(tok, what, method, path, body string, code int) {
			t.Helper()
			want(t, what, e.do(method, path, js, body, bearer(tok)...), code)
		}
		call := func(saga, tool, input string, code int) {
			t.Helper()
			as(agentTok, saga+" calls "+tool, "POST", "/sagacity/sagas/"+saga+"/calls", callJSON(tool, input), code)
		}
		sagas := []string{"order-1", "ship-1", "wire-1", "wire-2", "wire-3", "pay-1", "lost-1", "lost-2", "gone"}

		call("order-1", "reserveInventory", "{}", 200)
		call("order-1", "createOrder", "{}", 200)
		call("ship-1", "reserveInventory", "{}", 200)
		call("ship-1", "scheduleShipment", "{}", 422) // fails: reserveInventory is compensated
		call("wire-1", "reserveInventory", "{}", 200)
		call("wire-1", "sendWireTransfer", transfer, 202)
		as(apprTok, "approve wire-1", "POST", "/sagacity/approve/wire-1/3", `{}`, 200)
		as(agentTok, "resume wire-1", "POST", "/sagacity/resume/wire-1/3", e.payload(transfer), 200)
		call("wire-2", "sendWireTransfer", transfer, 202) // left pending
		call("wire-3", "reserveInventory", "{}", 200)
		call("wire-3", "sendWireTransfer", transfer, 202)
		as(apprTok, "reject wire-3", "POST", "/sagacity/reject/wire-3/3", `{}`, 200) // compensates reserveInventory
		call("pay-1", "payTyped", `{"cents":100,"to":"bob"}`, 202)                   // left pending
		call("pay-1", "payTyped", `{"cents":"a lot"}`, 400)                          // off its schema
		call("pay-1", "launchRockets", "{}", 404)                                    // no such tool
		agent := engine.Principal{ID: "token:agent", Auth: "token", Roles: []engine.Role{engine.RoleAgent}}
		strandAs(t, dbURL, agent, "lost-1", "createOrder", `{"sku":"A"}`)
		strandAs(t, dbURL, agent, "lost-2", "createOrder", `{"sku":"B"}`) // left in doubt
		as(apprTok, "resolve lost-1", "POST", "/sagacity/in-doubt/lost-1/1/resolve", `{"happened":true,"result":"order-9","reason":"the shop has it"}`, 200)
		e.sequence() // order-1 is logged as it was written
		testkit.Exec(t, dbURL, "UPDATE journal SET payload = 'forged' WHERE saga_id = 'order-1' AND seq = 1")
		r := e.do("GET", "/sagacity/audit/order-1/verify", "", "", bearer(audTok)...)
		if r.code != 200 || !strings.Contains(r.body, `"valid":false`) {
			t.Fatalf("verify the forged journal = %d %s, want it invalid", r.code, r.body)
		}
		call("gone", "reserveInventory", "{}", 200)
		e.sequence()
		for _, q := range []string{"DELETE FROM journal WHERE saga_id = 'gone'", "DELETE FROM calls WHERE saga_id = 'gone'",
			"DELETE FROM sagas WHERE id = 'gone'"} {
			testkit.Exec(t, dbURL, q)
		}
		if problem, err := e.log.Check(context.Background(), true); problem == "" || err != nil {
			t.Fatalf("CheckLog = %q, %v; want the deleted saga found", problem, err)
		}
		as(agentTok, "resume while halted", "POST", "/sagacity/resume/wire-2/1", e.payload(transfer), 503)
		want(t, "an unknown page", e.get("/no/such/page"), 404)
		want(t, "an unknown API path", e.get("/sagacity/no/such/thing"), 401)

		r = e.get("/metrics")
		want(t, "metrics without a token", r, 401)
		if r.header.Get("WWW-Authenticate") == "" || !strings.Contains(r.body, `"error"`) {
			t.Errorf("metrics without a token = %v %s, want a JSON 401 with WWW-Authenticate", r.header, r.body)
		}
		r = e.do("GET", "/metrics", "", "", bearer(agentTok)...)
		if r.code != 403 || !strings.Contains(r.body, "reading metrics needs the auditor or approver role") {
			t.Errorf("metrics as an agent = %d %s, want 403 naming the roles", r.code, r.body)
		}
		e.scrape(apprTok) // an approver may read them too
		fams := e.scrape(audTok)

		const (
			calls    = "sagacity_tool_calls_total"
			toolTime = "sagacity_tool_duration_seconds"
			requests = "sagacity_http_requests_total"
			reqTime  = "sagacity_http_request_duration_seconds"
			callsAt  = "/sagacity/sagas/{sagaId}/calls"
		)
		wants := []struct {
			s    sample
			want float64
		}{
			{s(calls, "tool", "reserveInventory", "outcome", "executed"), 5},
			{s(calls, "tool", "createOrder", "outcome", "executed"), 1},
			{s(calls, "tool", "scheduleShipment", "outcome", "failed"), 1},
			{s(calls, "tool", "sendWireTransfer", "outcome", "awaiting_approval"), 3},
			{s(calls, "tool", "sendWireTransfer", "outcome", "executed"), 1}, // the resume
			{s(calls, "tool", "payTyped", "outcome", "awaiting_approval"), 1},
			{s(calls, "tool", "payTyped", "outcome", "refused"), 1},
			{s(calls, "tool", "", "outcome", "refused"), 2}, // the unknown tool, the halted resume
			{s("sagacity_decisions_total", "decision", "approved"), 1},
			{s("sagacity_decisions_total", "decision", "rejected"), 1},
			{s("sagacity_decisions_total", "decision", "happened"), 1},
			{s("sagacity_decisions_total", "decision", "not-happened"), 0},
			{s(toolTime, "tool", "reserveInventory", "phase", "execute"), 5},
			{s(toolTime, "tool", "reserveInventory", "phase", "compensate"), 2},
			{s(toolTime, "tool", "createOrder", "phase", "execute"), 1},
			{s(toolTime, "tool", "scheduleShipment", "phase", "execute"), 1},
			{s(toolTime, "tool", "sendWireTransfer", "phase", "execute"), 1},
			{s("sagacity_compensations_total", "outcome", "compensated"), 2},
			{s("sagacity_compensations_total", "outcome", "compensation_failed"), 0},
			{s("sagacity_verify_failures_total", "check", "journal"), 1},
			{s("sagacity_verify_failures_total", "check", "log"), 1},
			{s("sagacity_store_errors_total", "kind", "unavailable"), 0},
			{s("sagacity_store_errors_total", "kind", "internal"), 0},
			{s("sagacity_pending_requests", "tool", "sendWireTransfer"), 1},
			{s("sagacity_pending_requests", "tool", "payTyped"), 1},
			{s("sagacity_calls_in_doubt"), 1},
			{s(requests, "route", callsAt, "method", "post", "code", "200"), 6},
			{s(requests, "route", callsAt, "method", "post", "code", "202"), 4},
			{s(requests, "route", callsAt, "method", "post", "code", "422"), 1},
			{s(requests, "route", callsAt, "method", "post", "code", "400"), 1},
			{s(requests, "route", callsAt, "method", "post", "code", "404"), 1},
			{s(reqTime, "route", callsAt, "method", "post"), 13},
			{s(requests, "route", "/sagacity/approve/{sagaId}/{seq}", "method", "post", "code", "200"), 1},
			{s(requests, "route", "/sagacity/reject/{sagaId}/{seq}", "method", "post", "code", "200"), 1},
			{s(requests, "route", "/sagacity/resume/{sagaId}/{seq}", "method", "post", "code", "200"), 1},
			{s(requests, "route", "/sagacity/resume/{sagaId}/{seq}", "method", "post", "code", "503"), 1},
			{s(requests, "route", "/sagacity/in-doubt/{sagaId}/{seq}/resolve", "method", "post", "code", "200"), 1},
			{s(requests, "route", "/sagacity/audit/{sagaId}/verify", "method", "get", "code", "200"), 1},
			{s(requests, "route", "none", "method", "get", "code", "404"), 1},
			{s(requests, "route", "/sagacity/*", "method", "get", "code", "401"), 1},
			{s(requests, "route", "/metrics", "method", "get", "code", "401"), 1},
			{s(requests, "route", "/metrics", "method", "get", "code", "403"), 1},
			{s(requests, "route", "/metrics", "method", "get", "code", "200"), 1}, // the approver's; this scrape is not done yet
		}
		for _, w := range wants {
			if got, ok := w.s.value(fams); !ok || got != w.want {
				t.Errorf("scrape: %s = %v (found: %t), want %v", w.s, got, ok, w.want)
			}
		}
		oldest, ok := s("sagacity_oldest_pending_request_age_seconds").value(fams)
		if !ok || oldest <= 0 || oldest > 600 {
			t.Errorf("scrape: the oldest pending request's age = %v (found: %t), want the seconds since wire-2's request", oldest, ok)
		}
		for name, f := range fams {
			if strings.HasPrefix(name, "sagacity_") && len(f.GetHelp()) < 20 {
				t.Errorf("scrape: %s has help %q, want it explained", name, f.GetHelp())
			}
			for _, m := range f.GetMetric() {
				for _, l := range m.GetLabel() {
					for _, id := range sagas {
						if strings.Contains(l.GetValue(), id) {
							t.Errorf("scrape: %s has label %s=%q, which holds saga id %s", name, l.GetName(), l.GetValue(), id)
						}
					}
				}
			}
		}
	})
}
