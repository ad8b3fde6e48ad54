package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sagacity-go/sagacity/internal/engine"
	"github.com/sagacity-go/sagacity/toolsig"
)

// Held calls: agents that send a gated call with Prefer: wait and are
// answered once a person decides. heldCalls calls are held at once on the
// real binary (on SQLite, and on PostgreSQL split across two replicas);
// the servers' RSS before and while they hold them gives what a held
// call costs; then heldSample of them are approved, one at a time, by
// approver tokens on the first replica, under a rule that executes on
// approval, and each agent's answer (the tool's result) is timed from
// the vote's journal time: the commit's, the same clock.

// heldResult is one store's held calls.
type heldResult struct {
	store     string
	replicas  int
	held      int
	perCall   int64 // bytes of RSS a held call adds, over the replicas
	stacks    int64 // of which goroutine stacks (Go's own count)
	heap      int64 // and the heap in use
	p50, p99  time.Duration
	worst     time.Duration
	sample    int
	crossP99  time.Duration // of the answers held on the replica that did not take the vote
	crossSeen int
}

const (
	heldApprovers = 8 // tokens that vote, each from an address of its own: decisions are limited per principal and address
	heldWait      = 600
)

// heldConfig is the configuration of the held-calls servers: the gated
// tool executes on approval; tokens for the agents, the approvers and
// the metrics.
func heldConfig(tools, agent, auditor string, approvers []string) string {
	sum := func(t string) string { s := sha256.Sum256([]byte(t)); return hex.EncodeToString(s[:]) }
	var b strings.Builder
	fmt.Fprintf(&b, `tools:
  - name: %s
    reversibility: IRREVERSIBLE
    execute: {url: "%s/wire"}
approval:
  tools:
    %s:
      - {name: auto, execute: on-approval}
  default:
    - {name: default}
policy:
  maxWait: 15m
tokens:
  - {name: agent, sha256: %s, roles: [agent]}
  - {name: auditor, sha256: %s, roles: [auditor]}
`, toolGated, tools, toolGated, sum(agent), sum(auditor))
	for i, a := range approvers {
		fmt.Fprintf(&b, "  - {name: approver-%d, sha256: %s, roles: [approver]}\n", i, sum(a))
	}
	return b.String()
}

// wireServer serves the gated tool, refusing what Sagacity did not sign.
func wireServer(secret []byte) *httptest.Server {
	mux := http.NewServeMux()
	mux.Handle("POST /wire", toolsig.Handler(secret, toolsig.Expect{Tool: toolGated, Phase: toolsig.Execute}, 1<<20,
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, `{"wired":true}`) })))
	return httptest.NewServer(mux)
}

// heldStep measures held calls on SQLite and on PostgreSQL.
func (b *bench) heldStep(ctx context.Context) error {
	bin, err := b.binary(ctx)
	if err != nil {
		return err
	}
	pg, err := b.dbs.fresh(ctx, "held")
	if err != nil {
		return err
	}
	for _, st := range []struct {
		name     string
		url      string
		replicas int
	}{{"SQLite", "sqlite:" + filepath.Join(b.tmp, "held.db"), 1}, {"PostgreSQL", pg, 2}} {
		progress(b.start, "held calls: %s, %d replica(s), %d calls held, %d decided", st.name, st.replicas, b.c.held, heldSample)
		res, err := b.held(ctx, bin, st.name, st.url, st.replicas)
		if err != nil {
			return fmt.Errorf("held calls on %s: %w", st.name, err)
		}
		b.r.held = append(b.r.held, res)
	}
	return nil
}

// heldSample is how many of the held calls are decided and timed.
const heldSample = 200

