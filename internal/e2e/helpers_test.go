// Package e2e holds fault-injection suites that drive the real sagacity
// binary from outside: it is built once per test process, started with an
// environment and a YAML file like any deployment, killed with SIGKILL,
// run as two replicas on one PostgreSQL, and cut off from its database by
// a proxy. Tools are a real signed HTTP tool server that counts every
// effect by its Idempotency-Key. Everything listens on 127.0.0.1 only.
//
// The suites need the loopback addresses 127.0.0.2–127.0.0.254 as client
// source addresses (Linux has the whole 127.0.0.0/8 on lo): decisions are
// rate limited per client IP, and a few thousand of them have to fit in
// one server's lifetime.
package e2e

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestMain(m *testing.M) {
	code := m.Run()
	if build.dir != "" {
		os.RemoveAll(build.dir)
	}
	os.Exit(code)
}

// build is the sagacity binary, built once per test process.
var build struct {
	once sync.Once
	dir  string
	path string
	err  error
}

// binaryEnv names the variable that holds the path of a sagacity binary
// already built from this tree (make test builds one), so that the suites
// need not build it again.
const binaryEnv = "SAGACITY_TEST_BINARY"

// binary returns the path of the sagacity binary: binaryEnv's, or built on
// first use with the go command from the module root when it is unset.
func binary(t testing.TB) string {
	t.Helper()
	build.once.Do(func() {
		if build.path = os.Getenv(binaryEnv); build.path != "" {
			return
		}
		goTool, err := exec.LookPath("go")
		if err != nil {
			build.err = fmt.Errorf("the go command is not on PATH (go test puts it there): %w", err)
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		out, err := exec.CommandContext(ctx, goTool, "env", "GOMOD").Output()
		if err != nil {
			build.err = fmt.Errorf("go env GOMOD: %w", err)
			return
		}
		mod := strings.TrimSpace(string(out))
		if mod == "" || mod == os.DevNull {
			build.err = errors.New("go env GOMOD: not inside the module")
			return
		}
		if build.dir, err = os.MkdirTemp("", "sagacity-e2e-bin-"); err != nil {
			build.err = err
			return
		}
		path := filepath.Join(build.dir, "sagacity")
		cmd := exec.CommandContext(ctx, goTool, "build", "-o", path, "github.com/sagacity-go/sagacity/cmd/web")
		cmd.Dir = filepath.Dir(mod)
		if out, err := cmd.CombinedOutput(); err != nil {
			build.err = fmt.Errorf("go build github.com/sagacity-go/sagacity/cmd/web: %w\n%s", err, out)
			return
		}
		build.path = path
	})
	if build.err != nil {
		t.Fatal(build.err)
	}
	return build.path
}

var loopback struct {
	once sync.Once
	err  error
}

// needLoopbackRange fails the test unless client sockets can bind to
// 127.0.0.x addresses other than 127.0.0.1.
func needLoopbackRange(t testing.TB) {
	t.Helper()
	loopback.once.Do(func() {
		ln, err := net.Listen("tcp", "127.0.0.254:0")
		if err != nil {
			loopback.err = fmt.Errorf("these suites send requests from 127.0.0.2–127.0.0.254 to spread the decision rate limits, "+
				"but this machine cannot bind 127.0.0.254 (%w); on macOS add aliases to lo0", err)
			return
		}
		ln.Close()
	})
	if loopback.err != nil {
		t.Fatal(loopback.err)
	}
}

// transcript records every request the suite made and every answer it got,
// in order, so that a failure can be read back.
type transcript struct {
	mu    sync.Mutex
	start time.Time
	lines []string
}

func (tr *transcript) add(format string, args ...any) {
	line := fmt.Sprintf("%8.3fs ", time.Since(tr.start).Seconds()) + fmt.Sprintf(format, args...)
	tr.mu.Lock()
	tr.lines = append(tr.lines, line)
	tr.mu.Unlock()
}

func (tr *transcript) String() string {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return strings.Join(tr.lines, "\n") + "\n"
}

// keep writes text to a file that outlives the test and logs where it is,
// with its last lines.
func keep(t testing.TB, what, text string) {
	t.Helper()
	f, err := os.CreateTemp("", "sagacity-e2e-"+strings.NewReplacer("/", "-", " ", "_").Replace(t.Name())+"-*.log")
	if err == nil {
		_, err = f.WriteString(text)
		f.Close()
	}
	lines := strings.Split(strings.TrimRight(text, "\n"), "\n")
	tail := lines[max(0, len(lines)-20):]
	if err != nil {
		t.Logf("%s (could not be saved: %v), last %d lines:\n%s", what, err, len(tail), strings.Join(tail, "\n"))
		return
	}
	t.Logf("%s: %d lines in %s; the last %d:\n%s", what, len(lines), f.Name(), len(tail), strings.Join(tail, "\n"))
}

// eventually polls cond every 20ms until it holds or the deadline passes,
// and reports whether it held.
func eventually(ctx context.Context, within time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(within)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return false
		}
		select {
		case <-time.After(20 * time.Millisecond):
		case <-ctx.Done():
		}
	}
}

// parallel runs fn(0) … fn(count-1) on n goroutines.
func parallel(n, count int, fn func(i int)) {
	next := make(chan int)
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			for i := range next {
				fn(i)
			}
		})
	}
	for i := range count {
		next <- i
	}
	close(next)
	wg.Wait()
}
