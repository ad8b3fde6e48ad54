package main

import (
	"bytes"
	"context"
	_ "embed"
	"fmt"
	"net/url"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// report is what the run found.
type report struct {
	started time.Time
	took    time.Duration
	// load is the system's load average over 1, 5 and 15 minutes at the
	// start and at the end: the machine may have had other work.
	loadStart, loadEnd string
	config             config
	machine            machine
	figures            []figure
	trips              trips
	cpu                []named // CPU an operation took, of the concurrent group
	http               []httpResult
	held               []heldResult
	tasks              []tasksResult
	streamed           []streamed // the checks of the seeded stores
	groups             [2]int64   // group commits in the engine's concurrent rounds: transactions, members
}

// named is a contender's CPU use.
type named struct {
	name string
	use  cpuUse
}

// machine is where the run ran.
type machine struct {
	cpu, kernel, ram, postgres string
	cores                      int
	pgAddr                     string // host:port of the PostgreSQL server
}

func machineOf(ctx context.Context, dbURL string) (machine, error) {
	m := machine{cpu: "unknown", kernel: "unknown", ram: "unknown", cores: runtime.NumCPU()}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.Lines(string(b)) {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.cpu = strings.TrimSpace(v)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.kernel = "Linux " + strings.TrimSpace(string(b))
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for line := range strings.Lines(string(b)) {
			if v, ok := strings.CutPrefix(line, "MemTotal:"); ok {
				if kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64); err == nil {
					m.ram = fmt.Sprintf("%.1f GiB", float64(kb)/(1<<20))
				}
			}
		}
	}
	u, err := url.Parse(dbURL)
	if err != nil {
		return m, err
	}
	m.pgAddr = u.Host
	if u.Port() == "" {
		m.pgAddr += ":5432"
	}
	m.postgres, err = serverVersion(ctx, dbURL)
	return m, err
}

// loadAverage is the first three fields of /proc/loadavg.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) >= 3 {
		return strings.Join(f[:3], " ")
	}
	return "unknown"
}

// goal is a figure's target.
type goal struct {
	text string
	met  func(float64) bool
}

func atMost(x float64) goal {
	return goal{"≤ " + times(x), func(r float64) bool { return r <= x }}
}

func atLeast(x float64) goal {
	return goal{"≥ " + times(x), func(r float64) bool { return r >= x }}
}

// noGrowth is a ratio that is to stay at 1, counted as met up to x: the
// rounds' noise.
func noGrowth(x float64) goal {
	return goal{fmt.Sprintf("stays 1.0× (met up to %s)", times(x)), func(r float64) bool { return r <= x }}
}

// figure is one row of the table.
type figure struct {
	name  string
	goal  goal
	ratio spread
	sides string // each side's median, in its terms
}

// slower is the figure whose ratio is contender a's time per operation
// over b's, in each round.
func slower(name string, g goal, per [][]time.Duration, cs []contender, a, b int) figure {
	return figure{name, g, spreadOf(ratios(per, func(t []time.Duration) float64 { return float64(t[a]) / float64(t[b]) })),
		fmt.Sprintf("%s %s vs %s %s", cs[a].name, duration(spreadOf(column(per, a)).med), cs[b].name, duration(spreadOf(column(per, b)).med))}
}

// faster is the figure whose ratio is contender a's throughput over b's
// (b's time per operation over a's), in each round.
func faster(name string, g goal, per [][]time.Duration, cs []contender, a, b int) figure {
	rate := func(k int) string { return fmt.Sprintf("%.0f/s", float64(time.Second)/spreadOf(column(per, k)).med) }
	return figure{name, g, spreadOf(ratios(per, func(t []time.Duration) float64 { return float64(t[b]) / float64(t[a]) })),
		fmt.Sprintf("%s %s vs %s %s", cs[a].name, rate(a), cs[b].name, rate(b))}
}

// trips are round trips to PostgreSQL, by operation.
type trips struct {
	executed, gated, dbos float64
	sequencer             int64 // of one sequencer pass appending sequenced entries
	sequenced             int
}

