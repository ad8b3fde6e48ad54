package enginetest

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/sagacity-go/sagacity/internal/engine"
	"github.com/sagacity-go/sagacity/internal/store/storetest"
	"github.com/sagacity-go/sagacity/internal/testkit"
)

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
			_, _ = v.log.Check(ctx, false)
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
