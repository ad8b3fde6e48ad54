package main

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"runtime"
	"time"

	"github.com/dbos-inc/dbos-transact-golang/dbos"
)

// engineFigures compares the engine with the pgx floor and with DBOS, one
// call at a time and with b.c.concurrency sagas at once. Each group of
// contenders runs in the same interleaved rounds.
func (b *bench) engineFigures(ctx context.Context) (err error) {
	var engURL, floorURL, dbosURL string
	for _, db := range []struct {
		url  *string
		what string
	}{{&engURL, "engine"}, {&floorURL, "floor"}, {&dbosURL, "dbos"}} {
		if *db.url, err = b.dbs.fresh(ctx, db.what); err != nil {
			return err
		}
	}
	e, err := openEngine(ctx, engURL, b.keys, b.tmp)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, e.close(ctx)) }()
	if err := e.sequence(ctx); err != nil {
		return err
	}
	f, err := newFloor(ctx, floorURL, b.c.concurrency)
	if err != nil {
		return err
	}
	defer f.close(ctx)
	d, err := openDBOS(ctx, dbosURL)
	if err != nil {
		return fmt.Errorf("DBOS: %w", err)
	}
	defer func() { err = errors.Join(err, dbos.Shutdown(d, 30*time.Second)) }()
	inserts := func(k int) op {
		return func(ctx context.Context, w worker, i int) error { return f.inserts(ctx, w.N, k) }
	}

	progress(b.start, "one at a time: engine, pgx floor, DBOS; %d rounds of %d operations each", b.c.rounds, b.c.ops)
	one := []contender{
		loaded("engine executed call", 1, e.call(toolExecuted)),
		loaded("pgx 2 INSERT+COMMITs", 1, inserts(2)),
		loaded("engine gated call", 1, e.call(toolGated)),
		loaded("pgx 1 INSERT+COMMIT", 1, inserts(1)),
		loaded("DBOS one-step workflow", 1, workflow(d)),
	}
	per, err := rounds(ctx, b.c.rounds, b.c.ops, one...)
	if err != nil {
		return err
	}
	b.r.figures = append(b.r.figures,
		slower("executed call through the engine / two INSERT+COMMITs with pgx", atMost(1.5), per, one, 0, 1),
		slower("gated call / one INSERT+COMMIT", atMost(1.3), per, one, 2, 3),
		faster("engine throughput / DBOS one-step workflow, sequential", atLeast(2), per, one, 0, 4))

	n := b.c.concurrency
	progress(b.start, "%d at once: engine, DBOS, pgx floor; %d rounds of %d operations each", n, b.c.rounds, b.c.concOps)
	many := []contender{
		loaded(fmt.Sprintf("engine executed calls in %d sagas", n), n, e.call(toolExecuted)),
		loaded(fmt.Sprintf("DBOS %d workflows", n), n, workflow(d)),
		loaded(fmt.Sprintf("pgx %d connections, 2 INSERT+COMMITs", n), n, inserts(2)),
	}
	groups, members := e.db.Grouped()
	if per, err = rounds(ctx, b.c.rounds, b.c.concOps, many...); err != nil {
		return err
	}
	g, m := e.db.Grouped()
	b.r.groups = [2]int64{g - groups, m - members}
	b.r.figures = append(b.r.figures,
		faster(fmt.Sprintf("the same, %d concurrent sagas", n), atLeast(4), per, many, 0, 1),
		slower(fmt.Sprintf("time per executed call at %d concurrent sagas / floor at %d", n, n), atMost(1.0), per, many, 0, 2))
	// Where the time goes at that load: on two cores it is CPU.
	for _, c := range many {
		use, err := measureCPU(ctx, c, b.c.concOps)
		if err != nil {
			return err
		}
		b.r.cpu = append(b.r.cpu, named{c.name, use})
	}
	return nil
}

// verifyPasses is how many times each contender of the verify figure
// goes over the journal a round: a pass takes some 20 ms, short enough
// for a moment's noise on this machine to move one round's ratio.
const verifyPasses = 10

// verifyFigure compares evidence.Verify with raw SHA-256 over the same
// bytes, in memory.
func (b *bench) verifyFigure(ctx context.Context) error {
	progress(b.start, "verify: one journal of %d entries in memory", b.c.verifyN)
	cs, err := verifyContenders(journals(b.c.verifyN, b.c.verifyN))
	if err != nil {
		return err
	}
	per, err := rounds(ctx, b.c.rounds, verifyPasses, cs...)
	if err != nil {
		return err
	}
	b.r.figures = append(b.r.figures,
		slower(fmt.Sprintf("verifying a journal of %s entries in memory, on %d cores / raw SHA-256 over the same preimage bytes on one",
			count(b.c.verifyN), runtime.GOMAXPROCS(0)), atMost(0.75), per, cs, 0, 1))
	return nil
}

