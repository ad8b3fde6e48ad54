package storetest

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/sagacity-go/sagacity/internal/engine"
	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"
	"golang.org/x/mod/sumdb/note"
)

// sequence appends what is unsequenced to the global log and signs a
// checkpoint of it.
func (v *env) sequence() engine.LogState {
	v.t.Helper()
	st, err := v.e.Sequence(context.Background(), true)
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
	verifier, err := note.NewVerifier(Keys(v.t).VerifierKey())
	if err != nil {
		v.t.Fatal(err)
	}
	if _, err := note.Open([]byte(signed), note.VerifierList(verifier)); err != nil {
		v.t.Fatalf("note.Open(checkpoint) with the public key: %v", err)
	}
	cp, err := engine.OpenCheckpoint(signed, verifier)
	if err != nil {
		v.t.Fatal(err)
	}
	return cp
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
	if cp1.Size != st.Size || hex.EncodeToString(cp1.Root) != hex.EncodeToString(st.Root) || cp1.Origin != Keys(t).Name() {
		t.Errorf("checkpoint = %+v, want the log's state %+v, origin %s", cp1, st, Keys(t).Name())
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
			h, _ := hex.DecodeString(en.Hash)
			if err := proof.VerifyInclusion(rfc6962.DefaultHasher, uint64(en.Leaf), uint64(cp1.Size), rfc6962.DefaultHasher.HashLeaf(h), ps.Of[i], cp1.Root); err != nil {
				t.Errorf("inclusion of %s seq=%d: %v", saga, en.Seq, err)
			}
		}
	}
	if got := v.verify("a"); !got.Valid || !strings.Contains(got.Message, "4 in the log as the checkpoint of size 6 signed it") {
		t.Errorf("Verify(a) = %+v, want valid with its 4 entries proved in the checkpoint", got)
	}

	// More writes, from two engines at once: one log, consistent with the
	// checkpoint before.
	other := v.engine(v.open())
	var wg sync.WaitGroup
	for i, e := range []*engine.Engine{v.e, other} {
		wg.Go(func() {
			for j := range 20 {
				if _, err := e.Call(ctx, agent, fmt.Sprintf("c%d-%d", i, j%3), "reserveInventory", "{}"); err != nil {
					t.Error(err)
				}
				if _, err := e.Sequence(ctx, false); err != nil {
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
		if problem, err := v.e.CheckLog(ctx, full); problem != "" || err != nil || v.e.Halted() != "" {
			t.Errorf("CheckLog(full=%v) = %q, %v; want the database to match", full, problem, err)
		}
	}
	_, err = v.e.ConsistencyProof(ctx, auditor, cp2.Size, cp1.Size)
	wantKind(t, "ConsistencyProof(backwards)", err, engine.Invalid)
	_, err = v.e.ConsistencyProof(ctx, agent, 0, cp1.Size)
	wantKind(t, "ConsistencyProof(as an agent)", err, engine.Forbidden)
	_, _, err = v.e.Evidence(ctx, auditor, "a", st2.Size+1)
	wantKind(t, "Evidence(beyond the log)", err, engine.Invalid)
}

// testLogTamper: an insider with write access to the database rolls it
// back or rewrites it; the check against the newest checkpoint outside
// the database finds it, executions halt (a resume is refused, nothing is
// journaled, nothing runs) and reads go on; once the database matches
// again, executions resume.
func testLogTamper(t *testing.T, nh func(*testing.T) Harness) {
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
			if got := v.verify("b"); !got.Valid {
				t.Errorf("Verify(b) = %+v: the chain alone should not see its tail cut", got)
			}
		}, "is missing (rows deleted, a saga removed)"},
		{"saga deleted", true, func(t *testing.T, v *env) {
			for _, table := range []string{"journal", "calls", "approval_requests"} {
				v.h.Exec(t, "DELETE FROM "+table+" WHERE saga_id = 'b'")
			}
			v.h.Exec(t, "DELETE FROM sagas WHERE id = 'b'")
		}, "is missing (rows deleted, a saga removed)"},
		{"chain recomputed", true, func(t *testing.T, v *env) {
			es := v.journal("b")
			prev := engine.ZeroHash
			for i, en := range es {
				if i == 0 {
					en.Input = `{"item":"yacht"}`
				}
				en.Hash = engine.Hash(prev, en)
				prev = en.Hash
				v.h.Exec(t, "UPDATE journal SET input = $1, hash = $2 WHERE saga_id = 'b' AND seq = $3", en.Input, en.Hash, en.Seq)
			}
			v.h.Exec(t, "UPDATE sagas SET head_hash = $1 WHERE id = 'b'", prev)
			if got := v.verify("b"); got.Valid || got.BreakAtIndex != 0 || !strings.Contains(got.Message, "is not in the log as the checkpoint of size") {
				t.Errorf("Verify(b) = %+v, want broken at its first entry: not in the log as signed", got)
			}
		}, "its root at that size, from the journal's entries, is not the one signed (history rewritten)"},
		{"rolled back", false, func(t *testing.T, v *env) {
			v.h.Exec(t, "UPDATE journal SET leaf = NULL WHERE leaf >= 4")
			v.h.Exec(t, "DELETE FROM log_nodes WHERE (level = 0 AND idx >= 4) OR (level = 1 AND idx >= 2) OR (level = 2 AND idx >= 1) OR level >= 3")
			v.h.Exec(t, "UPDATE log_state SET size = 4")
		}, "it holds 4 leaves, fewer than the 7 signed (rolled back, or rows deleted)"},
		{"tree rewritten", false, func(t *testing.T, v *env) {
			v.h.Exec(t, "UPDATE log_nodes SET hash = $1 WHERE level = 2 AND idx = 0", strings.Repeat("ab", 32))
		}, "its root at that size is not the one signed (history rewritten)"},
		{"key replaced", false, func(t *testing.T, v *env) {
			_, vkey := otherKeys(t)
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
			v.approve("a", seq)
			before := len(v.journal("a"))
			tt.tamper(t, v)
			problem, err := v.e.CheckLog(ctx, false)
			if tt.full && (err != nil || problem != "") {
				t.Errorf("CheckLog(cheap) = %q, %v; want it blind to what only the entries show", problem, err)
			} else if !tt.full && (err != nil || !strings.Contains(problem, tt.want)) {
				t.Errorf("CheckLog(cheap) = %q, %v; want %q", problem, err, tt.want)
			}
			problem, err = v.e.CheckLog(ctx, true)
			if err != nil || !strings.Contains(problem, tt.want) || v.e.Halted() != problem {
				t.Fatalf("CheckLog(full) = %q, %v (halted %q); want %q", problem, err, v.e.Halted(), tt.want)
			}
			_, err = v.e.Resume(ctx, agent, "a", seq, wire)
			wantKind(t, "Resume while halted", err, engine.Unavailable)
			if !errors.Is(err, engine.ErrHalted) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Resume while halted = %v, want ErrHalted naming %q", err, tt.want)
			}
			if n := len(v.journal("a")); n != before || v.fx.wire.Load() != 0 || v.pending("a") != 1 {
				t.Errorf("after a refused resume: journal %d entries (want %d), %d wires (want 0), %d pending (want 1)",
					n, before, v.fx.wire.Load(), v.pending("a"))
			}
			if st, err := v.e.LogStatus(ctx, auditor); err != nil || st.Halted != problem {
				t.Errorf("LogStatus = %+v, %v; want it to read, halted", st, err)
			}
		})
	}
}

// otherKeys is a key pair an insider makes, named as the server's.
func otherKeys(t *testing.T) (*engine.Keys, string) {
	t.Helper()
	skey, vkey, err := engine.GenerateKeys(Keys(t).Name())
	if err != nil {
		t.Fatal(err)
	}
	k, err := engine.NewKeys(skey)
	if err != nil {
		t.Fatal(err)
	}
	return k, vkey
}
