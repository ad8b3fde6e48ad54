package e2e

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	sagacity "github.com/sagacity-go/sagacity/client"
	"github.com/sagacity-go/sagacity/internal/engine"
	"github.com/sagacity-go/sagacity/internal/testkit"
	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"
	"golang.org/x/mod/sumdb/note"
)

func (c *client) log(ctx context.Context, s *server) (a answer, r sagacity.LogStatus) {
	a = c.ask(ctx, s, func(ctx context.Context, api *sagacity.Client) (err error) {
		r, err = api.Log(ctx)
		return err
	})
	return a, r
}

// signedCheckpoint is a checkpoint read with the public key alone.
type signedCheckpoint struct {
	size int64
	root []byte
	file string
}

// readCheckpoint opens a signed checkpoint with note and the public key,
// and reads its size and root as C2SP tlog-checkpoint lays them out.
func readCheckpoint(t *testing.T, vkey, signed, file string) signedCheckpoint {
	t.Helper()
	v, err := note.NewVerifier(vkey)
	if err != nil {
		t.Fatal(err)
	}
	n, err := note.Open([]byte(signed), note.VerifierList(v))
	if err != nil {
		t.Fatalf("%s: does not verify with the public key: %v", file, err)
	}
	lines := strings.Split(n.Text, "\n")
	size, err := strconv.ParseInt(lines[1], 10, 64)
	root, rerr := base64.StdEncoding.DecodeString(lines[2])
	if len(lines) < 4 || lines[0] != v.Name() || err != nil || rerr != nil {
		t.Fatalf("%s: %q is not a checkpoint of origin %s", file, n.Text, v.Name())
	}
	return signedCheckpoint{size: size, root: root, file: file}
}

// checkpointsConsistent checks every checkpoint the named servers keep,
// with the public key and transparency-dev's verifier alone: checkpoints
// of one size name one root, and each is consistent with the one before
// it, by a proof s serves. It returns how many it checked.
func (f *fixture) checkpointsConsistent(s *server, names ...string) int {
	t := f.t
	t.Helper()
	vkey := f.verifierKey()
	var cps []signedCheckpoint
	for _, name := range names {
		files, err := filepath.Glob(filepath.Join(f.checkpointDir(name), "*.checkpoint"))
		if err != nil {
			t.Fatal(err)
		}
		for _, file := range files {
			b, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			cps = append(cps, readCheckpoint(t, vkey, string(b), file))
		}
	}
	slices.SortFunc(cps, func(a, b signedCheckpoint) int { return int(a.size - b.size) })
	for i := 1; i < len(cps); i++ {
		a, b := cps[i-1], cps[i]
		if a.size == b.size {
			if hex.EncodeToString(a.root) != hex.EncodeToString(b.root) {
				t.Errorf("%s and %s sign size %d with different roots: the log forked", a.file, b.file, a.size)
			}
			continue
		}
		var p sagacity.ConsistencyProof
		ans := f.auditor.ask(f.ctx, s, func(ctx context.Context, api *sagacity.Client) (err error) {
			p, err = api.Consistency(ctx, a.size, b.size)
			return err
		})
		if !ans.is(200) {
			t.Fatalf("consistency proof %d → %d: %s", a.size, b.size, ans)
		}
		if err := proof.VerifyConsistency(rfc6962.DefaultHasher, uint64(a.size), uint64(b.size), p.Proof, a.root, b.root); err != nil {
			t.Errorf("%s is not consistent with the earlier %s: %v", b.file, a.file, err)
		}
	}
	return len(cps)
}

// verifierKey is the public key of the suite's signing key.
func (f *fixture) verifierKey() string {
	k, err := engine.NewKeys(f.signingKey)
	if err != nil {
		f.t.Fatal(err)
	}
	return k.VerifierKey()
}

