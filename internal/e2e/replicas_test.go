package e2e

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	sagacity "github.com/sagacity-go/sagacity/client"
	"github.com/sagacity-go/sagacity/internal/testkit"
)

// TestReplicas runs two servers on one PostgreSQL schema. However many
// resumes race across both, an approved request's tool runs once, and the
// others are told what it came to; a rejection racing an approval either
// drops the request, or loses to a resume that already claimed it.
func TestReplicas(t *testing.T) {
	start := time.Now()
	f := newFixture(t, 80*time.Second)
	dbURL := testkit.PostgresURL(t)
	reps := []*server{f.server("replica-1", dbURL), f.server("replica-2", dbURL)}
	ctx := f.ctx

	// 200 gated requests, each in a saga of its own (a saga's later
	// request of the same tool would supersede an earlier one once
	// approved), started by agents taking turns.
	type request struct {
		saga  string
		seq   int64
		input string
	}
	const sagas, resumers = 200, 8
	reqs := make([]request, sagas)
	parallel(8, sagas, func(i int) {
		saga, agent := fmt.Sprintf("rep-%d", i), f.initiator(i)
		in := fmt.Sprintf(`{"amount":"%d","to":"%s"}`, i+1, saga)
		a, r := agent.call(ctx, reps[i%2], saga, toolWire, in)
		if !a.is(202) || r.Outcome != "AWAITING_APPROVAL" {
			t.Errorf("gated call of saga %s: %s; want 202 AWAITING_APPROVAL", saga, a)
		}
		reqs[i] = request{saga, r.JournalSeq, in}
	})
	parallel(8, len(reqs), func(k int) {
		q, rep := reqs[k], reps[k%2]
		c := f.approvers.take(rep)
		if c == nil {
			t.Errorf("no decision budget left to approve %s/%d", q.saga, q.seq)
			return
		}
		if a, r := c.approve(ctx, rep, q.saga, q.seq); !a.is(200) || !r.Approved {
			t.Errorf("approve %s/%d: %s; want 200 approved", q.saga, q.seq, a)
		}
	})
	if t.Failed() {
		t.FailNow()
	}

	// Eight resumers, half on each replica at any moment, each resume every
	// request with its exact bytes, in the same order so that they collide.
	answers := make([][resumers]answer, len(reqs))
	go1 := make(chan struct{})
	var wg sync.WaitGroup
	for r := range resumers {
		wg.Go(func() {
			<-go1
			for k, q := range reqs {
				rep := reps[(r+k)%2]
				c := f.agents.take(rep)
				if c == nil {
					t.Errorf("resumer %d: no decision budget left for %s/%d", r, q.saga, q.seq)
					return
				}
				answers[k][r], _ = c.resume(ctx, rep, q.saga, q.seq, q.input)
			}
		})
	}
	close(go1)
	wg.Wait()
	eff := f.tools.snapshot()
	for k, q := range reqs {
		// The resume that ran it answers 200; each one after it is told
		// what it came to (200 again) or that it still runs (409
		// IN_PROGRESS).
		var won int
		var others []string
		for _, a := range answers[k] {
			switch {
			case a.is(200):
				won++
			case !a.is(409) || !strings.Contains(a.body, `"code":"IN_PROGRESS"`):
				others = append(others, a.String())
			}
		}
		if won < 1 || len(others) > 0 {
			t.Errorf("request %s/%d resumed by %d resumers on two replicas: %d answered 200, and besides 409 IN_PROGRESS: %q; want 200 at least once, "+
				"409 IN_PROGRESS for the rest", q.saga, q.seq, resumers, won, others)
		}
		if keys := eff.keysFor(q.input); len(keys) != 1 || eff.execs[keys[0]] != 1 {
			t.Errorf("request %s/%d: the wire ran under keys %v (%v); want one key, executed once", q.saga, q.seq, keys, counts(eff, keys))
		}
	}
	if n := eff.arrived["/wire"]; n != len(reqs) {
		t.Errorf("tool server ran %d wires for %d approved requests, want %d", n, len(reqs), len(reqs))
	}

	// Approve against reject: approver A on replica 1 (half of the time
	// resuming at once), approver B on replica 2, at the same moment.
	type race struct {
		saga, input     string
		reserveSeq, seq int64
		withResume      bool
		approve, resume answer // A's
		reject          answer // B's
		later           answer // a resume once both are done
		a, b            string
	}
	const races = 50
	rs := make([]*race, races)
	parallel(8, races, func(i int) {
		x := &race{saga: fmt.Sprintf("race-%d", i), input: fmt.Sprintf(`{"amount":"%d","to":"race-%d"}`, 1000+i, i), withResume: i%2 == 1}
		rs[i] = x
		agent := f.initiator(i)
		a, r := agent.call(ctx, reps[0], x.saga, toolReserve, fmt.Sprintf(`{"sku":"race-%d","qty":1}`, i))
		if !a.is(200) || r.Outcome != "EXECUTED" {
			t.Errorf("saga %s: %s; want 200 EXECUTED", x.saga, a)
		}
		x.reserveSeq = r.JournalSeq
		if a, r = agent.call(ctx, reps[1], x.saga, toolWire, x.input); !a.is(202) {
			t.Errorf("saga %s: %s; want 202 AWAITING_APPROVAL", x.saga, a)
		}
		x.seq = r.JournalSeq
	})
	if t.Failed() {
		t.FailNow()
	}
	parallel(8, races, func(i int) {
		x := rs[i]
		ca, cb, cr, cl := f.approvers.take(reps[0]), f.approvers2.take(reps[1]), f.agents.take(reps[0]), f.agents.take(reps[1])
		if ca == nil || cb == nil || cr == nil || cl == nil {
			t.Errorf("race %s: no decision budget left", x.saga)
			return
		}
		x.a, x.b = ca.principal(), cb.principal()
		go2 := make(chan struct{})
		var wg sync.WaitGroup
		wg.Go(func() {
			<-go2
			x.approve, _ = ca.approve(ctx, reps[0], x.saga, x.seq)
			if x.withResume && x.approve.is(200) {
				x.resume, _ = cr.resume(ctx, reps[0], x.saga, x.seq, x.input)
			}
		})
		wg.Go(func() {
			<-go2
			if x.withResume {
				// A makes two requests: give it a head start now and then,
				// so that both outcomes occur.
				time.Sleep(rand.N(8 * time.Millisecond))
			}
			x.reject, _ = cb.reject(ctx, reps[1], x.saga, x.seq)
		})
		close(go2)
		wg.Wait()
		x.later, _ = cl.resume(ctx, reps[1], x.saga, x.seq, x.input)
	})
	eff = f.tools.snapshot()
	outcomes := map[string]int{}
	for _, x := range rs {
		_, sg := f.auditor.saga(ctx, reps[0], x.saga)
		_, es := f.auditor.audit(ctx, reps[1], x.saga)
		wires := eff.keysFor(x.input)
		released := eff.comps[key(x.saga, x.reserveSeq)+"/compensate"]
		var problems []string
		wrong := func(cond bool, format string, args ...any) {
			if cond {
				problems = append(problems, fmt.Sprintf(format, args...))
			}
		}
		switch {
		case x.reject.is(200):
			outcomes["reject won"]++
			wrong(x.resume.is(200), "A's resume succeeded too")
			wrong(!x.later.is(404), "a later resume did not answer 404")
			wrong(len(wires) != 0, "the wire ran (keys %v)", wires)
			wrong(sg.Status != "COMPENSATED" && sg.Status != "COMPENSATION_FAILED", "the saga is %s", sg.Status)
			wrong(released != 1, "the reservation was released %d times, want once", released)
			wrong(find(es, func(e sagacity.Entry) bool {
				return e.Phase == "REJECTED" && e.Input == fmt.Sprintf("seq=%d", x.seq) && strings.HasPrefix(e.Payload, "approver="+x.b+"\n")
			}) == nil, "the journal has no REJECTED by %s", x.b)
		case x.reject.is(404) || x.reject.is(409):
			outcomes["approve won"]++
			wrong(!x.approve.is(200), "the approval did not succeed")
			// A's resume runs it; a later one answers what it came to.
			wrong(x.withResume && !x.resume.is(200), "A's resume did not answer 200")
			wrong(!x.later.is(200), "a later resume did not answer 200")
			wrong(len(wires) != 1 || eff.execs[wires[0]] != 1, "the wire ran under keys %v (%v), want one key executed once", wires, counts(eff, wires))
			wrong(released != 0, "the reservation was released %d times, want never", released)
			wrong(sg.Status != "RUNNING", "the saga is %s, want RUNNING", sg.Status)
			wrong(find(es, func(e sagacity.Entry) bool {
				return e.Phase == "APPROVED" && e.Input == fmt.Sprintf("seq=%d", x.seq) && strings.HasPrefix(e.Payload, "approver="+x.a+"\n")
			}) == nil, "the journal has no APPROVED by %s", x.a)
		default:
			problems = append(problems, "the rejection answered neither 200 nor 404/409")
		}
		if len(problems) > 0 {
			t.Errorf("race on %s/%d, approve by %s on replica-1 (resume at once: %t), reject by %s on replica-2: %s\n  approve: %s\n  resume:  %s\n  reject:  %s\n  later:   %s\n%s",
				x.saga, x.seq, x.a, x.withResume, x.b, strings.Join(problems, "; "), x.approve, x.resume, x.reject, x.later, journalText(es))
		}
	}

	// Every journal verifies, read through either replica.
	ids := make([]string, 0, sagas+races)
	for i := range sagas {
		ids = append(ids, fmt.Sprintf("rep-%d", i))
	}
	for _, x := range rs {
		ids = append(ids, x.saga)
	}
	parallel(8, len(ids), func(i int) {
		if a, v := f.auditor.verify(ctx, reps[i%2], ids[i]); !a.is(200) || !v.Valid {
			t.Errorf("saga %s: %s; want 200 valid:true", ids[i], a)
		}
	})
	// One log: both replicas sequence it under its state row's lock, and
	// every checkpoint either signed extends every earlier one.
	for _, rep := range reps {
		f.waitLogged(rep)
	}
	per := map[string]int{}
	for _, name := range []string{"replica-1", "replica-2"} {
		files, _ := filepath.Glob(filepath.Join(f.checkpointDir(name), "*.checkpoint"))
		per[name] = len(files)
		if len(files) < 2 {
			t.Errorf("%s signed %d checkpoints while both wrote; want several", name, len(files))
		}
	}
	n := f.checkpointsConsistent(reps[0], "replica-1", "replica-2")
	t.Logf("%d requests resumed by %d resumers on 2 replicas, %d approve/reject races (%v), %d checkpoints (%v), all consistent, in %s",
		len(reqs), resumers, races, outcomes, n, per, time.Since(start).Round(time.Millisecond))
}

func counts(eff effects, keys []string) []int {
	var n []int
	for _, k := range keys {
		n = append(n, eff.execs[k])
	}
	return n
}
