package engine

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
	"strconv"
	"time"
)

// ZeroHash is the previous hash of every saga's first entry.
const ZeroHash = "0000000000000000000000000000000000000000000000000000000000000000"

// Hash returns the entry hash of e chained on prev: SHA-256 over eight
// fields, each written as its UTF-8 byte length in decimal, a colon and the
// bytes, with nothing between fields. Field order: prev, sagaId, seq,
// toolName, phase, input, payload, timestamp (see CanonicalTime). The
// length prefixes make field boundaries unambiguous. The result is 64
// lowercase hex digits. e.Hash is ignored.
func Hash(prev string, e Entry) string {
	h := sha256.New()
	field(h, prev)
	field(h, e.SagaID)
	field(h, strconv.FormatInt(e.Seq, 10))
	field(h, e.ToolName)
	field(h, string(e.Phase))
	field(h, e.Input)
	field(h, e.Payload)
	field(h, CanonicalTime(e.Timestamp))
	return hex.EncodeToString(h.Sum(nil))
}

func field(h hash.Hash, s string) {
	h.Write(strconv.AppendInt(nil, int64(len(s)), 10))
	h.Write([]byte{':'})
	h.Write([]byte(s))
}

// CanonicalTime writes t as the hash chain does: UTC, truncated to
// microseconds, as "<unix seconds>.<6-digit microseconds>".
func CanonicalTime(t time.Time) string {
	t = Truncate(t)
	return fmt.Sprintf("%d.%06d", t.Unix(), t.Nanosecond()/1000)
}

// Truncate returns t in UTC, truncated to the microsecond: the precision the
// journal stores and hashes.
func Truncate(t time.Time) time.Time { return t.UTC().Truncate(time.Microsecond) }

// PayloadHash is the approval binding: lowercase hex SHA-256 of the exact
// input bytes. No canonicalisation: reformatted JSON is another payload.
func PayloadHash(input string) string {
	sum := sha256.Sum256([]byte(input))
	return hex.EncodeToString(sum[:])
}

// Verification is the result of walking a journal's hash chain.
type Verification struct {
	Valid        bool   `json:"valid"`
	EntryCount   int    `json:"entryCount"`
	BreakAtIndex int    `json:"breakAtIndex"`
	Message      string `json:"message"`
}

// Verify walks entries (one saga's journal, ordered by seq) from the zero
// hash, recomputing each entry from its stored fields and the previous
// stored hash. The first entry whose hash differs, or whose seq is not one
// more than the one before it, breaks the chain. Verify is pure.
func Verify(entries []Entry) Verification {
	n := len(entries)
	if n == 0 {
		return Verification{Valid: true, BreakAtIndex: -1, Message: "empty journal"}
	}
	prev := ZeroHash
	for i, e := range entries {
		if Hash(prev, e) != e.Hash {
			return broken(n, i, fmt.Sprintf("hash mismatch at seq=%d (entry %d)", e.Seq, i))
		}
		if e.Seq != int64(i)+1 || e.SagaID != entries[0].SagaID {
			return broken(n, i, fmt.Sprintf("sequence break at seq=%d (entry %d): expected seq=%d of saga %q", e.Seq, i, i+1, entries[0].SagaID))
		}
		prev = e.Hash
	}
	return Verification{Valid: true, EntryCount: n, BreakAtIndex: -1, Message: fmt.Sprintf("all %d entries verified", n)}
}

// VerifyHead verifies entries like Verify and also checks them against the
// saga's recorded head, which catches rows deleted from the journal's tail.
func VerifyHead(entries []Entry, headSeq int64, headHash string) Verification {
	v := Verify(entries)
	if !v.Valid {
		return v
	}
	var lastSeq int64
	lastHash := ZeroHash
	if n := len(entries); n > 0 {
		lastSeq, lastHash = entries[n-1].Seq, entries[n-1].Hash
	}
	switch {
	case lastSeq < headSeq:
		return broken(len(entries), len(entries), fmt.Sprintf("journal truncated: it ends at seq=%d but the saga's head is seq=%d", lastSeq, headSeq))
	case lastSeq > headSeq || lastHash != headHash:
		return broken(len(entries), len(entries)-1, fmt.Sprintf("head mismatch at seq=%d (entry %d): the saga records head seq=%d hash=%s", lastSeq, len(entries)-1, headSeq, headHash))
	}
	return v
}

func broken(n, i int, msg string) Verification {
	return Verification{Valid: false, EntryCount: n, BreakAtIndex: i, Message: msg}
}
