package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	sagacity "github.com/sagacity-go/sagacity/client"
)

// gate is a gated call the client saw parked (202).
type gate struct {
	seq      int64
	input    string
	approved bool // an approve answered 200
	closed   bool // resumed, rejected, dropped by a compensation, or tried after a restart
	// superseded: a later request of the saga (the same tool) was
	// approved, so this one can be neither approved nor executed; it
	// stays pending until rejected or its saga fails.
	superseded bool
}

// success is an answer the client took as success: the journal must show it.
type success struct {
	what  string // call, gated, failed, approve, reject, resume, end
	seq   int64  // the call's seq; for a decision or a resume, the gated seq
	tool  string
	input string // the call's input; for a resume, the payload
	by    string // who decided
}

// sagaState is the client's view of one saga.
type sagaState struct {
	id      string
	agent   *client // its initiator
	ended   bool
	retired bool // the workers are done with it
	unsure  bool // a request on it went unanswered or got a 503: the view may be wrong
	gates   []*gate
	succ    []success
	dirty   bool             // touched since its journal was last read back
	journal []sagacity.Entry // as last read back
	doubt   map[int64]bool   // INTENTs without an outcome in that journal
}

func (s *sagaState) gatesWhere(approved bool) []*gate {
	var gs []*gate
	for _, g := range s.gates {
		if !g.closed && !g.superseded && g.approved == approved {
			gs = append(gs, g)
		}
	}
	return gs
}

// supersededGates are the open requests a later approval superseded.
func (s *sagaState) supersededGates() []*gate {
	var gs []*gate
	for _, g := range s.gates {
		if !g.closed && g.superseded {
			gs = append(gs, g)
		}
	}
	return gs
}

func (s *sagaState) closeGates() {
	for _, g := range s.gates {
		g.closed = true
	}
}

// driver runs sagas against one server from concurrent workers, keeps the
// ledger of every success, and reads it all back from the journals.
type driver struct {
	f       *fixture
	srv     *server
	workers int
	prefix  string
	faults  bool // database faults: a 503 may answer a request that did something

	killing atomic.Bool // set before SIGKILL: from then on, requests may go unanswered
	n       atomic.Int64

	mu         sync.Mutex
	sagas      []*sagaState
	cur        []*sagaState    // each worker's saga
	doubts     map[string]int  // "saga/seq" in doubt → executions when first listed
	compDoubts map[string]bool // "saga/seq" whose compensation is in doubt
	stats      map[string]int
}

func newDriver(f *fixture, srv *server, workers int, prefix string) *driver {
	return &driver{f: f, srv: srv, workers: workers, prefix: prefix, cur: make([]*sagaState, workers),
		doubts: map[string]int{}, compDoubts: map[string]bool{}, stats: map[string]int{}}
}

func (d *driver) count(what string) {
	d.mu.Lock()
	d.stats[what]++
	d.mu.Unlock()
}

func (d *driver) stat(what string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.stats[what]
}

func (d *driver) statsLine() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	keys := make([]string, 0, len(d.stats))
	for k := range d.stats {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	fmt.Fprintf(&b, "%d sagas", len(d.sagas))
	for _, k := range keys {
		fmt.Fprintf(&b, ", %s %d", k, d.stats[k])
	}
	return b.String()
}

func key(saga string, seq int64) string { return fmt.Sprintf("%s/%d", saga, seq) }

// tool is the key the tool of the call at seq was handed: the request's,
// for a resumed call (its INTENT says "resumes=seq=N").
func tool(s *sagaState, seq int64) string {
	if s == nil {
		return ""
	}
	if e := at(s.journal, seq); e != nil {
		if _, req, ok := strings.Cut(e.Payload, "\nresumes=seq="); ok {
			if n, err := strconv.ParseInt(req, 10, 64); err == nil {
				return key(s.id, n)
			}
		}
	}
	return key(s.id, seq)
}

