package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	sagacity "github.com/sagacity-go/sagacity/client"
	"github.com/sagacity-go/sagacity/internal/engine"
	"github.com/sagacity-go/sagacity/internal/testkit"
)

// TestRestore: the database restored from a backup older than the
// checkpoints the server signed, behind its back, with the checkpoint
// directory kept. Executions halt at the start (the rejection the backup
// lost stays lost, and the wire it rejected must not run) and stay halted
// however much the agents write meanwhile: the server signs no checkpoint
// of the rolled-back history. Deleting the checkpoints newer than the
// backup, while the server runs, lifts nothing either.
func TestRestore(t *testing.T) {
	for _, db := range []struct {
		name string
		url  func(testing.TB) string
	}{{"postgres", testkit.PostgresURL}, {"sqlite", testkit.SQLiteURL}} {
		t.Run(db.name, func(t *testing.T) {
			f := newFixture(t, 60*time.Second)
			ctx := f.ctx
			dbURL := db.url(t)
			srv := f.server("sagacity", dbURL)
			agent, other := f.initiator(0), f.approvers.take(srv)
			agent.call(ctx, srv, "paid", toolReserve, `{"sku":"desk","qty":1}`)
			r := f.approvedWire(srv, agent, "paid")
			srv.kill()
			restore := backup(t, dbURL)

			srv.start()
			if a, _ := other.reject(ctx, srv, "paid", r.JournalSeq); !a.is(200) {
				t.Fatalf("reject: %s", a)
			}
			before := f.waitLogged(srv, "paid")
			srv.kill()
			restore()
			srv.start()

			halted := func(what string) {
				t.Helper()
				st := f.waitChecked(srv)
				if !strings.Contains(st.Halted, "fewer than the") {
					t.Errorf("%s: GET /sagacity/log halted = %q; want the rollback named", what, st.Halted)
				}
				if a, _ := agent.resume(ctx, srv, "paid", r.JournalSeq, wire); a.code != 503 {
					t.Errorf("%s: resume of the wire the lost rejection rejected: %s; want 503", what, a)
				}
			}
			halted("after the restore")
			// The agents write on: many checkpoint intervals and checks.
			for i := range 30 {
				if a, _ := agent.call(ctx, srv, "refill", toolReserve, fmt.Sprintf(`{"sku":"r%d","qty":1}`, i)); !a.is(200) {
					t.Fatalf("call after the restore: %s", a)
				}
				time.Sleep(50 * time.Millisecond)
			}
			if a, st := f.auditor.log(ctx, srv); !a.is(200) || text(st.Checkpoint) != text(before.Checkpoint) {
				t.Errorf("after writing on: the newest checkpoint is %q; want still %q, none of the rolled-back log", text(st.Checkpoint), text(before.Checkpoint))
			}
			halted("after writing on")
			// Only the checkpoints the backup predates remain on disk.
			for _, file := range checkpointFiles(t, f.checkpointDir("sagacity")) {
				if !strings.HasSuffix(file, fmt.Sprintf("%020d.checkpoint", f.checkpointSizes(t)[0])) {
					os.Remove(file)
				}
			}
			time.Sleep(time.Second) // two cheap checks
			halted("after the newer checkpoints were deleted")
			if n := f.tools.snapshot().arrived["/wire"]; n != 0 {
				t.Errorf("the wire ran %d times; its rejection was lost, but nothing may run on a rolled-back database", n)
			}
		})
	}
}

// wire is the input of the suites' wire transfers.
const wire = `{"amount":"100","to":"alice"}`

// approvedWire has agent ask for the wire in saga, an approver approve it
// and the log cover it; it returns the call.
func (f *fixture) approvedWire(srv *server, agent *client, saga string) sagacity.CallResult {
	f.t.Helper()
	a, r := agent.call(f.ctx, srv, saga, toolWire, wire)
	if !a.is(202) {
		f.t.Fatalf("wire: %s", a)
	}
	if a, _ := f.approvers.take(srv).approve(f.ctx, srv, saga, r.JournalSeq); !a.is(200) {
		f.t.Fatalf("approve: %s", a)
	}
	f.waitLogged(srv, saga)
	return r
}

// backup copies the database at dbURL, whose server is stopped, and
// returns what restores it: the SQLite files as they are, or every table
// of the PostgreSQL schema.
func backup(t *testing.T, dbURL string) (restore func()) {
	t.Helper()
	if path, ok := strings.CutPrefix(dbURL, "sqlite:"); ok {
		saved := map[string][]byte{}
		for _, suffix := range []string{"", "-wal", "-shm"} {
			if b, err := os.ReadFile(path + suffix); err == nil {
				saved[suffix] = b
			}
		}
		return func() {
			for _, suffix := range []string{"", "-wal", "-shm"} {
				os.Remove(path + suffix)
				if b, ok := saved[suffix]; ok {
					if err := os.WriteFile(path+suffix, b, 0o600); err != nil {
						t.Fatal(err)
					}
				}
			}
		}
	}
	tables := []string{"sagas", "journal", "approval_requests", "calls", "call_keys", "log_nodes", "log_state"}
	for _, table := range tables {
		testkit.Exec(t, dbURL, "CREATE TABLE backup_"+table+" AS TABLE "+table)
	}
	return func() {
		testkit.Exec(t, dbURL, "TRUNCATE "+strings.Join(tables, ", "))
		for _, table := range tables {
			testkit.Exec(t, dbURL, "INSERT INTO "+table+" TABLE backup_"+table)
		}
	}
}

