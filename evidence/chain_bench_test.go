package evidence

import (
	"crypto/sha256"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
)

// BenchmarkVerify100k measures Verify over a journal of 100,000 entries
// against what it cannot beat: SHA-256 alone over the same preimages,
// built once before the timing. Each round times both, one after the
// other, so that both see the same machine; the metrics are the medians
// over the rounds:
//
//   - ns/entry-verify, ns/entry-raw: per entry, Verify and SHA-256 alone;
//   - ratio: Verify's time, on every core, over SHA-256's on one (the
//     goal, on two cores, is at most 0.75);
//   - allocs/entry: Verify's allocations per entry.
//
// Run it with enough rounds for a median, e.g. -benchtime=20x.
func BenchmarkVerify100k(b *testing.B) {
	const n = 100_000
	es := benchJournal(n)
	pre := preimages(es)
	allocs := testing.AllocsPerRun(1, func() { Verify(es) }) / n

	var verifyNs, rawNs, ratio []float64
	var sink byte // keeps the sums observable
	for b.Loop() {
		began := time.Now()
		if v := Verify(es); !v.Valid {
			b.Fatal(v.Message)
		}
		verified := time.Now()
		for _, p := range pre {
			sum := sha256.Sum256(p)
			sink ^= sum[0]
		}
		v, r := verified.Sub(began), time.Since(verified)
		verifyNs = append(verifyNs, float64(v)/n)
		rawNs = append(rawNs, float64(r)/n)
		ratio = append(ratio, float64(v)/float64(r))
	}
	b.ReportMetric(median(verifyNs), "ns/entry-verify")
	b.ReportMetric(median(rawNs), "ns/entry-raw")
	b.ReportMetric(median(ratio), "ratio")
	b.ReportMetric(allocs, "allocs/entry")
}

// preimages returns each entry's preimage, chained on the hash stored
// before it, one after the other in memory as a hasher would best like
// them.
func preimages(es []Entry) [][]byte {
	var all []byte
	ends := make([]int, len(es))
	prev := ZeroHash
	for i := range es {
		all = AppendPreimage(all, prev, es[i])
		ends[i], prev = len(all), es[i].Hash
	}
	pre := make([][]byte, len(es))
	start := 0
	for i, end := range ends {
		pre[i], start = all[start:end], end
	}
	return pre
}

func median(xs []float64) float64 {
	slices.Sort(xs)
	return xs[len(xs)/2]
}

// benchJournal is a valid journal of n entries shaped like the engine's:
// calls of a few tools, each an INTENT with its JSON input (60–200 bytes)
// and the requester, then its EXECUTED with a result of about 100 bytes;
// every tenth call is gated and goes through AWAITING_APPROVAL and
// APPROVED first.
func benchJournal(n int) []Entry {
	rng := rand.New(rand.NewPCG(1, 2))
	tools := []string{"reserveInventory", "sendWireTransfer", "createInvoice", "notifyCustomer"}
	es := make([]Entry, 0, n)
	ts := t0
	add := func(e Entry) {
		if len(es) == n {
			return
		}
		ts = ts.Add(time.Duration(rng.IntN(5_000_000)) * time.Microsecond)
		e.SagaID, e.Seq, e.Timestamp = "8f14e45f-ceea-467f-a8f6-2b1e4c0d9a37", int64(len(es))+1, ts
		prev := ZeroHash
		if len(es) > 0 {
			prev = es[len(es)-1].Hash
		}
		e.Hash = Hash(prev, e)
		es = append(es, e)
	}
	for call := 0; len(es) < n; call++ {
		tool := tools[rng.IntN(len(tools))]
		input := fmt.Sprintf(`{"orderId":"ord-%08d","amount":"%d.%02d","currency":"EUR","note":%q}`,
			call, rng.IntN(100_000), rng.IntN(100), strings.Repeat("x", rng.IntN(120)))
		add(Entry{ToolName: tool, Phase: PhaseIntent, Input: input, Payload: "requester=agent-1\nauth=token"})
		if call%10 == 0 {
			add(Entry{ToolName: tool, Phase: PhaseAwaitingApproval, Input: input, Payload: "requester=agent-1\nauth=token"})
			add(Entry{ToolName: GateTool, Phase: PhaseApproved, Input: input, Payload: "approver=alice\nreason=within the quarterly budget"})
		}
		result := fmt.Sprintf(`{"status":"ok","reference":"ref-%016x","processedAt":"%s"}`, rng.Uint64(), ts.Format(time.RFC3339Nano))
		add(Entry{ToolName: tool, Phase: PhaseExecuted, Input: input, Payload: result})
	}
	return es
}
