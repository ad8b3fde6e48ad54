package store

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/sagacity-go/sagacity/internal/engine"
	"github.com/sagacity-go/sagacity/internal/testkit"
	"github.com/sagacity-go/sagacity/internal/tlog"
	"github.com/transparency-dev/merkle/compact"
	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"
)

// What the evidence costs: the global log and decision receipts per
// executed and per gated call, and verifying a log of a million entries
// from a checkpoint.

// benchWire is the gated call's input, resumed byte for byte.
const benchWire = `{"amount":"100","to":"alice"}`

// sequenceEvery is how many operations the engine with the log makes
// between two runs of its sequencer.
const sequenceEvery = 100

// receiptRounds is how many times the gated benchmark times what receipts
// add to a call.
const receiptRounds = 1000

// evidenceOps are the operations BenchmarkEvidence times, with the journal
// entries each writes.
var evidenceOps = []struct {
	name    string
	entries int64
	run     func(ctx context.Context, e *engine.Engine, n int) error
}{{"executed", 2, executed}, {"gated", 4, gated}}

// BenchmarkEvidence measures what the global log adds to an executed call
// and to a gated one (call, approval by somebody else, resume with the
// approved bytes) on each store. Every iteration makes the operation once
// on an engine without the log and once on an engine with it, each over a
// fresh database of its own, taking turns at going first: both see the
// machine as it is at that moment, so drift cancels out of the ratio. It
// reports each one's mean (ns/call-nolog, ns/call-log) and the ratio
// log/nolog; ns/op, B/op and allocs/op are those of the pair.
//
// The engine with the log runs its sequencer inline, every sequenceEvery
// operations and once at the end, on the clock that times it. The server
// runs it on a 200ms ticker in a goroutine of its own, whose cost would
// land on the calls only as it happens to contend for the CPU and the
// write lock; inline, all of it is counted, the same way every run. 100
// operations take one caller 0.1–0.6s here, the same order as the
// server's 200ms.
//
// Receipts cannot be turned off (an engine without a key is refused), so
// both engines sign and verify them. The gated case measures them
// directly instead: what a decision adds (signing the receipt) and what
// the resume adds (verifying it), timed receiptRounds times before the
// loop, reported as ns/receipt and as receipt-share, its share of a gated
// call with the log, as the server runs it.
func BenchmarkEvidence(b *testing.B) {
	for _, st := range benchStores {
		for _, op := range evidenceOps {
			b.Run(st.name+"/"+op.name, func(b *testing.B) {
				ctx := context.Background()
				nolog, _ := benchEngine(b, st.url(b), false)
				logged, tl := benchEngine(b, st.url(b), true)
				var receipt time.Duration
				if op.name == "gated" {
					journal, r := decision(b, nolog)
					start := time.Now()
					for range receiptRounds {
						if err := receiptWork(testkit.Keys(b), journal, r); err != nil {
							b.Fatal(err)
						}
					}
					receipt = time.Since(start) / receiptRounds
				}
				// each makes the nth operation without the log (0) or with
				// it (1).
				each := [2]func(n int) error{
					func(n int) error { return op.run(ctx, nolog, n) },
					func(n int) error {
						if err := op.run(ctx, logged, n); err != nil || (n+1)%sequenceEvery != 0 {
							return err
						}
						_, err := tl.Sequence(ctx, false)
						return err
					},
				}
				var spent [2]time.Duration
				n := 0
				for b.Loop() {
					for k := range 2 {
						i := (n + k) % 2 // turns at going first
						start := time.Now()
						if err := each[i](n); err != nil {
							b.Fatal(err)
						}
						spent[i] += time.Since(start)
					}
					n++
				}
				start := time.Now()
				st, err := tl.Sequence(ctx, false)
				spent[1] += time.Since(start)
				if err != nil || st.Size != op.entries*int64(n) {
					b.Fatalf("the log holds %d leaves after %d operations (%v), want %d", st.Size, n, err, op.entries*int64(n))
				}
				perNolog, perLog := float64(spent[0])/float64(n), float64(spent[1])/float64(n)
				b.ReportMetric(perNolog, "ns/call-nolog")
				b.ReportMetric(perLog, "ns/call-log")
				b.ReportMetric(perLog/perNolog, "ratio")
				if receipt > 0 {
					b.ReportMetric(float64(receipt), "ns/receipt")
					b.ReportMetric(float64(receipt)/perLog, "receipt-share")
				}
			})
		}
	}
}