// run drives the workers until stop is set or, once the server is being
// killed, a request goes unanswered.
func (d *driver) run(stop *atomic.Bool) {
	var wg sync.WaitGroup
	for w := range d.workers {
		wg.Go(func() {
			for !stop.Load() && d.f.ctx.Err() == nil {
				if !d.step(w) {
					return
				}
			}
		})
	}
	wg.Wait()
}

func (d *driver) newSaga(w int) *sagaState {
	s := &sagaState{id: fmt.Sprintf("%s-w%d-%d", d.prefix, w, d.n.Add(1)), agent: d.f.initiator(w)}
	d.mu.Lock()
	d.sagas = append(d.sagas, s)
	d.mu.Unlock()
	return s
}

// step makes one request on worker w's saga. It returns false when the
// worker should stop: the server is gone.
func (d *driver) step(w int) bool {
	ctx, srv := d.f.ctx, d.srv
	s := d.cur[w]
	if s == nil || s.retired {
		s = d.newSaga(w)
		d.cur[w] = s
	}
	s.dirty = true
	open, approved, superseded := s.gatesWhere(false), s.gatesWhere(true), s.supersededGates()
	if s.ended && len(open)+len(approved)+len(superseded) == 0 {
		s.retired = true
		return true
	}
	type choice struct {
		op     string
		weight int
	}
	var choices []choice
	if !s.ended {
		choices = append(choices, choice{"reserve", 4}, choice{"wire", 3}, choice{"ship", 1}, choice{"end", 1})
	}
	if len(open) > 0 {
		choices = append(choices, choice{"approve", 4}, choice{"reject", 1})
	}
	if len(approved) > 0 {
		choices = append(choices, choice{"resume", 4}, choice{"reject", 1})
	}
	if len(superseded) > 0 {
		choices = append(choices, choice{"reject", 1})
	}
	total := 0
	for _, c := range choices {
		total += c.weight
	}
	op, r := "", rand.IntN(total)
	for _, c := range choices {
		if r < c.weight {
			op = c.op
			break
		}
		r -= c.weight
	}
	if len(s.succ) == 0 && !s.unsure {
		op = "reserve" // the first call creates the saga
	}
	n := d.n.Add(1)
	switch op {
	case "reserve":
		in := fmt.Sprintf(`{"sku":"%s-%d","qty":1}`, s.id, n)
		a, r := s.agent.call(ctx, srv, s.id, toolReserve, in)
		if a.is(200) && r.Outcome == "EXECUTED" && r.JournalSeq > 0 && r.ToolName == toolReserve {
			s.succ = append(s.succ, success{what: "call", seq: r.JournalSeq, tool: toolReserve, input: in})
			return true
		}
		return d.unexpected(s, a, "call "+toolReserve+", want 200 EXECUTED")
	case "wire":
		in := fmt.Sprintf(`{"amount":"%d","to":"%s"}`, n, s.id)
		a, r := s.agent.call(ctx, srv, s.id, toolWire, in)
		if a.is(202) && r.Outcome == "AWAITING_APPROVAL" && r.JournalSeq > 0 {
			s.gates = append(s.gates, &gate{seq: r.JournalSeq, input: in})
			s.succ = append(s.succ, success{what: "gated", seq: r.JournalSeq, tool: toolWire, input: in})
			return true
		}
		return d.unexpected(s, a, "call "+toolWire+", want 202 AWAITING_APPROVAL")
	case "ship":
		in := fmt.Sprintf(`{"parcel":"%s-%d"}`, s.id, n)
		a, r := s.agent.call(ctx, srv, s.id, toolShip, in)
		// COMPENSATING: the database failed part way; compensation goes on.
		if a.is(422) && r.JournalSeq > 0 && r.Outcome == "FAILED" && (r.Status == "COMPENSATED" || r.Status == "COMPENSATING" || s.unsure) {
			s.succ = append(s.succ, success{what: "failed", seq: r.JournalSeq, tool: toolShip, input: in})
			s.closeGates()
			s.retired = true
			return true
		}
		return d.unexpected(s, a, "call "+toolShip+" (always fails), want 422 COMPENSATED")
	case "end":
		a, r := s.agent.end(ctx, srv, s.id)
		want := sagacity.Completed
		if len(open)+len(approved)+len(superseded) > 0 {
			want = sagacity.AwaitingApproval
		}
		if a.is(200) && r.Ended && (r.Status == want || s.unsure) {
			s.ended = true
			s.succ = append(s.succ, success{what: "end"})
			return true
		}
		return d.unexpected(s, a, "end, want 200 ended "+string(want))
	case "approve":
		g := open[rand.IntN(len(open))]
		c := d.f.approvers.take(srv)
		if c == nil {
			d.count("no decision budget left")
			return true
		}
		a, r := c.approve(ctx, srv, s.id, g.seq)
		if a.is(200) && r.Approved && r.ApproverIdentity == c.principal() {
			g.approved = true
			for _, o := range s.gates {
				if o.seq < g.seq && !o.closed {
					o.superseded = true
				}
			}
			s.succ = append(s.succ, success{what: "approve", seq: g.seq, by: c.principal()})
			return true
		}
		return d.unexpected(s, a, fmt.Sprintf("approve seq %d, want 200 approved by %s", g.seq, c.principal()))
	case "reject":
		gs := append(append(open, approved...), superseded...)
		g := gs[rand.IntN(len(gs))]
		c := d.f.approvers.take(srv)
		if c == nil {
			d.count("no decision budget left")
			return true
		}
		a, r := c.reject(ctx, srv, s.id, g.seq)
		if a.is(200) && !r.Approved && (r.Status == "COMPENSATED" || r.Status == "COMPENSATING" || s.unsure) {
			s.succ = append(s.succ, success{what: "reject", seq: g.seq, by: c.principal()})
			s.closeGates()
			s.retired = true
			return true
		}
		return d.unexpected(s, a, fmt.Sprintf("reject seq %d, want 200 COMPENSATED", g.seq))
	case "resume":
		g := approved[rand.IntN(len(approved))]
		c := d.f.agents.take(srv)
		if c == nil {
			d.count("no decision budget left")
			return true
		}
		a, r := c.resume(ctx, srv, s.id, g.seq, g.input)
		if a.is(200) && r.Result != nil && *r.Result != "" {
			g.closed = true
			s.succ = append(s.succ, success{what: "resume", seq: g.seq, tool: toolWire, input: g.input})
			return true
		}
		return d.unexpected(s, a, fmt.Sprintf("resume seq %d with the approved bytes, want 200", g.seq))
	}
	return true
}

