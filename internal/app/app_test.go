package app_test

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/sagacity-go/sagacity/internal/engine"
	"github.com/sagacity-go/sagacity/internal/notify"
	"github.com/sagacity-go/sagacity/internal/service"
	"github.com/sagacity-go/sagacity/internal/testkit"
)

// TestServices: Build returns the server's services, started by none, in
// the order they start: the checker, the heartbeat, the sequencer, the
// services that write to the journal (the relay and the Notifier only
// with notification targets), the MCP gateway's watcher.
func TestServices(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name    string
		targets []notify.Target
		want    []string
	}{
		{"without notifications", nil,
			[]string{"*tlog.Checker", "*engine.Heartbeat", "*tlog.Sequencer", "*engine.Listener", "*engine.Recoverer", "*engine.Lapser", "*mcpgw.Watcher"}},
		{"with notifications", []notify.Target{{Name: "hook", Kind: "webhook", Channel: &notify.Webhook{URL: "http://127.0.0.1:1"}}},
			[]string{"*tlog.Checker", "*engine.Heartbeat", "*tlog.Sequencer", "*engine.Listener", "*engine.Recoverer", "*engine.Lapser",
				"*notify.Relay", "*engine.Notifier", "*mcpgw.Watcher"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			a := build(t, testkit.SQLiteURL(t), tt.targets)
			var got []string
			for _, s := range a.Services {
				got = append(got, fmt.Sprintf("%T", s))
				select {
				case <-s.Started():
					t.Errorf("%T started by Build", s)
				default:
				}
			}
			if diff := cmp.Diff(got, tt.want); diff != "" {
				t.Errorf("Build's services (-got +want):\n%s", diff)
			}
		})
	}
}

// TestServicesRun: the services run and stop as serve runs them: once
// started, this process is a runner and the log is checked; once stopped,
// the runner is gone and the newest checkpoint covers every entry
// written while they ran.
func TestServicesRun(t *testing.T) {
	t.Parallel()
	for name, url := range map[string]func(testing.TB) string{"sqlite": testkit.SQLiteURL, "postgres": testkit.PostgresURL} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dbURL := url(t)
			a := build(t, dbURL, nil)
			runners := func() int64 {
				return testkit.Count(t, dbURL, "SELECT count(*) FROM runners WHERE replica = 'app-test'")
			}
			ctx := t.Context()
			if err := service.StartAll(ctx, a.Services...); err != nil {
				t.Fatalf("StartAll = %v", err)
			}
			if err := service.WaitStarted(ctx, a.Services...); err != nil {
				t.Fatal(err)
			}
			if n := runners(); n != 1 {
				t.Errorf("runners of replica app-test once started = %d; want this process's", n)
			}
			agent := engine.Principal{ID: "agent", Auth: engine.AuthToken, Roles: []engine.Role{engine.RoleAgent}}
			if _, err := a.Engine.Call(ctx, agent, "s", "reserve", `{}`); err != nil {
				t.Fatal(err)
			}
			if err := service.StopAll(ctx, a.Services...); err != nil {
				t.Fatalf("StopAll = %v", err)
			}
			if n := runners(); n != 0 {
				t.Errorf("runners of replica app-test once stopped = %d; want none", n)
			}
			st, err := a.Log.Status(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if st.CheckedAt.IsZero() || st.FullAt.IsZero() || st.Halted != "" {
				t.Errorf("log status = %+v; want it checked, cheaply and in full, and not halted", st)
			}
			if st.Size < 2 || st.Checkpoint.Size != st.Size {
				t.Errorf("once stopped, the log has %d leaves and the newest checkpoint size %d; want a checkpoint covering the call",
					st.Size, st.Checkpoint.Size)
			}
		})
	}
}