// waitLogged waits until the newest checkpoint covers the whole log,
// every entry of the sagas named included (an entry committed but not yet
// sequenced is in no log), and a full check has run; it returns the log's
// state.
func (f *fixture) waitLogged(s *server, sagas ...string) sagacity.LogStatus {
	f.t.Helper()
	var r sagacity.LogStatus
	var a answer
	proved := func(saga string, size int64) bool {
		var es []sagacity.Entry
		a := f.auditor.ask(f.ctx, s, func(ctx context.Context, api *sagacity.Client) (err error) {
			p, err := api.AuditProofs(ctx, saga, size)
			es = p.Entries
			return err
		})
		return a.is(200) && !slices.ContainsFunc(es, func(e sagacity.Entry) bool { return e.TreeSize == nil || *e.TreeSize != size })
	}
	ok := eventually(f.ctx, 20*time.Second, func() bool {
		a, r = f.auditor.log(f.ctx, s)
		if !a.is(200) || r.Checkpoint == nil || r.FullCheckAt == nil {
			return false
		}
		cp := readCheckpoint(f.t, f.verifierKey(), *r.Checkpoint, "/sagacity/log")
		if cp.size != r.Size {
			return false
		}
		for _, saga := range sagas {
			if !proved(saga, cp.size) {
				return false
			}
		}
		return true
	})
	if !ok {
		f.t.Fatalf("the newest checkpoint did not come to cover the log and sagas %v: %s", sagas, a)
	}
	return r
}

// TestTamper is the insider's attack on each store, through the real
// server: rows rewritten, deleted or forged while it is down, or its
// key's record replaced. Each is found: by the start-up check, which
// halts executions (a resume is refused with 503 and the problem, reads
// go on), by verification, or by the resume the forgery was for.
func TestTamper(t *testing.T) {
	for _, db := range []struct {
		name string
		url  func(testing.TB) string
	}{{"postgres", testkit.PostgresURL}, {"sqlite", testkit.SQLiteURL}} {
		t.Run(db.name, func(t *testing.T) { tamperMatrix(t, db.url) })
	}
}

// tamperCase is one tampering: what it does to the database (the server
// is down), and how it must be found.
type tamperCase struct {
	name   string
	tamper func(t *testing.T, dbURL string, w written)
	// halts is what the start-up check says, "" when it finds nothing
	halts string
	// refused is what the server says when it refuses to start, "" when
	// it starts
	refused string
	// broken is the saga whose verification must break, and how
	broken, why string
}

// written is what a case's server wrote before it went down.
type written struct {
	f           *fixture
	paid        []sagacity.Entry // saga "paid": reserved, wire approved
	stock       []sagacity.Entry // saga "stock": two reservations
	gateSeq     int64            // saga "paid"'s pending wire
	forgedSaga  string           // a saga with a wire pending, for forgeries
	forged      []sagacity.Entry // its journal
	forgedSeq   int64
	forgedInput string
}