// unexpected handles an answer that was not the success the client's view
// of the saga predicts. It returns false when the worker should stop.
func (d *driver) unexpected(s *sagaState, a answer, what string) bool {
	t := d.f.t
	switch {
	case a.err != nil && d.killing.Load() && neverSent(a):
		d.count("refused after the kill")
		return false
	case a.err != nil && d.killing.Load():
		// In flight at the kill: the outcome is unknown, nothing is counted.
		s.unsure = true
		d.count("unanswered at the kill")
		return false
	case a.err != nil:
		s.unsure = true
		t.Errorf("saga %s: %s: %s; the server was not being killed", s.id, what, a)
		return false
	case a.code == 429:
		s.unsure = true
		t.Errorf("saga %s: %s: %s; the suite's decision budget should stay under the rate limits", s.id, what, a)
	case a.code == 503 && d.faults:
		// The database went away: the request may have done part of its work.
		s.unsure = true
		d.count("503")
	case a.code >= 500:
		s.unsure = true
		t.Errorf("saga %s: %s: %s; no 5xx is acceptable here", s.id, what, a)
	case s.unsure:
		s.retired = true
		d.count("retired after an unknown outcome")
	default:
		t.Errorf("saga %s: %s: %s", s.id, what, a)
		s.retired = true
	}
	return true
}

