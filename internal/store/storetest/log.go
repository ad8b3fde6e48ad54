package storetest

import (
	"bytes"
	"encoding/hex"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/sagacity-go/sagacity/internal/engine"
	"github.com/sagacity-go/sagacity/internal/testkit"
	"github.com/sagacity-go/sagacity/internal/tlog"
	"github.com/sagacity-go/sagacity/wire"
)

// The global log's store methods: the log is one per database, so each
// test has a database of its own.

// emptyRoot is the RFC 6962 root of the empty tree, SHA-256 of nothing.
const emptyRoot = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

// journalOf writes sagas a and b of three entries each, interleaved in
// time, and returns them in the order the sequencer takes them.
func journalOf(t *testing.T, d *drv) []engine.Entry {
	t.Helper()
	a, b := d.id("a"), d.id("b")
	createSagas(t, d.db, mkSaga(a, wire.Running, when(0)), mkSaga(b, wire.Running, when(0)))
	var es []engine.Entry
	for i := range int64(3) {
		es = append(es, mkEntry(a, i+1, when(int(2*i+1))), mkEntry(b, i+1, when(int(2*i+2))))
	}
	for _, e := range es {
		write(t, d.db, func(tx engine.Tx) error { return tx.Append(e) })
	}
	return storedEntries(es...)
}

// sequence runs fn in LogStore.Sequence and fails the test when it fails.
func sequence(t *testing.T, db DB, fn func(tlog.Tx) error) {
	t.Helper()
	if err := db.Sequence(t.Context(), fn); err != nil {
		t.Fatalf("Sequence: %v", err)
	}
}

func testLogSequence(t *testing.T, d *drv) {
	ctx := t.Context()
	es := journalOf(t, d)
	root := bytes.Repeat([]byte{7}, 32)
	sequence(t, d.db, func(tx tlog.Tx) error {
		st, err := tx.State()
		if err != nil || st.Size != 0 || hex.EncodeToString(st.Root) != emptyRoot || st.Key != "" {
			t.Errorf("State of a new log = %+v, %v; want size 0, the empty root, no key", st, err)
		}
		got, err := tx.Unsequenced(4)
		if err != nil || !cmp.Equal(es[:4], got, exact...) {
			t.Errorf("Unsequenced(4) = %+v, %v; want the first 4 by time, none with a leaf", got, err)
		}
		if err := tx.Sequence(es[:4], 0); err != nil {
			return err
		}
		return tx.PutState(tlog.State{Size: 4, Root: root, Key: "k+1+x"})
	})
	if st, err := d.db.LogState(ctx); err != nil || st.Size != 4 || !bytes.Equal(st.Root, root) || st.Key != "k+1+x" {
		t.Errorf("LogState after a sequence = %+v, %v; want size 4, its root and key", st, err)
	}
	got, err := d.db.Entries(ctx, d.id("a"))
	if err != nil || got[0].Leaf != 0 || got[1].Leaf != 2 || got[2].Leaf != -1 {
		t.Errorf("Entries(a) = %+v, %v; want leaves 0, 2 and none yet", got, err)
	}

	t.Run("an entry sequenced twice", func(t *testing.T) {
		err := d.db.Sequence(ctx, func(tx tlog.Tx) error {
			if err := tx.Sequence(es[4:], 4); err != nil {
				return err
			}
			return tx.Sequence(es[3:4], 6)
		})
		testkit.WantKind(t, "Sequence of an entry with a leaf", err, engine.Conflict)
		if got, _ := d.db.Entries(ctx, d.id("a")); got[2].Leaf != -1 {
			t.Errorf("after a failed sequence, Entries(a) = %+v; want nothing kept", got)
		}
	})
	t.Run("fn fails", func(t *testing.T) {
		boom := errors.New("boom")
		err := d.db.Sequence(ctx, func(tx tlog.Tx) error {
			if err := tx.PutState(tlog.State{Size: 99, Root: root}); err != nil {
				return err
			}
			return boom
		})
		if !errors.Is(err, boom) {
			t.Errorf("Sequence = %v, want fn's error", err)
		}
		if st, _ := d.db.LogState(ctx); st.Size != 4 {
			t.Errorf("LogState after a failed sequence = %+v, want size 4 kept", st)
		}
	})
}