func tamperMatrix(t *testing.T, newDB func(testing.TB) string) {
	cases := []tamperCase{
		{name: "tail deleted", halts: "is missing (rows deleted, a saga removed)",
			tamper: func(t *testing.T, dbURL string, w written) {
				testkit.Exec(t, dbURL, "DELETE FROM journal WHERE saga_id = 'stock' AND seq >= 3")
				testkit.Exec(t, dbURL, "DELETE FROM calls WHERE saga_id = 'stock' AND seq >= 3")
				testkit.Exec(t, dbURL, "UPDATE sagas SET head_seq = 2, head_hash = $1 WHERE id = 'stock'", w.stock[1].Hash)
			}},
		{name: "saga deleted", halts: "is missing (rows deleted, a saga removed)",
			tamper: func(t *testing.T, dbURL string, w written) {
				for _, table := range []string{"journal", "calls", "approval_requests"} {
					testkit.Exec(t, dbURL, "DELETE FROM "+table+" WHERE saga_id = 'stock'")
				}
				testkit.Exec(t, dbURL, "DELETE FROM sagas WHERE id = 'stock'")
			}},
		{name: "chain recomputed", halts: "from the journal's entries, is not the one signed (history rewritten)",
			broken: "stock", why: "is not in the log as the checkpoint of size",
			tamper: func(t *testing.T, dbURL string, w written) {
				prev := engine.ZeroHash
				for i, e := range w.stock {
					en := engineEntry(e)
					if i == 0 {
						en.Input = `{"sku":"yacht","qty":1}`
					}
					en.Hash = engine.Hash(prev, en)
					prev = en.Hash
					testkit.Exec(t, dbURL, "UPDATE journal SET input = $1, hash = $2 WHERE saga_id = $3 AND seq = $4", en.Input, en.Hash, en.SagaID, en.Seq)
				}
				testkit.Exec(t, dbURL, "UPDATE sagas SET head_hash = $1 WHERE id = 'stock'", prev)
			}},
		{name: "forged APPROVED", broken: "forged", why: "the decision carries no receipt",
			tamper: func(t *testing.T, dbURL string, w written) {
				forgeApproval(t, dbURL, w, "approver=token:mallory\nauth=token")
			}},
		{name: "forged receipt", broken: "forged", why: "the receipt's signature does not verify",
			tamper: func(t *testing.T, dbURL string, w written) {
				mallory, _ := insiderKeys(t, w.f)
				signed, err := mallory.Sign("sagacity decision receipt v1\nsaga: forged\n")
				if err != nil {
					t.Fatal(err)
				}
				forgeApproval(t, dbURL, w, "approver=token:mallory\nauth=token\nreceipt="+base64.StdEncoding.EncodeToString([]byte(signed)))
			}},
		{name: "public key replaced", refused: "the database records the signing key",
			tamper: func(t *testing.T, dbURL string, w written) {
				_, vkey := insiderKeys(t, w.f)
				testkit.Exec(t, dbURL, "UPDATE log_state SET verifier_key = $1", vkey)
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, 60*time.Second)
			ctx := f.ctx
			dbURL := newDB(t)
			srv := f.server("sagacity", dbURL)
			w := written{f: f, forgedSaga: "forged", forgedInput: `{"amount":"999","to":"mallory"}`}
			agent, approver := f.initiator(0), f.approvers.take(srv)
			if a, _ := agent.call(ctx, srv, "paid", toolReserve, `{"sku":"desk","qty":1}`); !a.is(200) {
				t.Fatalf("reserve: %s", a)
			}
			a, r := agent.call(ctx, srv, "paid", toolWire, `{"amount":"100","to":"alice"}`)
			if !a.is(202) {
				t.Fatalf("wire: %s", a)
			}
			w.gateSeq = r.JournalSeq
			if a, _ := approver.approve(ctx, srv, "paid", w.gateSeq); !a.is(200) {
				t.Fatalf("approve: %s", a)
			}
			for _, sku := range []string{"chair", "lamp"} {
				if a, _ := agent.call(ctx, srv, "stock", toolReserve, fmt.Sprintf(`{"sku":"%s","qty":1}`, sku)); !a.is(200) {
					t.Fatalf("reserve %s: %s", sku, a)
				}
			}
			if a, r = agent.call(ctx, srv, w.forgedSaga, toolWire, w.forgedInput); !a.is(202) {
				t.Fatalf("wire to be forged: %s", a)
			}
			w.forgedSeq = r.JournalSeq
			f.waitLogged(srv, "paid", "stock", w.forgedSaga)
			_, w.paid = f.auditor.audit(ctx, srv, "paid")
			_, w.stock = f.auditor.audit(ctx, srv, "stock")
			_, w.forged = f.auditor.audit(ctx, srv, w.forgedSaga)
			if len(w.paid) != 4 || len(w.stock) != 4 || len(w.forged) != 1 {
				t.Fatalf("journals of %d, %d and %d entries; want 4, 4 and 1", len(w.paid), len(w.stock), len(w.forged))
			}
			srv.kill()
			tc.tamper(t, dbURL, w)
			if tc.refused != "" {
				if out := srv.refused(); !strings.Contains(out, tc.refused) || !strings.Contains(out, f.verifierKey()) {
					t.Errorf("the server started, or said:\n%s\nwant it to refuse to start, naming %q and both keys", out, tc.refused)
				}
				return
			}
			srv.start()

			if tc.halts != "" {
				r := f.waitChecked(srv)
				if !strings.Contains(r.Halted, tc.halts) {
					t.Errorf("GET /sagacity/log halted = %q, want it to name %q", r.Halted, tc.halts)
				}
				a, _ := agent.resume(ctx, srv, "paid", w.gateSeq, `{"amount":"100","to":"alice"}`)
				if a.code != 503 || !strings.Contains(a.body, "executions of IRREVERSIBLE tools are halted") || !strings.Contains(a.body, tc.halts) {
					t.Errorf("resume while halted: %s; want 503 naming the problem", a)
				}
				if a, _ := f.auditor.verify(ctx, srv, "paid"); !a.is(200) {
					t.Errorf("verify while halted: %s; want reads to go on", a)
				}
			} else if r := f.waitChecked(srv); r.Halted != "" {
				t.Errorf("GET /sagacity/log halted = %q; want the log to match", r.Halted)
			}
			if tc.broken != "" {
				a, v := f.auditor.verify(ctx, srv, tc.broken)
				if !a.is(200) || v.Valid || !strings.Contains(v.Message, tc.why) {
					t.Errorf("verify %s: %s; want broken: %s", tc.broken, a, tc.why)
				}
			}
			if tc.broken == "forged" {
				a, _ := agent.resume(ctx, srv, w.forgedSaga, w.forgedSeq, w.forgedInput)
				if a.code != 409 || !strings.Contains(a.body, "does not verify") {
					t.Errorf("resume of the forged approval: %s; want 409, the journal does not verify", a)
				}
			}
			if n := f.tools.snapshot().arrived["/wire"]; n != 0 {
				t.Errorf("the wire ran %d times; nothing was resumed that could run", n)
			}
		})
	}
}

