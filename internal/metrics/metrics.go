// Package metrics exports what the engine and the HTTP server do as
// Prometheus metrics, on a registry of its own: it is the engine's
// Observer, the instrumentation of every route, and the handler that
// serves them. Labels hold tool names, route patterns and closed sets of
// outcomes, never a saga id, a principal or a path as requested.
package metrics

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/sagacity-go/sagacity/internal/engine"
	"github.com/sagacity-go/sagacity/wire"
)

// latency are the buckets of both histograms, in seconds: a request or a
// tool may take from milliseconds to a tool's longest timeout (five
// minutes).
var latency = []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300}

// scrapeTimeout bounds the engine's work for one scrape.
const scrapeTimeout = 5 * time.Second

// Recorder records what the engine and the HTTP server do, and serves it.
type Recorder struct {
	reg            *prometheus.Registry
	handler        http.Handler
	calls          *prometheus.CounterVec
	decisions      *prometheus.CounterVec
	toolSeconds    *prometheus.HistogramVec
	compensations  *prometheus.CounterVec
	verifyFailures *prometheus.CounterVec
	storeErrors    *prometheus.CounterVec
	requests       *prometheus.CounterVec
	requestSeconds *prometheus.HistogramVec
	notifications  *prometheus.CounterVec
}

var _ engine.Observer = (*Recorder)(nil)

// New returns the metrics, all zero, with the Go runtime's and the
// process's. Errors while serving them go to log.
func New(log *slog.Logger) *Recorder {
	m := &Recorder{reg: prometheus.NewRegistry()}
	m.handler = promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{
		// A database that is down takes the backlog's gauges away, not
		// the counters that say so.
		ErrorHandling: promhttp.ContinueOnError,
		ErrorLog:      slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	})
	counter := func(name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sagacity_" + name, Help: help}, labels)
	}
	histogram := func(name, help string, labels ...string) *prometheus.HistogramVec {
		return prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "sagacity_" + name, Help: help, Buckets: latency}, labels)
	}
	m.calls = counter("tool_calls_total", "Requests to run a tool (agents' calls and resumes of approved requests), by tool and how they ended: "+
		"executed, awaiting_approval, failed (the saga was compensated), in_doubt, refused (nothing ran), error (the store failed). "+
		`tool is "" when no registered tool was named.`, "tool", "outcome")
	m.decisions = counter("decisions_total", "People's decisions, as their receipts name them: approved, rejected, "+
		"and what calls in doubt came to (happened, not-happened, undone, not-undone).", "decision")
	m.toolSeconds = histogram("tool_duration_seconds", "How long tools took, by tool and phase (execute, compensate).", "tool", "phase")
	m.compensations = counter("compensations_total", "Sagas whose compensation ended, by outcome: compensated or compensation_failed.", "outcome")
	m.verifyFailures = counter("verify_failures_total", "Verifications that found evidence broken: a saga's journal (check=journal), "+
		"the global log against the newest checkpoint, which halts executions (check=log), or a notification's outbox rows, "+
		"not as the server wrote them, which are never sent (check=notification).", "check")
	m.storeErrors = counter("store_errors_total", "Store operations that failed, by kind: unavailable or internal.", "kind")
	m.requests = counter("http_requests_total", `HTTP requests, by route pattern ("none" when no route matched), method and status code.`,
		"route", "method", "code")
	m.requestSeconds = histogram("http_request_duration_seconds", "How long HTTP requests took, by route pattern and method.", "route", "method")
	m.notifications = counter("notification_attempts_total", "Attempts to deliver a notification, by endpoint, channel (webhook, slack, "+
		"email, pagerduty) and outcome: delivered, retry (tried again later), failed (given up on), gone (the endpoint answered 410 "+
		"and is disabled).", "endpoint", "channel", "outcome")
	m.reg.MustRegister(m.calls, m.decisions, m.toolSeconds, m.compensations, m.verifyFailures, m.storeErrors,
		m.requests, m.requestSeconds, m.notifications, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	// The closed sets start at zero, so that an increase is seen from the
	// first one.
	for _, d := range engine.Decideds {
		m.decisions.WithLabelValues(string(d))
	}
	for _, s := range []engine.Status{wire.Compensated, wire.CompensationFailed} {
		m.compensations.WithLabelValues(outcome(s))
	}
	for _, c := range []engine.Checked{engine.CheckedJournal, engine.CheckedLog, engine.CheckedNotification} {
		m.verifyFailures.WithLabelValues(string(c))
	}
	for _, k := range []engine.Kind{engine.Unavailable, engine.Internal} {
		m.storeErrors.WithLabelValues(k.String())
	}
	return m
}