// executed makes the nth executed call: INTENT, then EXECUTED. A saga
// holds 50, as in BenchmarkEngineCall.
func executed(ctx context.Context, e *engine.Engine, n int) error {
	r, err := e.Call(ctx, benchAgent, fmt.Sprintf("x-%d", n/50), "reserveInventory", `{"item":"laptop"}`)
	if err == nil && r.Outcome != engine.OutcomeExecuted {
		err = fmt.Errorf("executed call: outcome %s %s", r.Outcome, r.Error)
	}
	return err
}

// gated makes the nth gated call, has it approved and resumes it with the
// approved bytes: AWAITING_APPROVAL, APPROVED, INTENT, EXECUTED. Each is a
// saga of its own, because a resume verifies every receipt of its saga's
// journal: so it verifies one, as BenchmarkReceipt/verify does.
func gated(ctx context.Context, e *engine.Engine, n int) error {
	saga := fmt.Sprintf("g-%d", n)
	seq, err := approved(ctx, e, saga)
	if err != nil {
		return err
	}
	r, err := e.Resume(ctx, benchAgent, saga, seq, benchWire)
	if err == nil && r.Call.Outcome != engine.OutcomeExecuted {
		err = fmt.Errorf("resume: refused %t, outcome %s %s", r.Refused, r.Call.Outcome, r.Reason)
	}
	return err
}

// approved makes a gated call in saga and has benchApprover approve it. It
// returns the gated entry's seq.
func approved(ctx context.Context, e *engine.Engine, saga string) (int64, error) {
	r, err := e.Call(ctx, benchAgent, saga, "sendWireTransfer", benchWire)
	if err != nil {
		return 0, err
	}
	if r.Outcome != engine.OutcomeAwaitingApproval {
		return 0, fmt.Errorf("gated call: outcome %s, want %s", r.Outcome, engine.OutcomeAwaitingApproval)
	}
	_, err = e.Approve(ctx, benchApprover, saga, r.Seq, "")
	return r.Seq, err
}

// decision has a gated call approved on e and returns the saga's journal
// then, holding that one decision, as its resume verifies it, and the
// decision's receipt.
func decision(b *testing.B, e *engine.Engine) ([]engine.Entry, engine.Receipt) {
	ctx := context.Background()
	if _, err := approved(ctx, e, "receipt"); err != nil {
		b.Fatal(err)
	}
	journal, err := e.Journal(ctx, benchApprover, "receipt")
	if err != nil {
		b.Fatal(err)
	}
	r, err := engine.OpenReceipt(engine.ReceiptOf(journal[len(journal)-1]), testkit.Keys(b).Verifier())
	if err != nil {
		b.Fatal(err)
	}
	return journal, r
}

// receiptWork is what receipts add to a gated call: signing the
// approval's receipt, and verifying it when the resume checks the journal.
func receiptWork(keys *engine.Keys, journal []engine.Entry, r engine.Receipt) error {
	if _, err := keys.Sign(r.Text()); err != nil {
		return err
	}
	if v := engine.VerifyReceipts(journal, keys.Verifier()); !v.Valid {
		return errors.New(v.Message)
	}
	return nil
}

