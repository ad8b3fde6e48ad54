package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sagacity-go/sagacity/internal/engine"
	"github.com/sagacity-go/sagacity/toolsig"
)

// The HTTP view: the real binary, in tokens mode, with one COMPENSATABLE
// HTTP tool whose tool server does nothing but check Sagacity's signature
// (toolsig), and agents that are goroutines calling the gateway, each on
// sagas of its own.

// httpResult is one load level.
type httpResult struct {
	agents   int
	calls    int
	perSec   float64
	p50, p99 time.Duration
	rssMax   int64 // bytes, the most the server's VmRSS was seen at
}

// buildServer builds cmd/web of the module at root into dir.
func buildServer(ctx context.Context, root, dir string) (string, error) {
	bin := filepath.Join(dir, "sagacity")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/web")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/web: %w\n%s", err, out)
	}
	return bin, nil
}

// toolServer serves reserveInventory's endpoints, refusing what Sagacity
// did not sign for them.
func toolServer(secret []byte) *httptest.Server {
	ok := func(result string) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, result) })
	}
	mux := http.NewServeMux()
	mux.Handle("POST /reserve", toolsig.Handler(secret, toolsig.Expect{Tool: toolExecuted, Phase: toolsig.Execute}, 1<<20, ok(`{"reserved":1}`)))
	mux.Handle("POST /release", toolsig.Handler(secret, toolsig.Expect{Tool: toolExecuted, Phase: toolsig.Compensate}, 1<<20, ok("released")))
	return httptest.NewServer(mux)
}

// server is the running binary.
type server struct {
	cmd    *exec.Cmd
	url    string
	token  string
	exited chan struct{}
}

var urlPattern = regexp.MustCompile(`"url":"(http://127\.0\.0\.1:\d+)"`)

// startServer runs bin serve on dbURL with a config of one tool served by
// tools, signed with secret, and one agent token, and waits until it says
// where it listens.
func startServer(ctx context.Context, bin, dir, dbURL, tools, secret string) (*server, error) {
	token := "sgc_" + rand.Text()
	skey, _, err := engine.GenerateKeys("sagacity.bench")
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256([]byte(token))
	config := fmt.Sprintf(`tools:
  - name: %s
    reversibility: COMPENSATABLE
    execute: {url: "%s/reserve"}
    compensate: {url: "%s/release"}
tokens:
  - name: agent
    sha256: %s
    roles: [agent]
`, toolExecuted, tools, tools, hex.EncodeToString(sum[:]))
	configPath := filepath.Join(dir, "sagacity.yaml")
	if err := os.WriteFile(configPath, []byte(config), 0o600); err != nil {
		return nil, err
	}
	s, err := launch(ctx, bin, serverEnv(dbURL, configPath, secret, skey, filepath.Join(dir, "checkpoints")))
	if err != nil {
		return nil, err
	}
	s.token = token
	return s, nil
}

// serverEnv is the environment of a server in tokens mode.
func serverEnv(dbURL, configPath, secret, skey, checkpoints string) []string {
	return []string{
		"SAGACITY_ADDR=127.0.0.1:0",
		"SAGACITY_DATABASE_URL=" + dbURL,
		"SAGACITY_AUTH=tokens",
		"SAGACITY_CONFIG=" + configPath,
		"SAGACITY_TOOL_SIGNING_SECRET=" + secret,
		"SAGACITY_SIGNING_KEY=" + skey,
		"SAGACITY_CHECKPOINT_DIR=" + checkpoints,
	}
}

// launch runs bin serve with env and waits until it says where it
// listens.
func launch(ctx context.Context, bin string, env []string) (*server, error) {
	cmd := exec.Command(bin, "serve")
	cmd.Env = env
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	s := &server{cmd: cmd, exited: make(chan struct{})}
	found := make(chan string, 1)
	var tail bytes.Buffer // what it said before its url, for an error
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if m := urlPattern.FindStringSubmatch(sc.Text()); m != nil {
				found <- m[1]
				break
			}
			tail.WriteString(sc.Text() + "\n")
		}
		_, _ = io.Copy(io.Discard, out) // its request log, written as in production
		_ = cmd.Wait()
		close(s.exited)
	}()
	select {
	case s.url = <-found:
		return s, nil
	case <-s.exited:
		return nil, fmt.Errorf("the server exited at start:\n%s", tail.String())
	case <-time.After(30 * time.Second):
		s.stop()
		return nil, errors.New("the server printed no url within 30s")
	case <-ctx.Done():
		s.stop()
		return nil, ctx.Err()
	}
}

// stop asks the server to shut down gracefully, as SIGTERM does in
// production, and waits for it.
func (s *server) stop() {
	_ = s.cmd.Process.Signal(os.Interrupt)
	select {
	case <-s.exited:
	case <-time.After(30 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.exited
	}
}

// rss is the server's resident set size now, from /proc.
func (s *server) rss() (int64, error) { return procBytes(strconv.Itoa(s.cmd.Process.Pid), "VmRSS") }

// gatewayLoad has agents call the gateway for d, after a warm-up of d/5,
// each agent on its own connection and its own sagas, and measures every
// call's latency and the server's RSS every 100ms.
func gatewayLoad(ctx context.Context, s *server, agents int, d time.Duration) (httpResult, error) {
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: agents}, Timeout: time.Minute}
	call := func(saga string) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.url+"/sagacity/sagas/"+saga+"/calls",
			strings.NewReader(`{"tool":"`+toolExecuted+`","input":"{\"item\":\"laptop\"}"}`))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+s.token)
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("gateway call: %d %s", resp.StatusCode, body)
		}
		return nil
	}
	run := func(d time.Duration, sample func()) ([]time.Duration, time.Duration, error) {
		var mu sync.Mutex
		var lat []time.Duration
		var failed atomic.Pointer[error]
		deadline := time.Now().Add(d)
		start := time.Now()
		var wg sync.WaitGroup
		for range agents {
			id := workerSeq.Add(1)
			wg.Go(func() {
				var mine []time.Duration
				for i := 0; time.Now().Before(deadline) && failed.Load() == nil; i++ {
					t := time.Now()
					if err := call(fmt.Sprintf("h%d-%d", id, i/sagaLength)); err != nil {
						failed.CompareAndSwap(nil, &err)
						return
					}
					mine = append(mine, time.Since(t))
				}
				mu.Lock()
				lat = append(lat, mine...)
				mu.Unlock()
			})
		}
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for waiting := true; waiting; {
			select {
			case <-tick.C:
				sample()
			case <-done:
				waiting = false
			}
		}
		if err := failed.Load(); err != nil {
			return nil, 0, *err
		}
		return lat, time.Since(start), nil
	}
	if _, _, err := run(d/5, func() {}); err != nil {
		return httpResult{}, err
	}
	var rssMax int64
	var rssErr error
	lat, took, err := run(d, func() {
		n, err := s.rss()
		rssMax, rssErr = max(rssMax, n), errors.Join(rssErr, err)
	})
	if err != nil || rssErr != nil {
		return httpResult{}, errors.Join(err, rssErr)
	}
	slices.Sort(lat)
	pct := func(p float64) time.Duration { return lat[min(len(lat)-1, int(p*float64(len(lat))))] }
	return httpResult{agents: agents, calls: len(lat), perSec: float64(len(lat)) / took.Seconds(),
		p50: pct(0.50), p99: pct(0.99), rssMax: rssMax}, nil
}