// Backlogger is what the metrics read from the engine at each scrape.
type Backlogger interface {
	Backlog(ctx context.Context) (engine.Backlog, error)
	Halted() string
	Held() int
}

// Watch adds the gauges of e's backlog, read at each scrape: pending
// requests by tool, the oldest one's age, the calls in doubt, the
// rules the people known cannot meet and the break-glass executions not
// ratified (and of them, past their window); and whether executions are
// halted. Call it once.
func (m *Recorder) Watch(e Backlogger) {
	m.reg.MustRegister(&backlog{e: e,
		halted: prometheus.NewDesc("sagacity_executions_halted",
			"1 while executions of IRREVERSIBLE tools are halted (the database does not match the checkpoints, or they cannot be kept); GET /sagacity/log says why.", nil, nil),
		pending: prometheus.NewDesc("sagacity_pending_requests", "Requests waiting for a person (undecided, or approved and not yet resumed), by tool.",
			[]string{"tool"}, nil),
		oldest: prometheus.NewDesc("sagacity_oldest_pending_request_age_seconds",
			"How long the oldest pending request has waited; 0 when none is pending.", nil, nil),
		inDoubt: prometheus.NewDesc("sagacity_calls_in_doubt",
			"Calls whose outcome the journal does not know (cut off by a process that is gone, or still for the in-doubt window): each blocks its saga until a person resolves it.", nil, nil),
		outbox: prometheus.NewDesc("sagacity_outbox_pending", "Notifications not delivered yet, by endpoint: due, or waiting for a retry.",
			[]string{"endpoint"}, nil),
		outboxAge: prometheus.NewDesc("sagacity_outbox_oldest_age_seconds",
			"How long the oldest notification not delivered yet has waited, by endpoint.", []string{"endpoint"}, nil),
		unmeetable: prometheus.NewDesc("sagacity_unmeetable_rules",
			"Approval rules of the policy in force that the people the server knows cannot meet (the console's policy page says why).", nil, nil),
		unratified: prometheus.NewDesc("sagacity_break_glass_unratified",
			"Break-glass executions their rules' quorums have not ratified yet (every console page lists them).", nil, nil),
		overdue: prometheus.NewDesc("sagacity_break_glass_overdue",
			"Break-glass executions not ratified by the end of their window: verification flags them.", nil, nil),
		held: prometheus.NewDesc("sagacity_held_calls",
			"Calls this process holds until their request is decided (Prefer: wait, MCP calls and tasks).", nil, nil),
	})
}

// backlog is the collector of the backlog's gauges.
type backlog struct {
	e                                                                                          Backlogger
	halted, pending, oldest, inDoubt, outbox, outboxAge, held, unmeetable, unratified, overdue *prometheus.Desc
}

func (b *backlog) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{b.halted, b.pending, b.oldest, b.inDoubt, b.outbox, b.outboxAge, b.held, b.unmeetable, b.unratified, b.overdue} {
		ch <- d
	}
}