func testLogNodes(t *testing.T, d *drv) {
	ctx := t.Context()
	h := func(b byte) []byte { return bytes.Repeat([]byte{b}, 32) }
	nodes := []tlog.Node{{ID: tlog.NodeID{Level: 0, Index: 0}, Hash: h(1)}, {ID: tlog.NodeID{Level: 0, Index: 1}, Hash: h(2)},
		{ID: tlog.NodeID{Level: 1, Index: 0}, Hash: h(3)}}
	sequence(t, d.db, func(tx tlog.Tx) error { return tx.PutNodes(nodes) })
	d.h.Exec(t, "INSERT INTO log_nodes (level, idx, hash) VALUES (0, 2, 'not hex')")
	ids := []tlog.NodeID{{Level: 1, Index: 0}, {Level: 0, Index: 1}, {Level: 0, Index: 2}, {Level: 5, Index: 5}}
	want := map[tlog.NodeID][]byte{{Level: 1, Index: 0}: h(3), {Level: 0, Index: 1}: h(2)}
	if got, err := d.db.LogNodes(ctx, ids); err != nil || !cmp.Equal(want, got) {
		t.Errorf("LogNodes(%v) = %v, %v; want the stored ones, none for a missing or unreadable node", ids, got, err)
	}
	sequence(t, d.db, func(tx tlog.Tx) error {
		if got, err := tx.Nodes(ids); err != nil || !cmp.Equal(want, got) {
			t.Errorf("LogTx.Nodes(%v) = %v, %v; want %v", ids, got, err, want)
		}
		return nil
	})
	err := d.db.Sequence(ctx, func(tx tlog.Tx) error { return tx.PutNodes(nodes[:1]) })
	testkit.WantKind(t, "PutNodes of a node stored already", err, engine.Conflict)
}

func testLeaves(t *testing.T, d *drv) {
	ctx := t.Context()
	es := journalOf(t, d)
	sequence(t, d.db, func(tx tlog.Tx) error { return tx.Sequence(es, 0) })
	leaf := func(i int) tlog.Leaf {
		e := es[i]
		e.Leaf = int64(i)
		return tlog.Leaf{Entry: e}
	}
	if got, err := d.db.Leaves(ctx, 1, 4); err != nil || !cmp.Equal([]tlog.Leaf{leaf(1), leaf(2), leaf(3)}, got, exact...) {
		t.Errorf("Leaves(1, 4) = %+v, %v; want leaves 1 to 3", got, err)
	}
	d.h.Exec(t, "DELETE FROM journal WHERE leaf = 2")
	if got, err := d.db.Leaves(ctx, 0, 10); err != nil || !cmp.Equal([]tlog.Leaf{leaf(0), leaf(1), leaf(3), leaf(4), leaf(5)}, got, exact...) {
		t.Errorf("Leaves(0, 10) with leaf 2 deleted = %+v, %v; want the others, in order", got, err)
	}
	// An entry whose saga has no row is an orphan.
	d.h.Orphanable(t)
	d.h.Exec(t, "UPDATE journal SET saga_id = 'nobody' WHERE leaf = 3")
	orphan := leaf(3)
	orphan.SagaID, orphan.Orphan = "nobody", true
	if got, err := d.db.Leaves(ctx, 3, 4); err != nil || !cmp.Equal([]tlog.Leaf{orphan}, got, exact...) {
		t.Errorf("Leaves(3, 4) of an entry moved to no saga = %+v, %v; want it marked an orphan", got, err)
	}
}

// testTxLeaves: the sequencer's transaction reads leaves as Leaves does,
// and sees the leaves it gave.
func testTxLeaves(t *testing.T, d *drv) {
	es := journalOf(t, d)
	sequence(t, d.db, func(tx tlog.Tx) error {
		if err := tx.Sequence(es[:4], 0); err != nil {
			return err
		}
		got, err := tx.Leaves(1, 6)
		var want []tlog.Leaf
		for i, e := range es[1:4] {
			e.Leaf = int64(i + 1)
			want = append(want, tlog.Leaf{Entry: e})
		}
		if err != nil || !cmp.Equal(want, got, exact...) {
			t.Errorf("Tx.Leaves(1, 6) = %+v, %v; want leaves 1 to 3, the ones given", got, err)
		}
		return nil
	})
}