// BenchmarkReceipt measures each half of what receipts add to a gated
// call: sign, what an approval adds (signing its receipt), and verify,
// what the resume adds (verifying the receipts of a journal holding that
// one decision).
func BenchmarkReceipt(b *testing.B) {
	e, _ := benchEngine(b, testkit.SQLiteURL(b), false)
	journal, r := decision(b, e)
	keys := testkit.Keys(b)
	b.Run("sign", func(b *testing.B) {
		for b.Loop() {
			if _, err := keys.Sign(r.Text()); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("verify", func(b *testing.B) {
		for b.Loop() {
			if v := engine.VerifyReceipts(journal, keys.Verifier()); !v.Valid {
				b.Fatal(v.Message)
			}
		}
	})
}

// The log BenchmarkVerify1M verifies: verifySize entries under a signed
// checkpoint, then verifyAdded more.
const (
	verifySize  = 1_000_000
	verifyAdded = 1_000
)

// BenchmarkVerify1M measures verifying a log of verifySize entries from a
// checkpoint of it:
//
//   - full: as an auditor holding every entry does, and as Check(full)
//     does: open the checkpoint, recompute the root from every entry's
//     hash, compare;
//   - incremental: as an auditor who verified that checkpoint does when
//     verifyAdded entries later come with a new one: open the new
//     checkpoint, verify the consistency proof between the two and the new
//     entries' inclusion proofs; the history is not rehashed.
//
// Both run in memory, on random entry hashes. The server's checks of a
// log in a SQLite store, of a million entries and of ten million, are the
// benchmark harness's (bench/, its stream step).
func BenchmarkVerify1M(b *testing.B) {
	l := newAuditLog(b)
	v := testkit.Keys(b).Verifier()
	b.Run("full", func(b *testing.B) {
		for b.Loop() {
			cp, err := tlog.OpenCheckpoint(l.old, v)
			if err != nil {
				b.Fatal(err)
			}
			root, err := rootOf(l.entries[:verifySize], nil)
			if err != nil {
				b.Fatal(err)
			}
			if !bytes.Equal(root, cp.Root) {
				b.Fatal("the entries' root is not the checkpoint's")
			}
		}
	})
	b.Run("incremental", func(b *testing.B) {
		old, err := tlog.OpenCheckpoint(l.old, v) // verified before
		if err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			cp, err := tlog.OpenCheckpoint(l.new, v)
			if err != nil {
				b.Fatal(err)
			}
			if err := tlog.VerifyConsistency(old, cp, l.consistency); err != nil {
				b.Fatal(err)
			}
			if bad, proved := tlog.VerifyProofs(l.added, l.proofs, cp.Root); bad >= 0 || proved != verifyAdded {
				b.Fatalf("inclusion proofs: entry %d fails, %d proved", bad, proved)
			}
		}
	})
}

// auditLog is a log of verifySize+verifyAdded entries held in memory:
// every entry, as an auditor holding them all has it, and what an auditor
// going on from the checkpoint at verifySize fetches.
type auditLog struct {
	entries     []engine.Entry // every entry, by leaf
	old, new    string         // the checkpoints at verifySize and at the end, signed
	consistency [][]byte       // the proof that old's log is a prefix of new's
	added       []engine.Entry // the entries after verifySize
	proofs      *engine.Proofs // their inclusion in new's log
}

// newAuditLog makes a log of entries with random hashes, sagas of 10. It builds the tree once
// and keeps only the nodes the proofs are made of.
func newAuditLog(b *testing.B) *auditLog {
	check := func(err error) {
		if err != nil {
			b.Helper()
			b.Fatal(err)
		}
	}
	const size = verifySize + verifyAdded
	raw := make([]byte, sha256.Size*size)
	rand.Read(raw)
	all := hex.EncodeToString(raw)
	l := &auditLog{entries: make([]engine.Entry, size), proofs: &engine.Proofs{TreeSize: size}}
	for i := range l.entries {
		l.entries[i] = engine.Entry{SagaID: fmt.Sprintf("s-%06d", i/10), Seq: int64(i%10 + 1),
			Hash: all[2*sha256.Size*i : 2*sha256.Size*(i+1)], Leaf: int64(i)}
	}

	consistency, err := proof.Consistency(verifySize, size)
	check(err)
	need := []proof.Nodes{consistency}
	for i := range verifyAdded {
		inclusion, err := proof.Inclusion(uint64(verifySize+i), size)
		check(err)
		need = append(need, inclusion)
		l.added = append(l.added, l.entries[verifySize+i])
	}
	nodes := map[compact.NodeID][]byte{}
	for _, n := range need {
		for _, id := range n.IDs {
			nodes[id] = nil
		}
	}
	oldRoot, err := rootOf(l.entries[:verifySize], nil)
	check(err)
	newRoot, err := rootOf(l.entries, func(id compact.NodeID, h []byte) {
		if _, ok := nodes[id]; ok {
			nodes[id] = bytes.Clone(h)
		}
	})
	check(err)

	rehash := func(n proof.Nodes) [][]byte {
		hashes := make([][]byte, len(n.IDs))
		for i, id := range n.IDs {
			hashes[i] = nodes[id]
		}
		p, err := n.Rehash(hashes, rfc6962.DefaultHasher.HashChildren)
		check(err)
		return p
	}
	l.consistency = rehash(consistency)
	for _, n := range need[1:] {
		l.proofs.Of = append(l.proofs.Of, rehash(n))
	}
	keys := testkit.Keys(b)
	l.old, err = keys.Sign(engine.Checkpoint{Origin: keys.Name(), Size: verifySize, Root: oldRoot}.Text())
	check(err)
	l.new, err = keys.Sign(engine.Checkpoint{Origin: keys.Name(), Size: size, Root: newRoot}.Text())
	check(err)
	return l
}

// rfc6962Ranges makes compact ranges with the log's hasher.
var rfc6962Ranges = compact.RangeFactory{Hash: rfc6962.DefaultHasher.HashChildren}

// rootOf is the root of the log of these entries, as tlog hashes its
// leaves; visit, when not nil, sees every node.
func rootOf(entries []engine.Entry, visit compact.VisitFn) ([]byte, error) {
	r := rfc6962Ranges.NewEmptyRange(0)
	for _, e := range entries {
		leaf, err := tlog.LeafHash(e)
		if err != nil {
			return nil, err
		}
		if err := r.Append(leaf, visit); err != nil {
			return nil, err
		}
	}
	return r.GetRootHash(nil)
}