func times(x float64) string { return strconv.FormatFloat(x, 'f', -1, 64) + "×" }

func duration(ns float64) string {
	switch d := time.Duration(ns); {
	case d >= time.Second:
		return fmt.Sprintf("%.2f s", d.Seconds())
	case d >= time.Millisecond:
		return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond))
	default:
		return fmt.Sprintf("%.1f µs", float64(d)/float64(time.Microsecond))
	}
}

// count writes n with thousands separators.
func count(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

func (r *report) markdown() []byte {
	var b bytes.Buffer
	p := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	c, m := r.config, r.machine
	p("# Benchmarks")
	p("")
	p("Written by `make bench` (the harness in `bench/`, a module of its own); do not edit by hand, run it again.")
	p("")
	p("- Date: %s (the run took %s)", r.started.UTC().Format("2006-01-02 15:04 MST"), r.took.Round(time.Second))
	p("- Machine: %s, %d cores, %s RAM, %s", m.cpu, m.cores, m.ram, m.kernel)
	p("- Load average (1, 5, 15 min): %s at the start, %s at the end", r.loadStart, r.loadEnd)
	p("- Go: %s; PostgreSQL: %s, on the same machine", runtime.Version(), m.postgres)
	p("- Compared with: DBOS Transact Go v1.8.0 (`github.com/dbos-inc/dbos-transact-golang`), and pgx as the floor")
	p("")
	p("## Method")
	p("")
	p("Everything runs side by side in one process and one run, against the same PostgreSQL, each "+
		"contender over a fresh database of its own. The engine runs in-process as `cmd/web` runs it: the "+
		"PostgreSQL store, the global log on (a checkpoint every 1,000 leaves or 10 s, the sequencer every "+
		"200 ms in a goroutine), and two tools that do nothing, so that only the engine is timed: an executed "+
		"call is `engine.Call` of a COMPENSATABLE tool (INTENT, the tool, EXECUTED: two transactions), a "+
		"gated call one of an IRREVERSIBLE tool (AWAITING_APPROVAL: one transaction); each worker starts a "+
		"new saga every %d calls. The floor is pgx's autocommit `INSERT INTO floor (v) VALUES ($1)` on one "+
		"connection per worker: two per executed call, one per gated call. DBOS runs a workflow of one step "+
		"that returns a string, with its system database in PostgreSQL and its defaults otherwise, started "+
		"and awaited (`RunWorkflow`, `GetResult`). Contenders compared with each other run in the same "+
		"interleaved rounds: after a warm-up, each round makes %d operations of each (%d in the concurrent "+
		"group, spread over %d workers), one contender after the other, the order rotating from round to "+
		"round; a round's ratio compares its contenders measured within seconds of each other, and the "+
		"table gives the median of %d rounds' ratios and their range. Time per operation is wall time over "+
		"operations, so at %d workers it is the inverse of throughput. Verification is `evidence.Verify` "+
		"over one journal of all the entries, in memory, which it checks a chunk at a time on every core, against "+
		"`sha256.Sum256` on one core over the same bytes, prepared beforehand, %d passes a round, first in the run, while nothing else keeps a core busy. For growth, each store is seeded with SQL (sagas of %d executed "+
		"calls, their hashes not chained: a call reads no other saga's journal), its entries given their "+
		"leaves in the log and the tables vacuumed and analyzed, as autovacuum would have, before the "+
		"rounds; the calls timed then run with the sequencer on, as everywhere. The HTTP view runs the real binary "+
		"(`go build ./cmd/web`, tokens mode) against a tool server that only checks each request's "+
		"signature with `toolsig`; agents are goroutines with keep-alive HTTP clients, each on sagas of "+
		"its own; each level runs %s after a warm-up of a fifth of that, and the server's RSS is read from "+
		"`/proc/<pid>/status` every 100 ms.",
		sagaLength, c.ops, c.concOps, c.concurrency, c.rounds, c.concurrency, verifyPasses, sagaLength, c.httpTime)
	p("")
	p("## Figures")
	p("")
	p("| figure | measured: median (range) | goal | met? | the two sides, medians per operation |")
	p("|---|---|---|---|---|")
	for _, f := range r.figures {
		met := "missed"
		if f.goal.met(f.ratio.med) {
			met = "met"
		}
		measured := fmt.Sprintf("%.2f× (%.2f–%.2f)", f.ratio.med, f.ratio.lo, f.ratio.hi)
		if f.ratio.lo == f.ratio.hi {
			measured = fmt.Sprintf("%.2f× (one measurement)", f.ratio.med)
		}
		p("| %s | %s | %s | %s | %s |", f.name, measured, f.goal.text, met, f.sides)
	}
	p("")
	p("## HTTP: the agent gateway")
	p("")
	p("`POST /sagacity/sagas/{id}/calls` of the COMPENSATABLE tool, through the server's HTTP stack, auth, "+
		"the engine, the signed HTTP call to the tool server and back, each level for %s.", c.httpTime)
	p("")
	p("| agents | calls | calls/s | p50 | p99 | server RSS (max) |")
	p("|---|---|---|---|---|---|")
	for _, h := range r.http {
		p("| %d | %s | %.0f | %s | %s | %.0f MiB |", h.agents, count(h.calls), h.perSec, duration(float64(h.p50)), duration(float64(h.p99)),
			float64(h.rssMax)/(1<<20))
	}
	if len(r.held) > 0 {
		p("")
		p("## Calls held for their decision")
		p("")
		p("Agents send a gated call with `Prefer: wait=%d`, each on a connection of its own, to the real binary (tokens mode; "+
			"on PostgreSQL two replicas of one database, the calls split between them), under a rule that executes on approval. "+
			"A held call's cost is what the servers' RSS grew by while holding them all, after a warm-up, over the calls held. "+
			"Then %d of them are approved one at a time on the first replica, each by one of %d approver tokens from an address "+
			"of its own, and each agent's answer, the tool's result, is timed from the vote's `decidedAt` (its journal entry, "+
			"the same machine's clock): through the commit, the wake-up (PostgreSQL's `NOTIFY` for the other replica), "+
			"the tool's call and the answer's way back.", heldWait, heldSample, heldApprovers)
		p("")
		p("| store | held at once | RSS a held call | of it, stacks and heap | goal | met? | vote → answer p50 | p99 | goal | met? | worst | p99 on the other replica |")
		p("|---|---|---|---|---|---|---|---|---|---|---|---|")
		for _, h := range r.held {
			goal := 20 * time.Millisecond
			if h.replicas > 1 {
				goal = 50 * time.Millisecond
			}
			met := func(ok bool) string {
				if ok {
					return "met"
				}
				return "missed"
			}
			other := "—"
			if h.crossSeen > 0 {
				other = fmt.Sprintf("%s (%d answers)", duration(float64(h.crossP99)), h.crossSeen)
			}
			p("| %s, %d replica(s) | %s | %.1f KiB | %.1f + %.1f KiB | ≤ 16 KiB | %s | %s | %s | ≤ %s | %s | %s | %s |", h.store, h.replicas,
				count(h.held), float64(h.perCall)/1024, float64(h.stacks)/1024, float64(h.heap)/1024, met(h.perCall <= 16<<10),
				duration(float64(h.p50)), duration(float64(h.p99)), duration(float64(goal)), met(h.p99 <= goal), duration(float64(h.worst)), other)
		}
	}
	if len(r.tasks) > 0 {
		p("")
		p("## MCP tasks: what a poll costs the database")
		p("")
		p("One MCP session (the real binary on PostgreSQL, tokens mode) calls the gated tool as a task, each in a saga of "+
			"its own, then polls `tasks/get` at %d a second for %s, round the open tasks, with 100 tasks open and again with "+
			"1,000; what PostgreSQL counted for the database meanwhile (`pg_stat_database`: rows returned and fetched, blocks "+
			"hit and read, transactions, read %s after each burst so that idle backends have reported), less what the server "+
			"did by itself over as long a window with no poll just before (the sequencer, the sweeps, the heartbeat), is divided by the polls. "+
			"The goal is on the rows a poll reads; its blocks also count the index pages above them, one level more once "+
			"an index outgrows its root, which any lookup by key pays as a table grows.",
			tasksRate, tasksFor, statsFlush)
		p("")
		p("| tasks open | polls | p50 | p99 | rows per poll | blocks per poll | transactions per poll | rows, blocks vs 100 open | goal (rows) | met? |")
		p("|---|---|---|---|---|---|---|---|---|---|")
		for i, t := range r.tasks {
			vs, met := "—", "—"
			if i > 0 {
				vs = fmt.Sprintf("%.2f×, %.2f×", t.ratioTuples, t.ratioBlks)
				met = "met"
				if t.ratioTuples > 1.1 {
					met = "missed"
				}
			}
			p("| %s | %s | %s | %s | %.1f | %.1f | %.2f | %s | stays 1.0× (met up to 1.1×) | %s |", count(t.open), count(t.polls),
				duration(float64(t.p50)), duration(float64(t.p99)), t.tuples, t.blocks, t.xacts, vs, met)
		}
	}
	if len(r.streamed) > 0 {
		p("")
		p("## The server's log check, streamed from SQLite")
		p("")
		p("`tlog.Log.Check` of a SQLite store of %s sagas (sagas of executed calls' entries, seeded once in "+
			"`$TMPDIR` through the log's own sequencer), against its checkpoint, in a process of its own: "+
			"cheap from the tree's nodes, then full, from every entry. The full check reads the next 2,000 "+
			"leaves while it hashes the last on every core and keeps each saga's last entry.", count(streamSagas))
		p("")
		p("| entries | cheap check | full check | entries/s | peak RSS | of it, once the store was open |")
		p("|---|---|---|---|---|---|")
		for _, s := range r.streamed {
			p("| %s | %s | %.1f s | %s | %.0f MiB | %.0f MiB |", count(int(s.Leaves)), duration(s.Cheap*1e9), s.Seconds,
				count(int(float64(s.Leaves)/s.Seconds)), float64(s.RSSPeak)/(1<<20), float64(s.RSSOpen)/(1<<20))
		}
	}
	p("")
	p("## Notes")
	p("")
	t := r.trips
	p("- Round trips to PostgreSQL, counted by a proxy that counts each Sync and Query the clients send: "+
		"an executed call %.1f, a gated call %.1f, one sequencer pass %d (appending the %s entries of %s "+
		"executed calls), a DBOS one-step workflow %.1f (its background work during the count included). "+
		"The floor is 1 per INSERT+COMMIT. Each commit also waits for its WAL flush, the same for all.",
		t.executed, t.gated, t.sequencer, count(t.sequenced), count(t.sequenced/2), t.dbos)
	p("- The engine's pool is the store's default (32 connections, as in production unless the database URL sets " +
		"`pool_max_conns`), DBOS's its default (20); the floor has one connection per worker.")
	p("- Everything shares %d cores: the harness, PostgreSQL and, for the HTTP view, the server and the tool server.", m.cores)
	if g := r.groups; g[0] > 0 {
		p("- Group commit in the engine's rounds at %d at once (warm-ups included): %s transactions of two members or more, "+
			"holding %s commits, %.1f a transaction; the rest committed alone.", c.concurrency, count(int(g[0])), count(int(g[1])), float64(g[1])/float64(g[0]))
	}
	if len(r.cpu) > 0 {
		var parts []string
		for _, c := range r.cpu {
			parts = append(parts, fmt.Sprintf("%s %s (%s of it in this process)", c.name, duration(float64(c.use.machine)), duration(float64(c.use.self))))
		}
		p("- CPU an operation took at %d at once, on the whole machine (from `/proc/stat`), and of that in this "+
			"process (the engine and pgx, DBOS, or pgx alone, and the harness; the rest is mostly PostgreSQL): %s.",
			c.concurrency, strings.Join(parts, "; "))
	}
	p("")
	b.Write(analysis)
	return b.Bytes()
}

// analysis is the hand-written reading of the figures, kept with the
// harness so that the report and its explanation change together.
//
//go:embed analysis.md
var analysis []byte