func (b *bench) held(ctx context.Context, bin, store, dbURL string, replicas int) (heldResult, error) {
	secret := "bench-tool-signing-secret-" + rand.Text()
	tools := wireServer([]byte(secret))
	defer tools.Close()
	agent, auditor := "sgc_"+rand.Text(), "sgc_"+rand.Text()
	approvers := make([]string, heldApprovers)
	for i := range approvers {
		approvers[i] = "sgc_" + rand.Text()
	}
	dir, err := os.MkdirTemp(b.tmp, "held-")
	if err != nil {
		return heldResult{}, err
	}
	config := filepath.Join(dir, "sagacity.yaml")
	if err := os.WriteFile(config, []byte(heldConfig(tools.URL, agent, auditor, approvers)), 0o600); err != nil {
		return heldResult{}, err
	}
	skey, _, err := engine.GenerateKeys("sagacity.bench")
	if err != nil {
		return heldResult{}, err
	}
	var reps []*server
	defer func() {
		for _, s := range reps {
			s.stop()
		}
	}()
	for i := range replicas {
		s, err := launch(ctx, bin, serverEnv(dbURL, config, secret, skey, filepath.Join(dir, fmt.Sprintf("checkpoints-%d", i))))
		if err != nil {
			return heldResult{}, err
		}
		reps = append(reps, s)
	}
	post := func(c *http.Client, ctx context.Context, url, token, body string, header ...string) (int, []byte, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
		if err != nil {
			return 0, nil, err
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+token)
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		resp, err := c.Do(req)
		if err != nil {
			return 0, nil, err
		}
		defer resp.Body.Close()
		out, err := io.ReadAll(resp.Body)
		return resp.StatusCode, out, err
	}
	call := func(i int) string {
		in, _ := json.Marshal(fmt.Sprintf(`{"amount":"%d","to":"held"}`, i+1))
		return `{"tool":"` + toolGated + `","input":` + string(in) + `}`
	}

	// Warm-up: each replica holds and answers a few calls, so that what
	// it has grown to serve them is in its RSS before the count.
	direct := &http.Client{Timeout: 2 * time.Minute}
	for k, s := range reps {
		for i := range 20 {
			saga := fmt.Sprintf("warm-%d-%d", k, i)
			done := make(chan error, 1)
			go func() {
				code, body, err := post(direct, ctx, s.url+"/sagacity/sagas/"+saga+"/calls", agent, call(i), "Prefer", "wait=60")
				if err == nil && code != http.StatusOK {
					err = fmt.Errorf("warm-up held call: %d %s", code, body)
				}
				done <- err
			}()
			if err := waitHeld(ctx, s, auditor, 1); err != nil {
				return heldResult{}, err
			}
			if code, body, err := post(direct, ctx, s.url+"/sagacity/approve/"+saga+"/1", approvers[0], `{}`); err != nil || code != http.StatusOK {
				return heldResult{}, errors.Join(err, fmt.Errorf("warm-up vote: %d %s", code, body))
			}
			if err := <-done; err != nil {
				return heldResult{}, err
			}
		}
	}
	time.Sleep(2 * time.Second) // the warm-up's garbage collected
	base := make([]int64, len(reps))
	baseGo := make([]goMemory, len(reps))
	for k, s := range reps {
		if base[k], err = s.rss(); err != nil {
			return heldResult{}, err
		}
		if baseGo[k], err = goMemoryOf(ctx, s, auditor); err != nil {
			return heldResult{}, err
		}
	}

	// Hold b.c.held calls, each on a connection of its own, spread over
	// the replicas; the answers are kept with when they came.
	holdCtx, release := context.WithCancel(ctx)
	defer release()
	type answer struct {
		at   time.Time
		code int
		body []byte
		err  error
	}
	answers := make([]chan answer, b.c.held)
	holders := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: -1, DisableKeepAlives: true}}
	var wg sync.WaitGroup
	defer wg.Wait()
	defer release()
	for i := range b.c.held {
		answers[i] = make(chan answer, 1)
		s := reps[i%len(reps)]
		wg.Go(func() {
			code, body, err := post(holders, holdCtx, s.url+"/sagacity/sagas/"+fmt.Sprintf("held-%d", i)+"/calls", agent, call(i),
				"Prefer", "wait="+strconv.Itoa(heldWait))
			answers[i] <- answer{time.Now(), code, body, err}
		})
		if (i+1)%500 == 0 {
			// Paced, so that the servers take the calls as they come.
			for _, s := range reps {
				if err := waitHeld(ctx, s, auditor, (i+1)/len(reps)); err != nil {
					return heldResult{}, err
				}
			}
		}
	}
	for _, s := range reps {
		if err := waitHeld(ctx, s, auditor, b.c.held/len(reps)); err != nil {
			return heldResult{}, err
		}
	}
	time.Sleep(2 * time.Second)
	var grew, stacks, heap int64
	for k, s := range reps {
		n, err := s.rss()
		if err != nil {
			return heldResult{}, err
		}
		m, err := goMemoryOf(ctx, s, auditor)
		if err != nil {
			return heldResult{}, err
		}
		grew, stacks, heap = grew+n-base[k], stacks+m.stacks-baseGo[k].stacks, heap+m.heap-baseGo[k].heap
	}

	// Decide heldSample of them, one at a time, on the first replica.
	voters := make([]*http.Client, heldApprovers)
	for i := range voters {
		local := &net.TCPAddr{IP: net.IPv4(127, 0, 0, byte(30+i))}
		voters[i] = &http.Client{Timeout: time.Minute, Transport: &http.Transport{DialContext: (&net.Dialer{LocalAddr: local}).DialContext}}
	}
	var lat, cross []time.Duration
	for k := range heldSample {
		i := k*(b.c.held/heldSample) + k%len(reps) // every replica's, in turn
		code, body, err := post(voters[k%heldApprovers], ctx, reps[0].url+"/sagacity/approve/"+fmt.Sprintf("held-%d", i)+"/1",
			approvers[k%heldApprovers], `{}`)
		if err != nil || code != http.StatusOK {
			return heldResult{}, errors.Join(err, fmt.Errorf("vote on held-%d: %d %s", i, code, body))
		}
		var d struct {
			DecidedAt time.Time `json:"decidedAt"`
		}
		if err := json.Unmarshal(body, &d); err != nil {
			return heldResult{}, err
		}
		var a answer
		select {
		case a = <-answers[i]:
		case <-time.After(time.Minute):
			return heldResult{}, fmt.Errorf("held-%d: no answer a minute after its vote", i)
		}
		if a.err != nil || a.code != http.StatusOK {
			return heldResult{}, errors.Join(a.err, fmt.Errorf("held-%d answered %d %s", i, a.code, a.body))
		}
		l := a.at.Sub(d.DecidedAt)
		lat = append(lat, l)
		if i%len(reps) != 0 {
			cross = append(cross, l)
		}
	}
	slices.Sort(lat)
	slices.Sort(cross)
	pct := func(ls []time.Duration, p float64) time.Duration {
		if len(ls) == 0 {
			return 0
		}
		return ls[min(len(ls)-1, int(p*float64(len(ls))))]
	}
	return heldResult{store: store, replicas: len(reps), held: b.c.held, perCall: grew / int64(b.c.held),
		stacks: stacks / int64(b.c.held), heap: heap / int64(b.c.held),
		p50: pct(lat, 0.5), p99: pct(lat, 0.99), worst: lat[len(lat)-1], sample: len(lat), crossP99: pct(cross, 0.99), crossSeen: len(cross)}, nil
}