// checkpointFiles lists the checkpoint files in dir.
func checkpointFiles(t *testing.T, dir string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.checkpoint"))
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// checkpointSizes are the sizes of the checkpoints the server named
// "sagacity" keeps, smallest first.
func (f *fixture) checkpointSizes(t *testing.T) []int64 {
	t.Helper()
	var sizes []int64
	for _, file := range checkpointFiles(t, f.checkpointDir("sagacity")) {
		var n int64
		_, _ = fmt.Sscanf(filepath.Base(file), "%d.checkpoint", &n)
		sizes = append(sizes, n)
	}
	return sizes
}

// TestCheckpointDirectory: a checkpoint directory that cannot take a
// checkpoint (made immutable: as root, permissions would not stop a
// write) halts executions once three checkpoint intervals have gone by,
// as GET /sagacity/log and the metrics say; once it takes one again,
// executions go on.
func TestCheckpointDirectory(t *testing.T) {
	if _, err := exec.LookPath("chattr"); err != nil {
		t.Fatalf("this test makes the checkpoint directory immutable with chattr (e2fsprogs): %v", err)
	}
	f := newFixture(t, 60*time.Second)
	ctx := f.ctx
	srv := f.server("sagacity", testkit.SQLiteURL(t))
	agent := f.initiator(0)
	r := f.approvedWire(srv, agent, "paid")
	dir := f.checkpointDir("sagacity")
	chattr := func(flag string) {
		t.Helper()
		if out, err := exec.Command("chattr", flag, dir).CombinedOutput(); err != nil {
			t.Fatalf("chattr %s %s: %v %s (the file system must take the immutable flag)", flag, dir, err, out)
		}
	}
	chattr("+i")
	t.Cleanup(func() { _ = exec.Command("chattr", "-i", dir).Run() })
	var st sagacity.LogStatus
	stalled := eventually(ctx, 20*time.Second, func() bool {
		agent.call(ctx, srv, "busy", toolReserve, fmt.Sprintf(`{"sku":"b%d","qty":1}`, time.Now().UnixNano()))
		_, st = f.auditor.log(ctx, srv)
		return strings.Contains(st.Halted, "the checkpoint directory has taken no checkpoint since")
	})
	if !stalled {
		t.Fatalf("GET /sagacity/log halted = %q with the directory immutable; want executions halted", st.Halted)
	}
	if a, _ := agent.resume(ctx, srv, "paid", r.JournalSeq, wire); a.code != 503 || !strings.Contains(a.body, "checkpoint directory") {
		t.Errorf("resume while the directory takes nothing: %s; want 503 naming it", a)
	}
	if m := f.metrics(ctx, srv); !strings.Contains(m, "\nsagacity_executions_halted 1\n") {
		t.Errorf("metrics while halted lack sagacity_executions_halted 1:\n%s", m)
	}
	chattr("-i")
	if !eventually(ctx, 20*time.Second, func() bool {
		_, st = f.auditor.log(ctx, srv)
		return st.Halted == ""
	}) {
		t.Fatalf("GET /sagacity/log halted = %q with the directory writable again; want executions going on", st.Halted)
	}
	if a, _ := agent.resume(ctx, srv, "paid", r.JournalSeq, wire); !a.is(200) {
		t.Errorf("resume once the directory takes checkpoints again: %s; want 200", a)
	}
}

// metrics is what GET /metrics answers the auditor.
func (f *fixture) metrics(ctx context.Context, s *server) string {
	f.t.Helper()
	req, err := http.NewRequestWithContext(ctx, "GET", s.URL()+"/metrics", nil)
	if err != nil {
		f.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+f.auditor.token)
	resp, err := (&http.Client{Transport: f.auditor.transport}).Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 {
		f.t.Fatalf("GET /metrics = %d %s, %v", resp.StatusCode, b, err)
	}
	return string(b)
}

// TestOtherKey: a replica started with another signing key on a database
// the first replica's key was recorded in refuses to start, naming both
// public keys; the first replica goes on.
func TestOtherKey(t *testing.T) {
	f := newFixture(t, 60*time.Second)
	dbURL := testkit.PostgresURL(t)
	first := f.server("replica-1", dbURL)
	skey, vkey, err := engine.GenerateKeys("sagacity.e2e")
	if err != nil {
		t.Fatal(err)
	}
	out := f.serverRefused("replica-2", dbURL, map[string]string{"SAGACITY_SIGNING_KEY": skey})
	if !strings.Contains(out, "the database records the signing key "+f.verifierKey()) || !strings.Contains(out, vkey) {
		t.Errorf("the replica with another key said:\n%s\nwant it to refuse to start, naming %s and %s", out, f.verifierKey(), vkey)
	}
	if a, _ := f.initiator(0).call(f.ctx, first, "s", toolReserve, `{"sku":"desk","qty":1}`); !a.is(200) {
		t.Errorf("the first replica after the other's refusal: %s", a)
	}
}
