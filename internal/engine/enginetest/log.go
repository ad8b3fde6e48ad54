package enginetest

import (
	"context"
	"encoding/hex"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/sagacity-go/sagacity/internal/engine"
	"github.com/sagacity-go/sagacity/internal/store/storetest"
	"github.com/sagacity-go/sagacity/internal/testkit"
	"github.com/sagacity-go/sagacity/internal/tlog"
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
		_, _ = v.log.Sequence(ctx, true)
		_, _ = v.log.Check(ctx, false)
	}
	if now := v.checkpoint(); now.Size != cp.Size || !strings.Contains(v.e.Halted(), "fewer than the") {
		t.Errorf("after refilling: newest checkpoint of size %d (was %d), halted %q; want no new checkpoint and still halted",
			now.Size, cp.Size, v.e.Halted())
	}
	_, err := v.e.Resume(ctx, agent, "a", seq, transfer)
	testkit.WantKind(t, "Resume on the rolled-back database", err, engine.Unavailable)
}
