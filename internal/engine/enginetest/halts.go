package enginetest

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sagacity-go/sagacity/internal/engine"
	"github.com/sagacity-go/sagacity/internal/store/storetest"
	"github.com/sagacity-go/sagacity/internal/testkit"
	"github.com/sagacity-go/sagacity/internal/tlog"
	"github.com/sagacity-go/sagacity/internal/witness"
)

// testLogHalts: a halt lifts only when a check as strong as the one that
// raised it passes against a checkpoint at least as large; deleting the
// checkpoints newer than the database lifts nothing while the server that
// witnessed them runs; the sequencer refuses an entry whose saga lost the
// leaves this server read, one that does not chain, and a log whose
// leaves it cannot read back; and a checkpoint directory that takes no
// checkpoint for three intervals halts executions until it takes one.
func testLogHalts(t *testing.T, nh func(*testing.T) storetest.Harness) {
	ctx := context.Background()
	t.Run("newer checkpoints deleted", func(t *testing.T) {
		v := newEnv(t, nh)
		v.gate("a")
		first := v.sequence()
		v.call("b", "reserveInventory", "{}")
		v.sequence()
		v.h.Exec(t, "UPDATE journal SET leaf = NULL WHERE leaf >= $1", first.Size)
		v.h.Exec(t, "UPDATE log_state SET size = $1", first.Size)
		if problem, _ := v.log.Check(ctx, false); problem == "" {
			t.Fatal("Check of the rolled-back log found nothing")
		}
		files, _ := os.ReadDir(v.w.Path())
		for _, f := range files {
			if !strings.HasSuffix(f.Name(), fmt.Sprintf("%020d.checkpoint", first.Size)) {
				os.Remove(v.w.Path() + "/" + f.Name())
			}
		}
		for _, full := range []bool{false, true} {
			if problem, err := v.log.Check(ctx, full); err != nil || !strings.Contains(problem, "fewer than the") {
				t.Errorf("Check(full=%v) with the newer checkpoints deleted = %q, %v; want the rollback still found", full, problem, err)
			}
		}
	})
	t.Run("leaves taken away", func(t *testing.T) {
		v := newEnv(t, nh)
		v.call("b", "reserveInventory", "{}")
		v.sequence()
		// The insider takes the saga's leaves away and rewrites it, under
		// the running server.
		v.h.Exec(t, "UPDATE journal SET leaf = NULL WHERE saga_id = 'b'")
		rewrite(t, v, "b", true)
		_, err := v.log.Sequence(ctx, true)
		testkit.WantKind(t, "Sequence of a saga whose leaves were taken away", err, engine.Conflict)
		const refused = "refusing to extend the log: leaf 2 (saga b seq=1) is logged a second time: the saga's seq=2 was logged before it, at leaf 1"
		if err == nil || !strings.Contains(err.Error(), refused) || !strings.Contains(v.e.Halted(), refused) {
			t.Errorf("Sequence = %v, halted %q; want it refused, naming the saga, and executions halted", err, v.e.Halted())
		}
		if es := v.journal("b"); es[0].Leaf != -1 {
			t.Errorf("the rewritten saga was logged: leaf %d", es[0].Leaf)
		}
	})
	t.Run("an entry that does not chain", func(t *testing.T) {
		v := newEnv(t, nh)
		v.call("b", "reserveInventory", "{}")
		v.h.Exec(t, `UPDATE journal SET input = '{"x":1}' WHERE saga_id = 'b' AND seq = 2`)
		_, err := v.log.Sequence(ctx, true)
		if err == nil || !strings.Contains(err.Error(), "refusing to extend the log: leaf 1 (saga b seq=2) is not the entry that chains on the one before it") {
			t.Errorf("Sequence = %v; want the rewritten entry refused", err)
		}
		v.h.Exec(t, `UPDATE journal SET input = '{}' WHERE saga_id = 'b' AND seq = 2`)
		if _, err := v.log.Sequence(ctx, true); err != nil || v.e.Halted() != "" {
			t.Errorf("Sequence once the entry is restored = %v, halted %q; want it logged and executions going on", err, v.e.Halted())
		}
	})
	t.Run("an entry before a logged one", func(t *testing.T) {
		// The server restarts: it reads the log from its first leaf
		// before it extends it.
		v := newEnv(t, nh)
		v.call("b", "reserveInventory", "{}")
		v.sequence()
		v.h.Exec(t, "UPDATE journal SET leaf = NULL WHERE saga_id = 'b' AND seq = 1")
		v.e, v.log = v.process(v.db)
		_, err := v.log.Sequence(ctx, true)
		if err == nil || !strings.Contains(err.Error(), "refusing to extend the log: leaf 0 is missing (rows deleted, a saga removed)") {
			t.Errorf("Sequence = %v; want the log whose first leaf lost its entry refused", err)
		}
		if es := v.journal("b"); es[0].Leaf != -1 {
			t.Errorf("the entry was logged again: leaf %d", es[0].Leaf)
		}
	})
	t.Run("another server's leaves rewritten before this one read them", func(t *testing.T) {
		v := newEnv(t, nh)
		v.call("a", "reserveInventory", "{}")
		v.sequence()
		other, otherLog := v.engine(v.open())
		if _, err := other.Call(ctx, agent, "b", "reserveInventory", "{}"); err != nil {
			t.Fatal(err)
		}
		if _, err := otherLog.Sequence(ctx, true); err != nil {
			t.Fatal(err)
		}
		rewrite(t, v, "b", false)
		_, err := v.log.Sequence(ctx, true)
		if err == nil || !strings.Contains(err.Error(), "refusing to extend the log: its recorded root at size 4 is not what its leaves hash to") ||
			v.e.Halted() == "" {
			t.Errorf("Sequence = %v, halted %q; want the leaves it read refused, and executions halted", err, v.e.Halted())
		}
	})
	t.Run("the stored tree rewritten under the running server", func(t *testing.T) {
		v := newEnv(t, nh)
		v.call("a", "reserveInventory", "{}")
		v.sequence()
		v.h.Exec(t, "UPDATE log_nodes SET hash = $1 WHERE level = 1 AND idx = 0", strings.Repeat("ab", 32))
		v.call("b", "reserveInventory", "{}")
		_, err := v.log.Sequence(ctx, true)
		if err == nil || !strings.Contains(err.Error(), "refusing to extend the log: its stored tree at size 2 does not hash to its leaves") {
			t.Errorf("Sequence = %v; want the rewritten tree refused", err)
		}
		if es := v.journal("b"); es[0].Leaf != -1 {
			t.Errorf("an entry was logged on the rewritten tree: leaf %d", es[0].Leaf)
		}
	})
	t.Run("full halt, cheap pass", func(t *testing.T) {
		v := newEnv(t, nh)
		seq := v.gate("a")
		v.sequence()
		v.h.Orphanable(t)
		v.h.Exec(t, "UPDATE journal SET saga_id = 'ghost' WHERE saga_id = 'a' AND seq = 1")
		if problem, _ := v.log.Check(ctx, true); !strings.Contains(problem, "belongs to no saga") {
			t.Fatalf("Check(full) = %q; want the orphan found", problem)
		}
		if problem, _ := v.log.Check(ctx, false); problem != "" || v.e.Halted() == "" {
			t.Errorf("Check(cheap) = %q, halted %q; want it to pass and lift nothing", problem, v.e.Halted())
		}
		v.h.Exec(t, "UPDATE journal SET saga_id = 'a' WHERE saga_id = 'ghost'")
		if problem, _ := v.log.Check(ctx, true); problem != "" || v.e.Halted() != "" {
			t.Errorf("Check(full) once the row is back = %q, halted %q; want executions going on", problem, v.e.Halted())
		}
		v.approve("a", seq)
		if _, err := v.e.Resume(ctx, agent, "a", seq, transfer); err != nil {
			t.Errorf("Resume once the database matches again: %v", err)
		}
	})
	t.Run("key record replaced", func(t *testing.T) {
		// Under the running server: no decision is signed with a key the
		// database's evidence would not verify with.
		v := newEnv(t, nh)
		seq := v.gate("a")
		_, vkey := testkit.NewKeys(t, testkit.Keys(t).Name())
		v.h.Exec(t, "UPDATE log_state SET verifier_key = $1", vkey)
		before := len(v.journal("a"))
		for name, err := range map[string]error{
			"Approve": second(v.e.Approve(ctx, approver, "a", seq, "")),
			"Reject":  second(v.e.Reject(ctx, approver, "a", seq, "")),
		} {
			testkit.WantKind(t, name+" with another key recorded", err, engine.Conflict)
			if err == nil || !strings.Contains(err.Error(), vkey) || !strings.Contains(err.Error(), testkit.Keys(t).VerifierKey()) {
				t.Errorf("%s = %v; want it refused, naming both keys", name, err)
			}
		}
		if n := len(v.journal("a")); n != before {
			t.Errorf("journal has %d entries after the refused decisions, want %d", n, before)
		}
	})
	t.Run("checkpoint directory unwritable", func(t *testing.T) {
		h := nh(t)
		dir := t.TempDir()
		w, err := witness.Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		var clock clock
		db := h.Open(t)
		t.Cleanup(db.Close)
		l := tlog.New(db, w, testkit.Keys(t), tlog.Options{Every: 1, Interval: time.Second, Now: clock.now})
		if err := l.Claim(ctx); err != nil {
			t.Fatal(err)
		}
		fx := &effects{}
		e, err := engine.New(db, fx.tools(), engine.WithKeys(testkit.Keys(t)), engine.WithClock(clock.now), engine.WithLog(l))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.Call(ctx, agent, "s", "reserveInventory", "{}"); err != nil {
			t.Fatal(err)
		}
		// The directory's place taken by a file: nothing can be written
		// in it (as root, permissions would not stop a write).
		if err := os.Rename(dir, dir+".moved"); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dir, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		for range 10 {
			clock.n.Add(int64(time.Second / time.Millisecond))
			if _, err := l.Sequence(ctx, false); err == nil {
				t.Fatal("Sequence into an unwritable directory succeeded")
			}
			if _, err := e.Call(ctx, agent, "s", "reserveInventory", "{}"); err != nil {
				t.Fatal(err)
			}
		}
		if why := e.Halted(); !strings.Contains(why, "the checkpoint directory has taken no checkpoint since") {
			t.Errorf("halted = %q after 10 s of an unwritable directory (10 intervals); want executions halted", why)
		}
		if st, _ := e.LogStatus(ctx, auditor); st.Halted == "" {
			t.Errorf("LogStatus = %+v; want it halted", st)
		}
		os.Remove(dir)
		if err := os.Rename(dir+".moved", dir); err != nil {
			t.Fatal(err)
		}
		if _, err := l.Sequence(ctx, true); err != nil || e.Halted() != "" {
			t.Errorf("Sequence once the directory is back = %v, halted %q; want a checkpoint and executions going on", err, e.Halted())
		}
	})
}
