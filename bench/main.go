// Command bench compares Sagacity's engine with the least PostgreSQL can
// do (autocommit INSERTs through pgx), with DBOS Transact for Go, and with
// raw SHA-256; measures how a call's cost grows with the store and what
// the real server does over HTTP; and writes the figures to a Markdown
// file (BENCHMARKS.md, by `make bench`).
//
// It is a module of its own so that the product never depends on DBOS.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sagacity-go/sagacity/internal/engine"
)

// config is what the flags set.
type config struct {
	out         string
	dbURL       string
	rounds      int
	ops         int // operations of each contender a round, one at a time
	concurrency int
	concOps     int // operations of each contender a round, concurrently
	verifyN     int // entries verified
	growth      []int
	agents      []int
	stream      []int // sizes of the SQLite stores the stream step checks
	httpTime    time.Duration
	held        int
	steps       map[string]bool // the steps to run; all when empty
}

func main() {
	var c config
	growth, agents, stream := "1000,100000,1000000", "1,8,64", "1000000,10000000"
	dbURL := os.Getenv("SAGACITY_TEST_DATABASE_URL")
	if dbURL == "" {
		dbURL = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
	}
	flag.StringVar(&c.out, "out", "BENCHMARKS.md", "where to write the report")
	flag.StringVar(&c.dbURL, "db", dbURL, "a PostgreSQL database to connect to; the benchmark creates and drops databases of its own beside it")
	flag.IntVar(&c.rounds, "rounds", 7, "interleaved rounds of each comparison")
	flag.IntVar(&c.ops, "ops", 400, "operations of each contender a round, one at a time")
	flag.IntVar(&c.concurrency, "concurrency", 32, "concurrent sagas (workflows, connections) in the concurrent comparison")
	flag.IntVar(&c.concOps, "conc-ops", 3000, "operations of each contender a round in the concurrent comparison")
	flag.IntVar(&c.verifyN, "verify", 100_000, "entries verified in memory")
	flag.StringVar(&growth, "growth", growth, "store sizes, in journal entries, the per-call time is compared at (the first is the base)")
	flag.StringVar(&stream, "stream", stream, "sizes, in journal entries, of the SQLite stores whose log the server checks in full (each seeded in $TMPDIR the first time)")
	flag.StringVar(&agents, "agents", agents, "concurrent agents of each HTTP load level")
	flag.DurationVar(&c.httpTime, "http-time", 10*time.Second, "how long each HTTP load level runs")
	flag.IntVar(&c.held, "held", 10_000, "calls held at once for their decision (Prefer: wait)")
	child := flag.String("check-store", "", "")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of this process over the run to this file (for go tool pprof)")
	steps := flag.String("steps", "", "run only these steps, comma-separated, of: "+strings.Join(stepNames, ", ")+" (for trying a change; the report then holds only theirs)")
	flag.Parse()
	if *child != "" { // the stream step's child (streamStep)
		if err := checkStore(context.Background(), *child); err != nil {
			fail(err)
		}
		return
	}
	if *steps != "" {
		c.steps = map[string]bool{}
		for s := range strings.SplitSeq(*steps, ",") {
			if !slices.Contains(stepNames, s) {
				fail(fmt.Errorf("-steps: no step %q; the steps are %s", s, strings.Join(stepNames, ", ")))
			}
			c.steps[s] = true
		}
	}
	var err error
	if c.growth, err = ints(growth); err != nil || len(c.growth) < 2 {
		fail(fmt.Errorf("-growth %q: want two or more sizes, comma-separated", growth))
	}
	if c.stream, err = ints(stream); err != nil {
		fail(fmt.Errorf("-stream %q: %w", stream, err))
	}
	if c.agents, err = ints(agents); err != nil {
		fail(fmt.Errorf("-agents %q: %w", agents, err))
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fail(fmt.Errorf("-cpuprofile: %w", err))
		}
		defer pprof.StopCPUProfile()
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, c); err != nil {
		fail(err)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "bench:", err)
	os.Exit(1)
}

func ints(s string) ([]int, error) {
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%q is not a positive number", f)
		}
		out = append(out, n)
	}
	return out, nil
}

// progress says what the run is doing, on stderr.
func progress(start time.Time, format string, args ...any) {
	fmt.Fprintf(os.Stderr, "[%6.1fs] %s\n", time.Since(start).Seconds(), fmt.Sprintf(format, args...))
}

func run(ctx context.Context, c config) (err error) {
	start := time.Now()
	r := report{started: start, config: c, loadStart: loadAverage()}
	if r.machine, err = machineOf(ctx, c.dbURL); err != nil {
		return err
	}
	dbs := newDatabases(c.dbURL)
	defer func() {
		if derr := dbs.dropAll(context.WithoutCancel(ctx)); derr != nil && err == nil {
			err = fmt.Errorf("dropping the benchmark's databases: %w", derr)
		}
	}()
	tmp, err := os.MkdirTemp("", "sagacity-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	_, keys, err := newKeys()
	if err != nil {
		return err
	}
	b := &bench{c: c, dbs: dbs, tmp: tmp, keys: keys, start: start, r: &r}
	// Verification first, while nothing else keeps a core busy: after the
	// engine's figures PostgreSQL is still writing what they left for a
	// while.
	for i, step := range []func(context.Context) error{b.verifyFigure, b.streamStep, b.engineFigures, b.growthFigure, b.roundTrips, b.httpView, b.heldStep, b.tasksStep} {
		if len(c.steps) > 0 && !c.steps[stepNames[i]] {
			continue
		}
		if err := step(ctx); err != nil {
			return err
		}
	}
	r.took, r.loadEnd = time.Since(start), loadAverage()
	if err := os.WriteFile(c.out, r.markdown(), 0o644); err != nil {
		return err
	}
	progress(start, "wrote %s", c.out)
	return nil
}

// newKeys makes a signing key, as text and as keys.
func newKeys() (string, *engine.Keys, error) {
	skey, _, err := engine.GenerateKeys("sagacity.bench")
	if err != nil {
		return "", nil, err
	}
	keys, err := engine.NewKeys(skey)
	return skey, keys, err
}

// stepNames names the run's steps, in the order they run.
var stepNames = []string{"verify", "stream", "engine", "growth", "trips", "http", "held", "tasks"}

// bench is one run's shared state.
type bench struct {
	c     config
	dbs   *databases
	tmp   string
	keys  *engine.Keys
	start time.Time
	r     *report
	bin   string // the server's binary, once built (binary)
}

// binary builds cmd/web of the module measured, once a run.
func (b *bench) binary(ctx context.Context) (string, error) {
	if b.bin != "" {
		return b.bin, nil
	}
	root, err := moduleRoot(ctx)
	if err != nil {
		return "", err
	}
	progress(b.start, "building %s/cmd/web", root)
	b.bin, err = buildServer(ctx, root, b.tmp)
	return b.bin, err
}

// moduleRoot is the directory of the module the harness measures.
func moduleRoot(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "list", "-m", "-f", "{{.Dir}}", "github.com/sagacity-go/sagacity").Output()
	if err != nil {
		return "", fmt.Errorf("go list -m github.com/sagacity-go/sagacity: %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}
