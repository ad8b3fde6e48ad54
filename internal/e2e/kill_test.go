package e2e

import (
	"crypto/rand"
	mrand "math/rand/v2"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/sagacity-go/sagacity/internal/testkit"
)

// killRounds is how many times each store's server is killed.
const killRounds = 30

// TestKill9 drives many sagas from eight workers and kills the server with
// SIGKILL at a random moment, over and over, on each store. After every
// restart, what the client was told must still hold (see driver.check).
func TestKill9(t *testing.T) {
	t.Run("postgres", func(t *testing.T) {
		dbURL, settle := killablePostgres(t)
		killAgainAndAgain(t, "postgres", dbURL, settle)
	})
	t.Run("sqlite", func(t *testing.T) {
		killAgainAndAgain(t, "sqlite", testkit.SQLiteURL(t), func(*fixture) {})
	})
}

// killablePostgres is a PostgreSQL database for a server that is killed,
// and what to wait for after each kill: a backend of the dead process
// finishes the statement it received (a COMMIT, say) before it notices.
func killablePostgres(t *testing.T) (dbURL string, settle func(*fixture)) {
	direct, tagged, app := taggedPostgres(t)
	return tagged, func(f *fixture) {
		conn, err := pgx.Connect(f.ctx, direct)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(f.ctx)
		gone := eventually(f.ctx, 10*time.Second, func() bool {
			var n int
			err := conn.QueryRow(f.ctx, `SELECT count(*) FROM pg_stat_activity WHERE application_name = $1`, app).Scan(&n)
			return err == nil && n == 0
		})
		if !gone {
			t.Fatalf("backends with application_name=%s still there 10s after the server was killed", app)
		}
	}
}

// taggedPostgres is a fresh PostgreSQL database, by its URL and by one
// whose connections carry an application_name of their own (app), by
// which the server's backends are found.
func taggedPostgres(t *testing.T) (direct, tagged, app string) {
	direct = testkit.PostgresURL(t)
	u, err := url.Parse(direct)
	if err != nil {
		t.Fatal(err)
	}
	app = "sagacity-e2e-" + strings.ToLower(rand.Text()[:10])
	q := u.Query()
	q.Set("application_name", app)
	u.RawQuery = q.Encode()
	return direct, u.String(), app
}

// killAgainAndAgain runs killRounds rounds on dbURL: drive, kill, wait for
// the dead process's work to settle, restart, check.
func killAgainAndAgain(t *testing.T, name, dbURL string, settle func(*fixture)) {
	start := time.Now()
	f := newFixture(t, 80*time.Second)
	srv := f.server("sagacity", dbURL)
	d := newDriver(f, srv, 8, "kill-"+name)
	for round := range killRounds {
		var stop atomic.Bool
		done := make(chan struct{})
		go func() {
			d.run(&stop)
			close(done)
		}()
		time.Sleep(50*time.Millisecond + mrand.N(350*time.Millisecond)) // when the kill lands
		d.killing.Store(true)
		srv.kill()
		stop.Store(true)
		<-done
		d.killing.Store(false)
		f.tools.quiesce(f.ctx, t)
		settle(f)
		srv.start()
		d.check(false)
		if t.Failed() {
			t.Fatalf("stopped after round %d of %d: %s", round+1, killRounds, d.statsLine())
		}
	}
	d.check(true)
	d.check(false) // what the last check resumed
	t.Logf("%d kills in %s: %s", killRounds, time.Since(start).Round(time.Millisecond), d.statsLine())
	if d.stat("calls in doubt") == 0 {
		t.Errorf("no kill landed between a call's INTENT and its outcome in %d rounds; the suite tests nothing of the kind", killRounds)
	}
	if d.stat("approvals resumed later") == 0 {
		t.Errorf("no approval was resumed after a restart in %d rounds; the suite tests nothing of the kind", killRounds)
	}
}