// check reads back the sagas touched since the last check (every saga when
// all is set) and asserts, after a restart or a fault:
//  1. every journal verifies;
//  2. no Idempotency-Key was executed or compensated twice;
//  3. every success the client took is in the journal;
//  4. approvals the client saw succeed can still be resumed with their exact
//     bytes (200), unless the journal shows why not (404);
//  5. calls with an INTENT and no outcome are listed in doubt and never run
//     again.
func (d *driver) check(all bool) {
	t := d.f.t
	eff := d.f.tools.snapshot()
	for k, n := range eff.execs {
		if n > 1 {
			t.Errorf("tool server: Idempotency-Key %s executed %d times, want at most once", k, n)
		}
	}
	for k, n := range eff.comps {
		if n > 1 {
			t.Errorf("tool server: Idempotency-Key %s compensated %d times, want at most once", k, n)
		}
	}
	d.mu.Lock()
	var sagas []*sagaState
	for _, s := range d.sagas {
		if all || s.dirty {
			sagas = append(sagas, s)
		}
	}
	d.mu.Unlock()
	work := make(chan *sagaState)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for s := range work {
				d.readBack(s, eff)
			}
		})
	}
	for _, s := range sagas {
		work <- s
	}
	close(work)
	wg.Wait()
	d.checkInDoubt(eff)
	if all {
		d.stuck()
	}
	d.resumeApproved()
}