// waitHeld waits until the server holds at least n calls, as its
// metrics say.
func waitHeld(ctx context.Context, s *server, token string, n int) error {
	deadline := time.Now().Add(2 * time.Minute)
	for {
		got, err := heldNow(ctx, s, token)
		if err != nil {
			return err
		}
		if got >= n {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the server holds %d calls two minutes on; want %d", got, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// goMemory is what Go's runtime says of a server's memory, in bytes.
type goMemory struct{ stacks, heap int64 }

// goMemoryOf reads it from the server's metrics.
func goMemoryOf(ctx context.Context, s *server, token string) (goMemory, error) {
	ms, err := metricsOf(ctx, s, token, "go_memstats_stack_inuse_bytes", "go_memstats_heap_inuse_bytes")
	return goMemory{int64(ms[0]), int64(ms[1])}, err
}

// heldNow reads sagacity_held_calls from the server's metrics.
func heldNow(ctx context.Context, s *server, token string) (int, error) {
	ms, err := metricsOf(ctx, s, token, "sagacity_held_calls")
	return int(ms[0]), err
}

// metricsOf reads gauges without labels from the server's metrics.
func metricsOf(ctx context.Context, s *server, token string, names ...string) ([]float64, error) {
	out := make([]float64, len(names))
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.url+"/metrics", nil)
	if err != nil {
		return out, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return out, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return out, fmt.Errorf("GET /metrics: %d", resp.StatusCode)
	}
	found := 0
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		for i, n := range names {
			if v, ok := strings.CutPrefix(sc.Text(), n+" "); ok {
				if out[i], err = strconv.ParseFloat(v, 64); err != nil {
					return out, err
				}
				found++
			}
		}
	}
	if found != len(names) {
		return out, errors.Join(sc.Err(), fmt.Errorf("the metrics do not say each of %v", names))
	}
	return out, sc.Err()
}
