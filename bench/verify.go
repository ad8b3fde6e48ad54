package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/sagacity-go/sagacity/evidence"
	"github.com/sagacity-go/sagacity/internal/engine"
)

// journals are sagas of length entries each (an INTENT and an EXECUTED a
// call), entries in all, chained with engine.Hash, with the sizes an
// agent's calls have: about 60 bytes of input, who asked, a short result.
func journals(entries, length int) [][]engine.Entry {
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var out [][]engine.Entry
	for n := 0; n < entries; {
		saga := fmt.Sprintf("order-%06d", len(out))
		prev := engine.ZeroHash
		var j []engine.Entry
		for seq := int64(1); seq <= int64(length) && n < entries; seq, n = seq+1, n+1 {
			e := engine.Entry{SagaID: saga, Seq: seq, ToolName: toolExecuted, Phase: engine.PhaseIntent,
				Input:   fmt.Sprintf(`{"sku":"LAPTOP-13","qty":%d,"warehouse":"eu-west-%d"}`, seq, n%7),
				Payload: "requester=token:agent-7\nauth=token", Timestamp: at.Add(time.Duration(n) * time.Millisecond)}
			if seq%2 == 0 {
				e.Phase, e.Payload = engine.PhaseExecuted, fmt.Sprintf(`{"reserved":1,"reservation":"r-%d"}`, n)
			}
			e.Hash = engine.Hash(prev, e)
			prev = e.Hash
			j = append(j, e)
		}
		out = append(out, j)
	}
	return out
}

// verifyContenders are evidence.Verify over every journal, and the floor:
// SHA-256 over the same bytes, made beforehand. One operation verifies
// (or hashes) every entry once. The preimages are checked against the
// hashes first, so the floor hashes exactly what Verify does.
func verifyContenders(js [][]engine.Entry) ([]contender, error) {
	var pre [][]byte
	for _, j := range js {
		prev := engine.ZeroHash
		for _, e := range j {
			p := evidence.AppendPreimage(nil, prev, e)
			if sum := sha256.Sum256(p); hex.EncodeToString(sum[:]) != e.Hash {
				return nil, fmt.Errorf("preimage of %s seq=%d does not hash to its entry's hash", e.SagaID, e.Seq)
			}
			pre = append(pre, p)
			prev = e.Hash
		}
	}
	verify := func(ctx context.Context, n int) (time.Duration, error) {
		start := time.Now()
		for range n {
			for _, j := range js {
				if v := evidence.Verify(j); !v.Valid {
					return 0, fmt.Errorf("verify: %s", v.Message)
				}
			}
		}
		return time.Since(start) / time.Duration(n), nil
	}
	var sink byte // keeps the sums observable
	raw := func(ctx context.Context, n int) (time.Duration, error) {
		start := time.Now()
		for range n {
			for _, p := range pre {
				sum := sha256.Sum256(p)
				sink ^= sum[0]
			}
		}
		return time.Since(start) / time.Duration(n), nil
	}
	return []contender{{"evidence.Verify", verify}, {"raw SHA-256", raw}}, nil
}