func (b *backlog) Collect(ch chan<- prometheus.Metric) {
	halted := 0.0
	if b.e.Halted() != "" {
		halted = 1
	}
	ch <- prometheus.MustNewConstMetric(b.halted, prometheus.GaugeValue, halted)
	ch <- prometheus.MustNewConstMetric(b.held, prometheus.GaugeValue, float64(b.e.Held()))
	ctx, cancel := context.WithTimeout(context.Background(), scrapeTimeout)
	defer cancel()
	bl, err := b.e.Backlog(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(b.pending, err)
		return
	}
	for _, p := range bl.Pending {
		ch <- prometheus.MustNewConstMetric(b.pending, prometheus.GaugeValue, float64(p.Count), p.Tool)
	}
	ch <- prometheus.MustNewConstMetric(b.oldest, prometheus.GaugeValue, bl.Oldest.Seconds())
	ch <- prometheus.MustNewConstMetric(b.inDoubt, prometheus.GaugeValue, float64(bl.InDoubt))
	ch <- prometheus.MustNewConstMetric(b.unmeetable, prometheus.GaugeValue, float64(bl.Unmeetable))
	ch <- prometheus.MustNewConstMetric(b.unratified, prometheus.GaugeValue, float64(bl.Unratified))
	ch <- prometheus.MustNewConstMetric(b.overdue, prometheus.GaugeValue, float64(bl.Overdue))
	for _, o := range bl.Outbox {
		age := 0.0
		if !o.Oldest.IsZero() {
			age = time.Since(o.Oldest).Seconds()
		}
		ch <- prometheus.MustNewConstMetric(b.outbox, prometheus.GaugeValue, float64(o.Pending), o.Name)
		ch <- prometheus.MustNewConstMetric(b.outboxAge, prometheus.GaugeValue, age, o.Name)
	}
}

// ServeHTTP serves the metrics in Prometheus' text format, to whoever the
// route lets through.
func (m *Recorder) ServeHTTP(w http.ResponseWriter, r *http.Request) { m.handler.ServeHTTP(w, r) }

// Instrument counts and times each request under its route's pattern, as
// chi knows it once the handler has run (/sagacity/sagas/{sagaId}/calls,
// never the path requested). It must run inside the router (chi's Use),
// where that pattern is kept.
func (m *Recorder) Instrument(next http.Handler) http.Handler {
	route := promhttp.WithLabelFromCtx("route", routeOf)
	return promhttp.InstrumentHandlerDuration(m.requestSeconds, promhttp.InstrumentHandlerCounter(m.requests, next, route), route)
}

// routeOf is the pattern of the route that served a request, or "none".
func routeOf(ctx context.Context) string {
	if rc := chi.RouteContext(ctx); rc != nil {
		if p := rc.RoutePattern(); p != "" {
			return p
		}
	}
	return "none"
}

// Called counts a request to run a tool.
func (m *Recorder) Called(tool string, end engine.CallEnd) {
	m.calls.WithLabelValues(tool, string(end)).Inc()
}

// Decided counts a person's decision.
func (m *Recorder) Decided(decision engine.Decided) {
	m.decisions.WithLabelValues(string(decision)).Inc()
}

// ToolRan observes how long a tool took.
func (m *Recorder) ToolRan(tool string, phase engine.ToolPhase, took time.Duration) {
	m.toolSeconds.WithLabelValues(tool, string(phase)).Observe(took.Seconds())
}

// Compensated counts a saga whose compensation ended.
func (m *Recorder) Compensated(s engine.Status) { m.compensations.WithLabelValues(outcome(s)).Inc() }

// VerifyFailed counts a verification that found evidence broken.
func (m *Recorder) VerifyFailed(what engine.Checked) {
	m.verifyFailures.WithLabelValues(string(what)).Inc()
}

// Attempted counts an attempt to deliver a notification (it is the
// relay's notify.Observer).
func (m *Recorder) Attempted(endpoint, channel, outcome string) {
	m.notifications.WithLabelValues(endpoint, channel, outcome).Inc()
}

// StoreError counts a store operation that failed.
func (m *Recorder) StoreError(k engine.Kind) { m.storeErrors.WithLabelValues(k.String()).Inc() }

// outcome is the label of a saga's status after compensation.
func outcome(s engine.Status) string { return strings.ToLower(string(s)) }
