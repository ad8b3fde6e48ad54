package enginetest

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sagacity-go/sagacity/internal/engine"
	"github.com/sagacity-go/sagacity/internal/store/storetest"
	"github.com/sagacity-go/sagacity/internal/testkit"
	"github.com/sagacity-go/sagacity/internal/tlog"
	"github.com/sagacity-go/sagacity/internal/witness"
	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"
	"golang.org/x/mod/sumdb/note"
)

// sequence appends what is unsequenced to the global log and signs a
// checkpoint of it.
func (v *env) sequence() tlog.State {
	v.t.Helper()
	st, err := v.log.Sequence(context.Background(), true)
	if err != nil {
		v.t.Fatalf("Sequence: %v", err)
	}
	return st
}

// checkpoint reads the newest checkpoint outside the database with the
// public key alone, as anyone holding it would.
func (v *env) checkpoint() engine.Checkpoint {
	v.t.Helper()
	signed, _, err := v.w.Newest()
	if err != nil || signed == "" {
		v.t.Fatalf("newest checkpoint = %q, %v; want one", signed, err)
	}
	verifier, err := note.NewVerifier(testkit.Keys(v.t).VerifierKey())
	if err != nil {
		v.t.Fatal(err)
	}
	if _, err := note.Open([]byte(signed), note.VerifierList(verifier)); err != nil {
		v.t.Fatalf("note.Open(checkpoint) with the public key: %v", err)
	}
	cp, err := tlog.OpenCheckpoint(signed, verifier)
	if err != nil {
		v.t.Fatal(err)
	}
	return cp
}

// leafHash is an entry's leaf hash in the log, computed as
// docs/how-it-works.md documents it: RFC 6962's leaf hash of saga, seq
// and hash, each written as its byte length, a colon and its bytes.
func leafHash(e engine.Entry) []byte {
	seq := fmt.Sprint(e.Seq)
	data := fmt.Sprintf("%d:%s%d:%s%d:%s", len(e.SagaID), e.SagaID, len(seq), seq, len(e.Hash), e.Hash)
	return rfc6962.DefaultHasher.HashLeaf([]byte(data))
}