// waitChecked waits until the server has checked its database in full
// against its newest checkpoint, and returns what it found.
func (f *fixture) waitChecked(s *server) sagacity.LogStatus {
	f.t.Helper()
	var r sagacity.LogStatus
	var a answer
	if !eventually(f.ctx, 20*time.Second, func() bool {
		a, r = f.auditor.log(f.ctx, s)
		return a.is(200) && r.FullCheckAt != nil
	}) {
		f.t.Fatalf("no full check of the log after the start: %s", a)
	}
	return r
}

// forgeApproval writes an APPROVED entry for the forged saga's pending
// wire, with the right chain hash and head, and the given payload.
func forgeApproval(t *testing.T, dbURL string, w written, payload string) {
	t.Helper()
	last := engineEntry(w.forged[len(w.forged)-1])
	f := engine.Entry{SagaID: w.forgedSaga, Seq: last.Seq + 1, ToolName: engine.GateTool, Phase: engine.PhaseApproved,
		Input: fmt.Sprintf("seq=%d", w.forgedSeq), Payload: payload, Timestamp: last.Timestamp.Add(time.Second)}
	f.Hash = engine.Hash(last.Hash, f)
	testkit.Exec(t, dbURL, "INSERT INTO journal (saga_id, seq, tool_name, phase, input, payload, timestamp, hash) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
		f.SagaID, f.Seq, f.ToolName, f.Phase, f.Input, f.Payload, f.Timestamp, f.Hash)
	testkit.Exec(t, dbURL, "UPDATE sagas SET head_seq = $2, head_hash = $3 WHERE id = $1", f.SagaID, f.Seq, f.Hash)
}

// engineEntry is the journal entry an exported one is.
func engineEntry(e sagacity.Entry) engine.Entry {
	return engine.Entry{SagaID: e.SagaID, Seq: e.Seq, ToolName: e.ToolName, Phase: engine.Phase(e.Phase),
		Input: e.Input, Payload: e.Payload, Timestamp: timestamp(e.Timestamp), Hash: e.Hash}
}

// timestamp reads an exported entry's time; zero when it is none.
func timestamp(s string) time.Time {
	t, _ := time.Parse(time.RFC3339Nano, s)
	return t
}