// growthFigure compares an executed call's time on stores seeded with
// each of b.c.growth entries, each store with its engine and its
// sequencer running.
func (b *bench) growthFigure(ctx context.Context) (err error) {
	var cs []contender
	var engines []*benchEngine
	defer func() {
		for _, e := range engines {
			err = errors.Join(err, e.close(ctx))
		}
	}()
	for _, size := range b.c.growth {
		progress(b.start, "growth: seeding a store of %s entries", count(size))
		url, err := b.dbs.fresh(ctx, fmt.Sprintf("growth_%d", size))
		if err != nil {
			return err
		}
		e, err := openEngine(ctx, url, b.keys, b.tmp)
		if err != nil {
			return err
		}
		engines = append(engines, e)
		if err := seed(ctx, url, size); err != nil {
			return fmt.Errorf("seeding %d entries: %w", size, err)
		}
		progress(b.start, "growth: giving them their leaves in the log")
		if st, err := e.log.Sequence(ctx, true); err != nil || st.Size != int64(size) {
			return fmt.Errorf("sequencing the %d seeded entries: log size %d, %w", size, st.Size, err)
		}
		if err := vacuum(ctx, url); err != nil {
			return err
		}
		if err := e.sequence(ctx); err != nil {
			return err
		}
		cs = append(cs, loaded(fmt.Sprintf("executed call, %s entries", count(size)), 1, e.call(toolExecuted)))
	}
	progress(b.start, "growth: %d rounds of %d calls on each store", b.c.rounds, b.c.ops)
	per, err := rounds(ctx, b.c.rounds, b.c.ops, cs...)
	if err != nil {
		return err
	}
	for k := 1; k < len(cs); k++ {
		b.r.figures = append(b.r.figures, slower(fmt.Sprintf("time per call, store of %s entries / %s",
			count(b.c.growth[k]), count(b.c.growth[0])), noGrowth(1.1), per, cs, k, 0))
	}
	return nil
}

// roundTrips counts the round trips an executed call, a gated call, a
// sequencer pass and a DBOS workflow make, through a counting proxy, on
// fresh databases. The engine's sequencer loop is off, so a call's count
// is its own; the pass appends what the counted calls wrote.
func (b *bench) roundTrips(ctx context.Context) (err error) {
	progress(b.start, "counting round trips")
	p, err := newRoundTrips(b.r.machine.pgAddr)
	if err != nil {
		return err
	}
	defer p.close()
	trips := func(n int, do op) (float64, error) {
		before := p.count.Load()
		if _, err := load(ctx, 1, n, do); err != nil {
			return 0, err
		}
		return float64(p.count.Load()-before) / float64(n), nil
	}
	const n = 200
	url, err := b.dbs.fresh(ctx, "trips")
	if err != nil {
		return err
	}
	if url, err = p.via(url); err != nil {
		return err
	}
	e, err := openEngine(ctx, url, b.keys, b.tmp)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, e.close(ctx)) }()
	if _, err := load(ctx, 1, n, e.call(toolExecuted)); err != nil { // statements prepared, first sagas made
		return err
	}
	if _, err := e.log.Sequence(ctx, false); err != nil {
		return err
	}
	t := &b.r.trips
	if t.executed, err = trips(n, e.call(toolExecuted)); err != nil {
		return err
	}
	before := p.count.Load()
	if _, err := e.log.Sequence(ctx, false); err != nil {
		return err
	}
	t.sequencer, t.sequenced = p.count.Load()-before, 2*n
	if t.gated, err = trips(n, e.call(toolGated)); err != nil {
		return err
	}

	if url, err = b.dbs.fresh(ctx, "trips_dbos"); err != nil {
		return err
	}
	if url, err = p.via(url); err != nil {
		return err
	}
	d, err := openDBOS(ctx, url)
	if err != nil {
		return fmt.Errorf("DBOS: %w", err)
	}
	defer func() { err = errors.Join(err, dbos.Shutdown(d, 30*time.Second)) }()
	if _, err := load(ctx, 1, n, workflow(d)); err != nil {
		return err
	}
	t.dbos, err = trips(n, workflow(d))
	return err
}

// httpView runs the real server under b.c.agents concurrent agents.
func (b *bench) httpView(ctx context.Context) error {
	bin, err := b.binary(ctx)
	if err != nil {
		return err
	}
	url, err := b.dbs.fresh(ctx, "http")
	if err != nil {
		return err
	}
	secret := "bench-tool-signing-secret-" + rand.Text()
	tools := toolServer([]byte(secret))
	defer tools.Close()
	s, err := startServer(ctx, bin, b.tmp, url, tools.URL, secret)
	if err != nil {
		return err
	}
	defer s.stop()
	for _, n := range b.c.agents {
		progress(b.start, "HTTP: %d agents for %s", n, b.c.httpTime)
		res, err := gatewayLoad(ctx, s, n, b.c.httpTime)
		if err != nil {
			return fmt.Errorf("%d agents: %w", n, err)
		}
		b.r.http = append(b.r.http, res)
	}
	return nil
}