// testLog: every entry of every saga becomes a leaf of one log, each
// saga's in seq order; checkpoints are signed and kept outside the
// database; each entry's inclusion and each checkpoint's consistency with
// the one before verify with transparency-dev's verifier; and the
// database matches the checkpoints.
func testLog(t *testing.T, v *env) {
	ctx := context.Background()
	seq := v.gate("a")
	v.call("b", "reserveInventory", `{"item":"desk"}`)
	v.approve("a", seq)
	st := v.sequence()
	if st.Size != 6 {
		t.Errorf("log size = %d, want the 6 entries written", st.Size)
	}
	cp1 := v.checkpoint()
	if cp1.Size != st.Size || hex.EncodeToString(cp1.Root) != hex.EncodeToString(st.Root) || cp1.Origin != testkit.Keys(t).Name() {
		t.Errorf("checkpoint = %+v, want the log's state %+v, origin %s", cp1, st, testkit.Keys(t).Name())
	}
	seen := map[int64]string{}
	for _, saga := range []string{"a", "b"} {
		es, ps, err := v.e.Evidence(ctx, auditor, saga, 0)
		if err != nil {
			t.Fatalf("Evidence(%s): %v", saga, err)
		}
		for i, en := range es {
			if i > 0 && en.Leaf <= es[i-1].Leaf {
				t.Errorf("saga %s seq=%d at leaf %d, not after seq=%d's %d", saga, en.Seq, en.Leaf, es[i-1].Seq, es[i-1].Leaf)
			}
			if other, dup := seen[en.Leaf]; dup || en.Leaf < 0 || en.Leaf >= st.Size {
				t.Errorf("saga %s seq=%d at leaf %d (also %q), want a leaf of its own below %d", saga, en.Seq, en.Leaf, other, st.Size)
			}
			seen[en.Leaf] = fmt.Sprintf("%s/%d", saga, en.Seq)
			if err := proof.VerifyInclusion(rfc6962.DefaultHasher, uint64(en.Leaf), uint64(cp1.Size), leafHash(en), ps.Of[i], cp1.Root); err != nil {
				t.Errorf("inclusion of %s seq=%d: %v", saga, en.Seq, err)
			}
		}
	}
	if got := v.verify("a"); !got.Valid || !strings.Contains(got.Message, "4 in the log as the checkpoint of size 6 signed it") {
		t.Errorf("Verify(a) = %+v, want valid with its 4 entries proved in the checkpoint", got)
	}

	// More writes, from two engines at once: one log, consistent with the
	// checkpoint before.
	other, otherLog := v.engine(v.open())
	var wg sync.WaitGroup
	for i, e := range []struct {
		e *engine.Engine
		l *tlog.Log
	}{{v.e, v.log}, {other, otherLog}} {
		wg.Go(func() {
			for j := range 20 {
				if _, err := e.e.Call(ctx, agent, fmt.Sprintf("c%d-%d", i, j%3), "reserveInventory", "{}"); err != nil {
					t.Error(err)
				}
				if _, err := e.l.Sequence(ctx, false); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	st2 := v.sequence()
	if st2.Size != st.Size+80 {
		t.Errorf("log size = %d, want %d", st2.Size, st.Size+80)
	}
	cp2 := v.checkpoint()
	p, err := v.e.ConsistencyProof(ctx, auditor, cp1.Size, cp2.Size)
	if err != nil {
		t.Fatal(err)
	}
	if err := proof.VerifyConsistency(rfc6962.DefaultHasher, uint64(cp1.Size), uint64(cp2.Size), p, cp1.Root, cp2.Root); err != nil {
		t.Errorf("consistency %d → %d: %v", cp1.Size, cp2.Size, err)
	}
	for _, full := range []bool{false, true} {
		if problem, err := v.log.Check(ctx, full); problem != "" || err != nil || v.e.Halted() != "" {
			t.Errorf("Check(full=%v) = %q, %v; want the database to match", full, problem, err)
		}
	}
	_, err = v.e.ConsistencyProof(ctx, auditor, cp2.Size, cp1.Size)
	testkit.WantKind(t, "ConsistencyProof(backwards)", err, engine.Invalid)
	_, err = v.e.ConsistencyProof(ctx, agent, 0, cp1.Size)
	testkit.WantKind(t, "ConsistencyProof(as an agent)", err, engine.Forbidden)
	_, _, err = v.e.Evidence(ctx, auditor, "a", st2.Size+1)
	testkit.WantKind(t, "Evidence(beyond the log)", err, engine.Invalid)
}

// testLogTamper: an insider with write access to the database rolls it
// back or rewrites it; the check against the newest checkpoint outside
// the database finds it, executions halt (a resume is refused, nothing is
// journaled, nothing runs) and reads go on, and nothing is logged or
// signed on top of it.
func testLogTamper(t *testing.T, nh func(*testing.T) storetest.Harness) {
	tests := []struct {
		name   string
		full   bool // only the full check, from every entry, sees it
		tamper func(t *testing.T, v *env)
		want   string
	}{
		{"tail deleted", true, func(t *testing.T, v *env) {
			es := v.journal("b")
			v.h.Exec(t, "DELETE FROM journal WHERE saga_id = 'b' AND seq >= 3")
			v.h.Exec(t, "DELETE FROM calls WHERE saga_id = 'b' AND seq >= 3")
			v.h.Exec(t, "UPDATE sagas SET head_seq = 2, head_hash = $1 WHERE id = 'b'", es[1].Hash)
			// The chain alone does not see it; the entries the log holds
			// of the saga, as this server read them, do.
			if got := v.verify("b"); got.Valid || got.BreakAtIndex != 2 ||
				!strings.Contains(got.Message, "the journal ends at seq=2, but the log holds the saga's entries through seq=4") {
				t.Errorf("Verify(b) = %+v; want its tail cut found at once", got)
			}
		}, "is missing (rows deleted, a saga removed)"},
		{"saga deleted", true, func(t *testing.T, v *env) {
			for _, table := range []string{"journal", "calls", "approval_requests"} {
				v.h.Exec(t, "DELETE FROM "+table+" WHERE saga_id = 'b'")
			}
			v.h.Exec(t, "DELETE FROM sagas WHERE id = 'b'")
		}, "is missing (rows deleted, a saga removed)"},
		{"chain recomputed", true, func(t *testing.T, v *env) {
			rewrite(t, v, "b", false)
			if got := v.verify("b"); got.Valid || got.BreakAtIndex != 0 || !strings.Contains(got.Message, "is not in the log as the checkpoint of size") {
				t.Errorf("Verify(b) = %+v, want broken at its first entry: not in the log as signed", got)
			}
		}, "its root at that size, from the journal's entries, is not the one signed (history rewritten)"},
		{"rewritten, the originals copied to no saga", true, func(t *testing.T, v *env) {
			// The originals, hash and leaf kept, in a journal no saga has
			// (an insider who owns the schema drops what would refuse
			// it); the saga's own rows lose their leaves and are
			// rewritten.
			v.h.Orphanable(t)
			copyOut(t, v, "b", "ghost")
		}, "leaf 3 (saga ghost seq=1) belongs to no saga: its entry was copied out of its journal"},
		{"rewritten, the originals copied to another saga", true, func(t *testing.T, v *env) {
			v.h.Exec(t, "INSERT INTO sagas (id, status, initiator, ended, reason, head_seq, head_hash, created_at, updated_at)"+
				" SELECT 'ghost', status, initiator, ended, reason, head_seq, head_hash, created_at, updated_at FROM sagas WHERE id = 'b'")
			copyOut(t, v, "b", "ghost")
		}, "leaf 3 (saga ghost seq=1) is not the entry that chains on the one before it (history rewritten)"},
		{"rolled back", false, func(t *testing.T, v *env) {
			v.h.Exec(t, "UPDATE journal SET leaf = NULL WHERE leaf >= 4")
			v.h.Exec(t, "DELETE FROM log_nodes WHERE (level = 0 AND idx >= 4) OR (level = 1 AND idx >= 2) OR (level = 2 AND idx >= 1) OR level >= 3")
			v.h.Exec(t, "UPDATE log_state SET size = 4")
		}, "it holds 4 leaves, fewer than the 7 signed (rolled back, or rows deleted)"},
		{"tree rewritten", false, func(t *testing.T, v *env) {
			v.h.Exec(t, "UPDATE log_nodes SET hash = $1 WHERE level = 2 AND idx = 0", strings.Repeat("ab", 32))
		}, "its root at that size is not the one signed (history rewritten)"},
		{"key replaced", false, func(t *testing.T, v *env) {
			_, vkey := testkit.NewKeys(t, testkit.Keys(t).Name())
			v.h.Exec(t, "UPDATE log_state SET verifier_key = $1", vkey)
		}, "the database records the signing key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			v := newEnv(t, nh)
			seq := v.gate("a")
			v.call("b", "reserveInventory", `{"item":"desk"}`)
			v.call("b", "reserveInventory", `{"item":"chair"}`)
			if st := v.sequence(); st.Size != 7 {
				t.Fatalf("log size = %d, want 7", st.Size)
			}
			signed, _, _ := v.w.Newest()
			v.approve("a", seq)
			before := len(v.journal("a"))
			tt.tamper(t, v)
			// The server restarts: its sequencer remembers nothing the
			// insider took away.
			v.e, v.log = v.process(v.db)
			problem, err := v.log.Check(ctx, false)
			if tt.full && (err != nil || problem != "") {
				t.Errorf("Check(cheap) = %q, %v; want it blind to what only the entries show", problem, err)
			} else if !tt.full && (err != nil || !strings.Contains(problem, tt.want)) {
				t.Errorf("Check(cheap) = %q, %v; want %q", problem, err, tt.want)
			}
			problem, err = v.log.Check(ctx, true)
			if err != nil || !strings.Contains(problem, tt.want) || v.e.Halted() != problem {
				t.Fatalf("Check(full) = %q, %v (halted %q); want %q", problem, err, v.e.Halted(), tt.want)
			}
			_, err = v.e.Resume(ctx, agent, "a", seq, transfer)
			testkit.WantKind(t, "Resume while halted", err, engine.Unavailable)
			if !errors.Is(err, engine.ErrHalted) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Resume while halted = %v, want ErrHalted naming %q", err, tt.want)
			}
			if n := len(v.journal("a")); n != before || v.fx.transfer.Load() != 0 || v.pending("a") != 1 {
				t.Errorf("after a refused resume: journal %d entries (want %d), %d wires (want 0), %d pending (want 1)",
					n, before, v.fx.transfer.Load(), v.pending("a"))
			}
			if st, err := v.e.LogStatus(ctx, auditor); err != nil || st.Halted != problem {
				t.Errorf("LogStatus = %+v, %v; want it to read, halted", st, err)
			}
			// Nothing is logged or signed on top of it, and a cheap check
			// that passes lifts no halt a full one raised.
			v.call("c", "reserveInventory", "{}")
			if _, err := v.log.Sequence(ctx, true); err != nil {
				t.Errorf("Sequence while halted: %v", err)
			}
			if now, _, _ := v.w.Newest(); now != signed {
				t.Errorf("a checkpoint was published while halted:\n%s", now)
			}
			if es := v.journal("c"); es[0].Leaf != -1 {
				t.Errorf("an entry was logged while halted: leaf %d", es[0].Leaf)
			}
			v.log.Check(ctx, false)
			if v.e.Halted() == "" {
				t.Errorf("after a cheap check: no longer halted; want the full check's halt kept")
			}
		})
	}
}

// copyOut copies saga's rows, hash and leaf kept, to the journal of saga
// to, takes the saga's leaves away and rewrites it: the originals hold
// their places in the log, and the rewrite is waiting for leaves of its
// own.
func copyOut(t *testing.T, v *env, saga, to string) {
	t.Helper()
	v.h.Exec(t, "UPDATE journal SET leaf = -1 - leaf WHERE saga_id = $1", saga) // out of the way of the copies
	v.h.Exec(t, "INSERT INTO journal (saga_id, seq, tool_name, phase, input, payload, timestamp, hash, leaf)"+
		" SELECT $1, seq, tool_name, phase, input, payload, timestamp, hash, -1 - leaf FROM journal WHERE saga_id = $2", to, saga)
	v.h.Exec(t, "UPDATE journal SET leaf = NULL WHERE saga_id = $1", saga)
	rewrite(t, v, saga, true)
}

// rewrite rewrites saga's first input and recomputes its chain and head,
// as an insider who can write the database but holds no key; without
// leaves when unlogged is set.
func rewrite(t *testing.T, v *env, saga string, unlogged bool) {
	t.Helper()
	rechain(t, v, saga, func(e *engine.Entry) {
		if e.Seq == 1 {
			e.Input = `{"item":"yacht"}`
		}
	})
	if unlogged {
		if es := v.journal(saga); es[0].Leaf != -1 {
			t.Fatalf("rewrite: %s keeps its leaves", saga)
		}
	}
}

// rechain has edit rewrite saga's entries and recomputes their chain and
// the saga's head, as an insider who can write the database but holds no
// key.
func rechain(t *testing.T, v *env, saga string, edit func(e *engine.Entry)) {
	t.Helper()
	prev := engine.ZeroHash
	for _, en := range v.journal(saga) {
		edit(&en)
		en.Hash = engine.Hash(prev, en)
		prev = en.Hash
		v.h.Exec(t, "UPDATE journal SET input = $1, payload = $2, hash = $3 WHERE saga_id = $4 AND seq = $5",
			en.Input, en.Payload, en.Hash, en.SagaID, en.Seq)
	}
	v.h.Exec(t, "UPDATE sagas SET head_hash = $1 WHERE id = $2", prev, saga)
}

// testLogRollback: a database restored from a backup older than the
// newest checkpoint halts executions, and stays halted however much its
// agents write: the server never signs the rolled-back history, so it
// never forks its own checkpoints.
func testLogRollback(t *testing.T, nh func(*testing.T) storetest.Harness) {
	ctx := context.Background()
	v := newEnv(t, nh)
	seq := v.gate("a")
	v.sequence()
	v.approve("a", seq)
	v.call("b", "reserveInventory", "{}")
	v.call("b", "reserveInventory", "{}")
	signed := v.sequence()
	cp := v.checkpoint()
	// The backup: the log as it was at the first checkpoint (3 leaves).
	v.h.Exec(t, "UPDATE journal SET leaf = NULL WHERE leaf >= 3")
	v.h.Exec(t, "DELETE FROM log_nodes WHERE (level = 0 AND idx >= 3) OR (level = 1 AND idx >= 1) OR level >= 2")
	v.h.Exec(t, "UPDATE log_state SET size = 3")
	v.e, v.log = v.process(v.db)
	if problem, err := v.log.Check(ctx, false); err != nil || !strings.Contains(problem, fmt.Sprintf("fewer than the %d signed", signed.Size)) {
		t.Fatalf("Check after the restore = %q, %v; want the rollback found", problem, err)
	}
	for i := range 20 {
		v.call("refill", "reserveInventory", fmt.Sprintf(`{"n":%d}`, i))
		v.log.Sequence(ctx, true)
		v.log.Check(ctx, false)
	}
	if now := v.checkpoint(); now.Size != cp.Size || !strings.Contains(v.e.Halted(), "fewer than the") {
		t.Errorf("after refilling: newest checkpoint of size %d (was %d), halted %q; want no new checkpoint and still halted",
			now.Size, cp.Size, v.e.Halted())
	}
	_, err := v.e.Resume(ctx, agent, "a", seq, transfer)
	testkit.WantKind(t, "Resume on the rolled-back database", err, engine.Unavailable)
}

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
		os.Rename(dir+".moved", dir)
		if _, err := l.Sequence(ctx, true); err != nil || e.Halted() != "" {
			t.Errorf("Sequence once the directory is back = %v, halted %q; want a checkpoint and executions going on", err, e.Halted())
		}
	})
}