// insiderKeys is a key pair an insider makes, named as the server's.
func insiderKeys(t *testing.T, f *fixture) (*engine.Keys, string) {
	t.Helper()
	v, err := note.NewVerifier(f.verifierKey())
	if err != nil {
		t.Fatal(err)
	}
	return testkit.NewKeys(t, v.Name())
}

// TestEvidence checks what the server hands an auditor with the standard
// tools alone, no code of this project: the public key from
// /sagacity/keys opens the receipt of a decision and the newest
// checkpoint with golang.org/x/mod/sumdb/note, and every entry of an
// export with proofs is included in the log the checkpoint signed, by
// transparency-dev/merkle's verifier.
func TestEvidence(t *testing.T) {
	f := newFixture(t, 30*time.Second)
	ctx := f.ctx
	srv := f.server("sagacity", testkit.SQLiteURL(t))
	agent, approver := f.initiator(0), f.approvers.take(srv)
	agent.call(ctx, srv, "paid", toolReserve, `{"sku":"desk","qty":1}`)
	_, r := agent.call(ctx, srv, "paid", toolWire, `{"amount":"100","to":"alice"}`)
	if a, _ := approver.approve(ctx, srv, "paid", r.JournalSeq); !a.is(200) {
		t.Fatalf("approve: %s", a)
	}
	f.waitLogged(srv, "paid")

	var keys []string
	a := f.auditor.ask(ctx, srv, func(ctx context.Context, api *sagacity.Client) (err error) {
		keys, err = api.Keys(ctx)
		return err
	})
	if !a.is(200) || len(keys) != 1 {
		t.Fatalf("GET /sagacity/keys: %s", a)
	}
	v, err := note.NewVerifier(keys[0])
	if err != nil {
		t.Fatal(err)
	}
	var receipt string
	a = f.auditor.ask(ctx, srv, func(ctx context.Context, api *sagacity.Client) (err error) {
		receipt, err = api.Receipt(ctx, "paid", r.JournalSeq+1)
		return err
	})
	if n, err := note.Open([]byte(receipt), note.VerifierList(v)); !a.is(200) || err != nil || !strings.Contains(n.Text, "decision: approved\n") {
		t.Errorf("receipt %s: opens with the public key: %v", a, err)
	}
	var latest string
	a = f.auditor.ask(ctx, srv, func(ctx context.Context, api *sagacity.Client) (err error) {
		latest, err = api.Checkpoint(ctx, sagacity.Latest)
		return err
	})
	if !a.is(200) {
		t.Fatalf("GET /sagacity/checkpoints/latest: %s", a)
	}
	cp := readCheckpoint(t, keys[0], latest, "the latest checkpoint")
	var es []sagacity.Entry
	a = f.auditor.ask(ctx, srv, func(ctx context.Context, api *sagacity.Client) (err error) {
		p, err := api.AuditProofs(ctx, "paid", cp.size)
		es = p.Entries
		return err
	})
	if !a.is(200) || len(es) != 4 {
		t.Fatalf("export with proofs: %s", a)
	}
	for _, e := range es {
		if e.TreeSize == nil || *e.TreeSize != cp.size || e.Leaf == nil || e.Proof == nil {
			t.Fatalf("export entry %+v; want a leaf and a proof against size %d", e, cp.size)
		}
		// The leaf, as docs/how-it-works.md documents it: RFC 6962's leaf hash of
		// the entry's saga, seq and hash, each as its byte length, a colon
		// and its bytes.
		seq := strconv.FormatInt(e.Seq, 10)
		leaf := rfc6962.DefaultHasher.HashLeaf([]byte(fmt.Sprintf("%d:%s%d:%s%d:%s", len(e.SagaID), e.SagaID, len(seq), seq, len(e.Hash), e.Hash)))
		if err := proof.VerifyInclusion(rfc6962.DefaultHasher, uint64(*e.Leaf), uint64(cp.size), leaf, *e.Proof, cp.root); err != nil {
			t.Errorf("seq=%d at leaf %d is not included in the checkpoint: %v", e.Seq, *e.Leaf, err)
		}
	}
}

// text is an optional text's value, "" when absent.
func text(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}
