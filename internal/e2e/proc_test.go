package e2e

import (
	"fmt"
	"io"
	"os/exec"
	"regexp"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/sagacity-go/sagacity/internal/testkit"
)

// startTimeout bounds how long a server may take to print its URL.
const startTimeout = 30 * time.Second

// urlPattern finds the server's address in its output, whatever the log
// format.
var urlPattern = regexp.MustCompile(`http://127\.0\.0\.1:\d+`)

// server is the sagacity binary running as a child process. It can be
// killed and started again with the same environment (on a new port).
type server struct {
	t    testing.TB
	name string
	env  []string
	log  *testkit.Buffer // the output of every start, in order

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
	url    string
	gen    int // how many times it was started
}

// newServer makes a server of the binary with env (and nothing else in
// its environment), not started yet. It is killed when the test ends; its
// output is kept if the test failed.
func newServer(t testing.TB, name string, env map[string]string) *server {
	t.Helper()
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	s := &server{t: t, name: name, log: &testkit.Buffer{}}
	for _, k := range keys {
		s.env = append(s.env, k+"="+env[k])
	}
	t.Cleanup(func() {
		s.kill()
		if t.Failed() {
			keep(t, "output of "+name, s.log.String())
		}
	})
	return s
}

// start runs the binary and waits until it prints its URL.
func (s *server) start() {
	s.t.Helper()
	if ok, out := s.launch(); !ok {
		s.t.Fatalf("%s exited at start %d:\n%s", s.name, s.starts()+1, out)
	}
}

// refused runs the binary when it must not start, and returns what it
// printed before it exited.
func (s *server) refused() string {
	s.t.Helper()
	ok, out := s.launch()
	if ok {
		s.t.Fatalf("%s started at %s; want it to refuse to start", s.name, s.URL())
	}
	return out
}

// launch runs the binary and waits until it prints its URL (true) or
// exits (false), and returns its output so far.
func (s *server) launch() (bool, string) {
	s.t.Helper()
	s.mu.Lock()
	running := s.cmd != nil
	gen := s.gen + 1
	s.mu.Unlock()
	if running {
		s.t.Fatalf("%s: start while running", s.name)
	}
	out := &testkit.Buffer{}
	fmt.Fprintf(s.log, "=== %s start %d at %s\n", s.name, gen, time.Now().Format(time.RFC3339Nano))
	cmd := exec.Command(binary(s.t), "serve")
	cmd.Env = s.env
	cmd.Stdout = io.MultiWriter(out, s.log)
	cmd.Stderr = cmd.Stdout
	cmd.SysProcAttr = procAttr()
	if err := cmd.Start(); err != nil {
		s.t.Fatalf("%s: start: %v", s.name, err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	deadline := time.Now().Add(startTimeout)
	for {
		if u := urlPattern.FindString(out.String()); u != "" {
			s.mu.Lock()
			s.cmd, s.exited, s.url, s.gen = cmd, exited, u, gen
			s.mu.Unlock()
			return true, out.String()
		}
		select {
		case <-exited:
			s.mu.Lock()
			s.gen = gen
			s.mu.Unlock()
			return false, fmt.Sprintf("(%v) %s", cmd.ProcessState, out)
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			<-exited
			s.t.Fatalf("%s printed no http://127.0.0.1:<port> within %s:\n%s", s.name, startTimeout, out)
		}
	}
}

// kill sends SIGKILL and waits for the process to be gone. It does
// nothing when the server is not running.
func (s *server) kill() {
	s.mu.Lock()
	cmd, exited := s.cmd, s.exited
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Kill() // SIGKILL
	<-exited
	fmt.Fprintf(s.log, "=== %s killed at %s\n", s.name, time.Now().Format(time.RFC3339Nano))
}

// URL is where the current (or last) start listens.
func (s *server) URL() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.url
}

// generation names the current start: rate limits live in the process,
// so decision budgets are counted per generation.
func (s *server) generation() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.name + "#" + strconv.Itoa(s.gen)
}

// starts is how many times the server was started.
func (s *server) starts() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.gen
}