// testSagaRewritten: an insider rewrites one saga the checkpoint covers,
// under the running server, so that its chain still verifies; verifying
// that saga names the entry at once, without the check from every entry.
func testSagaRewritten(t *testing.T, nh func(*testing.T) storetest.Harness) {
	tests := []struct {
		name   string
		tamper func(t *testing.T, v *env)
		at     int // the entry named
		want   string
	}{
		{"its newest leaf taken away", func(t *testing.T, v *env) {
			v.h.Exec(t, "UPDATE journal SET leaf = NULL WHERE saga_id = 'b' AND seq = 4")
		}, 3, "seq=4 (entry 3) has no leaf, but the log holds the saga's entries through seq=4"},
		{"rewritten, the originals copied to another saga", func(t *testing.T, v *env) {
			v.h.Exec(t, "INSERT INTO sagas (id, status, initiator, ended, reason, head_seq, head_hash, created_at, updated_at)"+
				" SELECT 'ghost', status, initiator, ended, reason, head_seq, head_hash, created_at, updated_at FROM sagas WHERE id = 'b'")
			copyOut(t, v, "b", "ghost")
		}, 0, "seq=1 (entry 0) has no leaf, but the log holds the saga's entries through seq=4"},
		{"rewritten, the originals copied to no saga", func(t *testing.T, v *env) {
			v.h.Orphanable(t)
			copyOut(t, v, "b", "ghost")
		}, 0, "seq=1 (entry 0) has no leaf, but the log holds the saga's entries through seq=4"},
		{"an entry deleted from the middle, the later ones renumbered onto its leaf and theirs", func(t *testing.T, v *env) {
			leaf := map[int64]int64{}
			for _, en := range v.journal("b") {
				leaf[en.Seq] = en.Leaf
			}
			v.h.Exec(t, "DELETE FROM journal WHERE saga_id = 'b' AND seq = 2")
			v.h.Exec(t, "DELETE FROM calls WHERE saga_id = 'b'")
			v.h.Exec(t, "UPDATE journal SET leaf = NULL WHERE saga_id = 'b' AND seq > 2")
			for seq := int64(3); seq <= 4; seq++ {
				v.h.Exec(t, "UPDATE journal SET seq = $1, leaf = $2 WHERE saga_id = 'b' AND seq = $3", seq-1, leaf[seq-1], seq)
			}
			rechain(t, v, "b", func(*engine.Entry) {})
			v.h.Exec(t, "UPDATE sagas SET head_seq = 3 WHERE id = 'b'")
		}, 1, "seq=2 (entry 1) is not in the log as the checkpoint of size 8 signed it"},
		{"the later ones renumbered, without leaves", func(t *testing.T, v *env) {
			v.h.Exec(t, "DELETE FROM journal WHERE saga_id = 'b' AND seq = 2")
			v.h.Exec(t, "DELETE FROM calls WHERE saga_id = 'b'")
			v.h.Exec(t, "UPDATE journal SET leaf = NULL WHERE saga_id = 'b' AND seq > 2")
			for seq := int64(3); seq <= 4; seq++ {
				v.h.Exec(t, "UPDATE journal SET seq = $1 WHERE saga_id = 'b' AND seq = $2", seq-1, seq)
			}
			rechain(t, v, "b", func(*engine.Entry) {})
			v.h.Exec(t, "UPDATE sagas SET head_seq = 3 WHERE id = 'b'")
		}, 1, "seq=2 (entry 1) has no leaf, but the log holds the saga's entries through seq=4"},
		{"deleted whole", func(t *testing.T, v *env) {
			for _, table := range []string{"journal", "calls", "approval_requests"} {
				v.h.Exec(t, "DELETE FROM "+table+" WHERE saga_id = 'b'")
			}
			v.h.Exec(t, "DELETE FROM sagas WHERE id = 'b'")
		}, 0, "the saga has no journal, but the log holds the saga's entries through seq=4"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := newEnv(t, nh)
			v.call("a", "reserveInventory", `{"item":"desk"}`)
			v.call("b", "reserveInventory", `{"item":"desk"}`)
			v.call("b", "reserveInventory", `{"item":"chair"}`)
			v.call("c", "reserveInventory", `{"item":"lamp"}`)
			if st := v.sequence(); st.Size != 8 {
				t.Fatalf("log size = %d, want 8", st.Size)
			}
			if got := v.verify("b"); !got.Valid {
				t.Fatalf("Verify(b) before = %+v", got)
			}
			tt.tamper(t, v)
			got := v.verify("b")
			if got.Valid || got.BreakAtIndex != tt.at || !strings.Contains(got.Message, tt.want) {
				t.Errorf("Verify(b) = %+v; want it broken at entry %d: %q", got, tt.at, tt.want)
			}
			for _, saga := range []string{"a", "c"} {
				if got := v.verify(saga); !got.Valid {
					t.Errorf("Verify(%s), a saga left alone = %+v", saga, got)
				}
			}
		})
	}
	t.Run("a restarted server, until it has read the log", func(t *testing.T) {
		v := newEnv(t, nh)
		v.call("a", "reserveInventory", `{"item":"desk"}`)
		v.sequence()
		v.e, v.log = v.process(v.db)
		ctx := context.Background()
		if _, err := v.log.Check(ctx, false); err != nil {
			t.Fatal(err)
		}
		const unread = "this server has read 0 of the 2 leaves signed since it started"
		if got := v.verify("a"); !got.Valid || !strings.Contains(got.Message, unread) {
			t.Errorf("Verify(a) before the full check = %+v; want it valid, saying %q", got, unread)
		}
		if problem, err := v.log.Check(ctx, true); problem != "" || err != nil {
			t.Fatalf("Check(full) = %q, %v", problem, err)
		}
		if got := v.verify("a"); !got.Valid || strings.Contains(got.Message, "this server has read") {
			t.Errorf("Verify(a) after the full check = %+v; want it valid, the log read", got)
		}
		v.h.Exec(t, "UPDATE journal SET leaf = NULL WHERE saga_id = 'a' AND seq = 2")
		if got := v.verify("a"); got.Valid || got.BreakAtIndex != 1 {
			t.Errorf("Verify(a) with its leaf taken away after the full check = %+v; want it broken at entry 1", got)
		}
	})
}