// stuck asserts that no saga stays COMPENSATING with nothing in doubt:
// compensation cut short by a kill or a fault is continued (at start, and
// by the steps' retries), so every saga either finishes compensating or
// waits on a call in doubt that a person must resolve.
func (d *driver) stuck() {
	ctx, srv := d.f.ctx, d.srv
	d.mu.Lock()
	sagas := append([]*sagaState(nil), d.sagas...)
	d.mu.Unlock()
	var left []string
	deadline := time.Now().Add(15 * time.Second)
	for {
		_, calls := d.f.auditor.inDoubt(ctx, srv, 0)
		has := map[string]bool{}
		for _, c := range calls {
			has[c.SagaID] = true
		}
		var mu sync.Mutex
		left = left[:0]
		parallel(8, len(sagas), func(i int) {
			s := sagas[i]
			if a, sg := d.f.auditor.saga(ctx, srv, s.id); a.is(200) && sg.Status == "COMPENSATING" && !has[s.id] {
				mu.Lock()
				left = append(left, s.id)
				mu.Unlock()
			}
		})
		if len(left) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	for _, id := range left {
		d.f.t.Errorf("saga %s stays COMPENSATING with nothing in doubt", id)
	}
}

// readBack verifies a saga's journal and finds the client's successes in it.
func (d *driver) readBack(s *sagaState, eff effects) {
	t, ctx, srv, au := d.f.t, d.f.ctx, d.srv, d.f.auditor
	if a, v := au.verify(ctx, srv, s.id); !a.is(200) || !v.Valid {
		t.Errorf("saga %s: %s; want 200 valid:true", s.id, a)
	}
	a, es := au.audit(ctx, srv, s.id)
	if !a.is(200) {
		t.Errorf("saga %s: %s; want 200 and its journal", s.id, a)
		return
	}
	s.journal, s.doubt, s.dirty = es, map[int64]bool{}, false
	for _, e := range es {
		if e.Phase == "INTENT" && outcome(es, e.Seq, e.ToolName, e.Input) == nil {
			s.doubt[e.Seq] = true
		}
	}
	for _, x := range s.succ {
		switch x.what {
		case "call", "failed":
			e, want := at(es, x.seq), map[string]string{"call": "EXECUTED", "failed": "FAILED"}[x.what]
			if e == nil || e.Phase != "INTENT" || e.ToolName != x.tool || e.Input != x.input {
				t.Errorf("saga %s: call of %s %s answered with seq %d, but the journal has %s there; want its INTENT", s.id, x.tool, x.input, x.seq, show(e))
				continue
			}
			if o := outcome(es, x.seq, x.tool, x.input); o == nil || o.Phase != want {
				t.Errorf("saga %s: call of %s at seq %d answered %s, but the journal's outcome is %s", s.id, x.tool, x.seq, want, show(o))
			}
			if n := eff.execs[key(s.id, x.seq)]; n != 1 {
				t.Errorf("saga %s: call of %s at seq %d answered %s, but the tool server was called %d times for it, want 1", s.id, x.tool, x.seq, want, n)
			}
		case "gated":
			if e := at(es, x.seq); e == nil || e.Phase != "AWAITING_APPROVAL" || e.ToolName != x.tool || e.Input != x.input {
				t.Errorf("saga %s: gated call of %s %s answered 202 with seq %d, but the journal has %s there", s.id, x.tool, x.input, x.seq, show(e))
			}
			// Its execution, once resumed, is under its own seq.
			approved := find(es, func(e sagacity.Entry) bool {
				return e.Phase == "APPROVED" && e.ToolName == gateTool && e.Input == fmt.Sprintf("seq=%d", x.seq)
			}) != nil
			if n := eff.execs[key(s.id, x.seq)]; n > 1 || (n == 1 && !approved) {
				t.Errorf("saga %s: gated call at seq %d executed %d times (approved: %v)", s.id, x.seq, n, approved)
			}
		case "approve", "reject":
			phase := map[string]string{"approve": "APPROVED", "reject": "REJECTED"}[x.what]
			if find(es, func(e sagacity.Entry) bool {
				return e.Phase == phase && e.ToolName == gateTool && e.Input == fmt.Sprintf("seq=%d", x.seq) &&
					strings.HasPrefix(e.Payload, "approver="+x.by+"\n")
			}) == nil {
				t.Errorf("saga %s: %s of seq %d by %s answered 200, but the journal has no %s entry for it", s.id, x.what, x.seq, x.by, phase)
			}
		case "resume":
			e := find(es, func(e sagacity.Entry) bool {
				return e.Phase == "INTENT" && e.ToolName == toolWire && e.Input == x.input && e.Seq > x.seq
			})
			if e == nil {
				t.Errorf("saga %s: resume of seq %d answered 200, but the journal has no INTENT of %s with the approved bytes", s.id, x.seq, toolWire)
				continue
			}
			if o := outcome(es, e.Seq, toolWire, x.input); o == nil || o.Phase != "EXECUTED" {
				t.Errorf("saga %s: resume of seq %d answered 200, but the journal's outcome of its INTENT (seq %d) is %s", s.id, x.seq, e.Seq, show(o))
			}
			// A resumed call's key names the request it executes.
			if n := eff.execs[key(s.id, x.seq)]; n != 1 {
				t.Errorf("saga %s: resume of seq %d answered 200, but %s executed %d times for key %s, want 1", s.id, x.seq, toolWire, n, key(s.id, x.seq))
			}
		case "end":
			if a, sg := au.saga(ctx, srv, s.id); !a.is(200) || !sg.Ended {
				t.Errorf("saga %s: end answered 200, but the saga reads %s; want ended:true", s.id, a)
			}
		}
	}
}

// checkInDoubt compares GET /sagacity/in-doubt?olderThan=0s with the calls
// the journals show without an outcome.
func (d *driver) checkInDoubt(eff effects) {
	t, ctx := d.f.t, d.f.ctx
	a, calls := d.f.auditor.inDoubt(ctx, d.srv, 0)
	if !a.is(200) {
		t.Errorf("%s; want 200", a)
		return
	}
	listed := map[string]sagacity.CallInDoubt{}
	for _, c := range calls {
		listed[key(c.SagaID, c.JournalSeq)] = c
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	want := map[string]bool{}
	bySaga := map[string]*sagaState{}
	for _, s := range d.sagas {
		bySaga[s.id] = s
		for seq := range s.doubt {
			want[key(s.id, seq)] = true
		}
	}
	for k := range want {
		c, ok := listed[k]
		switch {
		case !ok:
			t.Errorf("call %s has an INTENT and no outcome in its journal, but GET /sagacity/in-doubt?olderThan=0s does not list it", k)
		case c.State != "RUNNING":
			t.Errorf("call %s has an INTENT and no outcome in its journal, but in-doubt lists it %s; want RUNNING", k, c.State)
		case c.IdempotencyKey != tool(bySaga[c.SagaID], c.JournalSeq):
			t.Errorf("call %s is in doubt under key %q, but its tool was handed %q", k, c.IdempotencyKey, tool(bySaga[c.SagaID], c.JournalSeq))
		default:
			if before, seen := d.doubts[k]; !seen {
				d.doubts[k] = eff.execs[c.IdempotencyKey]
				d.stats["calls in doubt"]++
			} else if eff.execs[c.IdempotencyKey] != before {
				t.Errorf("call %s is in doubt and was executed again: the tool server counted %d, then %d", k, before, eff.execs[c.IdempotencyKey])
			}
		}
	}
	for k := range d.doubts {
		if !want[k] {
			t.Errorf("call %s was in doubt and its journal now shows an outcome, or it left the journal: nothing may run it again", k)
		}
	}
	for k, c := range listed {
		s := bySaga[c.SagaID]
		switch {
		case s == nil:
			t.Errorf("in-doubt lists %+v from a saga this suite never touched", c)
		case c.State == "RUNNING" && !want[k]:
			t.Errorf("in-doubt lists %+v RUNNING, but its journal has its outcome (or no INTENT at seq %d)", c, c.JournalSeq)
		case c.State == "COMPENSATING":
			ex := outcome(s.journal, c.JournalSeq, c.ToolName, c.Input)
			undone := find(s.journal, func(e sagacity.Entry) bool {
				return e.ToolName == c.ToolName && e.Input == c.Input && (e.Phase == "COMPENSATED" || e.Phase == "COMPENSATION_FAILED")
			})
			if ex == nil || ex.Phase != "EXECUTED" || undone != nil {
				t.Errorf("in-doubt lists %+v COMPENSATING, but its journal shows outcome %s and compensation %s", c, show(ex), show(undone))
			}
			if !d.compDoubts[k] {
				d.compDoubts[k] = true
				d.stats["compensations in doubt"]++
			}
		case c.State != "RUNNING":
			t.Errorf("in-doubt lists %+v in state %s, want RUNNING or COMPENSATING", c, c.State)
		}
	}
}

// resumeApproved resumes, with their exact bytes, the requests the client
// saw approved and never saw resumed or dropped.
func (d *driver) resumeApproved() {
	t, ctx, srv := d.f.t, d.f.ctx, d.srv
	d.mu.Lock()
	sagas := append([]*sagaState(nil), d.sagas...)
	d.mu.Unlock()
	for _, s := range sagas {
		for _, g := range s.gatesWhere(true) {
			c := d.f.agents.take(srv)
			if c == nil {
				t.Errorf("no decision budget left to resume %s/%d", s.id, g.seq)
				return
			}
			a, _ := c.resume(ctx, srv, s.id, g.seq, g.input)
			g.closed, s.dirty = true, true
			// A resume the client never saw answered may have claimed it:
			// then this one is told what that came to.
			claimed := find(s.journal, func(e sagacity.Entry) bool {
				return e.Phase == "INTENT" && e.ToolName == toolWire && e.Input == g.input && e.Seq > g.seq
			})
			switch {
			case a.is(200):
				s.succ = append(s.succ, success{what: "resume", seq: g.seq, tool: toolWire, input: g.input})
				if claimed != nil {
					d.count("approvals claimed by an unanswered resume, answered its outcome")
				} else {
					d.count("approvals resumed later")
				}
			case claimed != nil && s.doubt[claimed.Seq] && (a.is(202) && strings.Contains(a.body, `"outcome":"IN_DOUBT"`) ||
				a.is(409) && strings.Contains(a.body, `"code":"IN_PROGRESS"`)):
				d.count("approvals claimed by an unanswered resume cut off, answered in doubt")
			case claimed != nil && a.is(422) && strings.Contains(a.body, `"code":"TOOL_FAILED"`):
				d.count("approvals claimed by an unanswered resume whose tool failed, answered so")
			case a.is(404):
				failed := find(s.journal, func(e sagacity.Entry) bool {
					return (e.Phase == "REJECTED" || e.Phase == "FAILED") && e.Seq > g.seq
				})
				if claimed != nil || failed == nil {
					t.Errorf("saga %s: approval of seq %d answered 200 earlier, and now %s, but its journal shows a resume of it, or no rejection or failure that would have dropped it:\n%s",
						s.id, g.seq, a, journalText(s.journal))
				}
				d.count("approvals dropped by a failure or rejection")
			case a.is(409) && strings.Contains(a.body, `"code":"IN_DOUBT"`):
				// A call of the saga was cut off by the kill: the saga
				// takes nothing more until a person resolves it.
				var body struct {
					JournalSeq int64 `json:"journalSeq"`
				}
				_ = json.Unmarshal([]byte(a.body), &body)
				if !s.doubt[body.JournalSeq] {
					t.Errorf("saga %s: resume of the approved seq %d: %s; but its journal shows no call in doubt at seq %d:\n%s",
						s.id, g.seq, a, body.JournalSeq, journalText(s.journal))
				}
				d.count("resumes held by a call in doubt")
			case a.is(409) && strings.Contains(a.body, "was superseded by"):
				// A later request's approval the client did not see answered.
				later := find(s.journal, func(e sagacity.Entry) bool {
					return e.Phase == "APPROVED" && e.ToolName == gateTool && refOf(e.Input) > g.seq
				})
				if later == nil || !s.unsure {
					t.Errorf("saga %s: resume of the approved seq %d: %s; but no approval of a later request went unanswered:\n%s",
						s.id, g.seq, a, journalText(s.journal))
				}
				d.count("approvals superseded by an unanswered approval")
			default:
				t.Errorf("saga %s: resume of the approved seq %d with its exact bytes: %s; want 200, what an unanswered resume came to, "+
					"or 404 when the journal says why", s.id, g.seq, a)
			}
		}
	}
}

// refOf reads a decision's input "seq=<N>"; 0 when it is not one.
func refOf(input string) int64 {
	n, _ := strconv.ParseInt(strings.TrimPrefix(input, "seq="), 10, 64)
	return n
}

// neverSent reports an exchange that never reached a server: no attempt
// wrote the request (net/http retries a request with an Idempotency-Key
// on a new connection when a kept one turns out dead, and the request
// may have reached the server on the first), and the connection was
// refused.
func neverSent(a answer) bool {
	var op *net.OpError
	return !a.wrote && (errors.Is(a.err, syscall.ECONNREFUSED) || (errors.As(a.err, &op) && op.Op == "dial"))
}

// at is the entry at seq, or nil.
func at(es []sagacity.Entry, seq int64) *sagacity.Entry {
	return find(es, func(e sagacity.Entry) bool { return e.Seq == seq })
}

func find(es []sagacity.Entry, match func(sagacity.Entry) bool) *sagacity.Entry {
	for i := range es {
		if match(es[i]) {
			return &es[i]
		}
	}
	return nil
}

// outcome is the EXECUTED or FAILED entry that closes the call whose INTENT
// is at seq, or nil. Inputs are unique in these suites, so the tool and
// input identify the call.
func outcome(es []sagacity.Entry, seq int64, tool, input string) *sagacity.Entry {
	return find(es, func(e sagacity.Entry) bool {
		return e.Seq > seq && e.ToolName == tool && e.Input == input && (e.Phase == "EXECUTED" || e.Phase == "FAILED")
	})
}

func show(e *sagacity.Entry) string {
	if e == nil {
		return "nothing"
	}
	return fmt.Sprintf("seq %d %s %s %q", e.Seq, e.Phase, e.ToolName, e.Input)
}

func journalText(es []sagacity.Entry) string {
	var b strings.Builder
	for i := range es {
		fmt.Fprintf(&b, "  %s payload=%q\n", show(&es[i]), es[i].Payload)
	}
	return b.String()
}
